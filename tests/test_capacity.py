"""KV-cache planning pinned to vLLM's numbers: the reference's worked examples, vLLM's own test
vectors for grouping and max-length estimation, and the starting document's measurements."""
from __future__ import annotations

import pytest

from kvplan.model.kv_cache import KVCacheSpec, kv_cache_specs
from kvplan.vllm.block_plan import (
    NO_MEMORY_MESSAGE,
    BlockPlanSettings,
    KVCachePlan,
    capacity_log_line,
    estimate_max_model_len,
    plan_kv_cache,
)
from kvplan.vllm.kv_groups import align_hybrid_block_size, build_groups
from kvplan.vllm.verdicts import preemption_verdict
from tests.conftest import load_fixture

GIB = 2**30
SIXTY_GIB = 60 * GIB  # the reference's illustrative available memory: 64,424,509,440 B
H100_SERVE_IN_FLIGHT = 2 * 8192  # async scheduling × MNBT 8192


def full(i: int, heads: int = 2, head: int = 128, e: int = 2) -> KVCacheSpec:
    return KVCacheSpec(i, "full", heads, head, head, e)


def sliding(i: int, window: int, heads: int = 2, head: int = 128, e: int = 2) -> KVCacheSpec:
    return KVCacheSpec(i, "sliding_window", heads, head, head, e, sliding_window=window)


def gemma3_27b_specs() -> list[KVCacheSpec]:
    """Gemma-3-27B text stack (reference §10c): 62 layers, 16 KV heads × 128, window 1024,
    full attention where (i + 1) % 6 == 0."""
    return [full(i, 16) if (i + 1) % 6 == 0 else sliding(i, 1024, 16) for i in range(62)]


def summary(plan: KVCachePlan) -> tuple[int, int, int, int, str | None]:
    return (plan.block_size, plan.bytes_per_block, plan.blocks_per_request, plan.num_gpu_blocks, plan.log_line)


# ---------------------------------------------------------------------------------------------
# Reference §10 worked examples (60 GiB available, H100 `vllm serve`: 16,384 tokens in flight)
# ---------------------------------------------------------------------------------------------


def test_qwen25_1_5b_60gib_gives_vllms_log_line() -> None:
    plan = plan_kv_cache(kv_cache_specs(load_fixture("Qwen--Qwen2.5-1.5B")), SIXTY_GIB, BlockPlanSettings(16, 32768,
                                                                                                          H100_SERVE_IN_FLIGHT))
    assert summary(plan) == (16, 458_752, 2048, 140_434,
                             "GPU KV cache size: 2,246,944 tokens, Maximum concurrency for 32,768 tokens per "
                             "request: 68.57x")
    assert plan.fits and plan.usable_blocks == 140_433


@pytest.mark.parametrize("change", [{"kv_cache_dtype": "fp8"}, {"tp": 2}, {"tp": 4}])
def test_qwen25_1_5b_halves_per_block_with_fp8_tp2_or_tp4(change: dict[str, object]) -> None:
    """TP=4 replicates the model's 2 KV heads: 1 head per rank, like TP=2."""
    specs = kv_cache_specs(load_fixture("Qwen--Qwen2.5-1.5B"), **change)  # type: ignore[arg-type]
    plan = plan_kv_cache(specs, SIXTY_GIB, BlockPlanSettings(16, 32768, H100_SERVE_IN_FLIGHT))
    assert (plan.bytes_per_block, plan.num_gpu_blocks, plan.kv_cache_tokens) == (229_376, 280_868, 4_493_888)
    assert f"{plan.max_concurrency:.2f}" == "137.14"


@pytest.mark.parametrize(
    ("dtype", "block", "bpb", "tokens", "conc"),
    [("auto", 16, 1_124_352, 916_784, "5.60"), ("auto", 64, 4_497_408, 916_736, "5.60"),
     ("fp8", 64, 2_248_704, 1_833_536, "11.19")],
)
def test_deepseek_v3_mla_latent_per_block_size(dtype: str, block: int, bpb: int, tokens: int, conc: str) -> None:
    model = load_fixture("deepseek-ai--DeepSeek-V3")
    plan = plan_kv_cache(kv_cache_specs(model, kv_cache_dtype=dtype), SIXTY_GIB, BlockPlanSettings(block, 163_840,
                                                                                                   H100_SERVE_IN_FLIGHT))
    assert (plan.bytes_per_block, plan.kv_cache_tokens, f"{plan.max_concurrency:.2f}") == (bpb, tokens, conc)
    # The per-request bytes do not depend on the block size: 11,513,364,480 B at 163,840 tokens (bf16).
    if dtype == "auto":
        assert plan.needed_bytes == 11_513_364_480


