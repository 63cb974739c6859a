"""Per-PP-stage budgets (fit.py:memory_stage): every stage profiles its own memory and vLLM keeps the smallest
block count (v1/core/kv_cache_planning.py:get_kv_cache_configs, "Change the num_blocks of each rank to the
smallest among all ranks"); the sampler's dummy run is on the last stage only (v1/worker/gpu/model_runner.py:
profile_run, "Only run sampler/pooler on last PP rank")."""
from __future__ import annotations

from kvplan.hardware.gpus import get_gpu
from kvplan.model.hub import load_local
from kvplan.model.kv_cache import kv_cache_specs
from kvplan.units import GiB
from kvplan.vllm.block_plan import BlockPlanSettings, KVCachePlan, plan_kv_cache
from kvplan.vllm.defaults import VllmVersion, pp_fit_check_merged, requested_memory
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.memory.activation import (
    MRV2_UNSEEN_BYTES,
    ProfileRun,
    estimate_activation,
    v1_forward_phase_bytes,
)
from kvplan.vllm.memory.non_torch import estimate_non_torch
from kvplan.vllm.report import Startup
from kvplan.vllm.settings import ServeSettings
from tests.conftest import CONFIGS, load_fixture

H100 = get_gpu("h100")


def _qwen3_moe_pp2():  # type: ignore[no-untyped-def]
    model = load_fixture("Qwen--Qwen3-30B-A3B")
    return model, plan_fit(model, H100, ServeSettings.of(pp=2, max_model_len=32768), advise=False)


def test_each_stage_has_its_own_budget_and_the_smallest_block_count_wins() -> None:
    model, r = _qwen3_moe_pp2()
    assert [s.stage for s in r.memory.stages] == [0, 1]
    assert [s.num_layers for s in r.memory.stages] == [24, 24]
    requested = requested_memory(H100.cuda_total_bytes, 0.92)
    for s in r.memory.stages:
        assert s.available_kv_bytes == (requested - s.weights_bytes - s.activation_bytes - s.non_torch_bytes
                                        - s.cuda_graph_bytes)
        assert s.num_gpu_blocks == s.available_kv_bytes // s.bytes_per_block
        assert s.bytes_per_block == 24 * 16 * 2 * 4 * 128 * 2  # 24 layers × 16 tokens × K+V × 4 heads × 128 × bf16
    assert r.cache.num_gpu_blocks == min(s.num_gpu_blocks for s in r.memory.stages)
    assert r.memory.tightest_stage == 1
    assert r.memory.available_kv_bytes == r.memory.stages[1].available_kv_bytes


