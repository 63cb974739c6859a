"""DeepSeek-V4 (Flash, Pro): its config read as transformers' DeepseekV4Config, every layer's caches as vLLM 0.33
registers them, the packed groups of a block-outermost layout, vLLM ≤ 0.28's own layer-tuple layout, and the
numbers vLLM's CUDA planner (tests/fixtures/oracle-cuda) and real startup logs (tests/fixtures/startup-logs) give.
"""
from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kvplan.errors import BadConfig, InvalidParameter, KvplanError
from kvplan.hardware.gpus import get_gpu
from kvplan.model.config import parse_config
from kvplan.model.kv_cache import dsv4_specs, kv_cache_specs
from kvplan.units import GiB
from kvplan.vllm.block_plan import BlockPlanSettings, plan_kv_cache
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.kv_groups import approximate_gcd, build_groups
from kvplan.vllm.settings import ServeSettings
from tests.conftest import CONFIGS

CORPUS = CONFIGS.parent / "corpus" / "configs"
GOLDENS = CONFIGS.parent / "oracle-cuda"
KV_20GIB = 21474836480


def _raw(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CORPUS / f"deepseek-ai--DeepSeek-V4-{name}" / "config.json").read_text())
    return data


FLASH, PRO = parse_config(_raw("Flash")), parse_config(_raw("Pro"))


def test_compress_ratios_become_per_layer_ratios_as_transformers_reads_them() -> None:
    """DeepseekV4Config: compress_ratios cut to num_hidden_layers (the MTP entry dropped), 0 → sliding window only
    (ratio 1); Flash 2 window-only layers then CSA/HCA alternating and a last CSA; Pro 2 HCA layers first."""
    assert FLASH.dsv4 is not None and PRO.dsv4 is not None
    assert FLASH.dsv4.ratios == (1, 1) + (4, 128) * 20 + (4,)
    assert PRO.dsv4.ratios == (128, 128) + (4, 128) * 29 + (4,)
    assert (FLASH.max_model_len, FLASH.num_kv_heads, FLASH.head_size) == (1048576, 1, 512)
    # only the ratio-4 layers carry the indexer: 128 fp8 values + one fp32 scale per 128
    assert {layer.indexer_head_size for layer in FLASH.layers if layer.compress_ratio == 4} == {132}
    assert {layer.indexer_head_size for layer in FLASH.layers if layer.compress_ratio != 4} == {0}


def test_upstream_layer_types_give_the_same_ratios() -> None:
    raw = _raw("Flash")
    ratios = raw.pop("compress_ratios")
    names = {0: "sliding_attention", 4: "compressed_sparse_attention", 128: "heavily_compressed_attention"}
    raw["layer_types"] = [names[r] for r in ratios[:43]]
    assert parse_config(raw).dsv4 == FLASH.dsv4


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda r: r.__setitem__("compress_ratios", [0, 16] + r["compress_ratios"][2:]), r"compress_ratios has \[16\]"),
    (lambda r: r.__setitem__("compress_ratios", r["compress_ratios"][:10]), "must equal `len"),
    (lambda r: r.__setitem__("compress_ratios", "0,4"), "must list whole numbers"),
    (lambda r: r.__setitem__("compress_rates", {"compressed_sparse_attention": 8}), "ratio 8 is not served"),
])
def test_ratios_vllm_cannot_serve_are_refused(mutate: Any, message: str) -> None:
    raw = copy.deepcopy(_raw("Flash"))
    mutate(raw)
    with pytest.raises(BadConfig, match=message):
        parse_config(raw)


def test_each_layer_registers_vllms_caches_with_their_padded_pages() -> None:
    """vllm/models/deepseek_v4: a ratio-4 layer has the 64-token window (64 × 584 B → 37,440 at 576-byte alignment),
    the compressed latent (256 / 4 states × 584 → 37,440), its compressor state (4 × 2,048 fp32 → 32,832), the
    indexer K cache (64 × 132 → 8,640) and the indexer compressor state (4 × 512 fp32 → 8,640); a ratio-128 layer
    the window, 2 states (1,168 → 1,728) and an 8 × 1,024 fp32 state (32,832); a window-only layer the window."""
    c4 = dsv4_specs(2, 4, 128, 512, 132, 128)
    assert [(s.kind, s.block_size, s.sliding_window, s.page_size_bytes(256)) for s in c4] == [
        ("sliding_window", 64, 128, 37440), ("mla", None, None, 37440), ("sliding_window", 4, 8, 32832),
        ("mla", None, None, 8640), ("sliding_window", 4, 8, 8640)]
    c128 = dsv4_specs(3, 128, 128, 512, 0, 128)
    assert [(s.kind, s.block_size, s.sliding_window, s.page_size_bytes(256)) for s in c128] == [
        ("sliding_window", 64, 128, 37440), ("mla", None, None, 1728), ("sliding_window", 8, 128, 32832)]
    assert len(dsv4_specs(0, 1, 128, 512, 0, 128)) == 1
    # 43 windows + 21 × 4 + 20 × 2 = 167 caches (the oracle's num_kv_cache_layers), the same on every TP rank
    assert len(kv_cache_specs(FLASH, tp=2)[0]) == 167 == len(kv_cache_specs(FLASH, tp=8)[0])


