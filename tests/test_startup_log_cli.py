"""`kvplan calibrate LOGFILE` without --gpu: the parsed figures as a table and as JSON; and the comparison
helpers (`observed_terms`, `compare_terms`) that set them against kvplan's prediction."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.observe.calibration import TermComparison, compare_terms, observed_terms
from kvplan.render.json import to_data
from kvplan.units import GiB
from kvplan.vllm.startup_log import parse_startup_log
from tests.test_startup_log import RECORDS, V1_LOG


def run(*args: str, stdin: str | None = None) -> Any:
    return CliRunner().invoke(app, ["calibrate", *args], input=stdin, catch_exceptions=False)


@pytest.fixture()
def v1_log(tmp_path: Path) -> Path:
    path = tmp_path / "vllm.log"
    path.write_text(V1_LOG)
    return path


def test_json_is_the_parsers_result(v1_log: Path) -> None:
    result = run(str(v1_log), "--json")
    assert result.exit_code == 0 and result.stderr == ""
    data = json.loads(result.stdout)
    assert (data["schema_version"], data["kind"], data["source"]) == (2, "calibrate", str(v1_log))
    assert data["log"] == to_data(parse_startup_log(V1_LOG))
    assert data["log"]["memory"]["available_kv_bytes"] == round(54.72 * GiB)
    assert data["log"]["capacity"]["kv_cache_tokens"] == 1_992_640
    assert data["comparison"] is None  # no --gpu: nothing to predict against


def test_table_shows_settings_budget_and_capacity(v1_log: Path) -> None:
    result = run(str(v1_log))
    assert result.exit_code == 0 and result.stderr == ""
    out = result.stdout
    for text in ("Recognised 15 lines", "Qwen/Qwen2.5-7B", "kv_cache_dtype", "fp8", "79.19 GiB",
                 "available KV cache", "54.72 GiB", "1,992,640", "60.81x", "58333988249 (54.33 GiB)"):
        assert text in out


def test_stdin_and_a_failed_start() -> None:
    excerpt = next(r for r in RECORDS if r["id"] == "vllm-27508-h100-gpt-oss-120b")["log_excerpt"]
    result = run("-", "--json", stdin=excerpt)
    log = json.loads(result.stdout)["log"]
    assert (log["failure"]["reason"], log["failure"]["kv_needed_bytes"],
            log["settings"]["model_config"]["max_model_len"]) == (
        "max_len_exceeds_kv", round(4.54 * GiB), 131072)
    assert "max_len_exceeds_kv" in run("-", stdin=excerpt).stdout


@pytest.mark.parametrize(("content", "words"), [(None, "no such file"), ("hello\n", "no vLLM startup lines")])
def test_unusable_input_is_one_error_line(tmp_path: Path, content: str | None, words: str) -> None:
    path = tmp_path / "x.log"
    if content is not None:
        path.write_text(content)
    result = run(str(path))
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("Error: ") and words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_observed_terms_prefer_the_cuda_graph_estimate_vllm_subtracts() -> None:
    terms = observed_terms(parse_startup_log(V1_LOG))
    assert terms["cuda_graph"] == round(0.23 * GiB)  # the estimate, not the 0.45 GiB actually captured
    assert terms["weights"] == round(14.25 * GiB) and terms["num_gpu_blocks"] is None


def test_compare_terms_side_by_side() -> None:
    log = parse_startup_log(V1_LOG)
    terms = compare_terms(log, {"available_kv": round(54.0 * GiB), "num_gpu_blocks": 1000})
    by_name = {t.term: t for t in terms}
    assert by_name["available_kv"].difference == round(54.0 * GiB) - round(54.72 * GiB)
    assert by_name["num_gpu_blocks"] == TermComparison("num_gpu_blocks", "blocks", None, 1000)
    # The log states non-torch memory only in a sum: total consumed 14.88 GiB − weights 14.25 GiB.
    assert by_name["non_torch"] == TermComparison("non_torch", "bytes", round(14.88 * GiB) - round(14.25 * GiB),
                                                  None, "consumed − weights")
    assert by_name["non_torch"].observed == 676_457_349
    assert "activation_peak" in by_name and "max_concurrency" in by_name
    assert [t.term for t in terms][:3] == ["total_gpu_memory", "requested_memory", "weights"]
    with pytest.raises(ValueError):
        compare_terms(log, {"weight": 1})