def test_only_the_last_stage_runs_the_sampler() -> None:
    model, r = _qwen3_moe_pp2()
    first, last = r.memory.stages
    batch = 8192
    # vLLM 0.33's Model Runner V2 (ported, memory/activation.py): stage 0 peaks in its forward, the last stage
    # (its residual in the runner's intermediate tensors) in the warmup sampler pass; both plus MRV2_UNSEEN_BYTES
    forward_only = v1_forward_phase_bytes(model, tp=1, num_tokens=batch) + MRV2_UNSEEN_BYTES
    assert first.activation_bytes == forward_only
    with_sampler = estimate_activation(model, ProfileRun(batch, 1024, tp=1, first_stage=False), model_runner_v2=True)
    assert last.activation_bytes == with_sampler.bytes > first.activation_bytes
    # The stages then differ by the sampler's peak alone (same layers; qwen3_moe.py builds the embedding and the LM
    # head on both stages: kvplan.vllm.memory.weights.pp_vocab_copies_bytes).
    assert first.weights_bytes == last.weights_bytes
    assert first.num_gpu_blocks - last.num_gpu_blocks == (
        (first.available_kv_bytes // first.bytes_per_block) - (last.available_kv_bytes // last.bytes_per_block))
    assert last.activation_bytes - first.activation_bytes == 1_931_739_136  # the sampler phase over the forward's
    assert first.available_kv_bytes - last.available_kv_bytes == (
        last.activation_bytes - first.activation_bytes + last.non_torch_bytes - first.non_torch_bytes
        + last.cuda_graph_bytes - first.cuda_graph_bytes)
    assert (first.available_kv_bytes - last.available_kv_bytes) / GiB > 1.7


def test_the_report_names_the_tightest_stage() -> None:
    _, r = _qwen3_moe_pp2()
    note = next(n for n in r.notes if n.startswith("PP 2:"))
    # 791 blocks a stage below the one-table-a-stage layout: the other vocabulary table (151,936 × 2,048 × 2 B =
    # 593.5 MiB) that vLLM's Qwen3-MoE builds on every stage, at 0.75 MiB a block.
    assert "stage 0 55,219, stage 1 51,946 blocks; stage 1 is the tightest" in note


def test_only_the_last_stage_holds_model_runner_v2s_penalty_state() -> None:
    """Model Runner V2 builds its Sampler, whose PenaltiesState keeps output_bin_counts [max_num_reqs, vocab] and
    prompt_bin_mask [max_num_reqs, vocab / 32] (int32) on the GPU, on the last PP rank only
    (v1/worker/gpu/model_runner.py:load_model, `if self.is_last_pp_rank and not self.is_pooling_model`, read in
    0.22.0, 0.27.1 and 0.33.0): stage 0's non-torch term is the growth alone, the last stage's adds 1,024 slots ×
    151,936 × 4.125 B."""
    _, r = _qwen3_moe_pp2()
    first, last = r.memory.stages
    growth = estimate_non_torch(tp=1, pp=2, arch="hopper").bytes
    assert first.non_torch_bytes == growth
    assert last.non_torch_bytes - growth == 1024 * 151_936 * 4 + 1024 * 151_936 // 32 * 4 == 641_777_664


def test_one_stage_has_no_stage_table() -> None:
    r = plan_fit(load_fixture("Qwen--Qwen3-30B-A3B"), H100, ServeSettings.of(max_model_len=32768), advise=False)
    assert r.memory.stages == () and r.memory.tightest_stage is None
    assert not any(n.startswith("PP ") for n in r.notes)


def test_the_range_ends_are_planned_per_stage() -> None:
    _, r = _qwen3_moe_pp2()
    low, high = r.memory.available_kv_range
    assert (low, high) == tuple(r.memory.stages[1].available_kv_range)
    lo_tokens, hi_tokens = r.cache.kv_cache_tokens_range
    assert lo_tokens <= r.cache.kv_cache_tokens <= hi_tokens


# vllm#32105 (records.yaml `vllm-32105-8xa100-glm-4.7-fp8-pp8-v0150rc1-failed`, vLLM 0.15.0rc1): GLM-4.7-FP8 at PP 8
# on A100 refused 202,752 tokens: "(71.16 GiB KV cache is needed, which is larger than the available KV cache memory
# (28.57 GiB). ... the estimated maximum model length is 81392". 71.16 GiB is all 92 layers, not a stage's 11–12:
# vLLM 0.14–0.16 check the merged spec of every worker against the smallest one's memory
# (v1/core/kv_cache_utils.py:get_kv_cache_configs, read in the 0.14.0, 0.15.0, 0.15.1 and 0.16.0 wheels).
def _glm_pp8_plan(merged: bool) -> KVCachePlan:  # 0.15's fit check: the whole available memory, no null block
    model = load_local(str(CONFIGS.parent / "corpus" / "configs" / "zai-org--GLM-4.5-FP8"))  # GLM-4.7's KV geometry
    specs = kv_cache_specs(model, pp=8)
    assert sorted(len(s) for s in specs) == [11, 11, 11, 11, 12, 12, 12, 12]
    return plan_kv_cache(specs, [int(28.57 * GiB)] * 8,
                         BlockPlanSettings(16, 202_752, 8192, merged_pp_fit_check=merged, reserve_null_block=False))


def test_vllm_014_to_016_check_the_whole_model_against_the_smallest_stage() -> None:
    plan = _glm_pp8_plan(merged=True)
    assert not plan.fits and plan.refusal is not None
    assert plan.needed_bytes == 202_752 * 92 * 2 * 8 * 128 * 2  # 71.16 GiB: every layer, as the log's
    assert "(71.16 GiB KV cache is needed" in plan.refusal
    # the log's figures exactly: vLLM ≤ 0.28 checks the whole 28.57 GiB (defaults.fit_check_reserves_null_block);
    # less the null block it would print 28.56 GiB and estimate 81,376
    assert "memory (28.57 GiB)" in plan.refusal and plan.estimated_max_model_len == 81_392
    # Per stage (vLLM ≤ 0.13, 0.17+) the same memory holds the request: a 12-layer stage needs 9.28 GiB.
    per_stage = _glm_pp8_plan(merged=False)
    assert per_stage.fits and per_stage.needed_bytes == 202_752 * 12 * 2 * 8 * 128 * 2


def test_the_merged_check_is_the_014_to_016_rule_of_plan_fit() -> None:
    assert [pp_fit_check_merged(VllmVersion(0, m)) for m in (13, 14, 15, 16, 17, 33)] == [
        False, True, True, True, False, False]
    model = load_local(str(CONFIGS.parent / "corpus" / "configs" / "zai-org--GLM-4.5-FP8"))
    a100 = get_gpu("a100-80gb")
    startup = {v: plan_fit(model, a100, ServeSettings.of(pp=8, max_model_len=131072, gpu_memory_utilization=0.925,
                                                         vllm_version=v), advise=False).verdict.startup
               for v in ("0.13", "0.15", "0.17")}
    assert startup == {"0.13": Startup.OK, "0.15": Startup.REFUSES_MAX_MODEL_LEN, "0.17": Startup.OK}