def test_packed_groups_split_the_windows_by_the_approximate_gcd() -> None:
    """kv_cache_planning.py:_get_packed_kv_cache_groups on Flash: the 43 windows split 22 + 21 (the approximate gcd
    of 43, 21, 20 at least 21 is 22), the 62 MLA-type caches and the two state buckets stay whole; a block is the
    widest group, 21 × 8,640 + 21 × 37,440 + 20 × 1,728 = 1,002,240 bytes."""
    assert approximate_gcd([43, 21, 20], 21) == 22
    groups = build_groups(kv_cache_specs(FLASH)[0], 256).groups
    assert [(g.kind, len(g.layers), g.block_size, sum(g.pages())) for g in groups] == [
        ("sliding_window", 22, 64, 823680), ("sliding_window", 21, 64, 786240), ("mla", 62, 256, 1002240),
        ("sliding_window", 42, 4, 870912), ("sliding_window", 20, 8, 656640)]


@pytest.mark.parametrize("case", ["deepseek-ai--DeepSeek-V4-Flash__h200-tp2",
                                  "deepseek-ai--DeepSeek-V4-Flash__b200-tp8-fp8",
                                  "deepseek-ai--DeepSeek-V4-Flash__a100", "deepseek-ai--DeepSeek-V4-Pro__h100-tp4-fp8"])
def test_fit_equals_vllms_cuda_planner(case: str) -> None:
    """Flash on H200 at 20 GiB: 21,426 blocks, 2,084,504 tokens, 1.99x; B200's 32,768 tokens in flight: 1.23x;
    A100's 4,096: 3.70x; Pro: 14,954 blocks, 1.39x (tests/fixtures/oracle-cuda)."""
    golden = json.loads((GOLDENS / f"{case}.json").read_text())
    inputs = golden["inputs"]
    gpu = {"h100": "h100-sxm", "h200": "h200", "b200": "b200", "a100-80": "a100-80gb-sxm"}[inputs["gpu"]]
    model = FLASH if "Flash" in case else PRO
    r = plan_fit(model, get_gpu(gpu), ServeSettings.of(tp=inputs["tensor_parallel_size"],
                                                    kv_cache_dtype=inputs["kv_cache_dtype"],
                                                    kv_cache_memory_bytes=KV_20GIB, weights_bytes=0), advise=False)
    kv = golden["kv_cache"]
    assert (r.cache.num_gpu_blocks, r.cache.block_size, r.verdict.log_line) == (kv["num_blocks"], 256, kv["log_line"])
    assert r.cache.kv_cache_dtype == "fp8_ds_mla"  # the layers rewrite auto / fp8 (vLLM: "Using DeepSeek's fp8_ds_mla")


def test_pro_on_b200_is_refused_with_vllms_needed_memory() -> None:
    golden = json.loads((GOLDENS / "deepseek-ai--DeepSeek-V4-Pro__b200-tp4.json").read_text())
    r = plan_fit(PRO, get_gpu("b200"), ServeSettings.of(tp=4, kv_cache_memory_bytes=KV_20GIB, weights_bytes=0),
                 advise=False)
    assert not r.verdict.fits and r.verdict.error == golden["kv_cache"]["error_message"]
    assert "(23.32 GiB KV cache is needed" in r.verdict.error


def test_a_bfloat16_kv_cache_is_refused_with_vllms_message() -> None:
    """attention.py:_resolve_dsv4_kv_cache_dtype: the fp8_ds_mla layout takes auto and fp8 flags only."""
    with pytest.raises(KvplanError, match="DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got bfloat16"):
        plan_fit(FLASH, get_gpu("h200"), ServeSettings.of(tp=2, kv_cache_dtype="bfloat16",
                                                        kv_cache_memory_bytes=KV_20GIB, weights_bytes=0))
    with pytest.raises(InvalidParameter, match="got bfloat16"):
        kv_cache_specs(FLASH, kv_cache_dtype="bfloat16")


