"""The roofline core (kvplan/hardware/roofline.py): ridge points, decode and prefill bytes/FLOPs/times, MoE
expert reads, the compute-bound crossing, TP all-reduce, and the simulator cost model.

Every number is derived by hand in the test from the formulas the module cites.
"""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.errors import InvalidParameter
from kvplan.hardware.model_costs import (
    AttentionLayerCost,
    ModelCosts,
    expected_experts_hit,
    model_costs,
    step_cost,
    weight_bytes_read,
)
from kvplan.hardware.roofline import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    DEFAULT_COMPUTE_EFFICIENCY,
    Roof,
    RooflineCost,
    compute_bound_batch,
    decode_point,
    decode_step_time,
    prefill,
    ridge_point,
    roofline,
    throughput_limit,
)
from tests.conftest import ALL_FIXTURES, load_fixture

# H100 SXM as the starting document §1 derives it: 1,979 TFLOP/s BF16 "with sparsity", dense = half.
H100_BF16_DENSE = 1979e12 / 2
H100_BANDWIDTH = 3.35e12


def h100(**kw: float) -> Roof:
    return Roof(gpu="h100-sxm", bandwidth_bytes_per_s=H100_BANDWIDTH, peak_flops=H100_BF16_DENSE,
                flops_dtype="bf16", **kw)  # type: ignore[arg-type]


def dense_weights_only(weight_bytes: int, params: int) -> ModelCosts:
    """A model reduced to its weights (no attention layers): decode reads exactly the weights."""
    return ModelCosts(name="weights-only", weight_bytes=weight_bytes, matmul_params_per_token=params,
                      hidden_size=4096, num_layers=32)


# --- ridge point --------------------------------------------------------------------------------


def test_h100_sxm_bf16_ridge_point_is_about_295_flop_per_byte() -> None:
    # 1,979e12 / 2 / 3.35e12 = 295.37 (starting document §1: "approximately 295 FLOP/byte").
    assert ridge_point(H100_BF16_DENSE, H100_BANDWIDTH) == pytest.approx(295.37, abs=0.01)
    assert h100().ridge_point == pytest.approx(295.37, abs=0.01)


def test_effective_ridge_scales_by_the_ratio_of_efficiencies() -> None:
    roof = h100()
    assert roof.effective_ridge_point == pytest.approx(
        roof.ridge_point * DEFAULT_COMPUTE_EFFICIENCY / DEFAULT_BANDWIDTH_EFFICIENCY)


@pytest.mark.parametrize("eff", [0.0, -0.1, 1.01])
def test_efficiency_outside_zero_one_is_rejected(eff: float) -> None:
    with pytest.raises(InvalidParameter, match="bandwidth-efficiency"):
        h100(bandwidth_efficiency=eff)


# --- the starting document's measurement ---------------------------------------------------------


def test_document_case_one_request_at_70_percent_of_896_gbps_is_about_39_tok_s() -> None:
    """Starting document §1: 16.2 GB of weights, 896 GB/s GPU, 39 tok/s for one request.

    kvplan: 896e9 × 0.70 / 16.2e9 = 38.72 tok/s when only the weights are read (the 0.70 default is
    derived from this very measurement, so this pins the arithmetic, not an independent prediction).
    """
    laptop = Roof(gpu="laptop-896", bandwidth_bytes_per_s=896e9, peak_flops=100e12, flops_dtype="bf16")
    costs = dense_weights_only(16_200_000_000, 27_000_000_000)
    one = decode_point(costs, laptop, batch=1, context=0)
    assert one.tokens_per_s == pytest.approx(896e9 * 0.7 / 16.2e9)
    assert round(one.tokens_per_s) == 39
    assert one.bound == "memory"


