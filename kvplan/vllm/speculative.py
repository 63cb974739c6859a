"""Speculative decoding as vLLM 0.33 plans its KV cache (`--speculative-config`).

MTP drafts (DeepSeek-V3/R1, GLM-4.5, Qwen3-Next, Qwen3.5, MiMo … — vLLM rewrites the per-model method names
such as `deepseek_mtp` or `qwen3_next_mtp` to `mtp`, config/speculative.py) run the checkpoint's own MTP
layers (`num_nextn_predict_layers`, `mtp_num_hidden_layers`). Their attention layers join the target's KV
cache (v1/worker/gpu/spec_decode/eagle/utils.py:load_eagle_model builds them; their specs land in the same
groups), and a hybrid model keeps `num_speculative_tokens` more state blocks per request in each Mamba group
(v1/kv_cache_interface.py:MambaSpec.num_speculative_blocks). Pinned against vLLM's CUDA planner
(tests/fixtures/oracle-cuda: DeepSeek-V3 MTP 1/3, Qwen3-Next MTP 1/3 at TP 1, 2 and 4).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kvplan.errors import InvalidParameter
from kvplan.model.kv_cache import KVCacheSpec
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


# Model types whose MTP module defaults its layer count when the config states none
# (model_executor/models/qwen3_next_mtp.py: `getattr(config, "num_nextn_predict_layers", 1)`).
_MTP_DEFAULT_LAYERS = {"qwen3_next": 1}


def _mtp_layers(model: ModelSpec) -> int:
    for key in _MTP_LAYER_KEYS:
        v = model.raw.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return min(v, 16)
    return _MTP_DEFAULT_LAYERS.get(model.model_type, 0)


def resolve_speculative(model: ModelSpec, config: Mapping[str, Any] | None) -> SpecDecode | None:
    """`--speculative-config` for this model; None without one. MTP needs the checkpoint's MTP layers;
    EAGLE and separate draft models need the draft's own config, which kvplan is not given."""
    if not config:
        return None
    method = str(config.get("method") or config.get("model") or "").lower()
    tokens = config.get("num_speculative_tokens", 1)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_SPECULATIVE_TOKENS:
        raise InvalidParameter(f"--speculative-config: num_speculative_tokens must be 1–{MAX_SPECULATIVE_TOKENS}, "
                               f"got {tokens!r}")
    if method == "mtp" or method.endswith("_mtp"):
        layers = _mtp_layers(model)
        if not layers:
            raise InvalidParameter(f"--speculative-config method {method!r}: {model.name} has no MTP layers "
                                   f"({' / '.join(_MTP_LAYER_KEYS)} in config.json)")
        # DeepSeek-style MTP reuses its layers across steps: the draft keeps one KV layer per MTP layer.
        return SpecDecode("mtp", tokens, layers)
    raise InvalidParameter(f"--speculative-config method {method or '(none)'!r} is not modelled by kvplan yet",
                           hint="MTP is; EAGLE and draft models need the draft's own config.json")


def draft_specs(stage: Sequence[KVCacheSpec], num_layers: int, spec: SpecDecode) -> list[KVCacheSpec]:
    """The draft's KV specs: copies of the target's first full-attention (or MLA) layer's specs, one set per
    draft layer, numbered after the target's layers (vLLM places the draft on the last pipeline stage)."""
    template_layer = next((s.layer for s in stage if s.kind in ("full", "mla")), None)
    if template_layer is None:
        raise InvalidParameter("--speculative-config: the target has no full-attention layer for the draft to copy")
    template = [s for s in stage if s.layer == template_layer]
    return [replace(s, layer=num_layers + i) for i in range(spec.draft_layers) for s in template]