def test_sm12x_is_refused_not_guessed() -> None:
    """SM12x runs DeepseekV4FlashInferSM120Attention (nvidia/model.py:_select_dsv4_attn_cls), not modelled."""
    with pytest.raises(KvplanError, match="FlashInfer SM120"):
        plan_fit(FLASH, get_gpu("rtx-pro-6000"),
                 ServeSettings.of(tp=2, kv_cache_memory_bytes=KV_20GIB, weights_bytes=0))


def _legacy(gib: float, max_len: int, in_flight: int) -> Any:
    return plan_kv_cache(kv_cache_specs(FLASH, tp=2, kv_cache_dtype="fp8"), int(gib * GiB),
                         BlockPlanSettings(256, max_len, in_flight, dsv4_layer_tuples=True))


def test_vllm_0_23_layer_tuples_give_the_logged_h200_tokens() -> None:
    """vLLM ≤ 0.28 (kv_cache_utils.py:_get_kv_cache_groups_uniform_groups): one MLA group, windows padded to its
    pages; a block is Σ page × the most slots of it in a group = 37,440 × 22 + 8,640 × 21 + 1,728 × 20 = 1,039,680 B.
    uv-xiao/pto-cu's 2x H200 NVL logs (vLLM 0.23.0): 29.07 GiB → 82,301 tokens at 4,096; 32.08 GiB → 2,175,276 at
    262,144, sliding windows reserving max_num_batched_tokens 8,192 (no in-flight doubling before 0.26)."""
    for gib, max_len, logged in ((29.07, 4096, 82301), (32.08, 262144, 2175276), (32.08, 65536, 673323)):
        lo, hi = _legacy(gib - 0.005, max_len, 8192), _legacy(gib + 0.005, max_len, 8192)
        assert lo.bytes_per_block == 1039680
        assert lo.kv_cache_tokens <= logged <= hi.kv_cache_tokens
    assert _legacy(29.07, 4096, 8192).blocks_per_request == 1494
    # vLLM 0.33's packed layout at the same memory gives other numbers: the version rule matters
    assert plan_kv_cache(kv_cache_specs(FLASH, tp=2), int(29.07 * GiB),
                         BlockPlanSettings(256, 4096, 8192)).bytes_per_block == 1002240


def test_the_gh200_failed_start_is_a_refusal_with_vllms_kv_needed_figure() -> None:
    """vllm #44376 (2x GH200, LLM class: 16,384 batched tokens, max_model_len 30,000, block 256): "6.66 GiB KV cache
    is needed … available KV cache memory (5.44 GiB) … estimated maximum model length is 13528"."""
    plan = _legacy(5.44, 30000, 16384)
    assert not plan.fits and plan.refusal is not None
    assert "(6.66 GiB KV cache is needed, which is larger than the available KV cache memory (5.44 GiB)" in plan.refusal
    lo, hi = _legacy(5.435, 30000, 16384), _legacy(5.445, 30000, 16384)
    assert lo.estimated_max_model_len is not None and hi.estimated_max_model_len is not None
    assert lo.estimated_max_model_len <= 13528 <= hi.estimated_max_model_len


def test_fit_uses_the_layout_of_the_vllm_version_asked_for() -> None:
    """--vllm-version 0.23 plans the layer-tuple layout with max_num_batched_tokens in the windows: the 256k log."""
    s = ServeSettings.of(tp=2, kv_cache_dtype="fp8", max_model_len=262144, vllm_version="0.23",
                      kv_cache_memory_bytes=int(32.08 * GiB), weights_bytes=0)
    r = plan_fit(FLASH, get_gpu("h200"), s, advise=False)
    assert r.cache.bytes_per_block == 1039680
    assert abs(r.cache.kv_cache_tokens - 2175276) / 2175276 < 0.005  # windows reserving 2 × 8,192 would give 1,251,236


def test_weights_count_v4s_attention_and_mxfp4_experts() -> None:
    """DeepseekV4Attention's low-rank / grouped projections, compressors and indexer make Flash 284.3 B parameters
    (DeepSeek's 284B) and Pro 1.573 T (1.6T); expert_dtype fp4 stores the routed experts as MXFP4 (4.25 bits), so
    the loaded share at TP 2 is within 1.5 % of the 74.08 GiB "Model loading took" of the 2x H200 logs."""
    from kvplan.model.weights import count_parameters
    from kvplan.vllm.defaults import parse_vllm_version
    from kvplan.vllm.memory.weights import estimate_weights

    assert round(count_parameters(FLASH).total / 1e9, 1) == 284.3
    assert round(count_parameters(PRO).total / 1e12, 3) == 1.573
    loaded = estimate_weights(FLASH, tp=2, pp=1, arch="hopper", version=parse_vllm_version("0.23")).bytes / GiB
    assert abs(loaded - 74.08) / 74.08 < 0.015
    base = parse_config(json.loads((CORPUS / "deepseek-ai--DeepSeek-V4-Flash-Base" / "config.json").read_text()))
    assert base.dsv4 is not None and not base.dsv4.fp4_experts  # expert_dtype fp8: FP8 experts