def test_deepseek_v3_mla_cache_does_not_shrink_with_tp() -> None:
    model = load_fixture("deepseek-ai--DeepSeek-V3")
    tp1 = plan_kv_cache(kv_cache_specs(model), SIXTY_GIB, BlockPlanSettings(16, 163_840, H100_SERVE_IN_FLIGHT))
    tp8 = plan_kv_cache(kv_cache_specs(model, tp=8), SIXTY_GIB, BlockPlanSettings(16, 163_840, H100_SERVE_IN_FLIGHT))
    assert tp8.bytes_per_block == tp1.bytes_per_block == 1_124_352


def test_gemma3_27b_groups_10_full_and_52_sliding_into_7_groups() -> None:
    plan = plan_kv_cache([gemma3_27b_specs()], SIXTY_GIB, BlockPlanSettings(16, 131_072, H100_SERVE_IN_FLIGHT))
    sizes = sorted((g.kind, len(g.layers)) for g in plan.groups)
    assert sizes == [("full", 10)] + [("sliding_window", 8)] * 2 + [("sliding_window", 9)] * 4
    assert summary(plan)[1:4] == (1_310_720, 14_726, 49_152)
    assert plan.kv_cache_tokens == 437_488 and f"{plan.max_concurrency:.2f}" == "3.34"
    assert "Add 8 padding layers, may waste at most 15.38% KV cache memory" in plan.vllm_log
    sw = next(g for g in plan.groups if g.kind == "sliding_window")
    assert sw.blocks_per_request(131_072, H100_SERVE_IN_FLIGHT, 3) == 1089


@pytest.mark.parametrize(("in_flight", "bpr", "conc"), [(32_768, 20_870, "2.36"), (2 * 2048, 10_118, "4.86")])
def test_gemma3_27b_sliding_reservation_follows_in_flight_tokens(in_flight: int, bpr: int, conc: str) -> None:
    """LLM class (MNBT 16384 → 32,768 in flight) and the small-GPU server tier (MNBT 2048)."""
    plan = plan_kv_cache([gemma3_27b_specs()], SIXTY_GIB, BlockPlanSettings(16, 131_072, in_flight))
    assert (plan.blocks_per_request, f"{plan.max_concurrency:.2f}") == (bpr, conc)


def test_gemma3_27b_without_hybrid_manager_does_not_fit_60gib() -> None:
    plan = plan_kv_cache([gemma3_27b_specs()], SIXTY_GIB, BlockPlanSettings(16, 131_072, H100_SERVE_IN_FLIGHT,
                                                                            disable_hybrid_kv_cache_manager=True))
    assert plan.bytes_per_block == 8_126_464 and not plan.fits
    assert f"{plan.max_concurrency:.2f}" == "0.97"
    assert plan.refusal is not None and plan.refusal.startswith(
        "To serve at least one request with the model's max seq len (131072), (62.0 GiB KV cache is needed")


def test_gpt_oss_120b_two_groups_of_18() -> None:
    plan = plan_kv_cache(kv_cache_specs(load_fixture("openai--gpt-oss-120b")), SIXTY_GIB, BlockPlanSettings(16,
                                                                                                            131_072,
                                                                                                            H100_SERVE_IN_FLIGHT))
    assert summary(plan)[1:4] == (589_824, 9_225, 109_226)
    assert plan.kv_cache_tokens == 1_551_920 and f"{plan.max_concurrency:.2f}" == "11.84"
    assert plan.needed_bytes == 5_441_126_400


@pytest.mark.parametrize(("tp", "bpb", "conc"), [(2, 294_912, "23.68"), (4, 147_456, "47.36"), (8, 73_728, "94.72")])
def test_gpt_oss_120b_tensor_parallel_splits_kv_heads(tp: int, bpb: int, conc: str) -> None:
    plan = plan_kv_cache(kv_cache_specs(load_fixture("openai--gpt-oss-120b"), tp=tp), SIXTY_GIB,
                         BlockPlanSettings(16, 131_072, H100_SERVE_IN_FLIGHT))
    assert (plan.bytes_per_block, f"{plan.max_concurrency:.2f}") == (bpb, conc)