def test_document_case_four_requests_give_4x_without_kv_reads_and_3_5x_with_them() -> None:
    """Starting document §1: four requests gave 138 tok/s in aggregate, about 3.5× one request.

    kvplan predicts exactly 4.0× when a step reads only the weights (memory-bound: four requests share
    one weight read; at B=4 the FLOPs take 2·27e9·4 / (100e12·0.76) = 2.8 ms against 25.8 ms of
    reads). The measured 3.5× is what kvplan predicts once each request's KV read is about 5 % of the
    weights: 4·(W + R)/(W + 4R) = 3.5 ⇔ R = W/20 = 810 MB per request per step, e.g. 64 KiB/token
    (an fp8 KV cache of a 27B hybrid) at ~12.4k tokens of context. The document did not record the
    prompt and output lengths, so the context, and per-step overheads kvplan does not model
    (sampling, scheduling, launches), cannot be told apart.
    """
    laptop = Roof(gpu="laptop-896", bandwidth_bytes_per_s=896e9, peak_flops=100e12, flops_dtype="bf16")
    weights = 16_200_000_000
    costs = dense_weights_only(weights, 27_000_000_000)
    ratio = decode_point(costs, laptop, 4, 0).tokens_per_s / decode_point(costs, laptop, 1, 0).tokens_per_s
    assert ratio == pytest.approx(4.0)

    # One attention layer carrying 64 KiB/token; context so that KV per request = W/20.
    kv_per_token = 65_536
    context = round(weights / 20 / kv_per_token)  # 12,360 tokens
    layer = AttentionLayerCost(layer=0, kv_bytes_per_token=kv_per_token, num_q_heads=1, qk_head_dim=1,
                               v_head_dim=1, prefill_qk_head_dim=1, prefill_v_head_dim=1)
    with_kv = ModelCosts(name="doc", weight_bytes=weights, matmul_params_per_token=27_000_000_000,
                         hidden_size=4096, num_layers=1, attention=(layer,))
    one = decode_point(with_kv, laptop, 1, context)
    four = decode_point(with_kv, laptop, 4, context)
    assert four.tokens_per_s / one.tokens_per_s == pytest.approx(3.5, abs=0.01)
    assert one.tokens_per_s == pytest.approx(36.9, abs=0.1)  # 627.2e9 / (16.2e9 + 0.81e9)


# --- a real model by hand: Qwen2.5-1.5B -----------------------------------------------------------

# Qwen2.5-1.5B config: hidden 1536, 28 layers, 12 query heads, 2 KV heads, head 128, MLP 8960,
# vocab 151,936, tied embeddings, bf16, q/k/v biases.
QWEN_LAYER_LINEAR = (1536 * 1536 + 1536) + 2 * (1536 * 256 + 256) + 1536 * 1536 + 3 * 1536 * 8960
QWEN_EMBEDDING = 151_936 * 1536  # 233,373,696, tied: it is also the LM head
QWEN_NORMS = (2 * 28 + 1) * 1536
QWEN_TOTAL = 28 * QWEN_LAYER_LINEAR + QWEN_EMBEDDING + QWEN_NORMS
QWEN_KV_PER_TOKEN = 28 * 2 * 2 * 128 * 2  # layers × (K,V) × KV heads × head × bf16 = 28,672


def test_qwen2_5_1_5b_costs_match_a_hand_count() -> None:
    costs = model_costs(load_fixture("Qwen--Qwen2.5-1.5B"))
    assert QWEN_TOTAL == 1_543_714_304
    assert costs.weight_bytes == 2 * QWEN_TOTAL == 3_087_428_608
    assert costs.unread_weight_bytes == 0  # tied: the table is read as the LM head
    # Matmuls: every linear layer plus the LM head (the tied table), no norms, no lookup.
    assert costs.matmul_params_per_token == 28 * QWEN_LAYER_LINEAR + QWEN_EMBEDDING == 1_543_626_752
    assert costs.kv_bytes_per_token == QWEN_KV_PER_TOKEN == 28_672
    assert {(a.num_q_heads, a.qk_head_dim, a.v_head_dim) for a in costs.attention} == {(12, 128, 128)}


def test_qwen2_5_1_5b_decode_bytes_and_flops_at_batch_1_context_4096() -> None:
    costs = model_costs(load_fixture("Qwen--Qwen2.5-1.5B"))
    c = step_cost(costs, decode_reqs=1, decode_context=4096)
    # Bytes: all weights + 4,096 tokens of KV read + the new token's KV written.
    assert c.weight_bytes == 3_087_428_608
    assert c.kv_bytes == 4096 * 28_672 + 28_672 == 117_469_184
    assert c.bytes == 3_204_897_792
    # FLOPs: 2 × params + per layer 4 × B × C × heads × head_dim (QKᵀ and AV).
    assert c.linear_flops == 2 * 1_543_626_752
    assert c.attention_flops == 28 * 4 * 1 * 4096 * 12 * 128 == 704_643_072
    p = decode_point(costs, h100(), 1, 4096)
    assert p.bound == "memory"
    assert p.itl_s == pytest.approx(3_204_897_792 / (3.35e12 * 0.70))  # 1.3667 ms
    assert p.tokens_per_s == pytest.approx(731.7, abs=0.1)
    assert p.arithmetic_intensity == pytest.approx((2 * 1_543_626_752 + 704_643_072) / 3_204_897_792)