@pytest.mark.parametrize("case", ["deepseek-ai--DeepSeek-V4-Flash__h200-tp2-mtp3",
                                  "deepseek-ai--DeepSeek-V4-Pro__h200-tp2-mtp1"])
def test_the_mtp_layer_adds_one_sliding_window_cache(case: str) -> None:
    """The MTP draft layer (layer_id ≥ num_hidden_layers: compress ratio 1) registers its sliding window only:
    the windows split 22 + 22 (Pro 31 + 31), the block and the blocks per request stay (tests/fixtures/oracle-cuda,
    cuda_oracle_ext.py with speculative_config mtp)."""
    from kvplan.vllm.speculative import draft_specs, resolve_speculative

    golden = json.loads((GOLDENS / f"{case}.json").read_text())
    model = FLASH if "Flash" in case else PRO
    config = golden["inputs"]["engine_args"]["speculative_config"]
    spec = resolve_speculative(model, config, None, tp=2, max_model_len=model.max_model_len)
    assert spec is not None
    stage = kv_cache_specs(model, tp=2)[0]
    draft = draft_specs(stage, model.num_layers, spec)
    assert [(s.layer, s.kind, s.block_size, s.sliding_window) for s in draft] == [(model.num_layers, "sliding_window",
                                                                                  64, 128)]
    r = plan_fit(model, get_gpu("h200"), ServeSettings.of(tp=2, speculative_config=config,
                                                          kv_cache_memory_bytes=KV_20GIB, weights_bytes=0),
                 advise=False)
    kv = golden["kv_cache"]
    assert (r.cache.num_gpu_blocks, r.verdict.log_line) == (kv["num_blocks"], kv["log_line"])
    assert [g["num_layers"] for g in kv["groups"]][:2] == ([22, 22] if model is FLASH else [31, 31])


def test_before_vllm_0_30_an_auto_kv_cache_is_refused_with_the_logged_assertion() -> None:
    """vLLM 0.23-0.29 assert an fp8 flag (attention.py:_resolve_dsv4_kv_cache_dtype); pto-cu's first 2x H200 attempt
    with kv_cache_dtype=auto on vLLM 0.23 logged exactly kvplan's line. From 0.30 auto is served as fp8_ds_mla."""
    raw = (CONFIGS.parent / "startup-logs" / "raw" / "ptocu-2xh200nvl-dsv4-flash-tp2-llm-4k.log").read_text()
    with pytest.raises(KvplanError) as err:
        plan_fit(FLASH, get_gpu("h200"), ServeSettings.of(tp=2, vllm_version="0.23", weights_bytes=0,
                                                        kv_cache_memory_bytes=KV_20GIB))
    assert str(err.value).split(" (")[0] in raw
    with pytest.raises(KvplanError, match="DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got auto"):
        plan_fit(FLASH, get_gpu("h200"), ServeSettings.of(tp=2, vllm_version="0.29", weights_bytes=0,
                                                        kv_cache_memory_bytes=KV_20GIB))
    assert plan_fit(FLASH, get_gpu("h200"), ServeSettings.of(tp=2, vllm_version="0.30", weights_bytes=0,
                                                          kv_cache_memory_bytes=KV_20GIB), advise=False).verdict.fits


# --- Weights as loaded ("Model loading took X GiB") --------------------------------------------------------------
# The ptocu probe reports (tests/fixtures/startup-logs/raw/ptocu-2xh200nvl-dsv4-flash-tp2-*.log), vLLM 0.23, H200 NVL,
# TP 2, Flash: 74.08 GiB through `vllm serve` (8,192 batched tokens), 74.35 GiB through `LLM(...)` (16,384).
def test_flash_rotary_caches_are_two_fp32_caches_of_the_rope_dims() -> None:
    """common/rope.py:build_deepseek_v4_rope → DeepseekV4ScalingRotaryEmbedding: fp32, rotary_dim = qk_rope_head_dim
    64, 65,536 × 16 positions; one cache for rope_theta (window-only layers), one for compress_rope_theta."""
    from kvplan.vllm.memory.weights import rope_cache_bytes

    assert rope_cache_bytes(FLASH) == 2 * 1_048_576 * 64 * 4 == 536_870_912


