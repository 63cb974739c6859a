"""Docs that cannot drift: every command has help with runnable examples and is in the README and the command
reference (docs/commands.md); the exit-code, environment and JSON-key tables there match the code."""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from kvplan.cli import app as app_module
from kvplan.cli.app import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMANDS_DOC = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")  # exit codes, environment variables
JSON_DOC = (ROOT / "docs" / "json-schema.md").read_text(encoding="utf-8")  # the JSON key table
runner = CliRunner()


def _commands() -> dict[str, typer.models.CommandInfo]:
    """Every command's registration (the app builds them on first use: see app_module.COMMANDS)."""
    found = {}
    for name in app_module.COMMANDS:
        sub = app_module.command_typer(name)
        for c in sub.registered_commands:
            found[f"{name} {c.name}" if name == "simulate" else c.name or ""] = c
    return found


COMMANDS = _commands()


def _examples(name: str) -> list[list[str]]:
    epilog = COMMANDS[name].epilog or ""
    return [shlex.split(line.strip())[1:] for line in epilog.splitlines() if line.strip().startswith("kvplan ")]


def _runs_offline(args: list[str]) -> bool:
    """An example needs only local files: every path-like argument exists, no URL, no pipe."""
    if any(a in ("|", "&&", ">", "-") or "://" in a for a in args):
        return False
    words = [w for a in args for w in a.split()]
    paths = [w for w in words
             if not w.startswith("-") and ("/" in w or re.search(r"\.(log|ya?ml|prom|txt|jsonl?)$", w))]
    return all((ROOT / p).exists() for p in paths)


def test_all_commands_are_registered() -> None:
    assert set(COMMANDS) == {"size", "fit", "roofline", "gpus", "diagnose", "calibrate", "check",
                             "simulate prefix", "simulate serve"}


def test_the_command_list_has_each_commands_own_help_line() -> None:
    """`kvplan --help` lists commands from app_module.COMMANDS without importing them: same lines."""
    for name, line in app_module.COMMANDS.items():
        sub = app_module.command_typer(name)
        own = sub.info.help if name == "simulate" else sub.registered_commands[0].help
        assert own == line, name
    assert list(app_module.COMMANDS) == ["size", "fit", "roofline", "gpus", "diagnose", "calibrate", "check",
                                         "simulate"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_has_help_and_examples(name: str) -> None:
    info = COMMANDS[name]
    assert info.help and not info.help.startswith("Not implemented")
    examples = _examples(name)
    assert len(examples) >= 2, f"{name}: give at least two examples in its epilog"
    assert all(e[: len(name.split())] == name.split() for e in examples)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_has_an_example_that_runs_offline(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    local = [e for e in _examples(name) if _runs_offline(e)]
    assert local, f"{name}: no example runs from a checkout without the network"
    for args in local:
        result = runner.invoke(app, args)
        assert result.exit_code in (0, 1), (args, result.stderr)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_appears_in_readme_and_the_command_reference(name: str) -> None:
    assert f"kvplan {name}" in README
    assert f"kvplan {name}" in COMMANDS_DOC


def test_documented_exit_codes_match_the_cli() -> None:
    rows = dict(re.findall(r"^\| (\d) \| (.+?) \|$", COMMANDS_DOC, re.M))
    assert set(rows) == {str(app_module.EXIT_OK), str(app_module.EXIT_CHECK_FAILED), str(app_module.EXIT_BAD_INPUT)}
    assert "check" in rows["1"] and "bad input" in rows["2"]


def test_docs_list_every_environment_variable_kvplan_reads() -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "kvplan").rglob("*.py"))
    vllm_env = (ROOT / "kvplan" / "vllm" / "environment.py").read_text(encoding="utf-8")
    used = set(re.findall(r"\b(KVPLAN_[A-Z_]+)\b", source)) | set(re.findall(r'= "(VLLM_[A-Z0-9_]+)"', vllm_env))
    documented = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", COMMANDS_DOC, re.M))
    assert len(used) >= 5
    assert used <= documented
    assert {"HF_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_HOME"} <= documented


JSON_EXAMPLES = {
    "size": ["size", "tests/fixtures/configs/Qwen--Qwen2.5-7B"],
    "size-sglang": ["size", "tests/fixtures/configs/Qwen--Qwen2.5-7B", "--engine", "sglang"],
    "fit": ["fit", "tests/fixtures/configs/Qwen--Qwen2.5-7B", "--gpu", "h100"],
    "fit-sweep": ["fit", "tests/fixtures/configs/Qwen--Qwen2.5-7B"],
    "fit-sweep-sglang": ["fit", "tests/fixtures/configs/Qwen--Qwen2.5-7B", "--engine", "sglang"],
    "fit-sglang": ["fit", "tests/fixtures/configs/Qwen--Qwen2.5-7B", "--gpu", "h100", "--engine", "sglang"],
    "fit-compare": ["fit", "tests/fixtures/configs/Qwen--Qwen2.5-7B", "--gpu", "h100", "--engine", "both"],
    "roofline": ["roofline", "tests/fixtures/configs/Qwen--Qwen2.5-7B", "--gpu", "h100"],
    "gpus": ["gpus"],
    "diagnose": ["diagnose", "examples/metrics.prom"],
    "calibrate": ["calibrate", "examples/vllm-startup.log", "--model",
                  "tests/fixtures/configs/meta-llama--Meta-Llama-3.1-8B", "--gpu", "h100"],
    "check": ["check", "examples/plan.yaml", "--offline"],
    "simulate-prefix": ["simulate", "prefix", "--scenario", "cyclic", "--num-gpu-blocks", "1345"],
    "simulate-serve": ["simulate", "serve", "--num-gpu-blocks", "2000", "--num-requests", "10"],
}


