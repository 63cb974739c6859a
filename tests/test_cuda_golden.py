"""kvplan against vLLM 0.33's own KV planner with CUDA rules (tests/fixtures/oracle-cuda/, made by
tools/cuda_oracle/regen.py; 29 fixture and 200 corpus configs × H100, B200, A100, H100 fp8, H100 TP 2): every
case is exact, or refused with vLLM's own reason, except the rules listed below, pinned as still different
so that modelling one updates this list. Cases where the oracle itself failed (FAILURES.md) are left out."""
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
# vLLM 0.33 rules kvplan does not model yet (each case stays pinned as different until it is modelled):
KNOWN_DIFFERENCES: dict[str, str] = {}


def test_the_goldens_cover_the_fixture_and_corpus_configs_on_h100_b200_a100() -> None:
    configs = {c.split("__")[0] for c in GOLDENS}
    assert len(configs) >= 220 and len(GOLDENS) >= 1100
    assert {c.split("__")[1] for c in GOLDENS} >= {"h100", "b200", "a100", "h100-fp8", "h100-tp2"}


@pytest.mark.parametrize("case", sorted(c for c in GOLDENS if BENCH.classify(GOLDENS[c]) is not None))
def test_kvplan_plans_as_vllm_does(case: str) -> None:
    outcome = BENCH.classify(GOLDENS[case])
    assert outcome is not None
    if case in KNOWN_DIFFERENCES:
        assert outcome.cls == "wrong", f"{case} now agrees with vLLM: remove it from KNOWN_DIFFERENCES"
    else:
        assert outcome.cls in ("exact", "refused-vllm"), f"{case}: {outcome.cls}: {outcome.detail}"


@pytest.mark.parametrize(("folder", "dtype"), [("Qwen--Qwen2.5-7B", "float16"), ("unsloth--gemma-2-9b", "float32")])
def test_before_sm80_auto_dtype_is_float16_or_float32_for_float16_unsafe_models(folder: str, dtype: str) -> None:
    """Raw cuda_oracle.py output (tests/fixtures/oracle-cuda/t4/, `--gpu t4 --kv-cache-memory-bytes 4294967296
    --max-model-len 4096`): no bfloat16 on a T4, and gemma-2 is on vLLM's float16-unsafe list."""
    import json

    from kvplan.hardware.gpus import get_gpu
    from kvplan.model.hub import load_local
    from kvplan.vllm.fit import plan_fit
    from kvplan.vllm.settings import ServeSettings

    golden = json.loads((ROOT / "tests" / "fixtures" / "oracle-cuda" / "t4" / f"{folder}.json").read_text())
    assert golden["config"]["dtype"] == dtype
    r = plan_fit(load_local(str(ROOT / "tests" / "fixtures" / "configs" / folder)), get_gpu("t4"),
                 ServeSettings(kv_cache_memory_bytes=4294967296, max_model_len=4096, weights_bytes=0), advise=False)
    assert r.kv_cache_dtype == dtype
    assert (r.num_gpu_blocks, r.log_line) == (golden["plan"]["kv_cache_config"]["num_blocks"],
                                              golden["plan"]["kv_cache_config"]["log_line"])
