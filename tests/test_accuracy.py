"""benchmarks/accuracy.py against the recorded vLLM startup logs: regression guards on kvplan's accuracy.

Records: tests/fixtures/data/vllm-startup-logs.yaml. Tolerances are the logs' own rounding (GiB printed
with 2 decimals) plus what the benchmark reports today, so a change that makes kvplan worse fails here.
"""
from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from kvplan.hardware.gpus import get_gpu
from kvplan.units import GiB
from kvplan.vllm.memory.weights import MoeBackend, estimate_weights

ROOT = Path(__file__).resolve().parent.parent


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kvplan_accuracy_benchmark", ROOT / "benchmarks" / "accuracy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


BENCH = _benchmark()
RECORDS: list[dict[str, Any]] = yaml.safe_load(BENCH.LOGS.read_text())["records"]
BY_ID = {r["id"]: r for r in RECORDS}


def test_every_logged_block_or_token_count_is_reproduced_exactly() -> None:
    rows = [r for r in (BENCH.check_tokens(rec, False) for rec in RECORDS) if not isinstance(r, str)]
    assert len(rows) >= 4
    assert all(r.exact for r in rows), [r for r in rows if not r.exact]


@pytest.mark.parametrize(("record", "backend"), [
    ("llmd-h100-llama31-8b", None),
    ("llmd-h100-llama33-70b-fp8-tp2", None),
    ("llmd-h100-llama33-70b-fp8-tp1-failed", None),
    ("vllm-23278-h100-gpt-oss-120b", "marlin"),  # the log names the Marlin kernel
    # The llm-d gpt-oss runs used the Triton kernel (their weights match no other layout; see the report
    # of benchmarks/accuracy.py): the backend is given here, not inferred by kvplan.
    ("llmd-h100-gpt-oss-20b", "triton"),
    ("llmd-h100-gpt-oss-120b", "triton"),
])
def test_loaded_weights_match_model_loading_took(record: str, backend: MoeBackend | None) -> None:
    """Within 0.06 GiB of "Model loading took": kernel layout + rope cache explain the rest of the gap
    (gpt-oss keeps ~0.04 GiB that no cited mechanism accounts for)."""
    rec = BY_ID[record]
    model, _ = BENCH._model(rec)
    estimate = estimate_weights(model, tp=rec.get("tp") or 1, pp=1, arch=get_gpu("h100").arch,
                                       version=BENCH.parse_vllm_version(BENCH._version(rec)), moe_backend=backend)
    assert abs(estimate.bytes / GiB - rec["model_weights_gib"]) < 0.06


def test_available_kv_predictions_do_not_regress() -> None:
    rows = [r for r in (BENCH.predict_available(rec) for rec in RECORDS) if not isinstance(r, str)]
    assert len(rows) == 7
    errors = {r.record: abs(r.error_pct) for r in rows}
    assert statistics.median(errors.values()) < 3.0
    assert all(e < 0.5 for r, e in errors.items() if BY_ID[r]["available_kv_gib"] > 10)
