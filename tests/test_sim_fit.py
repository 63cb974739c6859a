"""Sizing the simulators from a deployment: fit's pool and limits, the hybrid mapping, roofline step times."""
from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.errors import InvalidParameter
from kvplan.hardware import model_costs as mc
from kvplan.hardware import roofline as rl
from kvplan.hardware.gpus import get_gpu
from kvplan.sim.scheduler import SchedulerConfig, simulate_serve
from kvplan.sim.sizing import RooflineStepCost, check_request_lengths, fitted_pool
from kvplan.sim.workloads import ServeRequest
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.report import GroupSummary
from kvplan.vllm.settings import ServeSettings
from tests.conftest import load_fixture

# Qwen2.5-1.5B: 28 layers × 2 KV heads × head 128 × (K, V) × 2 bytes = 28,672 bytes per token; × 16 = 458,752.
QWEN_15B_BLOCK_BYTES = 28 * 2 * 128 * 2 * 2 * 16
DOC_SETTINGS = ServeSettings.of(kv_cache_memory_bytes=1345 * QWEN_15B_BLOCK_BYTES, max_model_len=8192, max_num_seqs=4,
                             max_num_batched_tokens=2048)


def test_document_deployment_gives_vllms_pool_exactly() -> None:
    pool = fitted_pool(plan_fit(load_fixture("Qwen--Qwen2.5-1.5B"), get_gpu("l4"), DOC_SETTINGS, advise=False))
    assert QWEN_15B_BLOCK_BYTES == 458_752
    assert (pool.num_gpu_blocks, pool.block_size, pool.kv_cache_tokens) == (1345, 16, 21_520)
    assert (pool.sim_num_gpu_blocks, pool.sim_block_size, pool.sim_kv_tokens) == (1345, 16, 1344 * 16)
    assert pool.exact and pool.num_groups == 1 and pool.untracked_blocks_per_request == 0
    assert pool.kv_bytes_per_token == 28_672
    assert (pool.max_num_seqs, pool.max_num_batched_tokens, pool.max_model_len) == (4, 2048, 8192)
    assert pool.mapping.startswith("one KV-cache group: the simulator's pool is vLLM's 1,345 blocks")


def test_sliding_window_hybrid_maps_to_full_attention_blocks_and_states_the_rest() -> None:
    # gpt-oss-20b: 12 sliding-window (128 tokens) + 12 full layers, two groups sharing one pool.
    fit = plan_fit(load_fixture("openai--gpt-oss-20b"), get_gpu("h100"), ServeSettings.of(max_model_len=8192),
                   advise=False)
    pool = fitted_pool(fit)
    assert [g.kind for g in fit.cache.groups] == ["sliding_window", "full"]
    assert pool.sim_num_gpu_blocks == fit.cache.num_gpu_blocks and pool.sim_block_size == 16  # one full group
    # Sliding group per request (capacity.KVCacheGroup.blocks_per_request): cdiv(min(W − 1 + in-flight, L), bs) + 1
    # with W 128, in-flight = max_num_batched_tokens 8,192 (H100 default), L 8,192 → 512 + 1.
    assert fit.scheduler.max_num_batched_tokens == 8192
    assert pool.untracked_blocks_per_request == 513
    assert not pool.exact and pool.kv_bytes_per_token is None
    assert "optimistic by up to 513 blocks per running request" in pool.mapping


def test_two_full_attention_groups_each_take_a_block_id_per_block_of_tokens() -> None:
    fit = plan_fit(load_fixture("Qwen--Qwen2.5-1.5B"), get_gpu("l4"), DOC_SETTINGS, advise=False)
    full = GroupSummary("full", 5, 16, 4096, 512)
    hybrid = replace(fit, cache=fit.cache._replace(
        num_gpu_blocks=1001, groups=(full, full, GroupSummary("sliding_window", 5, 16, 4096, 65, sliding_window=1024))))
    pool = fitted_pool(hybrid)
    assert pool.sim_num_gpu_blocks == 1 + (1001 - 1) // 2 == 501
    assert pool.untracked_blocks_per_request == 65
    assert "(num_gpu_blocks − 1) ÷ 2 = 500 usable blocks" in pool.mapping
    assert "optimistic by up to 32 blocks per running request" in pool.mapping  # 65 ÷ 2 full groups


