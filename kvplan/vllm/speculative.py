"""Speculative decoding as vLLM 0.33 plans its KV cache (`--speculative-config`).

MTP drafts (DeepSeek-V3/R1, GLM-4.5, Qwen3-Next, Qwen3.5, MiMo … — vLLM rewrites the per-model method names
such as `deepseek_mtp` or `qwen3_next_mtp` to `mtp`, config/speculative.py) run the checkpoint's own MTP
layers (`num_nextn_predict_layers`, `mtp_num_hidden_layers`). Their attention layers join the target's KV
cache (v1/worker/gpu/spec_decode/eagle/utils.py:load_eagle_model builds them; their specs land in the same
groups), and a hybrid model keeps `num_speculative_tokens` more state blocks per request in each Mamba group
(v1/kv_cache_interface.py:MambaSpec.num_speculative_blocks). Pinned against vLLM's CUDA planner
(tests/fixtures/oracle-cuda: DeepSeek-V3 MTP 1/3, Qwen3-Next MTP 1/3 at TP 1, 2 and 4).

EAGLE / EAGLE-3 drafts (`{"method": "eagle3", "model": "<draft>", …}`) are small models of their own: vLLM
builds them from the draft's config.json (model_executor/models/llama_eagle3.py numbers its layers from the
target's `num_hidden_layers` on), in the target's dtype and at the target's TP, and their attention layers join
the same KV cache with the draft's own KV heads and head size. The caller parses the draft's config (the CLI
loads it; speculators-format checkpoints are flattened by `speculators_layer_config`, as vLLM's
transformers_utils/configs/speculators does) and passes it here as a ModelSpec. Pinned against vLLM's CUDA
planner (tests/fixtures/oracle-cuda/extra: Llama-3.1-8B + EAGLE-3 draft, 3 tokens).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kvplan.errors import InvalidParameter
from kvplan.model.kv_cache import KVCacheSpec, kv_cache_specs
from kvplan.model.spec import ModelSpec

# config/speculative.py: keys of the config that count MTP layers, per family.
_MTP_LAYER_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers")
MAX_SPECULATIVE_TOKENS = 64  # far above what any deployment uses; bounds the per-request state blocks


@dataclass(frozen=True)
class SpecDecode:
    """The draft as the KV cache sees it."""

    method: str  # vLLM's normalized method name
    num_speculative_tokens: int
    draft_layers: int  # attention layers the draft adds to the KV cache
    draft: ModelSpec | None = None  # EAGLE / EAGLE-3: the draft's own model (its KV heads, head size, layers)


# Model types whose MTP module defaults its layer count when the config states none
# (model_executor/models/qwen3_next_mtp.py: `getattr(config, "num_nextn_predict_layers", 1)`).
_MTP_DEFAULT_LAYERS = {"qwen3_next": 1}


def _mtp_layers(model: ModelSpec) -> int:
    for key in _MTP_LAYER_KEYS:
        v = model.raw.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return min(v, 16)
    return _MTP_DEFAULT_LAYERS.get(model.model_type, 0)


# config/speculative.py: methods whose draft is a separate checkpoint named by `model`.
EAGLE_METHODS = ("eagle", "eagle3")


def speculative_method(config: Mapping[str, Any]) -> str:
    """vLLM's method name for `--speculative-config` (config/speculative.py:SpeculativeConfig.__post_init__):
    the per-model MTP names become `mtp`; with no method, a draft `model` whose name says `eagle-` / `eagle3` is
    EAGLE / EAGLE-3 and any other is `draft_model`."""
    method = str(config.get("method") or "").lower()
    model = str(config.get("model") or "")
    if not method and model:
        if model in ("ngram", "[ngram]"):
            return "ngram"
        lowered = model.lower()
        return "eagle" if "eagle-" in lowered else "eagle3" if "eagle3" in lowered else "draft_model"
    return "mtp" if method == "mtp" or method.endswith("_mtp") else method


def needs_draft_config(config: Mapping[str, Any] | None) -> bool:
    """Whether this `--speculative-config` names a draft checkpoint whose config.json kvplan must read."""
    return bool(config and config.get("model")) and speculative_method(config or {}) in EAGLE_METHODS


def speculators_layer_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """A speculators-format draft config.json (`speculators_model_type`, `transformer_layer_config`) as the
    plain decoder config vLLM builds the draft from (transformers_utils/configs/speculators/base.py: the
    layer config, plus the EAGLE fields); any other config unchanged."""
    layer = config.get("transformer_layer_config")
    if not config.get("speculators_model_type") or not isinstance(layer, Mapping):
        return config
    flat = dict(layer)
    for key in ("draft_vocab_size", "target_hidden_size", "norm_before_residual"):
        if config.get(key) is not None:
            flat[key] = config[key]
    model_type = str(flat.get("model_type") or "llama")
    flat["architectures"] = [f"Eagle3{model_type.capitalize()}ForCausalLM"
                             if config.get("speculators_model_type") == "eagle3" else "EagleLlamaForCausalLM"]
    return flat


def resolve_speculative(model: ModelSpec, config: Mapping[str, Any] | None,
                        draft: ModelSpec | None = None) -> SpecDecode | None:
    """`--speculative-config` for this model; None without one. MTP needs the checkpoint's MTP layers;
    EAGLE / EAGLE-3 need the draft's own config, parsed by the caller (`draft`)."""
    if not config:
        return None
    method = speculative_method(config)
    tokens = config.get("num_speculative_tokens", 1)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_SPECULATIVE_TOKENS:
        raise InvalidParameter(f"--speculative-config: num_speculative_tokens must be 1–{MAX_SPECULATIVE_TOKENS}, "
                               f"got {tokens!r}")
    if method == "mtp":
        layers = _mtp_layers(model)
        if not layers:
            raise InvalidParameter(f"--speculative-config method {method!r}: {model.name} has no MTP layers "
                                   f"({' / '.join(_MTP_LAYER_KEYS)} in config.json)")
        # DeepSeek-style MTP reuses its layers across steps: the draft keeps one KV layer per MTP layer.
        return SpecDecode("mtp", tokens, layers)
    if method in EAGLE_METHODS:
        if draft is None:
            raise InvalidParameter(f"--speculative-config method {method!r} needs the draft's checkpoint",
                                   hint='name it: {"method": "' + method + '", "model": "<hub id or folder>", …}')
        return SpecDecode(method, tokens, draft.num_layers, draft)
    raise InvalidParameter(f"--speculative-config method {method or '(none)'!r} is not modelled by kvplan yet",
                           hint="MTP, EAGLE and EAGLE-3 are; separate draft models are not")


def draft_specs(stage: Sequence[KVCacheSpec], num_layers: int, spec: SpecDecode, *, tp: int = 1,
                kv_cache_dtype: str = "auto", dtype: str | None = None) -> list[KVCacheSpec]:
    """The draft's KV specs, numbered after the target's layers (vLLM places the draft on the last pipeline
    stage). MTP: copies of the target's first full-attention (or MLA) layer's specs, one set per draft layer.
    EAGLE: the draft model's own specs at the target's TP and in the target's `dtype` (vLLM builds the draft
    with the target's dtype and KV cache config)."""
    if spec.draft is not None:
        draft = spec.draft if dtype is None else replace(spec.draft, dtype=dtype)
        [own] = kv_cache_specs(draft, tp=tp, pp=1, kv_cache_dtype=kv_cache_dtype)
        return [replace(s, layer=num_layers + s.layer) for s in own]
    template_layer = next((s.layer for s in stage if s.kind in ("full", "mla")), None)
    if template_layer is None:
        raise InvalidParameter("--speculative-config: the target has no full-attention layer for the draft to copy")
    template = [s for s in stage if s.layer == template_layer]
    return [replace(s, layer=num_layers + i) for i in range(spec.draft_layers) for s in template]
