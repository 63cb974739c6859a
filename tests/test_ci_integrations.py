"""The composite GitHub Action (action.yml) and the pre-commit hook (.pre-commit-hooks.yaml), as their users
wire them: both run `kvplan-check-plans` (kvplan/cli/gate.py), which is tested here with the inputs each
passes; the Action's inputs reach it as environment variables only (no `${{ }}` inside a shell script)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

from kvplan.cli import gate

ROOT = Path(__file__).resolve().parent.parent
PLANS = Path(__file__).parent / "fixtures" / "plans"
PASSING, FAILING = str(PLANS / "passing.yaml"), str(PLANS / "failing.yaml")


def _action() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "action.yml").read_text())  # type: ignore[no-any-return]


def _check_step() -> dict:  # type: ignore[type-arg]
    return next(s for s in _action()["runs"]["steps"] if s.get("name") == "kvplan check")


def _console_scripts() -> dict[str, str]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]  # type: ignore[no-any-return]


def test_the_action_is_composite_and_splices_no_input_into_a_shell_script() -> None:
    action = _action()
    assert action["runs"]["using"] == "composite"
    for step in action["runs"]["steps"]:
        assert "${{" not in step.get("run", ""), step  # inputs come in through `env:`
    used = yaml.safe_dump(action["runs"])
    for name in action["inputs"]:
        assert f"inputs.{name}" in used, f"input {name} is not used"


def test_the_actions_check_step_runs_the_gate_with_its_variables() -> None:
    step = _check_step()
    assert step["run"].strip() == "kvplan-check-plans"
    assert _console_scripts()["kvplan-check-plans"] == "kvplan.cli.gate:console_main"
    assert step["env"] == {gate.ENV_PLANS: "${{ inputs.plans }}", gate.ENV_FORMAT: "${{ inputs.format }}",
                           gate.ENV_OFFLINE: "${{ inputs.offline }}", gate.ENV_JUNIT: "${{ inputs.junit }}"}


def _as_the_action(monkeypatch: pytest.MonkeyPatch, **inputs: str) -> None:
    """The check step's environment for these inputs (the rest at their defaults)."""
    defaults = {name: str(spec.get("default", "")) for name, spec in _action()["inputs"].items()}
    values = {**defaults, **inputs}
    for var, expr in _check_step()["env"].items():
        name = re.fullmatch(r"\$\{\{ inputs\.([\w-]+) \}\}", expr)
        assert name is not None
        monkeypatch.setenv(var, values[name.group(1)])


def test_the_action_annotates_a_failed_plan_writes_the_summary_and_fails(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    _as_the_action(monkeypatch, plans=f"{PASSING}\n{FAILING}\n", offline="true", junit=str(tmp_path / "junit"))
    assert gate.main([]) == 1  # one requirement failed
    out = capfd.readouterr().out
    assert "::error file=" in out and "failing.yaml" in out
    assert summary.read_text().count("kvplan check") >= 2  # one summary per plan
    assert sorted(p.name for p in (tmp_path / "junit").iterdir()) == ["failing.xml", "passing.xml"]


def test_the_action_with_a_passing_plan_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    _as_the_action(monkeypatch, plans=PASSING, offline="true", format="json")
    assert gate.main([]) == 0


def test_a_bad_format_or_offline_value_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch,
                                                                capfd: pytest.CaptureFixture[str]) -> None:
    _as_the_action(monkeypatch, plans=PASSING, format="xml")
    assert gate.main([]) == 2
    assert capfd.readouterr().err == "Error: $KVPLAN_FORMAT='xml' is not one of table, json, junit, github\n"
    _as_the_action(monkeypatch, plans=PASSING, offline="maybe")
    assert gate.main([]) == 2
    assert capfd.readouterr().err == "Error: $KVPLAN_OFFLINE='maybe' is not true or false\n"


def test_the_hook_runs_the_gate_on_the_staged_plan_files() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = hooks
    assert hook["id"] == "kvplan-check" and hook["language"] == "python" and hook["pass_filenames"] is True
    assert hook["entry"] in _console_scripts()
    files = re.compile(hook["files"])
    assert [p for p in ("kvplan.yaml", "deploy/kvplan-prod.yml", "plans/kvplan.yaml", "other.yaml",
                        "kvplan/plan.py") if files.search(p)] == ["kvplan.yaml", "deploy/kvplan-prod.yml",
                                                                  "plans/kvplan.yaml"]


@pytest.mark.parametrize(("plans", "code"), [([PASSING], 0), ([PASSING, FAILING], 1),
                                             ([FAILING, "no-such-plan.yaml"], 2), ([], 0)])
def test_the_hooks_entry_exits_with_the_worst_plans_code(plans: list[str], code: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (gate.ENV_PLANS, gate.ENV_FORMAT, gate.ENV_OFFLINE, gate.ENV_JUNIT):
        monkeypatch.delenv(var, raising=False)
    assert gate.main(["--offline", *plans]) == code
