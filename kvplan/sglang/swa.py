"""SGLang 0.5.23's sliding-window (hybrid SWA) pool split (paths relative to `sglang/srt/`).

`model_executor/pool_configurator.py:HybridSWAPoolConfigurator` gives a model of
`configs/model_config.py:is_hybrid_swa_model`'s allowlist two pools, full-attention and sliding-window layers:

    cell        = full_per_token × full_layers + swa_full_tokens_ratio × swa_per_token × swa_layers   (a float)
    full_tokens = int(budget // cell) // page × page          (max_total_num_tokens)
    swa_tokens  = int(full_tokens × ratio) // page × page
    refused when sliding_window + page ≥ swa_tokens (validate_swa_pool_size)

per_token = kv_heads(attn_tp) × (head_dim + v_head_dim) × e of the layer class; chunked-attention layers
(Llama-4) are the sliding side; a Gemma-4 layer that shares another's KV still gets its own rows, on the side
its `layer_types` entry names. `swa_full_tokens_ratio` falls back to 0.8 (arg_groups/fields/schedule.py).
Modelled: MHA hybrids with both layer classes, the default or a given ratio, radix cache on (so not
SWARequestCapPoolConfigurator). Pure: numbers in, numbers out.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvplan.model.spec import LayerSpec, ModelSpec

# configs/model_config.py:is_hybrid_swa_model's allowlist that this module sizes (MHA; both layer classes).
# DeepSeek-V4 (DSV4PoolConfigurator), Inkling (Mamba + SWA, ratio 0.1), Step3p5/3p7 (attention_other_setting
# heads) and the encoder / OCR models stay refused.
MODELLED_SWA_ARCHITECTURES = frozenset({
    "Llama4ForConditionalGeneration", "GptOssForCausalLM", "MiMoV2FlashForCausalLM", "Gemma4ForCausalLM",
    "Gemma4ForConditionalGeneration", "LagunaForCausalLM",
})
SWA_FULL_TOKENS_RATIO = 0.8  # arg_groups/fields/schedule.py: swa_full_tokens_ratio fallback
SWA_KINDS = frozenset({"sliding_window", "chunked_local"})


@dataclass(frozen=True)
class SwaPart:
    """The sliding-window side of a hybrid pool on one attention-TP rank."""

    layers: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    ratio: float  # swa_full_tokens_ratio
    window: int | None  # ModelConfig._get_sliding_window_size (validate_swa_pool_size's floor)

    def per_token(self, element_bytes: int) -> int:
        """swa_per_token: get_swa_num_kv_heads × (swa_head_dim + swa_v_head_dim) × e."""
        return self.kv_heads * (self.head_dim + self.v_head_dim) * element_bytes


def split_layers(spec: ModelSpec) -> tuple[list[LayerSpec], list[LayerSpec]] | None:
    """(full, sliding) layers as SGLang's layer_info counts them; None when this is not a modelled SWA hybrid
    (not on the allowlist, Laguna without a sliding_window, or one class missing)."""
    arch = spec.architectures[0] if spec.architectures else ""
    if arch not in MODELLED_SWA_ARCHITECTURES:
        return None
    if arch == "LagunaForCausalLM" and not spec.facts.sglang.has_sliding_window:
        return None  # is_hybrid_swa_model: Laguna only with a sliding_window
    types = spec.facts.layer_type_names
    full: list[LayerSpec] = []
    swa: list[LayerSpec] = []
    for layer in spec.layers:
        if layer.kind == "kv_shared":  # Gemma-4's shared-KV layers: rows of their own (layer_types names the side)
            named = types[layer.index] if types is not None and layer.index < len(types) else None
            (swa if named == "sliding_attention" else full).append(layer)
        elif layer.kind in SWA_KINDS:
            swa.append(layer)
        elif layer.kind == "full":
            full.append(layer)
        else:
            return None
    owners_full = [x for x in full if x.kind != "kv_shared"]
    owners_swa = [x for x in swa if x.kind != "kv_shared"]
    if not owners_full or not owners_swa:
        return None
    # Shared layers take their side's geometry (the layer whose cache they read has the same shape).
    return ([x if x.kind != "kv_shared" else owners_full[0] for x in full],
            [x if x.kind != "kv_shared" else owners_swa[0] for x in swa])


def sliding_window_size(spec: ModelSpec) -> int | None:
    """configs/model_config.py:ModelConfig._get_sliding_window_size: the text config's sliding_window_size,
    sliding_window or window_size, the first that is an integer (kvplan.model.spelt reads it)."""
    return spec.facts.sglang.window_size


def swa_part(swa: Sequence[LayerSpec], *, attn_tp: int, window: int | None,
             ratio: float | None = None) -> SwaPart:
    """The sliding side's geometry: KV heads per rank max(1, heads // attn_tp) (get_swa_num_kv_heads); `ratio` the
    given --swa-full-tokens-ratio (None: SGLang's 0.8)."""
    first = swa[0]
    return SwaPart(len(swa), max(1, first.num_kv_heads // attn_tp), first.head_size,
                   first.head_size_v or first.head_size, SWA_FULL_TOKENS_RATIO if ratio is None else ratio, window)


def swa_pool_too_small_text(swa_tokens: int, window: int, page_size: int) -> str:
    """The ValueError validate_swa_pool_size raises, verbatim."""
    return (f"SWA pool ({swa_tokens} tokens) cannot hold even one request: the prefill admission floor is "
            f"sliding_window_size ({window}) + page_size ({page_size}). Increase --swa-full-tokens-ratio or the "
            "total KV budget.")
