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


# --- one spelling of a report's notes -------------------------------------------------------------------------------

GEMMA3 = str(CONFIGS / "google--gemma-3-4b-it")
LLAMA_8B = str(CONFIGS / "meta-llama--Meta-Llama-3.1-8B")


@pytest.mark.parametrize("args, first", [
    (["size", GEMMA3], "Note: text_config leaves head_dim=256"),
    (["fit", GEMMA3, "--gpu", "h100"], "Note: text_config leaves head_dim=256"),
    (["roofline", "--gpu", "h100", "--context", "4096", "--batch", "1",
      "--vllm-cmd", f"vllm serve {LLAMA_8B} --enforce-eager"], "Note: --enforce-eager: the per-layer costs"),
])
def test_a_reports_notes_are_spelt_note_capitalised(args: list[str], first: str) -> None:
    """size, fit and roofline wrote `note: …` on stdout; calibrate, SGLang and every stderr notice write `Note: …`."""
    proc = run_kvplan(args)
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stdout.splitlines() if line.lower().startswith("note: ")]
    assert notes and notes[0].startswith(first)
    assert all(line.startswith("Note: ") for line in notes), notes


def test_no_renderer_spells_a_note_in_lower_case() -> None:
    import re

    import kvplan

    render = Path(kvplan.__file__).parent / "render"
    spelt = re.compile(r"""["']note: """)
    found = [f"{p.name}:{n}" for p in sorted(render.glob("*.py"))
             for n, text in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if spelt.search(text)]
    assert found == []
