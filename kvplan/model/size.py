"""The `kvplan size` result: KV bytes per token by layer kind, per request at several context lengths, the
same model as MHA, and the weights' size."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.model.kv_cache import CacheKind, KVCacheSpec, kv_cache_specs, resolve_kv_cache_dtype

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec

# ---------------------------------------------------------------------------------------------
# The `kvplan size` result
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerGroupSize:
    """Layers of one kind and shape, for the size table and `--json` `layers`."""

    kind: CacheKind
    count: int
    kv_heads: int  # per GPU
    head_size: int
    bytes_per_token: int  # per layer, per GPU (0 for recurrent layers)
    state_bytes: int | None = None  # recurrent layers: per request, per layer, per GPU
    sliding_window: int | None = None
    attention_chunk_size: int | None = None


@dataclass(frozen=True)
class ContextCost:
    """KV bytes one request holds at a context length (windows capped, recurrent state added)."""

    tokens: int
    bytes: int


@dataclass(frozen=True)
class SizeReport:
    """Everything `kvplan size` reports; rendered by render/size.py and `--json`."""

    model: str
    kv_cache_dtype: str
    tp: int
    pp: int
    kv_bytes_per_token: int  # per GPU, every KV layer, as if every token were kept (the worst PP stage)
    layers: tuple[LayerGroupSize, ...]
    attention_class: str  # MHA | GQA | MQA | MLA | none
    mha_bytes_per_token: int  # the same model with one KV head per query head (MHA), per GPU
    state_bytes_per_request: int  # recurrent layers, per GPU
    weights_bytes: int | None  # whole model, stored bytes; None: unknown (weights_source says why)
    weights_bytes_per_gpu: int | None
    weights_source: str  # "safetensors metadata" | "analytic parameter count" | "unknown: <reason>"
    num_parameters: int | None
    max_model_len: int
    per_request: tuple[ContextCost, ...]
    notes: tuple[str, ...] = ()


def attention_class(model: ModelSpec) -> str:
    """MHA (KV heads = query heads), GQA (1 < KV < query), MQA (1 KV head), MLA (latent), none."""
    if model.mla is not None:
        return "MLA"
    if not any(layer.kind in ("full", "sliding_window", "chunked_local") for layer in model.layers):
        return "none"
    kv = model.num_kv_heads
    if kv == model.num_attention_heads:
        return "MHA"
    return "MQA" if kv == 1 else "GQA"


def request_kv_bytes(specs: list[KVCacheSpec], tokens: int) -> int:
    """Bytes one request of `tokens` tokens keeps on one GPU, token-exact (no block rounding):
    sliding-window layers hold at most the window, chunked-local at most one chunk, recurrent layers
    their fixed state. The block-exact figure vLLM reserves lives in capacity.py."""
    total = 0
    for s in specs:
        if s.kind == "mamba":
            total += s.state_bytes
        else:
            kept = tokens
            if s.sliding_window is not None:
                kept = min(tokens, s.sliding_window)
            if s.attention_chunk_size is not None:
                kept = min(tokens, s.attention_chunk_size)
            total += kept * s.bytes_per_token
    return total


def _group_layers(specs: list[KVCacheSpec]) -> tuple[LayerGroupSize, ...]:
    groups: dict[tuple[object, ...], int] = {}
    for s in specs:
        key = (s.kind, s.num_kv_heads, s.head_size + s.head_size_v if s.kind == "mla" else s.head_size,
               s.bytes_per_token, s.state_bytes, s.sliding_window, s.attention_chunk_size)
        groups[key] = groups.get(key, 0) + 1
    out = []
    for (kind, heads, hs, bpt, state, win, chunk), count in groups.items():
        out.append(LayerGroupSize(
            kind=kind,  # type: ignore[arg-type]
            count=count, kv_heads=int(heads),  # type: ignore[call-overload]
            head_size=int(hs), bytes_per_token=int(bpt),  # type: ignore[call-overload]
            state_bytes=int(state) if kind == "mamba" else None,  # type: ignore[call-overload]
            sliding_window=win, attention_chunk_size=chunk,  # type: ignore[arg-type]
        ))
    return tuple(out)


def context_points(max_model_len: int) -> tuple[int, ...]:
    """Context lengths for the per-request table: powers of 4 from 1K, capped by and ending at the max."""
    points = [n for n in (1024, 4096, 16384, 32768, 131072, 262144, 1048576) if n < max_model_len]
    return (*points, max_model_len)


def size_report(
    model: ModelSpec,
    *,
    tp: int = 1,
    pp: int = 1,
    kv_cache_dtype: str = "auto",
    weights_bytes: int | None = None,
    weights_source: str = "analytic parameter count",
) -> SizeReport:
    """KV bytes per token, per layer kind, per request, and the weights' size (the `size` command)."""
    from dataclasses import replace

    from kvplan.errors import BadConfig
    from kvplan.model.weights import count_parameters, stored_weights_bytes, weights_bytes_per_gpu

    stages = kv_cache_specs(model, tp=tp, pp=pp, kv_cache_dtype=kv_cache_dtype)
    dtype = resolve_kv_cache_dtype(model, kv_cache_dtype)
    if model.dsv4 is not None:  # models/deepseek_v4/attention.py: auto and fp8 are served as fp8_ds_mla
        dtype = "fp8_ds_mla"
    # The stage with the most KV bytes per token is the one that bounds the cache (min over workers).
    worst = max(stages, key=lambda st: (sum(s.bytes_per_token for s in st), sum(s.state_bytes for s in st)))
    bpt = sum(s.bytes_per_token for s in worst)
    mha_specs = [replace(s, num_kv_heads=max(1, model.num_attention_heads // tp), head_size_v=s.head_size)
                 if s.kind == "mla" else
                 replace(s, num_kv_heads=max(1, model.num_attention_heads // tp)) if s.is_attention else s
                 for s in worst]
    if model.mla is not None:  # MHA equivalent of MLA: per-head K (nope + rope) and V
        m = model.mla
        mha_specs = [replace(s, num_kv_heads=model.num_attention_heads // tp,
                             head_size=m.qk_nope_head_dim + m.qk_rope_head_dim, head_size_v=m.v_head_dim)
                     for s in worst]
    try:
        params: int | None = count_parameters(model).total
        total_w: int | None = weights_bytes if weights_bytes is not None else stored_weights_bytes(model)
        per_gpu: int | None = weights_bytes_per_gpu(model, tp=tp, pp=pp, total_bytes=total_w)
    except BadConfig as exc:  # the KV figures above need none of this
        params = None
        per_gpu = -(-weights_bytes // tp) if weights_bytes is not None and pp == 1 else None
        total_w = weights_bytes
        weights_source = weights_source if weights_bytes is not None else f"unknown: {exc}"
    return SizeReport(
        model=model.name,
        kv_cache_dtype=dtype,
        tp=tp,
        pp=pp,
        kv_bytes_per_token=bpt,
        layers=_group_layers(worst),
        attention_class=attention_class(model),
        mha_bytes_per_token=sum(s.bytes_per_token for s in mha_specs),
        state_bytes_per_request=sum(s.state_bytes for s in worst),
        weights_bytes=total_w,
        weights_bytes_per_gpu=per_gpu,
        weights_source=weights_source,
        num_parameters=params,
        max_model_len=model.max_model_len,
        per_request=tuple(ContextCost(n, request_kv_bytes(worst, n)) for n in context_points(model.max_model_len)),
        notes=(*model.config_notes, *model.notes, *_tower_notes(model, analytic=weights_bytes is None)),
    )


def _tower_notes(model: ModelSpec, *, analytic: bool) -> tuple[str, ...]:
    """Multimodal towers the analytic count leaves out of the language model's weights (a safetensors total
    includes them); vLLM loads each unless --limit-mm-per-prompt sets its modalities to 0 (`kvplan fit`)."""
    if not analytic:
        return ()
    from kvplan.model.weights import FP_BYTES
    from kvplan.units import GiB

    elem = FP_BYTES.get(model.dtype, 2)
    return tuple(f"{t.name} ({', '.join(t.modalities)}): {t.params:,} parameters ({t.params * elem / GiB:.2f} GiB) "
                 "in the checkpoint besides these weights; vLLM loads it unless --limit-mm-per-prompt sets its "
                 "modalities to 0" for t in model.towers)