def test_mamba_hybrids_and_all_windowed_models_are_refused_with_a_way_out() -> None:
    gpu = get_gpu("h100")
    next_fit = plan_fit(load_fixture("Qwen--Qwen3-Next-80B-A3B-Instruct"), gpu, ServeSettings.of(tp=4), advise=False)
    with pytest.raises(InvalidParameter, match="Mamba/linear-attention state") as mamba:
        fitted_pool(next_fit)
    hint = f"--num-gpu-blocks {next_fit.cache.num_gpu_blocks} --block-size {next_fit.cache.block_size}"
    assert hint in (mamba.value.hint or "")
    with pytest.raises(InvalidParameter, match=r"every KV-cache group is windowed \(4,096 tokens\)"):
        fitted_pool(plan_fit(load_fixture("mistralai--Mistral-7B-v0.1"), gpu, ServeSettings(), advise=False))


def test_a_deployment_vllm_would_not_start_is_refused_with_vllms_reason() -> None:
    # Llama-3.1-8B at its full 131,072-token context on a 24 GB L4: the KV cache cannot hold one request.
    fit = plan_fit(load_fixture("meta-llama--Meta-Llama-3.1-8B"), get_gpu("l4"), ServeSettings(), advise=False)
    assert not fit.verdict.fits
    with pytest.raises(InvalidParameter, match="vLLM would not start .* To serve at least one request"):
        fitted_pool(fit)


def test_requests_longer_than_max_model_len_are_refused() -> None:
    check_request_lengths([8192, 100], 8192)
    with pytest.raises(InvalidParameter, match="request 1: prompt \\+ output = 8,193 tokens exceeds max_model_len"):
        check_request_lengths([100, 8193], 8192)


def _qwen_h100() -> tuple[mc.ModelCosts, rl.Roof]:
    gpu = get_gpu("h100")
    costs = mc.model_costs(load_fixture("Qwen--Qwen2.5-1.5B"), gpu_flops=gpu.flops)
    return costs, rl.roof_from_gpu(gpu, costs.compute_dtype)


def test_roofline_step_cost_turns_the_schedulers_attended_count_into_cached_tokens() -> None:
    costs, roof = _qwen_h100()
    cost = RooflineStepCost(rl.RooflineCost(costs, roof))
    # A lone prefill of 2,048 tokens attends over its own 2,048 (the scheduler's count); nothing was cached.
    assert cost.step_time(2048, 0, 2048) == rl.RooflineCost(costs, roof).step_time(2048, 0, 0)
    assert cost.step_time(2048, 0, 2048) == pytest.approx(rl.prefill(costs, roof, 2048).time_s, rel=1e-12)
    # 16 decoders with 1,000 cached tokens each attend over 1,001 keys: the scheduler passes 16 × 1,001.
    assert cost.step_time(0, 16, 16 * 1001) == pytest.approx(rl.decode_step_time(costs, roof, 16, 1001), rel=1e-12)
    assert cost.step_time(0, 0, 0) == 0.0


def test_lone_request_ttft_is_the_roofline_prefill_time_derived_by_hand() -> None:
    costs, roof = _qwen_h100()
    report = simulate_serve([ServeRequest(0.0, 2048, 1)], SchedulerConfig(num_gpu_blocks=200),
                            RooflineStepCost(rl.RooflineCost(costs, roof)))
    # Qwen2.5-1.5B matmul parameters per token: 28 layers × (q, o 1536² + k, v 1536×256 + MLP 3×1536×8960
    # + q/k/v biases 2,048) + tied LM head 151,936 × 1,536 = 1,543,626,752.
    params = 28 * (2 * 1536 * 1536 + 2 * 1536 * 256 + 3 * 1536 * 8960 + 2048) + 151_936 * 1536
    assert costs.matmul_params_per_token == params == 1_543_626_752
    linear = 2 * params * 2048
    attention = (2048 * 2049 // 2) * 2 * 12 * (128 + 128) * 28  # causal pairs × QKᵀ,AV × heads × dims × layers
    compute_s = (linear + attention) / (989.4e12 * 0.76)  # H100 SXM BF16 dense (catalog) at 76 %
    memory_s = (3_087_428_608 + 2048 * 28_672) / (3.35e12 * 0.70)  # weights + new K/V at 70 % of 3.35 TB/s
    assert memory_s < compute_s  # compute-bound
    assert report.time_to_first_token_seconds.max == pytest.approx(compute_s, rel=1e-12)
    assert report.time_to_first_token_seconds.max == pytest.approx(0.0088885, rel=1e-4)


def test_figures_name_the_rooflines_inputs() -> None:
    costs, roof = _qwen_h100()
    figures = RooflineStepCost(rl.RooflineCost(costs, roof)).figures()
    assert figures == {"bandwidth_bytes_per_s": 3.35e12, "bandwidth_efficiency": 0.70, "peak_flops": 989.4e12,
                       "compute_efficiency": 0.76, "weight_bytes": 3_087_428_608.0, "kv_bytes_per_token": 28_672.0,
                       "tp": 1.0}
