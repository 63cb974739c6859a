"""`check` at the pessimistic end of kvplan's range (every estimated term at its high end): `starts:
pessimistic` and `min_kv_tokens: {value: …, estimate: pessimistic}`."""
from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.ci.checks import evaluate_deployment
from kvplan.ci.plan import load_plan
from kvplan.errors import ParseError
from kvplan.hardware.gpus import get_gpu
from tests.conftest import CONFIGS, load_fixture

QWEN7 = str(CONFIGS / "Qwen--Qwen2.5-7B")


def _evaluate(tmp_path: Path, require: str, util: float):  # type: ignore[no-untyped-def]
    path = tmp_path / "plan.yaml"
    path.write_text(f"deployments:\n  - name: chat\n    model: {QWEN7}\n    gpu: h100\n"
                    f"    vllm: {{max-model-len: 4096, max-num-seqs: 8, gpu-memory-utilization: {util}}}\n"
                    f"    require:\n      {require}\n", encoding="utf-8")
    dep = load_plan(path).deployments[0]
    return evaluate_deployment(dep, load_fixture("Qwen--Qwen2.5-7B"), get_gpu("h100"))


def test_starts_pessimistic_fails_where_only_the_best_estimate_starts(tmp_path: Path) -> None:
    # Util 0.22: 1.35 GiB of KV at the best estimate (one 4,096-token request needs 0.22), 0.15 at the
    # pessimistic end. Util 0.223: +0.39 GiB even pessimistically. (The CUDA-graph estimate's high end follows
    # vLLM's logged estimates, tests/fixtures/data/cuda-graph-estimates.yaml; Model Runner V2's activation range
    # reaches 2 × MRV2_UNSEEN_BYTES above its ported peak, memory/activation.py: 0.21 / 0.22 before that constant
    # went from 0.40 to 0.53 GiB.)
    best = _evaluate(tmp_path, "starts: true", 0.22).checks[0]
    worst = _evaluate(tmp_path, "starts: pessimistic", 0.22).checks[0]
    assert best.passed and not worst.passed
    assert worst.measured == "starts only if the estimate is optimistic"
    assert "pessimistic end of the estimate" in worst.message
    assert _evaluate(tmp_path, "starts: pessimistic", 0.223).checks[0].passed


def test_min_kv_tokens_can_be_judged_at_the_pessimistic_end(tmp_path: Path) -> None:
    best = _evaluate(tmp_path, "min_kv_tokens: 140000", 0.3).checks[0]
    worst = _evaluate(tmp_path, "min_kv_tokens: {value: 150000, estimate: pessimistic}", 0.3).checks[0]
    assert best.passed and best.measured == 143_920
    assert not worst.passed and worst.measured == 121_488  # the range's low end (kv_cache_tokens_range)


def test_a_bad_estimate_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="must be best or pessimistic"):
        _evaluate(tmp_path, "min_kv_tokens: {value: 1, estimate: worst}", 0.3)
    with pytest.raises(ParseError, match="expected `true` or `pessimistic`"):
        _evaluate(tmp_path, "starts: maybe", 0.3)


def test_min_concurrency_can_be_judged_at_the_pessimistic_end(tmp_path: Path) -> None:
    # Util 0.223: 7 requests of 4,096 tokens (256 blocks each) at the best estimate, 456 usable blocks at the
    # pessimistic end (0.39 GiB of KV memory): 1 request.
    best = _evaluate(tmp_path, "min_concurrency: {value: 4, context: 4096}", 0.223).checks[0]
    worst = _evaluate(tmp_path, "min_concurrency: {value: 4, context: 4096, estimate: pessimistic}", 0.223).checks[0]
    assert best.passed and best.measured == 7
    assert not worst.passed and worst.measured == 1
    assert "at the pessimistic end of the estimate (456 usable blocks" in worst.message
    assert _evaluate(tmp_path, "min_concurrency: {value: 4, context: 4096, estimate: pessimistic}",
                     0.23).checks[0].measured == 4


def test_estimate_pessimistic_beside_the_requirements_judges_every_memory_requirement_at_the_low_end(
        tmp_path: Path) -> None:
    require = ("estimate: pessimistic\n      min_concurrency: {value: 4, context: 4096}\n"
               "      no_preemption: {concurrency: 4, context: 4096}\n      starts: true")
    conc, preempt, starts = _evaluate(tmp_path, require, 0.223).checks
    assert (conc.passed, conc.measured) == (False, 1)
    assert not preempt.passed and "1,024 blocks but only 456 are usable" in preempt.message
    assert starts.passed and starts.required == "starts (pessimistic)"
    # At 0.22 the pessimistic end does not start: the load requirements say so instead of counting requests.
    conc, preempt, starts = _evaluate(tmp_path, require, 0.22).checks
    assert not conc.passed and conc.measured is None
    assert "at the pessimistic end of the estimate vLLM starts only if the estimate is optimistic" in conc.message
    assert not starts.passed
    # A requirement's own `estimate: best` keeps the best estimate.
    own = _evaluate(tmp_path, "estimate: pessimistic\n      min_concurrency: {value: 4, context: 4096, "
                              "estimate: best}", 0.223).checks[0]
    assert own.passed and own.measured == 7


def test_estimate_beside_the_requirements_must_be_best_or_pessimistic(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match=r"require\.estimate: must be best or pessimistic"):
        _evaluate(tmp_path, "estimate: low\n      starts: true", 0.5)
    with pytest.raises(ParseError, match="no requirements"):
        _evaluate(tmp_path, "estimate: pessimistic", 0.5)