def test_flash_keeps_fp32_mixers_and_hash_tables_outside_the_parameter_count() -> None:
    """nvidia/model.py: 43 layers × (hc_attn/ffn_fn (24, 16384) + base (24) + scale (3)) fp32, the head's
    (4, 16384) + 4 + 1, and 3 hash layers' (129,280 × 6) int32 tid2eid."""
    from kvplan.model.weights import dsv4_fp32_and_table_bytes

    mixers = 43 * 2 * (24 * 16384 + 24 + 3) * 4
    head = (4 * 16384 + 4 + 1) * 4
    assert dsv4_fp32_and_table_bytes(FLASH) == mixers + head + 3 * 129_280 * 6 * 4


def test_flash_load_buffers_scale_with_the_batched_tokens_as_the_two_logs_differ() -> None:
    """topk_indices_buffer (tokens, 512) int32 + _mtp_hidden_buffer (tokens, 4·4096) bf16: 34,816 B per batched
    token, so 8,192 more tokens load 0.27 GiB more, as the LLM(...) log (74.35) and the serve log (74.08) differ."""
    from kvplan.vllm.memory.weights import loaded_weights_bytes_per_gpu

    serve = loaded_weights_bytes_per_gpu(FLASH, tp=2, arch="hopper", max_num_batched_tokens=8192)
    llm = loaded_weights_bytes_per_gpu(FLASH, tp=2, arch="hopper", max_num_batched_tokens=16384)
    assert llm - serve == 8192 * (512 * 4 + 4 * 4096 * 2) == 285_212_672
    assert round((llm - serve) / GiB, 2) == round(74.35 - 74.08, 2)


def test_flash_weights_at_tp2_match_both_logs_within_80_mib() -> None:
    """Replicated fused_wqa_wkv / indexer wq_b (FP8), compressors, weights_proj and router (bf16, quant_config=None),
    fp32 mixers on each rank: the estimate lands 0.06–0.07 GiB under both logs (was 0.64 / 0.91 under)."""
    from kvplan.vllm.memory.weights import loaded_weights_bytes_per_gpu

    for tokens, logged in ((8192, 74.08), (16384, 74.35)):
        got = loaded_weights_bytes_per_gpu(FLASH, tp=2, arch="hopper", max_num_batched_tokens=tokens) / GiB
        assert 0 <= (logged - got) * 1024 <= 80, (tokens, got)


def test_flash_profile_forward_holds_the_residual_streams_and_padded_attention_buffers() -> None:
    """activation.py:dsv4_forward_phase_bytes at TP 2 (32 local heads padded to FlashMLA's 64): two (4 × 4096) residual
    streams and two hidden-wide tensors, o_padded and the padded q (64 × 512 each), fused_wqa_wkv's output and its
    normed copies, the fp32 compressor and indexer scores, the indexer's q in bf16 and fp8, and the fused-MoE
    workspace (6 × (4096 + 4096)): 352,256 B per token."""
    from kvplan.vllm.memory.activation import dsv4_forward_phase_bytes

    per_token = (2 * 4 * 4096 + 2 * 4096) * 2 + 2 * 64 * 512 * 2 + 2 * 1536 * 2 + 2 * 2 * 512 * 4
    per_token += 2 * 2 * 128 * 4 + 64 * 128 * 3 + 6 * (4096 + 4096) * 2
    assert per_token == 352_256
    assert dsv4_forward_phase_bytes(FLASH, tp=2, num_tokens=16384) == 16384 * per_token


def test_flash_forward_slope_matches_the_llm_and_serve_logs() -> None:
    """The ptocu LLM(...) (16,384 batched tokens) and serve (8,192) logs, same GPUs and utilization: their memory
    beyond weights and KV differs by (74.08 + 32.08) − (74.35 + 29.07) = 2.74 GiB; the forward's 8,192 extra tokens
    cost 2.69 GiB in kvplan's count (the sampler's 1,024 rows are the same in both)."""
    from kvplan.vllm.memory.activation import dsv4_forward_phase_bytes

    extra = dsv4_forward_phase_bytes(FLASH, tp=2, num_tokens=16384) - dsv4_forward_phase_bytes(FLASH, tp=2,
                                                                                                 num_tokens=8192)
    logged = (74.08 + 32.08) - (74.35 + 29.07)
    assert round(logged, 2) == 2.74
    assert abs(extra / GiB - logged) < 0.06
