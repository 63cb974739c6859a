"""The one-request fit check with and without the null block, by vLLM release.

vLLM 0.29+ (v1/core/kv_cache_utils.py:get_kv_cache_configs, kv_cache_planning.py from 0.33: "Reserve the null block
BlockPool permanently holds back, so auto-fit and the capacity check both plan against usable blocks") checks
`available − bytes_per_block`; vLLM ≤ 0.28 the whole available memory (read in the 0.11.0–0.28.0 wheels). The case:
Meta-Llama-3.1-8B (32 layers × 8 KV heads × 128 × 2 B × K and V: 2 MiB a 16-token block) at max_model_len 32,768,
2,048 blocks a request, with `--kv-cache-memory-bytes` at exactly those 4 GiB: the null block decides.
"""
from __future__ import annotations

import pytest

from kvplan.vllm.block_plan import NO_MEMORY_MESSAGE
from kvplan.vllm.defaults import VllmVersion, fit_check_reserves_null_block, parse_vllm_version
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.settings import ServeSettings
from tests.conftest import load_fixture
from tests.test_capacity_fit import L40S

BLOCK = 32 * 16 * 8 * 128 * 2 * 2  # 2,097,152 B
REQUEST_BLOCKS = 32_768 // 16  # 2,048
ONE_REQUEST = REQUEST_BLOCKS * BLOCK  # 4 GiB
BEFORE = ("0.11", "0.13", "0.15", "0.18", "0.20", "0.22", "0.24", "0.26", "0.28")
SINCE = ("0.29", "0.30", "0.32", "0.33")


def _fit(version: str, kv_bytes: int, max_model_len: int = 32_768):  # type: ignore[no-untyped-def]
    model = load_fixture("meta-llama--Meta-Llama-3.1-8B")
    return plan_fit(model, L40S, ServeSettings.of(max_model_len=max_model_len, kv_cache_memory_bytes=kv_bytes,
                                                  vllm_version=version), advise=False)


def test_the_null_block_is_reserved_from_029() -> None:
    assert [fit_check_reserves_null_block(VllmVersion(0, m)) for m in (8, 11, 13, 15, 20, 22, 28, 29, 30, 33)] == [
        False, False, False, False, False, False, False, True, True, True]


@pytest.mark.parametrize("version", BEFORE)
def test_up_to_028_one_request_fits_in_exactly_its_blocks(version: str) -> None:
    r = _fit(version, ONE_REQUEST)
    assert r.memory.available_kv_bytes == ONE_REQUEST and r.cache.bytes_per_block == BLOCK
    assert r.verdict.fits and r.verdict.error is None and r.verdict.estimated_max_model_len is None
    assert r.cache.num_gpu_blocks == 2_048
    assert r.verdict.log_line == ("GPU KV cache size: 32,768 tokens, Maximum concurrency for 32,768 tokens per "
                                  "request: 1.00x")


@pytest.mark.parametrize("version", SINCE)
def test_from_029_the_same_memory_is_one_block_short(version: str) -> None:
    r = _fit(version, ONE_REQUEST)
    assert not r.verdict.fits and r.verdict.log_line is None
    assert r.verdict.estimated_max_model_len == 2_047 * 16 == 32_752
    assert r.verdict.error == (
        "To serve at least one request with the model's max seq len (32768), (4.0 GiB KV cache is needed, which is "
        "larger than the available KV cache memory (4.0 GiB). Based on the available memory, the estimated maximum "
        "model length is 32752. Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU "
        "backend) or decreasing `max_model_len` when initializing the engine. "
        "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")
    # one block more and it fits, under either rule
    assert _fit(version, ONE_REQUEST + BLOCK).verdict.fits


@pytest.mark.parametrize(("version", "estimated"), [(v, 2_047 * 16) for v in BEFORE] + [(v, 2_046 * 16) for v in SINCE])
def test_the_estimated_max_model_len_searches_the_memory_the_check_used(version: str, estimated: int) -> None:
    # a byte short of the request: both rules refuse; the binary search runs on 4 GiB − 1 (≤ 0.28: 2,047 whole
    # blocks) or on 4 GiB − 1 − 2 MiB (0.29+: 2,046), and the needed figure is the request's 4 GiB under both
    r = _fit(version, ONE_REQUEST - 1)
    assert not r.verdict.fits and r.verdict.estimated_max_model_len == estimated
    needed = "(4.00 GiB" if parse_vllm_version(version) < VllmVersion(0, 14) else "(4.0 GiB"  # `:.2f`, then format_gib
    assert r.verdict.error is not None and f"{needed} KV cache is needed" in r.verdict.error
    assert f"the estimated maximum model length is {estimated}." in r.verdict.error


@pytest.mark.parametrize("version", ("0.22", "0.28", "0.29", "0.33"))
def test_one_block_of_memory(version: str) -> None:
    # ≤ 0.28: 2 MiB > 0 holds one block, so the refusal estimates 16 tokens; 0.29+: 2 MiB − 2 MiB = 0 bytes checked,
    # "No available memory for the cache blocks"
    r = _fit(version, BLOCK)
    assert not r.verdict.fits
    if fit_check_reserves_null_block(VllmVersion(0, int(version.split(".")[1]))):
        assert r.verdict.error == NO_MEMORY_MESSAGE
    else:
        assert r.verdict.estimated_max_model_len == 16 and r.verdict.error is not None
        assert "larger than the available KV cache memory (0.0 GiB)" in r.verdict.error


@pytest.mark.parametrize(("version", "length"), [("0.28", 32_768), ("0.29", 32_752), ("0.33", 32_752)])
def test_auto_fit_plans_against_the_same_memory(version: str, length: int) -> None:
    # _auto_fit_max_model_len gets check_memory from 0.29, available_memory up to 0.28
    r = _fit(version, ONE_REQUEST, max_model_len=-1)
    assert r.verdict.fits and r.scheduler.max_model_len == length


def _override(version: str, blocks: int):  # type: ignore[no-untyped-def]
    model = load_fixture("meta-llama--Meta-Llama-3.1-8B")
    return plan_fit(model, L40S, ServeSettings.of(max_model_len=32_768, kv_cache_memory_bytes=20 * 2**30,
                                                  num_gpu_blocks_override=blocks, vllm_version=version), advise=False)


@pytest.mark.parametrize(("version", "fits_2048", "estimated_2047"),
                         [("0.18", True, None), ("0.20", True, None), ("0.21", True, 32_752), ("0.28", True, 32_752),
                          ("0.29", False, 32_736), ("0.33", False, 32_736)])
def test_the_block_override_sets_the_checked_memory_from_021(version: str, fits_2048: bool,
                                                             estimated_2047: int | None) -> None:
    # 20 GiB of KV memory, the count overridden to 2,048 or 2,047 blocks: up to 0.20 the check runs on the 20 GiB
    # (may_override_num_blocks replaces the count afterwards); from 0.21 on override × 2 MiB, less the null block from
    # 0.29 (2,048 blocks then hold 2,047 usable ones: one short of the request)
    full, short = _override(version, 2_048), _override(version, 2_047)
    assert full.cache.num_gpu_blocks == 2_048 and short.cache.num_gpu_blocks == 2_047
    assert full.verdict.fits is fits_2048
    assert short.verdict.fits is (estimated_2047 is None)
    assert short.verdict.estimated_max_model_len == estimated_2047