def test_gpt_oss_120b_llm_class_reserves_more_sliding_blocks() -> None:
    plan = plan_kv_cache(kv_cache_specs(load_fixture("openai--gpt-oss-120b")), SIXTY_GIB,
                         BlockPlanSettings(16, 131_072, 32_768))
    assert (plan.blocks_per_request, f"{plan.max_concurrency:.2f}") == (10_249, "10.66")


def test_qwen3_next_hybrid_block_576_with_gdn_checkpoint_alignment() -> None:
    plan = plan_kv_cache(kv_cache_specs(load_fixture("Qwen--Qwen3-Next-80B-A3B-Instruct")), SIXTY_GIB,
                         BlockPlanSettings(16, 262_144, H100_SERVE_IN_FLIGHT, mamba_cache_mode="align",
                                           mamba_checkpoint_alignment=64, mamba_prefill_checkpoint_blocks=1))
    assert summary(plan)[:4] == (576, 14_155_776, 465, 4_551)
    assert plan.kv_cache_tokens == 2_565_628 and f"{plan.max_concurrency:.2f}" == "9.79"
    assert plan.vllm_log[:2] == (
        "Setting attention block size to 576 tokens to ensure that attention page size is >= mamba page size.",
        "Padding mamba page size by 7.46% to ensure that mamba page size and attention page size are exactly equal.",
    )
    assert sorted((g.kind, len(g.layers)) for g in plan.groups) == [("full", 12)] + [("mamba", 12)] * 3


def test_qwen3_next_none_mode_uses_block_544_and_one_state_block() -> None:
    plan = plan_kv_cache(kv_cache_specs(load_fixture("Qwen--Qwen3-Next-80B-A3B-Instruct")), SIXTY_GIB,
                         BlockPlanSettings(16, 262_144, H100_SERVE_IN_FLIGHT, mamba_cache_mode="none"))
    assert (plan.block_size, plan.blocks_per_request, f"{plan.max_concurrency:.2f}") == (544, 485, "9.93")
    assert plan.hybrid is not None and f"{plan.hybrid.padding_pct:.2f}" == "1.49"


@pytest.mark.parametrize(("tp", "block", "bpb", "bpr", "pct"), [(2, 576, 7_077_888, 465, "7.46"),
                                                                (4, 320, 3_932_160, 829, "19.40")])
def test_qwen3_next_tensor_parallel_realigns_block(tp: int, block: int, bpb: int, bpr: int, pct: str) -> None:
    plan = plan_kv_cache(kv_cache_specs(load_fixture("Qwen--Qwen3-Next-80B-A3B-Instruct"), tp=tp), SIXTY_GIB,
                         BlockPlanSettings(16, 262_144, H100_SERVE_IN_FLIGHT, mamba_checkpoint_alignment=64,
                                           mamba_prefill_checkpoint_blocks=1))
    assert (plan.block_size, plan.bytes_per_block, plan.blocks_per_request) == (block, bpb, bpr)
    assert plan.hybrid is not None and f"{plan.hybrid.padding_pct:.2f}" == pct
    if tp == 2:
        assert f"{plan.max_concurrency:.2f}" == "19.57"


def test_jamba_style_mamba1_alignment_gives_block_80() -> None:
    """Reference §10e (Jamba-mini-1.5): 4 attention (8 × 128) + 28 Mamba1 layers, state 311,296 B."""
    specs = [full(i, 8) if i % 8 == 4 else KVCacheSpec(i, "mamba", state_bytes=311_296) for i in range(32)]
    hybrid = align_hybrid_block_size(specs, 16, mamba_cache_mode="align")
    assert hybrid is not None and (hybrid.block_size, hybrid.mamba_page_padded_bytes) == (80, 327_680)
    plan = plan_kv_cache([specs], SIXTY_GIB, BlockPlanSettings(16, 4096, 16_384))
    assert (plan.bytes_per_block, len(plan.groups)) == (1_310_720, 8)


def test_user_block_size_above_the_alignment_is_kept() -> None:
    specs = [full(0, 8), KVCacheSpec(1, "mamba", state_bytes=311_296)]
    hybrid = align_hybrid_block_size(specs, 128, mamba_cache_mode="none")
    assert hybrid is not None and (hybrid.block_size, hybrid.raised) == (128, False)
    assert hybrid.mamba_page_padded_bytes == 128 * 4096