def _documented_json_keys() -> dict[str, list[str]]:
    rows = re.findall(r"^\| `([a-z-]+)` \| `kvplan [a-z ]+` \| (.+) \|$", JSON_DOC, re.M)
    return {kind: re.findall(r"`([a-z_0-9]+)`", keys) for kind, keys in rows}


def test_json_table_covers_every_kind() -> None:
    assert sorted(_documented_json_keys()) == sorted(JSON_EXAMPLES)


@pytest.mark.parametrize("kind", sorted(JSON_EXAMPLES))
def test_json_output_has_the_documented_keys(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.chdir(ROOT)
    result = runner.invoke(app, [*JSON_EXAMPLES[kind], "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["schema_version"], data["kind"]) == (2, kind)
    assert [k for k in data if k not in ("schema_version", "kind")] == _documented_json_keys()[kind]


def test_the_gpus_entry_keys_are_documented(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    documented = JSON_DOC.split("Each entry of `gpus` is", 1)[1].split(". `arch` is", 1)[0].split("):", 1)[1]
    result = runner.invoke(app, ["gpus", "--json"])
    assert result.exit_code == 0, result.stderr
    for entry in json.loads(result.stdout)["gpus"]:
        assert list(entry) == re.findall(r"`([a-z_0-9]+)`", documented)
    assert "added within schema_version 2:\n`gpus[].arch`" in JSON_DOC.replace("Added", "added")


def _documented_log_paths() -> list[tuple[str, str]]:
    section = JSON_DOC.split("## schema_version 2: `calibrate`'s `log`, nested", 1)[1]
    return re.findall(r"^\| `log\.([a-z_0-9]+)` \| `log\.([a-z_0-9.]+)` \|$", section, re.M)


def _leaf_paths(data: dict[str, Any], prefix: str = "") -> list[str]:
    return [path for key, value in data.items()
            for path in (_leaf_paths(value, f"{prefix}{key}.") if isinstance(value, dict) else [prefix + key])]


def test_the_schema_2_log_table_is_startup_logs_nesting_and_the_real_documents() -> None:
    """docs/json-schema.md's schema 1 → schema 2 table is the one StartupLog gives (SCHEMA_1_KEYS), and a real
    `calibrate --json` document's `log` holds exactly those paths (and `lines`)."""
    import json

    from kvplan.vllm.startup_log import SCHEMA_1_KEYS

    assert _documented_log_paths() == list(SCHEMA_1_KEYS)
    assert len(SCHEMA_1_KEYS) == 45
    result = runner.invoke(app, [*JSON_EXAMPLES["calibrate"], "--json"])
    assert result.exit_code == 0, result.stderr
    log = json.loads(result.stdout)["log"]
    assert sorted(_leaf_paths(log)) == sorted([new for _, new in SCHEMA_1_KEYS] + ["lines"])
    assert log["memory"]["available_kv_bytes"] == 55_168_854_917  # examples/vllm-startup.log's 51.38 GiB


def _part_paths(data: dict[str, object], parts: tuple[str, ...]) -> list[str]:
    """The report's keys as paths: `part.field` inside each part, the key itself elsewhere."""
    return [f"{k}.{f}" if k in parts else k for k, v in data.items()
            for f in (v if k in parts and isinstance(v, dict) else [None])]


def test_schema_1_table_maps_every_v1_fit_key_to_where_version_2_keeps_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/json-schema.md's schema_version 2 `fit` table is FitReport's own mapping (report.schema_1_path), in v1's key
    order; every path is in the real `fit --json` document, and every value there is reached by one v1 key."""
    import json

    from kvplan.vllm.report import PARTS, SCHEMA_1_KEYS, schema_1_path

    section = JSON_DOC.split("## schema_version 2: `fit`'s report, nested", 1)[1].split("\n## ", 1)[0]
    table = re.findall(r"^\| `([a-z_0-9]+)` \| `([a-z_0-9.]+)` \|$", section, re.M)
    assert table == [(key, schema_1_path(key)) for key in SCHEMA_1_KEYS]
    assert len(table) == 53 and table[0] == ("model", "deployment.model")
    assert ("memory_terms", "memory.terms") in table and ("pp_stages", "memory.stages") in table
    monkeypatch.chdir(ROOT)
    result = runner.invoke(app, [*JSON_EXAMPLES["fit"], "--json"])
    data = json.loads(result.stdout)
    paths = _part_paths({k: v for k, v in data.items() if k not in ("schema_version", "kind")}, PARTS)
    assert sorted(paths) == sorted(path for _, path in table)


def test_the_docs_relative_links_point_at_files_that_exist() -> None:
    """README.md and docs/*.md link each other by relative path: a moved or renamed file breaks no link."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert len(docs) >= 4
    for doc in docs:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
            assert (doc.parent / target).exists(), f"{doc.name}: link to {target}"
