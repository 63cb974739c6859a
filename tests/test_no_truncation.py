"""A number or a flag is never cut into an ellipsis at 60 or 80 columns (a pipe, a CI log): tables fold or
stack their rows (kvplan.render.layout.TableOrStack) instead of Rich's "1,9…" and "--max-num…"."""
from __future__ import annotations

import re

import pytest

from tests.conftest import CONFIGS, run_kvplan

CUT = re.compile(r"\S…")  # an ellipsis glued to text is a cut cell; kvplan's ranges are "a … b"


@pytest.mark.parametrize("width", [60, 80])
@pytest.mark.parametrize("argv", [
    ["gpus"],
    ["fit", str(CONFIGS / "openai--gpt-oss-120b"), "--gpu", "H100"],
    ["fit", str(CONFIGS / "meta-llama--Meta-Llama-3.1-70B"), "--gpu", "H100"],
])
def test_no_cell_is_cut_at_narrow_widths(argv: list[str], width: int) -> None:
    proc = run_kvplan(argv, env={"COLUMNS": str(width), "NO_COLOR": "1"})
    assert proc.returncode in (0, 1), proc.stderr
    assert not CUT.search(proc.stdout), [line for line in proc.stdout.splitlines() if CUT.search(line)]
    assert all(len(line) <= width for line in proc.stdout.splitlines())


@pytest.mark.parametrize("width", [60, 80])
def test_every_catalog_number_and_advice_flag_is_whole(width: int) -> None:
    gpus = run_kvplan(["gpus"], env={"COLUMNS": str(width)}).stdout
    assert "1,978.9" in gpus and "79.19" in gpus  # H100 SXM: FP8 TFLOPS and CUDA GiB, unbroken
    fit = run_kvplan(["fit", str(CONFIGS / "openai--gpt-oss-120b"), "--gpu", "H100"],
                     env={"COLUMNS": str(width)}).stdout
    advice = fit[fit.index("What fixes it"):]
    # 0.98: gpt-oss-120b's 36 MoE layers raise vLLM's CUDA-graph estimate (memory/cuda_graphs.py)
    assert "--gpu-memory-utilization 0.98" in advice and "--tensor-parallel-size 2" in advice
