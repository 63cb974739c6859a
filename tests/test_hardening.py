"""Hardening, round 2 (issue 14): bad bytes are bad input, secrets never reach an output, control
characters from outside never reach a terminal, a failed write to stdout is a clean exit 2."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.text import escape, scrub

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "tests/fixtures/configs/meta-llama--Meta-Llama-3.1-8B"
LOG = ROOT / "examples/vllm-startup.log"


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    assert "internal error" not in stderr
    return lines[0]


# --------------------------------------------------------------------------------------------------
# Bad bytes are bad input


def _gpu_file(tmp_path: Path, field: str, value: str) -> Path:
    path = tmp_path / "gpus.yaml"
    path.write_text(f"gpus:\n  - id: x1\n    name: X1\n    vendor: nvidia\n    memory_gb: 80\n"
                    f"    cuda_total_bytes: 85029615043\n    memory_bandwidth_bytes_per_s: 3.0e+12\n"
                    f"    flops: {{bf16: 1.0e+15}}\n    {field}: {value}\n")
    return path


@pytest.mark.parametrize("field", ["memory_gb", "memory_bandwidth_bytes_per_s", "cuda_total_bytes"])
def test_a_400_digit_size_in_a_gpus_file_is_bad_input(field: str, tmp_path: Path) -> None:
    path = _gpu_file(tmp_path, field, "9" * 400)
    for args in (["gpus", "--gpus-file", str(path)], ["fit", str(CONFIG), "--gpu", "x1", "--gpus-file", str(path)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        one_error_line(result.stderr)


def test_a_5000_digit_number_in_a_config_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": ' + "9" * 5000 + "}")
    result = CliRunner().invoke(app, ["size", str(path)])
    assert result.exit_code == 2
    assert "not valid JSON" in one_error_line(result.stderr)


@pytest.mark.parametrize("exc", [UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
                                 OverflowError("int too large to convert to float"), MemoryError(),
                                 ValueError("Exceeds the limit (4300 digits) for integer string conversion"),
                                 RecursionError("maximum recursion depth exceeded")])
def test_the_boundary_reports_bad_bytes_as_input_errors_not_bugs(exc: Exception,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from kvplan.cli.app import boundary

    def command() -> None:
        raise exc

    with pytest.raises(typer.Exit) as info:
        boundary(command)()
    assert info.value.exit_code == 2
    assert "the input" in one_error_line(capsys.readouterr().err)


def test_a_full_stdout_is_a_clean_exit_2() -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "kvplan", "gpus"], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=60)
    assert proc.returncode == 2
    assert one_error_line(proc.stderr) == "Error: cannot write standard output: No space left on device"


def test_x_keys_in_a_gpus_file_hold_anchors_as_in_plans(tmp_path: Path) -> None:
    path = tmp_path / "gpus.yaml"
    path.write_text("x-hopper: &hopper {vendor: nvidia, compute_capability: '9.0'}\n"
                    "gpus:\n  - id: h100-sxm\n    x-note: an override\n    memory_gb: 80\n")
    result = CliRunner().invoke(app, ["gpus", "h100", "--gpus-file", str(path)])
    assert result.exit_code == 0, result.output
    path.write_text("hopper: {}\ngpus: []\n")
    result = CliRunner().invoke(app, ["gpus", "--gpus-file", str(path)])
    assert "unknown top-level key(s) hopper (allowed: gpus, and x-… keys" in one_error_line(result.stderr)


# --------------------------------------------------------------------------------------------------
# Secrets


TOKEN = "hf_" + "a1B2c3D4e5" * 3


@pytest.mark.parametrize("text, secret", [
    ("non-default args: {'hf_token': 'hf_abcdefghijklmnopqrstuvwxyz12', 'model': 'm'}", "hf_abcdef"),
    ("non-default args: {'api_key': 'sk-live-123', 'model': 'm'}", "sk-live-123"),
    ('{"api_key": "sk-live-123"}', "sk-live-123"),
    ("vllm serve m --api-key sk-live-123 --port 8000", "sk-live-123"),
    ("vllm serve m --hf-token=hf_tok_value", "hf_tok_value"),
    ("fetched https://alice:s3cr3t@hub.example.com/m", "s3cr3t"),
    (f"any text with {TOKEN} in it", TOKEN),
])
def test_scrub_removes_every_secret_vllm_can_log(text: str, secret: str) -> None:
    assert secret not in scrub(text) and "***" in scrub(text)


def test_scrub_removes_the_current_hf_token_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "plain-token-value")
    assert scrub("x plain-token-value y") == "x *** y"


def test_no_output_of_calibrate_holds_a_secret_from_the_log(tmp_path: Path) -> None:
    log = LOG.read_text(encoding="utf-8").replace(
        "'gpu_memory_utilization': 0.9}",
        f"'gpu_memory_utilization': 0.9, 'hf_token': '{TOKEN}', 'api_key': 'sk-live-123', "
        "'hf_config_path': 'https://alice:s3cr3t@example.com/x'}")
    assert TOKEN in log
    path = tmp_path / "vllm.log"
    path.write_text(log, encoding="utf-8")
    for args in (["calibrate", str(path), "--json"], ["calibrate", str(path)],
                 ["calibrate", str(path), "--gpu", "h100", "--model", str(CONFIG), "--json"]):
        result = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
        assert result.exit_code == 0, result.output
        for secret in (TOKEN, "sk-live-123", "s3cr3t"):
            assert secret not in result.output, (args, secret)
    data = json.loads(CliRunner().invoke(app, ["calibrate", str(path), "--json"]).stdout)
    assert "'hf_token': '***'" in json.dumps(data)


# --------------------------------------------------------------------------------------------------
# Terminal escapes


def test_escape_neutralises_control_characters_and_bidi_overrides() -> None:
    assert escape("\x1b[2J\x1b]0;pwn\x07") == "\\x1b[2J\\x1b]0;pwn\\x07"
    assert escape("a\u202eb\nc") == "a\\u202eb\\nc"
    assert escape("Llama-3.1 ünïcode") == "Llama-3.1 ünïcode"


HOSTILE = "\x1b[2J\x1b]0;pwn\x07\u202e"
ESCAPED = "\\x1b[2J\\x1b]0;pwn\\x07\\u202e"
RAW = ("\x1b[2J", "\x1b]0;", "\x07", "\u202e")


def _assert_inert(text: str) -> None:
    for raw in RAW:
        assert raw not in text, repr(text[:400])


def _hostile_plan(tmp_path: Path) -> Path:
    path = tmp_path / "plan.yaml"
    name = json.dumps(HOSTILE)  # YAML reads JSON's \u escapes in double quotes
    path.write_text(f"deployments:\n  - name: {name}\n    model: {CONFIG}\n    gpu: h100\n    require:\n"
                    "      starts: true\n      min_kv_tokens: 100000000\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt", ["table", "junit", "github"])
@pytest.mark.parametrize("color", [False, True], ids=["pipe", "terminal"])
def test_a_hostile_deployment_name_reaches_no_terminal_junit_or_annotation_raw(
        fmt: str, color: bool, tmp_path: Path) -> None:
    env = {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1"} if color else {}
    summary = tmp_path / "summary.md"
    result = CliRunner().invoke(app, ["check", str(_hostile_plan(tmp_path)), "--format", fmt],
                                env={**env, "GITHUB_STEP_SUMMARY": str(summary)})
    assert result.exit_code == 1, result.output
    _assert_inert(result.output)
    assert ESCAPED in result.output or "\\x1b" in result.output
    if fmt == "github":
        _assert_inert(summary.read_text(encoding="utf-8"))


def test_a_hostile_gpu_name_from_a_gpus_file_is_shown_escaped(tmp_path: Path) -> None:
    path = tmp_path / "gpus.yaml"
    path.write_text(f"gpus:\n  - id: x1\n    name: {json.dumps('X1 ' + HOSTILE)}\n    vendor: nvidia\n"
                    "    memory_gb: 80\n    cuda_total_bytes: 85029615043\n    memory_bandwidth_bytes_per_s: 3.0e+12\n"
                    "    flops: {bf16: 1.0e+15}\n", encoding="utf-8")
    for args in (["gpus", "--gpus-file", str(path)], ["gpus", "x1", "--gpus-file", str(path)],
                 ["fit", str(CONFIG), "--gpu", "x1", "--gpus-file", str(path)],
                 ["roofline", str(CONFIG), "--gpu", "x1", "--gpus-file", str(path)]):
        result = CliRunner().invoke(app, args, env={"FORCE_COLOR": "1", "COLUMNS": "200"})
        assert result.exit_code in (0, 1), result.output
        _assert_inert(result.output)


def test_a_hostile_served_model_name_is_shown_escaped(tmp_path: Path) -> None:
    text = (ROOT / "examples/metrics.prom").read_text(encoding="utf-8")
    path = tmp_path / "m.prom"
    # Prometheus label values take only \\ \" \n escapes: the raw control characters go in.
    path.write_text(text.replace("Qwen/Qwen2.5-7B", "Qwen\x1b[2J\x1b]0;pwn\x07"), encoding="utf-8")
    result = CliRunner().invoke(app, ["diagnose", str(path)], env={"FORCE_COLOR": "1", "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    _assert_inert(result.output)
    assert "Qwen\\x1b[2J" in result.output
