"""Round 5 of the adversarial pass (left by round 4): each input below was once accepted silently or answered
differently than it should; each now ends in the one `Error: …` line (exit 2), a `Note:` or the right answer."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CONFIGS, run_kvplan

QWEN_7B = str(CONFIGS / "Qwen--Qwen2.5-7B")


# --- a plan's pasted command line that is no text ------------------------------------------------------------------


@pytest.mark.parametrize("lines, key, kind", [
    ("    vllm_cmd: 5\n", "vllm_cmd", "the number 5"),
    ("    vllm_cmd: 0.5\n", "vllm_cmd", "the number 0.5"),
    ("    vllm_cmd: [vllm, serve]\n", "vllm_cmd", "a list"),
    ("    engine: sglang\n    sglang_cmd: 5\n", "sglang_cmd", "the number 5"),
])
def test_a_pasted_command_line_that_is_no_text_is_refused(tmp_path: Path, lines: str, key: str, kind: str) -> None:
    """`vllm_cmd: 5` was read as the line `5`, whose first word the parser took as the model: the plan went on to
    look up a Hub model named '5'."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"deployments:\n  - name: a\n    gpu: h100\n{lines}    require: {{starts: true}}\n",
                    encoding="utf-8")
    proc = run_kvplan(["check", str(plan)], {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    line = 4 + lines.count("\n") - 1
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"Error: {plan}:{line}: deployments[0].{key}: expected a command line (text), got {kind}\n"


def test_a_pasted_command_line_of_text_still_plans(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"deployments:\n  - name: a\n    gpu: h100\n    vllm_cmd: 'vllm serve {QWEN_7B}'\n"
                    "    require: {starts: true}\n", encoding="utf-8")
    proc = run_kvplan(["check", str(plan)])
    assert proc.returncode == 0, proc.stderr