def test_llama4_chunked_attention_keeps_its_own_groups_unless_the_hybrid_manager_is_off() -> None:
    """vLLM ≥ 0.14 keeps the hybrid manager on for chunked-local attention (the vLLM 0.32 oracle agrees);
    with it off (older vLLM, or --disable-hybrid-kv-cache-manager) every layer is cached as full."""
    model = load_fixture("unsloth--Llama-4-Scout-17B-16E-Instruct")
    kept = plan_kv_cache(kv_cache_specs(model), SIXTY_GIB, BlockPlanSettings(16, 131_072, H100_SERVE_IN_FLIGHT))
    assert not kept.hma_disabled
    assert sorted((g.kind, len(g.layers)) for g in kept.groups) == [("chunked_local", 12)] * 3 + [("full", 12)]
    chunked = next(g for g in kept.groups if g.kind == "chunked_local")
    assert chunked.blocks_per_request(131_072, H100_SERVE_IN_FLIGHT, 3) == 1536  # cdiv(8192 + 16,384, 16)
    off = plan_kv_cache(kv_cache_specs(model), SIXTY_GIB, BlockPlanSettings(16, 131_072, H100_SERVE_IN_FLIGHT,
                                                                            disable_hybrid_kv_cache_manager=True))
    assert off.hma_disabled and [(g.kind, len(g.layers)) for g in off.groups] == [("full", 48)]


# ---------------------------------------------------------------------------------------------
# vLLM's own test vectors (tests/v1/core/test_kv_cache_utils.py)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_full", "n_sw", "expected"),
    [(2, 4, [("full", 2), ("sliding_window", 2), ("sliding_window", 2)]),
     (3, 7, [("full", 3), ("sliding_window", 2), ("sliding_window", 2), ("sliding_window", 3)]),
     (6, 5, [("full", 6), ("sliding_window", 5)])],
)
def test_grouping_buckets_and_the_one_and_a_half_rule(n_full: int, n_sw: int, expected: list[tuple[str, int]]) -> None:
    specs = [full(i) for i in range(n_full)] + [sliding(n_full + i, 128) for i in range(n_sw)]
    result = build_groups(specs, 16)
    assert sorted((g.kind, len(g.layers)) for g in result.groups) == sorted(expected)


def test_round_robin_split_keeps_layers_interleaved() -> None:
    specs = [full(i) for i in range(3)] + [sliding(3 + i, 128) for i in range(7)]
    sw = [g.layers for g in build_groups(specs, 16).groups if g.kind == "sliding_window"]
    assert sw == [(3, 6, 9), (4, 7), (5, 8)]


@pytest.mark.parametrize(("max_len", "expected"), [(16_385, 16_384), (16_383, 16_383)])
def test_estimate_max_model_len_matches_vllm_vector(max_len: int, expected: int) -> None:
    """32 layers × 32 heads × 128 × fp16, 8 GiB."""
    groups = build_groups([full(i, 32) for i in range(32)], 16).groups
    bpb = 32 * 16 * 32 * 256 * 2
    assert estimate_max_model_len(groups, bpb, 8 * GIB, max_len, 0, 1) == expected


def test_estimate_max_model_len_is_zero_when_one_token_does_not_fit() -> None:
    groups = build_groups([full(0)], 16).groups
    assert estimate_max_model_len(groups, 16_384, 16_383, 4096, 0, 1) == 0


# ---------------------------------------------------------------------------------------------
# Fit check and refusal messages
# ---------------------------------------------------------------------------------------------


def test_fit_check_reserves_the_null_block() -> None:
    """Uniform model: L_max = ((avail − bpb) // bpb) × bs. Exactly bpr + 1 blocks is the least that starts."""
    specs = [kv_cache_specs(load_fixture("Qwen--Qwen2.5-1.5B"))[0]]
    bpb, bpr = 458_752, 512  # 8192 tokens
    ok = plan_kv_cache(specs, (bpr + 1) * bpb, BlockPlanSettings(16, 8192, 0))
    short = plan_kv_cache(specs, (bpr + 1) * bpb - 1, BlockPlanSettings(16, 8192, 0))
    assert ok.fits and ok.num_gpu_blocks == 513
    assert not short.fits and short.estimated_max_model_len == 8176
    assert short.log_line is None
    assert short.refusal == (
        "To serve at least one request with the model's max seq len (8192), (0.22 GiB KV cache is needed, which "
        "is larger than the available KV cache memory (0.22 GiB). Based on the available memory, the estimated "
        "maximum model length is 8176. Try increasing `gpu_memory_utilization` (which also controls CPU memory on "
        "the CPU backend) or decreasing `max_model_len` when initializing the engine. See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")