def test_qwen2_5_1_5b_prefill_counts_the_quadratic_attention_term() -> None:
    costs = model_costs(load_fixture("Qwen--Qwen2.5-1.5B"))
    r = prefill(costs, h100(), 2048)
    pairs = 2048 * 2049 // 2  # causal: token i attends to i keys
    assert r.linear_flops == 2 * 1_543_626_752 * 2048
    assert r.attention_flops == 28 * pairs * 2 * 12 * (128 + 128)
    assert r.bound == "compute"
    assert r.time_s == pytest.approx(r.flops / (H100_BF16_DENSE * 0.76))
    assert r.tokens_per_s == pytest.approx(2048 / r.time_s)


def test_chunked_prefill_splits_the_flops_exactly_and_rereads_the_weights() -> None:
    costs = model_costs(load_fixture("Qwen--Qwen2.5-1.5B"))
    r = prefill(costs, h100(), 5000, max_num_batched_tokens=2048)
    assert [(c.start, c.tokens) for c in r.chunks] == [(0, 2048), (2048, 2048), (4096, 904)]
    assert sum(c.flops for c in r.chunks) == r.flops
    # Each chunk reads the weights again and the KV of the chunks before it.
    assert r.chunks[1].bytes == 3_087_428_608 + 2048 * 28_672 + 2048 * 28_672
    # Every 2,048-token chunk is compute-bound on an H100, so chunking costs no time here…
    assert all(c.bound == "compute" for c in r.chunks)
    assert r.chunked_time_s == pytest.approx(r.time_s)
    # …while 64-token chunks are memory-bound (each re-reads 3.1 GB of weights) and cost more.
    small = prefill(costs, h100(), 5000, max_num_batched_tokens=64)
    assert small.chunks[0].bound == "memory" and small.chunked_time_s > 2 * r.time_s


def test_opt_125m_untied_positions_are_not_matmuls() -> None:
    # OPT-125m: tied token embedding 50,272 × 768 plus learned positions (2,048 + 2) × 768, fp16.
    costs = model_costs(load_fixture("facebook--opt-125m"))
    per_layer = 4 * (768 * 768 + 768) + (768 * 3072 + 3072) + (3072 * 768 + 768)
    assert costs.matmul_params_per_token == 12 * per_layer + 50_272 * 768
    assert costs.unread_weight_bytes == 0


# --- MoE ------------------------------------------------------------------------------------------


def test_expected_experts_is_k_at_batch_1_and_tends_to_e() -> None:
    assert expected_experts_hit(128, 8, 1) == pytest.approx(8.0)
    assert expected_experts_hit(8, 2, 2) == pytest.approx(8 * (1 - (6 / 8) ** 2)) == 3.5
    assert expected_experts_hit(128, 8, 4096) == pytest.approx(128.0)
    assert expected_experts_hit(128, 8, 64) == pytest.approx(128 * (1 - (120 / 128) ** 64))  # ≈ 126.0


def test_moe_weight_reads_grow_with_the_batch_and_dense_do_not() -> None:
    moe = load_fixture("Qwen--Qwen3-30B-A3B")  # 48 MoE layers, 128 experts, top-8, expert width 768
    costs = model_costs(moe)
    expert = 3 * 2048 * 768 * 2  # gate/up/down × bf16 = 9,437,184 bytes
    assert costs.expert_bytes == expert
    assert (costs.num_moe_layers, costs.num_experts, costs.experts_per_token) == (48, 128, 8)
    never_read = costs.unread_weight_bytes + 48 * 128 * expert
    assert costs.unread_weight_bytes == 151_936 * 2048 * 2  # untied input embedding: looked up
    assert weight_bytes_read(costs, 1) == costs.weight_bytes - never_read + 48 * 8 * expert
    assert weight_bytes_read(costs, 1_000_000) == costs.weight_bytes - costs.unread_weight_bytes
    reads = [weight_bytes_read(costs, b) for b in (1, 8, 64, 512)]
    assert reads == sorted(reads) and reads[0] < reads[-1]
    dense = model_costs(load_fixture("Qwen--Qwen2.5-1.5B"))
    assert weight_bytes_read(dense, 1) == weight_bytes_read(dense, 512)
    # FLOPs per token count only the k active experts.
    p = decode_point(costs, h100(), 1, 0)
    assert p.expected_experts == pytest.approx(8.0)


