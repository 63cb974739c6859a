"""vLLM defaults by version and GPU (vllm_defaults.py), and plan_fit's use of them."""
from __future__ import annotations

import pytest

from kvplan.errors import InvalidParameter
from kvplan.vllm import defaults as vd

GIB = 2**30
MIB = 2**20
# NVML totals (reference §9): H200 143,771 MiB, H100 81,559 MiB, A100-80 81,920 MiB, L40S 46,068 MiB.
H200, H100, A100, L40S, B200 = 143_771 * MIB, 81_559 * MIB, 81_920 * MIB, 46_068 * MIB, 183_359 * MIB


@pytest.mark.parametrize(
    ("nvml", "name", "usage", "mnbt", "seqs"),
    [(B200, "NVIDIA B200", "serve", 16384, 1024), (B200, "NVIDIA B200", "llm", 16384, 1024),
     (H200, "NVIDIA H200", "serve", 8192, 1024), (H100, "NVIDIA H100 80GB HBM3", "llm", 16384, 1024),
     (A100, "NVIDIA A100-SXM4-80GB", "serve", 2048, 256), (A100, "NVIDIA A100-SXM4-80GB", "llm", 8192, 256),
     (L40S, "NVIDIA L40S", "serve", 2048, 256)],
)
def test_batch_defaults_by_nvml_tier(nvml: int, name: str, usage: vd.Usage, mnbt: int, seqs: int) -> None:
    d = vd.batch_defaults(nvml, name, usage)
    assert (d.max_num_batched_tokens, d.max_num_seqs) == (mnbt, seqs)


def test_the_160_gib_tier_starts_in_0_28() -> None:
    """engine/arg_utils.py:get_batch_defaults: 0.27.0 has no ≥ 160 GiB tier, 0.28.0 does (the wheels)."""
    old = vd.batch_defaults(B200, "NVIDIA B200", "serve", vd.parse_vllm_version("0.27"))
    new = vd.batch_defaults(B200, "NVIDIA B200", "serve", vd.parse_vllm_version("0.28"))
    assert (old.max_num_batched_tokens, new.max_num_batched_tokens) == (8192, 16384)


def test_post_adjustments_only_touch_unset_values() -> None:
    d = vd.BatchDefaults(8192, 1024, "t")
    # MNBT capped at max_num_seqs × max_model_len when the user set neither MNBT nor... only seqs.
    r = vd.resolve_batch_settings(d, max_model_len=1024, max_num_seqs=4)
    assert (r.max_num_batched_tokens, r.max_num_seqs) == (4096, 4)
    r = vd.resolve_batch_settings(d, max_model_len=1024, max_num_seqs=4, max_num_batched_tokens=8192)
    assert r.max_num_batched_tokens == 8192
    r = vd.resolve_batch_settings(d, max_model_len=4096, max_num_batched_tokens=512)
    assert (r.max_num_batched_tokens, r.max_num_seqs) == (512, 512)
    r = vd.resolve_batch_settings(d, max_model_len=32768, performance_mode="throughput")
    assert (r.max_num_batched_tokens, r.max_num_seqs) == (16384, 2048)


@pytest.mark.parametrize(("version", "util", "cg"), [("0.33", 0.92, True), ("0.22.1", 0.92, True),
                                                     ("0.20.0", 0.92, True), ("0.19.1", 0.9, False),
                                                     ("0.11.0", 0.9, False)])
def test_version_rules(version: str, util: float, cg: bool) -> None:
    """Read in the wheels: config/cache.py's default 0.9 → 0.92 and envs.py's
    VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS "0" → "1" both change between 0.19.0 and 0.20.0."""
    v = vd.parse_vllm_version(version)
    assert vd.default_gpu_memory_utilization(v) == util
    assert vd.cudagraph_estimate_subtracted(v) is cg


@pytest.mark.parametrize(("version", "v2", "pp", "batches"), [
    ("0.33", True, 1, 2), ("0.33", True, 2, 3), ("0.20", False, 1, 2), ("0.20", False, 2, 2),
    ("0.25", True, 2, 3), ("0.13", False, 1, 1), ("0.11", False, 4, 4)])
def test_in_flight_batches(version: str, v2: bool, pp: int, batches: int) -> None:
    """config/vllm.py:max_concurrent_batches: pp + 1 with async scheduling on Model Runner V2, 2 on the V1
    runner at PP 1, pp otherwise — and async scheduling is on by default from 0.14 (EngineArgs took
    SchedulerConfig's False up to 0.13)."""
    v = vd.parse_vllm_version(version)
    async_on, _ = vd.async_scheduling_default(v)
    assert vd.max_in_flight_tokens(8192, pp, async_scheduling=async_on, model_runner_v2=v2) == batches * 8192


@pytest.mark.parametrize(("version", "method", "mamba", "on"), [
    ("0.13", None, "none", False), ("0.14", None, "none", True), ("0.27", "draft_model", "none", False),
    ("0.28", "draft_model", "none", True), ("0.16", None, "align", False), ("0.17", None, "align", True)])
