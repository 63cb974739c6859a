"""The CLI's environment and flag edges: NO_COLOR means no ANSI style at all; a custom-GPU flag alone is refused."""
from __future__ import annotations

import os
import subprocess
import sys

from typer.testing import CliRunner

from kvplan.cli.app import app
from tests.conftest import CONFIGS

QWEN = str(CONFIGS / "Qwen--Qwen2.5-7B")


def _fit(env: dict[str, str]) -> str:
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    full.update(env)
    return subprocess.run([sys.executable, "-m", "kvplan", "fit", QWEN, "--gpu", "h100"], capture_output=True,
                          text=True, env=full, timeout=60, check=False).stdout


def test_no_color_turns_off_bold_and_italic_too() -> None:
    assert "\x1b[" in _fit({"FORCE_COLOR": "1"})  # styled when forced
    assert "\x1b[" not in _fit({"FORCE_COLOR": "1", "NO_COLOR": "1"})  # no-color.org: no ANSI styling at all


def test_gpu_bandwidth_alone_is_refused_not_ignored() -> None:
    result = CliRunner().invoke(app, ["fit", QWEN, "--gpu", "h100", "--gpu-bandwidth", "abc"])
    assert result.exit_code == 2
    assert "--gpu-bandwidth describes a custom GPU: give --gpu-memory with it" in result.output


def test_shell_completion_is_on() -> None:
    out = subprocess.run([sys.executable, "-m", "kvplan", "--show-completion", "bash"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 0 and "_kvplan_completion()" in out.stdout
