"""The console script's Typer-free paths (kvplan.cli.launch): what they import, and that their output is
byte for byte the Typer app's, in plain, colour and narrow terminals."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = str(ROOT / "tests" / "fixtures" / "configs" / "Qwen--Qwen2.5-7B")

QUICK = "import sys; sys.argv = ['kvplan', *sys.argv[1:]]; from kvplan.cli.launch import main; main()"
TYPER = "import sys; sys.argv = ['kvplan', *sys.argv[1:]]; from kvplan.cli.app import main; main()"
TERMINALS = {
    "plain": {},
    "colour": {"FORCE_COLOR": "1", "COLUMNS": "120"},
    "narrow": {"COLUMNS": "44"},
    "no-colour": {"FORCE_COLOR": "1", "NO_COLOR": "1", "COLUMNS": "60"},
    "typer-width": {"TERMINAL_WIDTH": "70", "TERM": "dumb"},
}


def _run(code: str, args: list[str], env: dict[str, str]) -> tuple[int, bytes, bytes]:
    full = {k: v for k, v in os.environ.items()
            if k not in ("COLUMNS", "FORCE_COLOR", "NO_COLOR", "TERMINAL_WIDTH", "PY_COLORS", "GITHUB_ACTIONS")}
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, cwd=ROOT, env={**full, **env},
                          check=False, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("terminal", sorted(TERMINALS))
@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"], ["size", CONFIG],
                                  ["size", "tests/fixtures/configs/deepseek-ai--DeepSeek-V3"],
                                  ["size", "/nonexistent/config"], ["size", "tests/fixtures"]],
                         ids=lambda a: " ".join(a).replace(str(ROOT), "."))
def test_quick_paths_print_what_typer_prints(args: list[str], terminal: str) -> None:
    env = TERMINALS[terminal]
    quick, typer = _run(QUICK, args, env), _run(TYPER, args, env)
    assert quick == typer
    if terminal == "colour" and args[0] != "--version" and quick[0] == 0:
        assert b"\x1b[" in quick[1]


IMPORT_CHECK = (
    "import sys; sys.argv = ['kvplan', *sys.argv[1:]]\n"
    "from kvplan.cli import launch\n"
    "import os; os._exit = sys.exit\n"  # exit normally, to look at sys.modules
    "try:\n    launch.main()\nexcept SystemExit:\n    pass\n"
    "heavy = sorted(m for m in ('typer', 'click', 'pygments', 'markdown_it', 'rich.markdown', 'rich.traceback',"
    " 'rich.syntax', 'importlib.resources') if m in sys.modules)\n"
    "sys.stderr.write('HEAVY=' + ','.join(heavy))\n"
)


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["size", CONFIG]], ids=" ".join)
def test_everyday_calls_do_not_import_typer_or_pygments(args: list[str]) -> None:
    code, _, err = _run(IMPORT_CHECK, args, {})
    assert code == 0
    assert err.decode().rsplit("HEAVY=", 1)[1] == ""


def test_anything_else_goes_to_typer() -> None:
    """Options after `size`, a Hub id, `size --help`: the Typer app (these outputs come from Click/Typer)."""
    code, out, _ = _run(QUICK, ["size", "--help"], {})
    assert code == 0 and b"--kv-cache-dtype" in out
    assert _run(QUICK, ["size", CONFIG, "--json"], {}) == _run(TYPER, ["size", CONFIG, "--json"], {})
    assert _run(QUICK, ["size", CONFIG, "-tp", "2"], {}) == _run(TYPER, ["size", CONFIG, "-tp", "2"], {})
