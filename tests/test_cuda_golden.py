"""kvplan against vLLM 0.33's own KV planner with CUDA rules (tests/fixtures/oracle-cuda/, made by
tools/cuda_oracle/regen.py; 29 fixture and 200 corpus configs × H100, B200, A100, H100 fp8, H100 TP 2): every
case is exact, or refused with vLLM's own reason (tests/vllm_goldens.py: passes, the rule benchmarks/coverage.py
counts with), planned through the library (kvplan.fit), except the rules listed below, pinned as still different
so that modelling one updates this list. Cases where the oracle itself failed (FAILURES.md) or that set an engine
argument kvplan does not model are not judged, and counted."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests import vllm_goldens

ROOT = Path(__file__).resolve().parents[1]
GOLDENS = {str(g["case"]): g for g in vllm_goldens.goldens(vllm_goldens.CUDA_GOLDENS)}
OUTCOMES = {case: vllm_goldens.classify(g) for case, g in GOLDENS.items()}
# vLLM 0.33 rules kvplan does not model yet (each case stays pinned as different until it is modelled):
KNOWN_DIFFERENCES: dict[str, str] = {}


def test_the_goldens_cover_the_fixture_and_corpus_configs_on_h100_b200_a100() -> None:
    configs = {c.split("__")[0] for c in GOLDENS}
    assert len(configs) >= 220 and len(GOLDENS) >= 1100
    assert {c.split("__")[1] for c in GOLDENS} >= {"h100", "b200", "a100", "h100-fp8", "h100-tp2"}


@pytest.mark.parametrize("case", sorted(c for c, o in OUTCOMES.items() if o.judged))
def test_kvplan_plans_as_vllm_does(case: str) -> None:
    outcome = OUTCOMES[case]
    if case in KNOWN_DIFFERENCES:
        assert outcome.cls == "wrong", f"{case} now agrees with vLLM: remove it from KNOWN_DIFFERENCES"
    else:
        assert vllm_goldens.passes(outcome), f"{case}: {outcome.cls}: {outcome.detail}"


def test_the_cases_not_judged_are_counted_and_each_has_its_reason() -> None:
    """No golden drops out uncounted: the oracle's own failures are FAILURES.md's rows whose `--extra` retry
    failed too, and no case sets an engine argument kvplan does not model (a new one must be counted here)."""
    counts = Counter(o.cls for o in OUTCOMES.values())
    assert sum(counts.values()) == len(GOLDENS) and set(counts) <= set(vllm_goldens.CLASSES)
    rows = re.findall(r"^\| `([^`]+)` \| .*\| (ok|failed)[^|]*\|$",
                      (vllm_goldens.CUDA_GOLDENS / "FAILURES.md").read_text(), re.M)
    failed = {case for case, retry in rows if retry == "failed"}
    assert {c for c, o in OUTCOMES.items() if o.cls == "oracle-failure"} == failed and len(failed) == 15
    assert counts["not-modelled"] == 0
    assert counts["exact"] >= 850 and counts["refused-kvplan"] == counts["wrong"] == 0


def test_a_case_with_an_unmodelled_engine_argument_is_counted_not_judged() -> None:
    golden = {**GOLDENS["Qwen--Qwen2.5-7B__h100"]}
    golden["inputs"] = {**golden["inputs"], "engine_args": {"swap_space": 4}}
    outcome = vllm_goldens.classify(golden)
    assert (outcome.cls, outcome.judged, vllm_goldens.passes(outcome)) == ("not-modelled", False, False)
    assert outcome.detail == "engine arguments kvplan does not model: swap_space"


@pytest.mark.parametrize(("folder", "dtype"), [("Qwen--Qwen2.5-7B", "float16"), ("unsloth--gemma-2-9b", "float32")])
def test_before_sm80_auto_dtype_is_float16_or_float32_for_float16_unsafe_models(folder: str, dtype: str) -> None:
    """Raw cuda_oracle.py output (tests/fixtures/oracle-cuda/t4/, `--gpu t4 --kv-cache-memory-bytes 4294967296
    --max-model-len 4096`): no bfloat16 on a T4, and gemma-2 is on vLLM's float16-unsafe list."""
    import json

    import kvplan

    golden = json.loads((ROOT / "tests" / "fixtures" / "oracle-cuda" / "t4" / f"{folder}.json").read_text())
    assert golden["config"]["dtype"] == dtype
    r = kvplan.plan_fit(kvplan.load_model(str(ROOT / "tests" / "fixtures" / "configs" / folder)), kvplan.get_gpu("t4"),
                        kvplan.ServeSettings.of(kv_cache_memory_bytes=4294967296, max_model_len=4096, weights_bytes=0),
                        advise=False)
    assert r.cache.kv_cache_dtype == dtype
    assert (r.cache.num_gpu_blocks, r.verdict.log_line) == (golden["plan"]["kv_cache_config"]["num_blocks"],
                                              golden["plan"]["kv_cache_config"]["log_line"])