# --- the compute-bound crossing and the caps ------------------------------------------------------


def test_weights_only_bf16_model_turns_compute_bound_at_the_effective_ridge() -> None:
    # bytes = 2P, FLOPs = 2PB: compute ≥ memory ⇔ B ≥ peak·ce / (bw·be) = effective ridge (320.7).
    costs = dense_weights_only(2 * 8_000_000_000, 8_000_000_000)
    roof = h100()
    assert compute_bound_batch(costs, roof, 0) == math.ceil(roof.effective_ridge_point) == 321
    assert decode_point(costs, roof, 320, 0).bound == "memory"
    assert decode_point(costs, roof, 321, 0).bound == "compute"


def test_long_context_gqa_decode_never_turns_compute_bound() -> None:
    # Per request at 128k context the KV read (3.7 GB) dwarfs its FLOPs' share: intensity → ~6 FLOP/byte.
    costs = model_costs(load_fixture("Qwen--Qwen2.5-1.5B"))
    assert compute_bound_batch(costs, h100(), 131_072) is None
    assert compute_bound_batch(costs, h100(), 0) is not None


@pytest.mark.parametrize(
    ("kv", "crossing", "seqs", "limit"),
    [
        (100, 300, None, ("kv_capacity", 100)),
        (500, 300, None, ("compute", 300)),
        (100, None, None, ("kv_capacity", 100)),
        (300, 300, None, ("compute", 300)),  # at the crossing the step is compute-bound
        (2000, None, 1024, ("max_num_seqs", 1024)),
        (2000, 900, 1024, ("compute", 900)),
        (None, 300, 1024, ("unknown", None)),  # without the KV capacity nothing can be said
    ],
)
def test_throughput_limit_is_whichever_cap_comes_first(
    kv: int | None, crossing: int | None, seqs: int | None, limit: tuple[str, int | None]
) -> None:
    assert throughput_limit(kv, crossing, seqs) == limit


def test_report_marks_batches_beyond_kv_capacity_and_the_limit_point() -> None:
    costs = model_costs(load_fixture("Qwen--Qwen2.5-1.5B"))
    r = roofline(costs, h100(), context=4096, batches=[1, 64, 256], kv_capacity_batch=100,
                 gpu_flops={"bf16": H100_BF16_DENSE, "fp8": 2 * H100_BF16_DENSE})
    assert [p.fits_kv_cache for p in r.batches] == [True, True, False]
    assert r.throughput_limit == "kv_capacity"
    assert r.limit_point is not None and r.limit_point.batch == 100
    assert r.ridge_points["fp8"] == pytest.approx(2 * r.ridge_point)
    assert r.prefill.prompt_tokens == 4096  # defaults to the context
    assert r.curve[0].batch == 1 and r.curve[-1].batch >= 512


# --- tensor parallelism ---------------------------------------------------------------------------


def test_tp_splits_bytes_and_flops_and_adds_a_ring_all_reduce() -> None:
    model = load_fixture("Qwen--Qwen2.5-1.5B")
    one, two = model_costs(model, tp=1), model_costs(model, tp=2)
    assert two.weight_bytes == one.weight_bytes // 2
    assert two.matmul_params_per_token == one.matmul_params_per_token // 2
    assert two.kv_bytes_per_token == one.kv_bytes_per_token // 2  # 2 KV heads → 1 per rank
    roof = Roof(gpu="x", bandwidth_bytes_per_s=3.35e12, peak_flops=H100_BF16_DENSE, flops_dtype="bf16",
                interconnect_bytes_per_s=450e9)
    c = step_cost(two, decode_reqs=8, decode_context=1024)
    # 2 all-reduces per layer × 28 layers of 8 tokens × 1536 hidden × 2 bytes.
    assert c.allreduce_bytes == 2 * 28 * 8 * 1536 * 2
    p = decode_point(two, roof, 8, 1024)
    assert p.comm_s == pytest.approx(2 * (2 - 1) / 2 * c.allreduce_bytes / 450e9)
    assert p.itl_s == pytest.approx(max(p.memory_s, p.compute_s) + p.comm_s)
    # Without a link figure the communication is not modelled.
    assert decode_point(two, h100(), 8, 1024).comm_s == 0.0


