"""kvplan against vLLM 0.33's own KV planner with CUDA rules (tests/fixtures/oracle-cuda/, made by
tools/cuda_oracle/regen.py): every case is exact, or refused with vLLM's own reason, except the CUDA backend
rules listed below, which are pinned as still different so that fixing one updates this list."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kvplan_coverage_bench", ROOT / "benchmarks" / "coverage.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


BENCH = _benchmark()
GOLDENS = {str(g["case"]): g for g in BENCH.goldens()}
# vLLM 0.33 CUDA rules kvplan does not model yet (issue: model coverage, CUDA differences):
KNOWN_DIFFERENCES = {
    # multimodal prefix-LM models on Blackwell: TRITON_FLASHINFER composite backend, 64-token blocks
    "google--gemma-3-4b-it__b200": "TRITON_FLASHINFER 64-token blocks",
    "google--gemma-4-26B-A4B__b200": "TRITON_FLASHINFER 64-token blocks (128 on the head-size-512 layers)",
    # FlashAttention on SM90 with an fp8 KV cache and head size 512: 64-token blocks
    "google--gemma-4-26B-A4B__h100-fp8": "64-token blocks with fp8 and head size 512",
    # multimodal prefix-LM: max_num_batched_tokens raised to 2,496 so one image fits a batch
    "google--gemma-4-26B-A4B__a100": "max_num_batched_tokens 2,496 on A100",
}


def test_the_goldens_cover_every_fixture_config_on_h100_b200_a100() -> None:
    configs = {c.split("__")[0] for c in GOLDENS}
    assert len(configs) >= 29 and len(GOLDENS) >= 145
    assert {c.split("__")[1] for c in GOLDENS} >= {"h100", "b200", "a100", "h100-fp8", "h100-tp2"}


@pytest.mark.parametrize("case", sorted(c for c in GOLDENS if BENCH._settings(GOLDENS[c]) is not None))
def test_kvplan_plans_as_vllm_does(case: str) -> None:
    outcome = BENCH.classify(GOLDENS[case])
    assert outcome is not None
    if case in KNOWN_DIFFERENCES:
        assert outcome.cls == "wrong", f"{case} now agrees with vLLM: remove it from KNOWN_DIFFERENCES"
    else:
        assert outcome.cls in ("exact", "refused-vllm"), f"{case}: {outcome.cls}: {outcome.detail}"
