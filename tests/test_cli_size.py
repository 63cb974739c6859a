"""`kvplan size` from the command line: output, JSON, exit codes, and the import layering that keeps it fast."""
from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.model.size import size_report
from tests.conftest import CONFIGS, load_fixture

runner = CliRunner()
QWEN7 = str(CONFIGS / "Qwen--Qwen2.5-7B")


def test_size_table_shows_bytes_per_token_and_mha_comparison() -> None:
    result = runner.invoke(app, ["size", QWEN7], catch_exceptions=False)
    assert result.exit_code == 0
    assert "57,344 bytes" in result.stdout
    assert "GQA; as MHA it would need 401,408 bytes/token (392.00 KiB, 7.0×)" in result.stdout


def test_size_json_equals_the_core_result() -> None:
    result = runner.invoke(app, ["size", QWEN7, "--json", "-tp", "2", "--kv-cache-dtype", "fp8"],
                           catch_exceptions=False)
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    core = size_report(load_fixture("Qwen--Qwen2.5-7B"), tp=2, kv_cache_dtype="fp8")
    assert data["schema_version"] == 2 and data["kind"] == "size"
    assert data["kv_bytes_per_token"] == core.kv_bytes_per_token == 57_344 // 4
    assert data["layers"] == [{"kind": "full", "count": 28, "kv_heads": 2, "head_size": 128, "bytes_per_token": 512,
                               "state_bytes": None, "sliding_window": None, "attention_chunk_size": None}]
    assert (data["tp"], data["pp"], data["kv_cache_dtype"], data["weights_bytes"]) == (2, 1, "fp8", core.weights_bytes)


def test_size_recurrent_layers_report_state_bytes() -> None:
    result = runner.invoke(app, ["size", str(CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Instruct"), "--json"])
    layers = json.loads(result.stdout)["layers"]
    assert {"kind": "mamba", "count": 36, "state_bytes": 1_097_728} in [
        {k: g[k] for k in ("kind", "count", "state_bytes")} for g in layers]


def test_size_accepts_a_config_json_path() -> None:
    result = runner.invoke(app, ["size", QWEN7 + "/config.json", "--json"])
    assert json.loads(result.stdout)["kv_bytes_per_token"] == 57_344


def test_missing_path_is_exit_2_one_line() -> None:
    result = runner.invoke(app, ["size", "./no/such/folder"])
    assert result.exit_code == 2
    assert result.stderr == "Error: no such file or folder: ./no/such/folder\n"


def test_bad_tp_is_exit_2() -> None:
    result = runner.invoke(app, ["size", QWEN7, "-tp", "3"])
    assert result.exit_code == 2
    assert "does not divide the 28 attention heads" in result.stderr


def test_malformed_json_is_exit_2(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "config.json").write_text("{not json")
    result = runner.invoke(app, ["size", str(tmp_path)])
    assert result.exit_code == 2
    assert "is not valid JSON" in result.stderr


def test_unknown_flag_is_exit_2() -> None:
    assert runner.invoke(app, ["size", QWEN7, "--frobnicate"]).exit_code == 2


def test_core_imports_no_cli_or_network_libraries() -> None:
    """The pure core never pulls in typer, rich or huggingface_hub (layering and start-up speed)."""
    code = ("import sys, kvplan.model.config, kvplan.model.kv_cache, kvplan.model.size, kvplan.model.weights, "
            "kvplan.units; "
            "print(sorted(m for m in ('typer', 'rich', 'huggingface_hub', 'yaml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_help_imports_no_heavy_modules() -> None:
    code = ("import sys; sys.argv = ['kvplan', '--help']\n"
            "from kvplan.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('huggingface_hub', 'yaml', 'prometheus_client') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
