"""vLLM's one-request refusal in each release's own words (v1/core/kv_cache_utils.py:_check_enough_kv_cache_memory).

The expected strings are copied from real startup logs (tests/fixtures/startup-logs/raw/) or, where no log holds
the wording, built by hand from the release's f-strings."""

from __future__ import annotations

import pytest

from kvplan.units import GiB
from kvplan.vllm.block_plan import refusal_message
from kvplan.vllm.defaults import VllmVersion, refusal_wording

TRY_OLD = "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
SEE = " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."


def _gib(text: str) -> int:
    return round(float(text) * GiB)


@pytest.mark.parametrize(("version", "max_model_len", "needed", "checked", "estimated", "logged"), [
    # raw/recipes-pr12-h20-qwen3-coder-480b-fp8-dp8-ep-failed.log, vLLM 0.10.1.dev: `:.2f` figures, "models's".
    (VllmVersion(0, 10), 262144, "62.00", "48.66", 205728,
     "To serve at least one request with the models's max seq len (262144), (62.00 GiB KV cache is needed, which is "
     "larger than the available KV cache memory (48.66 GiB). Based on the available memory, the estimated maximum "
     f"model length is 205728. {TRY_OLD}"),
    # raw/vllm-32105-8xa100-glm-4.7-fp8-pp8-v0150rc1-failed.log: format_gib figures and the docs link, "models's".
    (VllmVersion(0, 15), 202752, "71.16", "28.57", 81392,
     "To serve at least one request with the models's max seq len (202752), (71.16 GiB KV cache is needed, which is "
     "larger than the available KV cache memory (28.57 GiB). Based on the available memory, the estimated maximum "
     f"model length is 81392. {TRY_OLD}{SEE}"),
], ids=["0.10-recipes-pr12", "0.15-vllm-32105"])
def test_refusal_matches_the_real_log_of_its_release(version: VllmVersion, max_model_len: int, needed: str,
                                                     checked: str, estimated: int, logged: str) -> None:
    text = refusal_message(max_model_len, _gib(needed), _gib(checked), estimated, refusal_wording(version))
    assert text == logged


def test_refusal_from_0_22_names_the_cpu_backend_and_the_model() -> None:
    text = refusal_message(131072, 46 * GiB, 20 * GiB, 56960, refusal_wording(VllmVersion(0, 33)))
    assert text.startswith("To serve at least one request with the model's max seq len (131072), (46.0 GiB")
    assert "(20.0 GiB). Based on the available memory, the estimated maximum model length is 56960. Try" in text
    assert "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or" in text


@pytest.mark.parametrize(("version", "between"), [
    (VllmVersion(0, 11), "(20.00 GiB).  Try"),   # f"GiB). " f"{estimated_msg} " f"Try": two spaces when empty
    (VllmVersion(0, 14), "(20.0 GiB). Try"),     # f"GiB). {estimated_msg}" f"Try"
    (VllmVersion(0, 8), "(20.00 GiB).  Try"),    # f"GiB)." f"{estimated_msg} " f" Try"
])
def test_refusal_spacing_without_an_estimate_follows_each_release(version: VllmVersion, between: str) -> None:
    assert between in refusal_message(65536, 40 * GiB, 20 * GiB, 0, refusal_wording(version))


def test_refusal_of_0_8_loses_the_estimated_length() -> None:
    # 0.8.5's estimated_msg is " Based on the available memory," alone: the next f-string line is a statement.
    text = refusal_message(65536, 40 * GiB, 20 * GiB, 32768, refusal_wording(VllmVersion(0, 8)))
    assert text.endswith(f"(20.00 GiB). Based on the available memory,  {TRY_OLD}")


def test_refusal_wording_changes_at_the_releases_read() -> None:
    assert [str(refusal_wording(VllmVersion(0, m))) for m in (8, 9, 12, 13, 14, 21, 22, 33)] == [
        "0.8", "0.9", "0.9", "0.13", "0.14", "0.14", "0.22", "0.22"]