# --- attention shapes -----------------------------------------------------------------------------


def _layer(**kw: int | None) -> AttentionLayerCost:
    return AttentionLayerCost(layer=0, kv_bytes_per_token=10, num_q_heads=1, qk_head_dim=1, v_head_dim=1,
                              prefill_qk_head_dim=1, prefill_v_head_dim=1, **kw)  # type: ignore[arg-type]


def test_sliding_window_caps_decode_reads_at_the_window() -> None:
    costs = ModelCosts(name="swa", weight_bytes=0, matmul_params_per_token=0, hidden_size=1, num_layers=1,
                       attention=(_layer(sliding_window=1024),))
    c = step_cost(costs, decode_reqs=3, decode_context=100_000)
    assert c.kv_bytes == 3 * 1024 * 10 + 3 * 10
    assert c.attention_flops == 3 * 1024 * 2 * 1 * 2


@given(n=st.integers(0, 3000), w=st.integers(1, 700))
def test_causal_pairs_equal_the_sum_of_attended_keys(n: int, w: int) -> None:
    for layer in (_layer(), _layer(sliding_window=w), _layer(attention_chunk_size=w)):
        assert layer.causal_pairs(n) == sum(layer.attended(i) for i in range(1, n + 1))


def test_mla_decode_uses_the_absorbed_latent_and_prefill_the_up_projected_heads() -> None:
    costs = model_costs(load_fixture("deepseek-ai--DeepSeek-V2-Lite"))
    a = costs.attention[0]
    # kv_lora_rank 512, rope 64, nope 128, v 128, 16 heads: decode QK 576 / AV 512, prefill 192 / 128.
    assert (a.num_q_heads, a.qk_head_dim, a.v_head_dim) == (16, 576, 512)
    assert (a.prefill_qk_head_dim, a.prefill_v_head_dim) == (192, 128)
    assert a.kv_bytes_per_token == 576 * 2


# --- the simulator's cost model -----------------------------------------------------------------


def test_roofline_cost_matches_decode_step_time_for_a_uniform_decode_batch() -> None:
    costs = model_costs(load_fixture("Qwen--Qwen2.5-1.5B"))
    cost = RooflineCost(costs, h100())
    # 16 requests with 1,000 cached tokens each attend over 16 × 1,001 entries (each query itself included).
    assert cost.step_time(0, 16, 16_016) == pytest.approx(decode_step_time(costs, h100(), 16, 1001))
    assert cost.step_time(0, 0, 0) == 0.0
    # The second 2,048-token chunk of a 4,096-token prompt attends over 4,096 entries.
    chunked = prefill(costs, h100(), 4096, max_num_batched_tokens=2048)
    assert cost.step_time(2048, 0, 4096) == pytest.approx(chunked.chunks[1].time_s)


def test_negative_counts_are_rejected() -> None:
    costs = dense_weights_only(10, 5)
    with pytest.raises(InvalidParameter):
        step_cost(costs, decode_reqs=-1)
    with pytest.raises(InvalidParameter):
        decode_point(costs, h100(), 0, 10)
    with pytest.raises(InvalidParameter):
        prefill(costs, h100(), 0)