def test_async_scheduling_default_by_release(version: str, method: str | None, mamba: str, on: bool) -> None:
    """config/vllm.py's `async_scheduling is None` branch, read in the 0.12–0.33 wheels."""
    assert vd.async_scheduling_default(vd.parse_vllm_version(version), speculative_method=method,
                                       mamba_cache_mode=mamba)[0] is on


@pytest.mark.parametrize("text", ["0.7", "1.2", "banana", "0.34"])
def test_unsupported_versions_are_refused(text: str) -> None:
    with pytest.raises(InvalidParameter):
        vd.parse_vllm_version(text)


@pytest.mark.parametrize(
    ("arch", "mla", "dtype", "name", "block"),
    [("hopper", False, "bfloat16", "FLASH_ATTN", 16), ("hopper", True, "bfloat16", "FLASH_ATTN_MLA", 16),
     ("hopper", True, "fp8", "FLASHMLA", 64), ("blackwell", True, "bfloat16", "FLASHINFER_MLA", 32),
     ("blackwell", False, "fp8", "FLASHINFER", 16), ("ampere", True, "bfloat16", "TRITON_MLA", 16)],
)
def test_attention_backend_block_size(arch: str, mla: bool, dtype: str, name: str, block: int) -> None:
    from kvplan.vllm.backends import attention_backend

    b = attention_backend(arch, mla=mla, kv_cache_dtype=dtype)
    assert (b.name, b.block_size) == (name, block)


def test_cudagraph_capture_sizes_default_list() -> None:
    assert vd.cudagraph_capture_sizes(512)[:5] == (1, 2, 4, 8, 16)
    assert len(vd.cudagraph_capture_sizes(512)) == 51
    assert vd.cudagraph_capture_sizes(8) == (1, 2, 4, 8)
    assert vd.max_cudagraph_capture_size(4, 2048, "ampere") == 8
    assert vd.max_cudagraph_capture_size(1024, 16384, "blackwell") == 1024
    assert vd.cudagraph_count(256, 2048, "ampere") == (51, 35)


def test_gdn_checkpoint_alignment_depends_on_the_kernel() -> None:
    assert vd.gdn_checkpoint_alignment("hopper") == 64
    assert vd.gdn_checkpoint_alignment("ampere") == 1


@pytest.mark.parametrize(("version", "method", "off"), [
    ("0.13", None, True), ("0.14", None, False), ("0.33", None, False), ("0.33", "eagle3", True),
    ("0.33", "mtp", True), ("0.33", "draft_model", False)])
def test_chunked_local_attention_and_the_hybrid_manager(version: str, method: str | None, off: bool) -> None:
    """config/vllm.py: chunked-local models turn the hybrid manager off with an EAGLE-type draft, and before
    0.14 unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 (its default: "0" to 0.13.0, "1" from
    0.14.0)."""
    v = vd.parse_vllm_version(version)
    assert vd.hybrid_manager_disabled_by_default(True, v, speculative_method=method) is off
    assert not vd.hybrid_manager_disabled_by_default(False, v, speculative_method=method)


def test_performance_mode_is_refused_before_0_17() -> None:
    """vLLM 0.16.0's EngineArgs has no --performance-mode (0.17.0 does: the wheels)."""
    from kvplan.errors import InvalidParameter
    from kvplan.hardware.gpus import get_gpu
    from kvplan.vllm.settings import ServeSettings, resolve_settings
    from tests.conftest import load_fixture

    model = load_fixture("Qwen--Qwen2.5-1.5B")
    with pytest.raises(InvalidParameter, match="vLLM 0.16 has no such flag"):
        resolve_settings(model, get_gpu("h100"), ServeSettings.of(vllm_version="0.16", performance_mode="throughput"))
    r = resolve_settings(model, get_gpu("h100"), ServeSettings.of(vllm_version="0.17", performance_mode="throughput"))
    assert r.scheduler_config.batch.max_num_seqs == 2048


@pytest.mark.parametrize(("env", "expected"), [
    ({}, (False, None, None, None)),
    ({"VLLM_ALLOW_LONG_MAX_MODEL_LEN": " TRUE "}, (True, None, None, None)),
    ({"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "0", "VLLM_USE_V2_MODEL_RUNNER": "0"}, (False, False, None, None)),
    ({"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "1", "VLLM_USE_FLASHINFER_SAMPLER": "0"}, (False, None, True, False)),
])
def test_vllm_environment_is_read_as_envs_py_reads_it(env: dict[str, str], expected: tuple[object, ...]) -> None:
    from kvplan.vllm.environment import vllm_environment

    e = vllm_environment(env)
    got = (e.allow_long_max_model_len, e.use_v2_model_runner, e.estimate_cudagraphs, e.use_flashinfer_sampler)
    assert got == expected
