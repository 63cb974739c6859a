"""`kvplan size --engine sglang`: what one token and one request cost in SGLang 0.5.23's pools, per GPU.

The per-token cell of the pool configurator SGLang picks (`pool.geometry`: DefaultPoolConfigurator, its DSA
index-K, or HybridSWAPoolConfigurator's full + ratio × sliding cell) and a hybrid's Mamba state per request slot
(`mamba.mamba_state`), at attention TP = TP (no attention DP). No GPU is named, so a DSA model's `auto` KV dtype
is the one below SM100 (bfloat16; fp8_e4m3 on SM100: `dsa.default_kv_dtype`). Pure: numbers in, numbers out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.errors import InvalidParameter
from kvplan.model.spec import ModelSpec
from kvplan.sglang import SGLANG_VERSION, kv_quant
from kvplan.sglang.dsa import is_dsa
from kvplan.sglang.dsa import kv_dtype as dsa_kv_dtype
from kvplan.sglang.dsv4 import DEFAULT_MAX_RUNNING_REQUESTS, Dsv4Part
from kvplan.sglang.mamba import mamba_state
from kvplan.sglang.pool import DSV4_BF16_BUILD, geometry, kv_dtype_name, unsupported_reason


@dataclass(frozen=True)
class SglangSize:
    """Bytes per token and per request of one model in SGLang's pools, per GPU."""

    model: str
    engine: str
    sglang_version: str
    tp: int
    kv_cache_dtype: str
    pool_configurator: str
    bytes_per_token: float  # the configurator's _cell_size (a float for a sliding-window hybrid)
    full_layers: int
    full_bytes_per_token: int  # the full-attention (or MLA / DSA) side's cell
    indexer_bytes_per_token: int  # DSA's index-K, part of full_bytes_per_token
    swa_layers: int
    swa_bytes_per_token: int  # the sliding side's cell (one token of the sliding pool)
    swa_full_tokens_ratio: float
    mamba_layers: int
    mamba_state_bytes_per_request: int  # one request slot (SGLang keeps 3 or 5 per running request)
    notes: tuple[str, ...]


def sglang_size(spec: ModelSpec, *, tp: int = 1, kv_cache_dtype: str = "auto") -> SglangSize:
    """SGLang's per-token and per-request bytes for `spec` at TP `tp`; InvalidParameter for a pool not modelled."""
    if tp < 1:
        raise InvalidParameter(f"--tensor-parallel-size must be ≥ 1, got {tp}")
    reason = unsupported_reason(spec, attn_tp=tp, tp=tp)
    if reason is not None:
        raise InvalidParameter(f"SGLang {SGLANG_VERSION} rules: {reason}")
    notes: list[str] = []
    if is_dsa(spec):
        kv = dsa_kv_dtype(kv_cache_dtype, spec, 9)
        if kv_cache_dtype.lower() == "auto":
            notes.append("DeepSeek sparse attention: auto is bfloat16 below SM100 and fp8_e4m3 on SM100 "
                         "(overrides.py:_dsa_kv_cache_dtype_default); sized for below SM100")
    else:
        kv = kv_dtype_name(kv_cache_dtype, spec)
    if kv in kv_quant.FP4_DTYPES:
        notes.append(f"{kv}: sized with the scale layout of trtllm_mha, SGLang's default on SM100 "
                     "(fp4_kv_cache_quant_method.py); other backends lay the scales out differently, and on Hopper "
                     "SGLang refuses FP4 under its default fa3 (arg_groups/kv_cache_hook.py)")
    geo = geometry(spec, attn_tp=tp, kv_dtype=kv, sm_major=9)
    if geo.dsv4 is not None:
        return _dsv4_size(spec, tp, kv, geo.dsv4)
    state = mamba_state(spec, attn_tp=tp, tp=tp)
    swa = geo.swa
    if state is not None:
        notes.append(f"Mamba state: SGLang carves (K + 1) slots of {state.per_req_bytes:,} B out of the budget "
                     "first, K from mamba_full_memory_ratio 0.9, and runs at most K // 3 (K // 5 with the extra "
                     "buffer) requests (kv_cache_configurator.py:_handle_max_mamba_cache)")
    return SglangSize(
        model=spec.name, engine="sglang", sglang_version=SGLANG_VERSION, tp=tp, kv_cache_dtype=kv,
        pool_configurator="HybridSWAPoolConfigurator" if swa is not None else "DefaultPoolConfigurator",
        bytes_per_token=geo.cell_size, full_layers=geo.layers, full_bytes_per_token=geo.cell_bytes,
        indexer_bytes_per_token=geo.indexer_bytes, swa_layers=swa.layers if swa else 0,
        swa_bytes_per_token=swa.per_token(geo.element_bytes) * swa.layers if swa else 0,
        swa_full_tokens_ratio=swa.ratio if swa else 0.0, mamba_layers=state.layers if state else 0,
        mamba_state_bytes_per_request=state.per_req_bytes if state else 0, notes=tuple(notes))


def _dsv4_size(spec: ModelSpec, tp: int, kv: str, d: Dsv4Part) -> SglangSize:
    """DeepSeek-V4 (kvplan.sglang.dsv4): DSV4PoolConfigurator's bytes per full token (a float); the compressed and
    sliding-window sides rounded up to whole bytes, their exact figures in the notes."""
    compressed, swa = d.compressed_bytes_per_full_token, d.bytes_per_swa_token
    notes = [f"DSV4PoolConfigurator: {d.bytes_per_full_token:,.2f} B per full token = compressed KV + indexer "
             f"{compressed:,.2f} ({d.c4_layers} c4 layers × ({d.paged_bytes(4):g} + {d.index_bytes}) / 4, "
             f"{d.c128_layers} c128 layers × {d.paged_bytes(128):g} / 128) + swa_full_tokens_ratio {d.swa_ratio:g} × "
             f"{swa:,.2f} per sliding-window token ({d.layers} layers × {d.paged_bytes():g} + the c4 compress state)",
             f"plus a fixed c128 compress state of {d.c128_state_fixed_bytes(DEFAULT_MAX_RUNNING_REQUESTS):,} B for "
             f"SGLang's default {DEFAULT_MAX_RUNNING_REQUESTS} running requests (pool_configurator.py:"
             "_get_c128_state_fixed_bytes); the same on every TP rank (one latent head)"]
    if kv == "bfloat16":
        notes.append(DSV4_BF16_BUILD)
    return SglangSize(
        model=spec.name, engine="sglang", sglang_version=SGLANG_VERSION, tp=tp, kv_cache_dtype=kv,
        pool_configurator="DSV4PoolConfigurator", bytes_per_token=d.bytes_per_full_token, full_layers=d.layers,
        full_bytes_per_token=math.ceil(compressed), indexer_bytes_per_token=math.ceil(d.c4_layers * d.index_bytes / 4),
        swa_layers=d.layers, swa_bytes_per_token=math.ceil(swa), swa_full_tokens_ratio=d.swa_ratio, mamba_layers=0,
        mamba_state_bytes_per_request=0, notes=tuple(notes))
