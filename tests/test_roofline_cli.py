"""`kvplan roofline` through the CLI: JSON schema and numbers equal to the core, the human report,
the SVG export, and exit code 2 on bad input. Local fixture configs only (no network)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.hardware import roofline as rl
from kvplan.hardware.gpus import get_gpu
from kvplan.hardware.model_costs import model_costs
from kvplan.hardware.roofline import decode_point, prefill, roof_from_gpu
from kvplan.hardware.speed_model import CALIBRATION
from kvplan.render.roofline import chart_text
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.settings import ServeSettings
from tests.conftest import CONFIGS, load_fixture

runner = CliRunner()
QWEN_1_5B = str(CONFIGS / "Qwen--Qwen2.5-1.5B")


def roofline_json(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["roofline", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_json_has_the_documented_fields_and_the_h100_ridge() -> None:
    doc = roofline_json(QWEN_1_5B, "--gpu", "h100", "--context", "4096", "--batch", "1,8,64")
    assert doc["kind"] == "roofline" and doc["schema_version"] == 2
    assert doc["gpu"] == "h100-sxm"
    assert doc["compute_dtype"] == "bf16"
    assert doc["ridge_point"] == pytest.approx(989.4e12 / 3.35e12)  # 295.3
    assert round(doc["ridge_point"]) == 295
    # The KV capacity is `kvplan fit`'s: requests of 4,096 tokens the blocks hold at once.
    fit = plan_fit(load_fixture("Qwen--Qwen2.5-1.5B"), get_gpu("h100"), ServeSettings.of(context=4096), advise=False)
    assert doc["kv_capacity_batch"] == fit.preemption.max_requests_at_context > 0
    assert doc["max_num_seqs"] == fit.max_num_seqs == 1024
    assert doc["prefill"]["max_num_batched_tokens"] == fit.max_num_batched_tokens == 8192
    assert [b["batch"] for b in doc["batches"]] == [1, 8, 64]
    for b in doc["batches"]:
        assert {"batch", "context", "tokens_per_s", "tokens_per_s_per_request", "itl_s", "bound"} <= b.keys()
        assert b["bound"] in ("memory", "compute") and b["context"] == 4096
    assert {"prompt_tokens", "flops", "time_s", "chunks"} <= doc["prefill"].keys()
    assert "compute_bound_batch" in doc


def test_json_numbers_equal_the_core_functions() -> None:
    doc = roofline_json(QWEN_1_5B, "--gpu", "h100", "--context", "2048", "--batch", "4", "--prompt", "1000",
                        "--max-num-batched-tokens", "512")
    costs = model_costs(load_fixture("Qwen--Qwen2.5-1.5B"))
    roof = roof_from_gpu(get_gpu("h100"), "bf16", calibration=CALIBRATION)
    point = decode_point(costs, roof, 4, 2048)
    assert doc["batches"][0]["tokens_per_s"] == point.tokens_per_s
    assert doc["batches"][0]["itl_s"] == point.itl_s
    assert doc["batches"][0]["bound_itl_s"] == point.bound_itl_s < point.itl_low_s <= point.itl_s
    pf = prefill(costs, roof, 1000, 512)
    assert doc["prefill"]["time_s"] == pf.time_s
    assert [c["tokens"] for c in doc["prefill"]["chunks"]] == [512, 488]


def test_max_concurrency_sets_the_kv_cap_and_which_limit_holds() -> None:
    doc = roofline_json(QWEN_1_5B, "--gpu", "h100", "--max-concurrency", "50", "--batch", "16,64")
    assert doc["kv_capacity_batch"] == 50
    assert [b["fits_kv_cache"] for b in doc["batches"]] == [True, False]
    assert doc["throughput_limit"] == "kv_capacity"
    assert doc["limit_point"]["batch"] == 50


def test_fp8_checkpoint_uses_the_fp8_peak_on_h100_and_bf16_on_a100() -> None:
    fp8 = str(CONFIGS / "nvidia--Llama-3.1-70B-Instruct-FP8")
    h100 = roofline_json(fp8, "--gpu", "h100", "-tp", "2", "--batch", "1")
    assert h100["compute_dtype"] == "fp8"
    assert h100["ridge_point"] == pytest.approx(1978.9e12 / 3.35e12)
    a100 = roofline_json(fp8, "--gpu", "a100", "-tp", "2", "--batch", "1")
    assert a100["compute_dtype"] == "bf16"
    assert "no FP8 tensor cores" in a100["compute_dtype_reason"]


def test_efficiency_flags_scale_the_roofs() -> None:
    base = roofline_json(QWEN_1_5B, "--gpu", "h100", "--batch", "1")
    half = roofline_json(QWEN_1_5B, "--gpu", "h100", "--batch", "1", "--bandwidth-efficiency", "0.35")
    assert half["bandwidth_efficiency"] == 0.35
    # The memory roof is the bytes at 35 % of the rated bandwidth; the overheads do not scale with it.
    one, base_one = half["batches"][0], base["batches"][0]
    assert one["memory_s"] == pytest.approx(one["bytes"] / (3.35e12 * 0.35))
    assert one["itl_s"] - one["memory_s"] == pytest.approx(base_one["itl_s"] - base_one["memory_s"])


def test_human_report_shows_ridge_table_chart_and_prefill() -> None:
    result = runner.invoke(app, ["roofline", QWEN_1_5B, "--gpu", "h100", "--max-concurrency", "100"],
                           env={"COLUMNS": "120"}, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "Ridge point: 295 FLOP/byte rated (BF16)" in text
    assert "Decode at 4,096 tokens of context" in text
    assert "KV cache holds 100 requests of 4,096 tokens" in text
    assert "Throughput capped by the KV cache" in text
    assert "┊" in text and "●" in text  # the chart with its KV-capacity marker
    assert "TTFT" in text and "physical bound" in text


def test_svg_export_writes_a_standalone_chart(tmp_path: Path) -> None:
    path = tmp_path / "chart.svg"
    result = runner.invoke(app, ["roofline", QWEN_1_5B, "--gpu", "h100", "--max-concurrency", "100",
                                 "--svg", str(path), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    svg = path.read_text()
    import xml.etree.ElementTree as ET

    root = ET.fromstring(svg)  # well-formed XML
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "KV capacity 100" in svg and "compute roof" in svg


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "h1000"], "unknown GPU"),
        (["--gpu", "h100", "--bandwidth-efficiency", "1.5"], "bandwidth-efficiency must be in (0, 1]"),
        (["--gpu", "h100", "--batch", "0"], "--batch must be ≥ 1"),
        (["--gpu", "h100", "--context", "lots"], "--context"),
        (["--gpu", "h100", "-tp", "5"], "does not divide"),
        (["--gpu", "h100", "--svg", "/nonexistent-dir/chart.svg"], "--svg: cannot write"),
    ],
)
def test_bad_input_exits_2_with_one_error_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["roofline", QWEN_1_5B, *args])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_text_chart_marks_the_kv_capacity_column() -> None:
    costs = model_costs(load_fixture("Qwen--Qwen2.5-1.5B"))
    from kvplan.hardware.roofline import decode_curve

    curve = decode_curve(costs, roof_from_gpu(get_gpu("h100"), "bf16"), 1024, 256)
    text = chart_text(curve, 64, None, width=40, height=8)
    rows = [line for line in text.splitlines() if "│" in line]
    assert len(rows) == 8
    # Batch 64 of 1..256 on a log2 axis sits at 6/8 of the width.
    columns = {line.index("┊") - line.index("│") - 1 for line in rows if "┊" in line}
    assert columns == {round(6 / 8 * 39)}
    assert text.splitlines()[-1].endswith("KV capacity 64")


def test_help_says_the_default_efficiencies_come_from_the_speed_model() -> None:
    result = runner.invoke(app, ["roofline", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert result.stdout.count("(default: the speed model's") == 2


def test_settings_the_step_times_leave_out_are_said_beside_them() -> None:
    doc = roofline_json("--gpu", "h100", "--vllm-cmd", f"vllm serve {QWEN_1_5B} -pp 2 --enforce-eager",
                        "--batch", "1")
    notes = " ".join(doc["notes"])
    assert "pipeline parallelism (2 stages) is not in the step times" in notes
    assert "--enforce-eager: the per-layer costs are fitted on runs with CUDA graphs" in notes
    plain = roofline_json(QWEN_1_5B, "--gpu", "h100", "--batch", "1")
    assert not any("step times" in n or "enforce-eager" in n for n in plain["notes"])
    assert rl.unmodelled_settings() == ()


def test_a_speculative_deployment_gets_its_decode_over_the_acceptance_range() -> None:
    r1 = str(CONFIGS.parent / "corpus" / "configs" / "deepseek-ai--DeepSeek-R1")
    mtp = '{"method": "mtp", "num_speculative_tokens": 1}'
    doc = roofline_json("--gpu", "h200", "--vllm-cmd", f"vllm serve {r1} -tp 8 --speculative-config '{mtp}'",
                        "--batch", "1,8", "--context", "2048")
    spec = doc["speculative"]
    assert [p["batch"] for p in spec] == [1, 8]
    assert spec[0]["method"] == "mtp" and (spec[0]["acceptance_low"], spec[0]["acceptance_high"]) == (0.85, 0.90)
    assert spec[0]["tokens_per_step_low"] == pytest.approx(1.85) and spec[0]["tokens_per_step_high"] == 1.9
    assert spec[0]["itl_low_s"] == pytest.approx(spec[0]["step_s"] / 1.9)
    assert roofline_json(QWEN_1_5B, "--gpu", "h100", "--batch", "1")["speculative"] == []