@pytest.mark.parametrize("available", [458_752, 0, -1_546_188_226])
def test_no_memory_message_when_at_most_one_block_fits(available: int) -> None:
    plan = plan_kv_cache(kv_cache_specs(load_fixture("Qwen--Qwen2.5-1.5B")), available, BlockPlanSettings(16, 8192, 0))
    assert plan.refusal == NO_MEMORY_MESSAGE and not plan.fits
    assert plan.num_gpu_blocks == max(0, available // 458_752)


def test_pipeline_parallel_takes_the_smallest_worker_count() -> None:
    """get_pp_indices: 28 layers over 3 stages → 9, 10, 9; the 10-layer stage bounds the cache."""
    specs = kv_cache_specs(load_fixture("Qwen--Qwen2.5-1.5B"), pp=3)
    assert [len(w) for w in specs] == [9, 10, 9]
    plan = plan_kv_cache(specs, SIXTY_GIB, BlockPlanSettings(16, 32768, 3 * 8192))
    assert plan.bytes_per_block_per_worker == (147_456, 163_840, 147_456)
    assert plan.num_gpu_blocks == SIXTY_GIB // 163_840 == 393_216


def test_capacity_log_line_format() -> None:
    assert capacity_log_line(62_278, 8192, 7.60233918128655) == (
        "GPU KV cache size: 62,278 tokens, Maximum concurrency for 8,192 tokens per request: 7.60x")


# ---------------------------------------------------------------------------------------------
# The starting document
# ---------------------------------------------------------------------------------------------


def test_starting_document_21520_tokens_are_1345_blocks_with_1344_usable() -> None:
    """Section 9: Qwen2.5-1.5B, --max-model-len 8192, 'GPU KV cache was 21,520 tokens'. The KV memory it
    implies is 1,345 blocks × 458,752 B."""
    plan = plan_kv_cache(kv_cache_specs(load_fixture("Qwen--Qwen2.5-1.5B")), 1345 * 458_752,
                         BlockPlanSettings(16, 8192, 2048))
    assert (plan.num_gpu_blocks, plan.usable_blocks, plan.kv_cache_tokens) == (1345, 1344, 21_520)
    assert plan.log_line == ("GPU KV cache size: 21,520 tokens, Maximum concurrency for 8,192 tokens per "
                             "request: 2.63x")
    # A 5,011-token document holds cdiv(5011, 16) = 314 blocks; 4 of them fit in 1,344 usable blocks.
    p = preemption_verdict(plan, max_num_seqs=4, context=5011, concurrency=4)
    assert (p.blocks_per_request, p.max_requests_at_context, p.possible) == (314, 4, False)


# ---------------------------------------------------------------------------------------------
# Preemption verdict
# ---------------------------------------------------------------------------------------------


def test_preemption_begins_at_the_first_request_that_does_not_fit() -> None:
    specs = [full(i) for i in range(28)]
    plan = plan_kv_cache([specs], 3501 * 458_752,
                         BlockPlanSettings(16, 16_384, 4096))  # 3,500 usable blocks, 1,024 per request
    p = preemption_verdict(plan, max_num_seqs=4)
    assert (p.usable_blocks, p.blocks_per_request, p.blocks_needed) == (3500, 1024, 4096)
    assert (p.possible, p.max_requests_at_context, p.from_concurrency) == (True, 3, 4)
    # 4 running requests overflow from cdiv(x, 16) × 4 > 3500, i.e. 876 blocks = 13,986+ tokens.
    assert p.from_context == 875 * 16 + 1
    assert "from the 4th such request" in p.explanation
    calm = preemption_verdict(plan, max_num_seqs=4, context=8192)
    assert not calm.possible and calm.from_concurrency is None


def test_preemption_counts_sliding_window_reservation() -> None:
    plan = plan_kv_cache([gemma3_27b_specs()], SIXTY_GIB, BlockPlanSettings(16, 131_072, H100_SERVE_IN_FLIGHT))
    p = preemption_verdict(plan, max_num_seqs=1024, context=4096)
    # full: 256 blocks; each SW group: cdiv(min(1023 + 16,384, 4096), 16) + 1 = 257, six groups.
    assert p.blocks_per_request == 256 + 6 * 257
    assert p.max_requests_at_context == 49_151 // (256 + 6 * 257)