def test_core_imports_no_cli_or_network_libraries() -> None:
    import subprocess
    import sys

    code = ("import sys, kvplan.hardware.roofline; "
            "print(sorted(m for m in ('rich', 'typer', 'huggingface_hub', 'yaml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("folder", ALL_FIXTURES)
def test_every_fixture_model_gets_a_consistent_roofline(folder: str) -> None:
    """Aggregate tok/s never falls and per-request tok/s never rises with the batch (weights are
    shared, per-token FLOPs and KV are not); the bound column agrees with the crossing."""
    costs = model_costs(load_fixture(folder))
    assert costs.weight_bytes > 0 and costs.matmul_params_per_token > 0
    r = roofline(costs, h100(), context=2048, batches=[1, 4, 16, 64, 256, 1024])
    agg = [p.tokens_per_s for p in r.batches]
    per = [p.tokens_per_s_per_request for p in r.batches]
    assert agg == sorted(agg)
    assert per == sorted(per, reverse=True)
    for p in r.batches:
        expected = "compute" if r.compute_bound_batch is not None and p.batch >= r.compute_bound_batch else "memory"
        assert p.bound == expected


def test_a_multimodal_w8a8_checkpoint_runs_its_matmuls_on_fp8_tensor_cores() -> None:
    """Llama-4-Scout FP8-dynamic (compressed-tensors, 8-bit float weights and dynamic per-token activations) keeps
    its quantization_config at the top of a multimodal config: the text sub-config the roofline reads has none,
    and the compute roof was BF16's. The reader now carries the W8A8 type in the QuantSpec."""
    from kvplan.hardware.gpus import get_gpu
    from kvplan.hardware.model_costs import select_compute_dtype
    from kvplan.model.hub import load_model
    from tests.conftest import CONFIGS

    corpus = CONFIGS.parent / "corpus" / "configs"
    model = load_model(str(corpus / "RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic"))
    assert model.quant is not None and model.quant.w8a8 == "float"
    assert select_compute_dtype(model, get_gpu("h100").flops)[0] == "fp8"
    assert select_compute_dtype(model, get_gpu("a100").flops)[0] == "bf16"  # no FP8 tensor cores


def test_a_verify_step_reads_each_request_s_kv_once_for_its_k_plus_one_queries() -> None:
    costs = model_costs(load_fixture("Qwen--Qwen2.5-7B"))
    one = step_cost(costs, decode_reqs=4, decode_context=1000)
    verify = step_cost(costs, decode_reqs=4, decode_context=1000, queries_per_request=3)
    assert verify.num_tokens == 12 and verify.decode_reqs == 4
    assert verify.linear_flops == 3 * one.linear_flops
    assert verify.attention_flops == 3 * one.attention_flops
    written = (12 - 4) * costs.kv_bytes_per_token  # the 8 more queries' K/V; the context's is read once
    assert verify.kv_bytes == one.kv_bytes + written


def test_speculative_decode_is_the_draft_and_verify_steps_over_the_tokens_they_yield() -> None:
    from kvplan.hardware.model_costs import one_layer_draft
    from kvplan.hardware.roofline import MTP_ACCEPTANCE, speculative_point, tokens_per_verify_step

    # Leviathan et al. 2023 eq. 1: (1 − α^(k+1)) / (1 − α).
    assert tokens_per_verify_step(0.8, 3) == pytest.approx((1 - 0.8 ** 4) / 0.2) == pytest.approx(2.952)
    assert tokens_per_verify_step(1.0, 3) == 4.0 and tokens_per_verify_step(0.0, 3) == 1.0
    costs = model_costs(load_fixture("Qwen--Qwen2.5-7B"))
    roof = Roof("h100-sxm", H100_BANDWIDTH, H100_BF16_DENSE, "bf16")
    p = speculative_point(costs, roof, 8, 2048, method="mtp", drafted=2)
    from kvplan.hardware.roofline import step_time

    verify = step_time(step_cost(costs, decode_reqs=8, decode_context=2048, queries_per_request=3), roof).time_s
    draft = 2 * decode_step_time(one_layer_draft(costs), roof, 8, 2048)
    assert p.draft_s == pytest.approx(draft)
    assert p.step_s == pytest.approx(verify + draft)
    assert verify > decode_step_time(costs, roof, 8, 2048)  # 24 tokens through the GEMMs, not 8
    assert (p.acceptance_low, p.acceptance_high) == MTP_ACCEPTANCE
    assert p.itl_low_s == pytest.approx(p.step_s / tokens_per_verify_step(0.90, 2))
    assert p.tokens_per_s_low == pytest.approx(8 * tokens_per_verify_step(0.85, 2) / p.step_s)
    layer = one_layer_draft(costs)
    assert layer.num_layers == 1 and layer.lm_head_params == costs.lm_head_params == 152_064 * 3584
