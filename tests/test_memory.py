"""The memory budget: vLLM's exact arithmetic, and kvplan's estimates pinned to their formulas."""
from __future__ import annotations

import math

import pytest

from kvplan.vllm.defaults import VllmVersion, requested_memory
from kvplan.vllm.memory.activation import (
    ProfileRun,
    estimate_activation,
    forward_activation_bytes,
    penalty_state_bytes,
)
from kvplan.vllm.memory.budget import (
    STARTUP_BASELINE_BYTES_SINGLE_GPU,
    MemoryTerm,
    memory_budget,
    startup_baseline_bytes,
)
from kvplan.vllm.memory.cuda_graphs import GraphCapture, estimate_cuda_graphs
from kvplan.vllm.memory.non_torch import estimate_non_torch
from kvplan.vllm.memory.weights import estimate_weights
from tests.conftest import load_fixture

GIB = 2**30
MIB = 2**20


def term(name: str, num: int) -> MemoryTerm:
    return MemoryTerm(name, num, "user", "test")


def test_requested_is_ceil_of_cuda_total_times_utilization() -> None:
    total = 85_029_158_912  # 79.19 GiB
    assert requested_memory(total, 0.92) == math.ceil(total * 0.92) == 78_226_826_200


def test_available_is_requested_minus_every_term() -> None:
    b = memory_budget(cuda_total_bytes=80 * GIB, gpu_memory_utilization=0.9, weights=term("weights", 15 * GIB),
                      activation=term("activation", 5 * GIB), non_torch=term("non_torch", GIB // 8),
                      cuda_graphs=term("cuda_graphs", GIB // 2))
    assert b.requested_bytes == 72 * GIB
    assert b.available_kv_bytes == 72 * GIB - 15 * GIB - 5 * GIB - GIB // 8 - GIB // 2
    assert b.terms[0].name == "weights" and b.startup_ok


def test_kv_cache_memory_bytes_replaces_the_profile_exactly() -> None:
    b = memory_budget(cuda_total_bytes=80 * GIB, gpu_memory_utilization=0.5, weights=term("weights", 70 * GIB),
                      activation=term("activation", 5 * GIB), non_torch=term("non_torch", 0),
                      cuda_graphs=term("cuda_graphs", 0), kv_cache_memory_bytes=123_456_789)
    assert b.available_kv_bytes == 123_456_789


def test_startup_refusal_uses_vllms_message() -> None:
    b = memory_budget(cuda_total_bytes=85_029_158_912, gpu_memory_utilization=1.0, weights=term("weights", 0),
                      activation=term("activation", 0), non_torch=term("non_torch", 0),
                      cuda_graphs=term("cuda_graphs", 0), startup_baseline=(STARTUP_BASELINE_BYTES_SINGLE_GPU,) * 3)
    assert not b.startup_ok
    assert b.startup_error() == (
        "Free memory on device cuda:0 (78.58/79.19 GiB) on startup is less than desired GPU memory utilization "
        "(1.0, 79.19 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")


def test_activation_is_the_sampler_peak_plus_retained_hidden_states() -> None:
    """Llama-3.1-8B, H100 serve defaults, vLLM 0.11: 1,024 logits rows × 128,256 vocab × 38.4 B + 8,192 × 4,096
    × 2 B; from 0.17 on the Triton top-k/top-p path's 20 B per logit. Model Runner V2's persistent penalty
    state (0.29+) is no part of the peak: vLLM counts it in the consumed memory, so fit adds it to non-torch."""
    model = load_fixture("meta-llama--Meta-Llama-3.1-8B")
    t = estimate_activation(model, ProfileRun(8192, 1024, tp=1), version=VllmVersion(0, 11))
    assert t.bytes == int(1024 * 128_256 * 38.4) + 8192 * 4096 * 2 == 5_110_339_993
    v028 = estimate_activation(model, ProfileRun(8192, 1024, tp=1), version=VllmVersion(0, 28))
    assert v028.bytes == int(1024 * 128_256 * 20.0) + 8192 * 4096 * 2 and "Triton top-k/top-p" in v028.assumption
    new = estimate_activation(model, ProfileRun(8192, 1024, tp=1))
    assert new.bytes == v028.bytes and "penalty state" not in new.assumption
    assert penalty_state_bytes(model, max_num_seqs=1024) == int(1024 * 128_256 * (4 + 4 / 32))
    # vLLM's profiler sees it from 0.27 (total_consumed), on Model Runner V2 only
    assert penalty_state_bytes(model, max_num_seqs=1024, version=VllmVersion(0, 27)) == int(1024 * 128_256 * 4.125)
    assert penalty_state_bytes(model, max_num_seqs=1024, version=VllmVersion(0, 26)) == 0
    assert penalty_state_bytes(model, max_num_seqs=1024, model_runner_v2=False) == 0
    assert t.source == "estimate" and "sampler over 1,024 rows" in t.assumption
    # llm-d H100 log: "torch peak memory increase" 4.76 GiB (v0.11 serve defaults).
    assert abs(t.bytes / GIB - 4.76) < 0.05


def test_activation_uses_min_of_tokens_and_seqs_for_sampler_rows() -> None:
    model = load_fixture("Qwen--Qwen2.5-1.5B")
    t = estimate_activation(model, ProfileRun(2048, 4, tp=1), version=VllmVersion(0, 28))
    assert t.bytes == max(int(4 * 151_936 * 20.0), 2048 * 3 * 8960 * 2) + 2048 * 1536 * 2


def test_forward_intermediates_win_for_tiny_batches_of_a_wide_mlp() -> None:
    model = load_fixture("Qwen--Qwen2.5-1.5B")  # intermediate 8,960
    assert forward_activation_bytes(model, tp=2, num_tokens=4096) == 4096 * 3 * 4480 * 2


def test_pre_017_moe_point_keeps_whole_experts_under_expert_parallel() -> None:
    """--enable-expert-parallel: FusedMoEParallelConfig.make gives the MoE tp_size 1, so each rank's experts keep their
    whole 1,536-wide intermediate (the 0.11.2 Qwen3-VL-235B TP 8 EP log looks up "E=16,N=1536"): the pre-0.17
    estimate's MoE point at 8,192 tokens is 8,192 × 8 × (3 × 1,536 + 4,096) × 2 B, not the TP-split 3 × 192."""
    from kvplan.model.hub import load_local
    from tests.conftest import CONFIGS

    model = load_local(str(CONFIGS.parent / "corpus" / "configs" / "Qwen--Qwen3-VL-235B-A22B-Instruct-FP8"))
    ep = forward_activation_bytes(model, tp=8, num_tokens=8192, moe_tp=1)
    assert ep == 8192 * 8 * (3 * 1536 + 4096) * 2
    assert forward_activation_bytes(model, tp=8, num_tokens=8192) == 8192 * 8 * (3 * 192 + 4096) * 2
    run = ProfileRun(8192, 2, tp=8, moe_tp=1)
    assert estimate_activation(model, run, version=VllmVersion(0, 11)).bytes == ep + 8192 * 4096 * 2


def test_non_torch_single_and_multi_gpu() -> None:
    assert estimate_non_torch(tp=1, pp=1).bytes == round(0.13 * GIB)
    assert estimate_non_torch(tp=2, pp=1).bytes == round(0.54 * GIB)
    assert estimate_non_torch(tp=1, pp=2).bytes == round(0.54 * GIB)


def test_cuda_graph_estimate_counts_the_extrapolated_graphs() -> None:
    """max_num_seqs 1024, MNBT 8192 on Hopper: capture sizes up to 512 → 51 piecewise + 51 full graphs, of which
    vLLM's estimate extrapolates 50 + 50 at 6 MiB each on a 64 MiB first capture (gpu_model_runner.py:
    profile_cudagraph_memory; constants from tests/fixtures/data/cuda-graph-estimates.yaml)."""
    t = estimate_cuda_graphs(GraphCapture(1024, 8192, arch="hopper", enforce_eager=False))
    assert t.bytes == 64 * MIB + 100 * 6 * MIB


def test_cuda_graphs_cost_nothing_with_enforce_eager_or_before_v021() -> None:
    eager = estimate_cuda_graphs(GraphCapture(1024, 8192, arch="hopper", enforce_eager=True))
    old = estimate_cuda_graphs(GraphCapture(1024, 8192, arch="hopper", enforce_eager=False),
                               version=VllmVersion(0, 11))
    assert (eager.bytes, eager.source) == (0, "none")
    assert (old.bytes, old.source) == (0, "not subtracted")


@pytest.mark.parametrize(("tp", "pp", "expected"), [(1, 1, 0.61), (2, 1, 1.54), (1, 4, 1.54)])
def test_startup_baseline(tp: int, pp: int, expected: float) -> None:
    assert startup_baseline_bytes(tp=tp, pp=pp) == (round(expected * GIB),) * 3


def test_dgx_spark_is_refused_at_0_92_as_its_logged_host_use_makes_vllm_refuse() -> None:
    """GB10 shares memory with the host: vLLM compares util × 121.63 GiB with MemAvailable. A public log:
    "Free memory on device cuda:0 (110.73/121.63 GiB) on startup is less than desired GPU memory utilization
    (0.92, 111.9 GiB)" (code-index id 57784008357), fixed with 0.89."""
    from kvplan.hardware.gpus import get_gpu
    from kvplan.vllm.fit import STARTS_IF_OPTIMISTIC, plan_fit
    from kvplan.vllm.settings import ServeSettings

    model = load_fixture("Qwen--Qwen2.5-7B")
    r = plan_fit(model, get_gpu("dgx-spark"), ServeSettings.of(max_model_len=8192), advise=False)
    assert r.verdict.startup == "refuses: free memory"
    assert r.verdict.error is not None and r.verdict.error.startswith(
        "Free memory on device cuda:0 (110.73/121.63 GiB) on startup is less than desired GPU memory utilization "
        "(0.92, 111.9 GiB)")
    ok = plan_fit(model, get_gpu("dgx-spark"), ServeSettings.of(max_model_len=8192, gpu_memory_utilization=0.89),
                  advise=False)
    # 0.89 × 121.63 = 108.25 GiB: under the clean hosts' 110.73–111.18 GiB free, above a busy host's 101.28.
    assert ok.verdict.startup == "ok" and ok.verdict.startup_range == STARTS_IF_OPTIMISTIC
    assert startup_baseline_bytes(tp=1, pp=1, integrated=True)[2] == round((121.63 - 101.28) * GIB)


def test_weights_estimate_is_the_loaded_bytes_and_names_what_loading_adds() -> None:
    from kvplan.vllm.memory.weights import loaded_weights_bytes_per_gpu

    model = load_fixture("openai--gpt-oss-20b")
    t = estimate_weights(model, tp=1, pp=1, arch="hopper")
    assert t.bytes == loaded_weights_bytes_per_gpu(model, arch="hopper")
    assert t.source == "estimate"
    assert "triton layout" in t.assumption and "rotary cos/sin cache +0.03 GiB" in t.assumption
    old = estimate_weights(model, tp=1, pp=1, arch="hopper", version=VllmVersion(0, 11))
    assert "marlin layout" in old.assumption and old.bytes > t.bytes


def test_hopper_mxfp4_before_012_ranges_over_marlin_and_triton() -> None:
    """vLLM 0.11.0 mxfp4.py:get_mxfp4_backend: Marlin without triton_kernels (not in the 0.11.0 wheel),
    Triton with it (0.11.1+). llm-d's H100 gpt-oss-20b log (calibration half, "0.11"): 13.47 GiB loaded,
    the Triton layout — inside the range, Marlin the best value."""
    from kvplan.vllm.memory.weights import loaded_weights_bytes_per_gpu

    model = load_fixture("openai--gpt-oss-20b")
    t = estimate_weights(model, tp=1, pp=1, arch="hopper", version=VllmVersion(0, 11))
    marlin = loaded_weights_bytes_per_gpu(model, arch="hopper", version=VllmVersion(0, 11))
    triton = loaded_weights_bytes_per_gpu(model, arch="hopper", moe_backend="triton")
    assert t.bytes == marlin and triton < marlin
    assert t.low_bytes <= triton and "if triton_kernels is installed" in t.assumption
    assert t.low_bytes <= 13.47 * GIB <= t.high_bytes
    # 0.12+ (triton_kernels a dependency), another GPU, or a named --moe-backend: one layout, no widening.
    for kwargs in ({"version": VllmVersion(0, 12)}, {"version": VllmVersion(0, 11), "moe_backend": "marlin"}):
        one = estimate_weights(model, tp=1, pp=1, arch="hopper", **kwargs)  # type: ignore[arg-type]
        assert "if triton_kernels is installed" not in one.assumption
        assert one.low_bytes == int(one.bytes * 0.99)
    assert "triton_kernels" not in estimate_weights(model, tp=1, pp=1, arch="ampere",
                                                    version=VllmVersion(0, 11)).assumption


def test_weights_estimate_starts_from_safetensors_bytes_when_given() -> None:
    model = load_fixture("meta-llama--Meta-Llama-3.1-8B")
    t = estimate_weights(model, tp=2, pp=1, arch="hopper", total_bytes=16 * GIB)
    assert t.bytes == 8 * GIB + 131072 * 128 * 2
    assert t.assumption.startswith("checkpoint size from safetensors metadata")


def test_weights_estimate_says_when_the_mxfp4_layout_is_unknown() -> None:
    t = estimate_weights(load_fixture("openai--gpt-oss-20b"), tp=1, pp=1, arch="cdna3")
    assert "checkpoint layout assumed" in t.assumption


def test_sampler_bytes_per_logit_by_version_band() -> None:
    """0.8–0.10: FlashInfer's top-k/top-p path (14 B/logit); 0.11–0.16: the sort-based 38.4 B/logit;
    0.17+: the in-place Triton top-k/top-p kernel (20 B/logit)."""
    from kvplan.vllm.memory.activation import sampler_bytes_per_logit

    model = load_fixture("Qwen--Qwen2.5-7B")
    for v in (VllmVersion(0, 8), VllmVersion(0, 9), VllmVersion(0, 10)):
        t = estimate_activation(model, ProfileRun(2048, 256, tp=1), version=v)
        assert t.bytes == int(256 * 152_064 * 14.0) + 2048 * 3584 * 2
        assert t.high_bytes > int(256 * 152_064 * 38.4)  # without FlashInfer: the native path
    assert sampler_bytes_per_logit(VllmVersion(0, 11)) == sampler_bytes_per_logit(VllmVersion(0, 16)) == 38.4
    assert sampler_bytes_per_logit(VllmVersion(0, 17)) == sampler_bytes_per_logit(VllmVersion(0, 33)) == 20.0


def test_estimated_terms_carry_a_range_and_measured_ones_do_not() -> None:
    est = estimate_non_torch(tp=2, pp=1)
    assert est.low_bytes < est.bytes < est.high_bytes
    user = MemoryTerm("weights", 10 * GIB, "user", "given with --weights-memory")
    assert user.low_bytes == user.bytes == user.high_bytes
    b = memory_budget(cuda_total_bytes=80 * GIB, gpu_memory_utilization=0.9, weights=user,
                      activation=term("activation", GIB), non_torch=est, cuda_graphs=term("cuda_graphs", 0))
    low, high = b.available_kv_range
    assert low == b.requested_bytes - 11 * GIB - est.high_bytes
    assert high == b.requested_bytes - 11 * GIB - est.low_bytes
    assert low < b.available_kv_bytes < high


def test_fit_report_carries_ranges_and_the_range_verdict() -> None:

    from kvplan.hardware.gpus import get_gpu
    from kvplan.vllm.fit import plan_fit
    from kvplan.vllm.settings import ServeSettings

    model = load_fixture("meta-llama--Meta-Llama-3.1-8B")
    r = plan_fit(model, get_gpu("h100"), ServeSettings.of(max_model_len=8192), advise=False)
    low, high = r.memory.available_kv_range
    assert low < r.memory.available_kv_bytes < high
    assert r.cache.kv_cache_tokens_range[0] < r.cache.kv_cache_tokens < r.cache.kv_cache_tokens_range[1]
    assert r.verdict.startup_range == "starts"
    exact = plan_fit(model, get_gpu("h100"), ServeSettings.of(max_model_len=8192, kv_cache_memory_bytes=GIB),
                     advise=False)
    assert exact.memory.available_kv_range == (GIB, GIB)
    # 16.3 GiB of KV at the best estimate for one 131,072-token request (16 GiB): the pessimistic end of
    # the range (measured weights, estimated activation/non-torch/graphs) falls below what it needs.
    r = plan_fit(model, get_gpu("h100"), ServeSettings.of(max_model_len=131072), advise=False)
    m = r.memory
    w = m.requested_bytes - m.activation_bytes - m.non_torch_bytes - m.cuda_graph_bytes - int(16.3 * GIB)
    tight = plan_fit(model, get_gpu("h100"), ServeSettings.of(max_model_len=131072, weights_bytes=w),
                     advise=False)
    assert tight.verdict.fits and tight.verdict.startup_range == "starts only if the estimate is optimistic"
    assert tight.memory.available_kv_range[0] < 16 * GIB < tight.memory.available_kv_range[1]


def test_cuda_graph_estimate_pinned_on_the_logs_that_print_their_graphs() -> None:
    """vLLM's logged estimate against kvplan's: Qwen3.6-27B (64 layers) on 3090s, "PIECEWISE=3 (largest=16),
    FULL=2" → 0.09 GiB (club3090-434, calibration) and "PIECEWISE=5 (largest=16)" → 0.13 GiB (club3090-104,
    validation): inside the range; the other logs are tests/test_cuda_graph_logs.py's."""
    from kvplan.vllm.memory.cuda_graphs import cuda_graph_bytes

    for (pw, full), logged in (((3, 2), 0.09), ((5, 0), 0.13)):
        assert cuda_graph_bytes(pw, full, end="low") <= (logged - 0.005) * GIB
        assert (logged + 0.005) * GIB <= cuda_graph_bytes(pw, full, end="high")
    # An extrapolated graph costs at least 1 MiB (_MIN_PER_GRAPH_BYTES); no graphs cost nothing.
    assert cuda_graph_bytes(0, 10) == 64 * MIB + 9 * 6 * MIB
    assert cuda_graph_bytes(0, 0) == 0


def test_capture_sizes_follow_vllm_033_set_cudagraph_sizes() -> None:
    from kvplan.vllm.memory.cuda_graphs import capture_sizes, compilation_settings, graph_counts

    # The default ceiling 512 (1024 on SM100), min(max_num_seqs × 2, ceiling), capped by the batch.
    assert len(capture_sizes(1024, 8192, "hopper")) == 51 and capture_sizes(1024, 8192, "hopper")[-1] == 512
    assert capture_sizes(1024, 8192, "blackwell")[-1] == 1024
    # max_num_seqs below the ceiling is appended (uniform decode), as is a batch cap inside it.
    assert 100 in capture_sizes(100, 8192, "hopper") and capture_sizes(100, 8192, "hopper")[-1] == 200
    assert capture_sizes(1024, 300, "hopper")[-1] == 300
    # models/config.py: gpt-oss raises the maximum to 1024 unless the user set sizes or a maximum.
    assert capture_sizes(256, 8192, "hopper", architecture="GptOssForCausalLM")[-1] == 1024
    assert capture_sizes(256, 8192, "hopper")[-1] == 512
    mine = compilation_settings({"cudagraph_capture_sizes": [1, 2, 4, 8, 16, 99999]})
    assert capture_sizes(256, 8192, "hopper", mine, architecture="GptOssForCausalLM") == (1, 2, 4, 8, 16)
    # Modes: FULL_AND_PIECEWISE (default) → every size piecewise + decode sizes full; PIECEWISE; FULL;
    # FULL_DECODE_ONLY; NONE; a compilation mode other than VLLM_COMPILE makes FULL_AND_PIECEWISE FULL.
    assert graph_counts(256, 8192, "hopper") == (51, 35)
    for mode, counts in (("PIECEWISE", (51, 0)), ("FULL", (0, 51)), ("full_decode_only", (0, 35)), ("NONE", (0, 0))):
        assert graph_counts(256, 8192, "hopper", compilation_settings({"cudagraph_mode": mode})) == counts
    assert graph_counts(256, 8192, "hopper", compilation_settings({"mode": 0})) == (0, 51)  # → FULL


def test_compilation_config_refusals_are_vllms() -> None:
    from kvplan.errors import InvalidParameter
    from kvplan.vllm.memory.cuda_graphs import compilation_settings

    for bad, words in (({"cudagraph_mode": "SOMETIMES"}, "cudagraph_mode must be one of"),
                       ({"cudagraph_capture_sizes": []}, "at least one element"),
                       ({"cudagraph_capture_sizes": [1, 8], "max_cudagraph_capture_size": 16}, "should be consistent"),
                       ({"max_cudagraph_capture_size": 0}, "whole number"),
                       ({"mode": "FAST"}, "valid modes")):
        with pytest.raises(InvalidParameter, match=words):
            compilation_settings(bad)
    assert compilation_settings({"pass_config": {}, "cudagraph_mode": "PIECEWISE"}).ignored_keys == ("pass_config",)


def test_cudagraph_mode_none_costs_nothing() -> None:
    from kvplan.vllm.memory.cuda_graphs import compilation_settings

    t = estimate_cuda_graphs(GraphCapture(1024, 8192, arch="hopper", enforce_eager=False,
                                          compilation=compilation_settings({"cudagraph_mode": "NONE"})))
    assert (t.bytes, t.source) == (0, "none")


def _gb10_record(record_id: str) -> dict[str, float]:
    import yaml

    from tests.conftest import CONFIGS

    path = CONFIGS.parent / "startup-logs" / "records.yaml"
    return next(r for r in yaml.safe_load(path.read_text())["records"] if r["id"] == record_id)


@pytest.mark.parametrize(("record_id", "vocab", "hidden", "growth_gib"), [
    ("guardkit-gb10-qwen2.5-14b-fp8-dynamic-util015-failed", 152_064, 5120, 2.78),
    ("guardkit-gb10-nemotron-3-nano-4b-fp8-util005-failed", 131_072, 3136, 2.34),
])
def test_integrated_gpu_host_growth_is_what_the_calibration_gb10_logs_leave(
        record_id: str, vocab: int, hidden: int, growth_gib: float) -> None:
    """On an integrated GPU vLLM's free memory is the OS's MemAvailable, so the host's growth during start-up
    lands in non-torch: two calibration-half GB10 logs (vLLM 0.13) leave 2.78 and 2.34 GiB once weights, KV,
    kvplan's activation (256 rows × vocab × 38.4 B + 2,048 hidden states) and 0.13 GiB are taken away."""
    from kvplan.hardware.gpus import get_gpu

    rec = _gb10_record(record_id)
    gb10 = get_gpu("gb10")
    requested = requested_memory(gb10.cuda_total_bytes, rec["gpu_memory_utilization"]) / GIB
    activation = (256 * vocab * 38.4 + 2048 * hidden * 2) / GIB
    rest = requested - rec["model_weights_gib"] - rec["available_kv_gib"]
    assert round(rest - activation - 0.13, 2) == growth_gib
    t = estimate_non_torch(tp=1, pp=1, version=VllmVersion(0, 13), integrated=True)
    assert t.bytes == round(0.13 * GIB) + round((2.78 + 2.34) / 2 * GIB)
    assert (t.low_bytes, t.high_bytes) == (round(0.02 * GIB), round(0.20 * GIB) + round(2.80 * GIB))
    assert estimate_non_torch(tp=1, pp=1, version=VllmVersion(0, 13)).bytes == round(0.13 * GIB)


@pytest.mark.parametrize(("version", "flashinfer", "per_logit"), [
    ("0.10", None, 14.0), ("0.10", False, 38.4), ("0.11", True, 14.0), ("0.16", None, 38.4), ("0.17", None, 20.0),
    ("0.17", True, 14.0), ("0.33", False, 20.0)])
def test_the_sampler_path_follows_vllm_use_flashinfer_sampler(version: str, flashinfer: bool | None,
                                                               per_logit: float) -> None:
    """v1/sample/ops/topk_topp_sampler.py: FlashInfer's path when asked (or, up to 0.11, when importable), the
    PyTorch path (sort up to 0.16, Triton from 0.17) when it is not there or VLLM_USE_FLASHINFER_SAMPLER=0."""
    from kvplan.vllm.defaults import parse_vllm_version
    from kvplan.vllm.memory.activation import sampler_bytes_per_logit

    assert sampler_bytes_per_logit(parse_vllm_version(version), flashinfer) == per_logit


def test_a_native_sampler_log_is_planned_with_its_sampler() -> None:
    """The Qwen3-Next 2 × H200 log (vLLM 0.10.2, calibration half) says "FlashInfer is not available. Falling back
    to the PyTorch-native implementation": 1,024 rows × 151,936 × 38.4 B, its logged 5.58 GiB of peak activation."""
    from kvplan.vllm.startup_log import parse_startup_log
    from tests.conftest import CONFIGS

    raw = CONFIGS.parent / "startup-logs" / "raw" / "ghlog-2xh200-qwen3-next-80b-a3b-instruct-tp2-v0102.log"
    assert parse_startup_log(raw.read_text()).settings.flashinfer_sampler is False
    model = load_fixture("Qwen--Qwen3-Next-80B-A3B-Instruct")
    t = estimate_activation(model, ProfileRun(8192, 1024, tp=2), version=VllmVersion(0, 10), flashinfer_sampler=False)
    assert round(t.bytes / GIB, 2) == 5.60 and "38.4 B" in t.assumption
