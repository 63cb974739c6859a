"""Every write handled: a closed or full standard stream, an output file that is one of the run's inputs,
an output path that cannot be written. Each is one `Error:` line and exit 2, and nothing is half-written
(the input a report would have replaced is intact)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CONFIGS

PLANS = Path(__file__).parent / "fixtures" / "plans"


def run(args: list[str], *, close: int | None = None, stdout: object = subprocess.PIPE,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh interpreter; `close` is a standard descriptor closed before it starts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVPLAN_"))}
    env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run([sys.executable, "-m", "kvplan", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, env=env, timeout=60, check=False, cwd=cwd,
                          preexec_fn=(lambda: os.close(close)) if close is not None else None)


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    assert "internal error" not in stderr and "Traceback" not in stderr
    return lines[0]


def test_a_closed_stdout_is_one_line_not_an_internal_error() -> None:
    proc = run(["gpus"], close=1, stdout=None)
    assert proc.returncode == 2
    assert "cannot write standard output: it is closed" in one_error_line(proc.stderr)


def test_a_closed_stderr_still_exits_2_on_bad_input() -> None:
    proc = subprocess.run([sys.executable, "-m", "kvplan", "size", "no/such/path.json"], capture_output=True,
                          text=True, timeout=60, check=False, preexec_fn=lambda: os.close(2))
    assert proc.returncode == 2 and proc.stdout == ""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("args", [["gpus"], ["gpus", "--json"], ["size", str(CONFIGS / "Qwen--Qwen2.5-1.5B")]])
def test_a_full_stdout_is_one_line(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        proc = run(args, stdout=full)
    assert proc.returncode == 2
    assert "cannot write standard output: No space left on device" in one_error_line(proc.stderr)


def _plan_copy(tmp_path: Path) -> Path:
    """passing.yaml beside a copy of the configs it names (relative paths)."""
    shutil.copytree(CONFIGS / "Qwen--Qwen2.5-7B", tmp_path / "configs" / "Qwen--Qwen2.5-7B")
    (tmp_path / "plans").mkdir()
    plan = tmp_path / "plans" / "passing.yaml"
    shutil.copy(PLANS / "passing.yaml", plan)
    return plan


def test_output_onto_the_plan_it_checks_is_refused_and_the_plan_is_intact(tmp_path: Path) -> None:
    plan = _plan_copy(tmp_path)
    before = plan.read_bytes()
    proc = run(["check", str(plan), "--offline", "--output", str(plan)])
    assert proc.returncode == 2
    assert one_error_line(proc.stderr) == (f"Error: --output: {plan} is also an input of this run; writing it "
                                           "would replace what was read (write the report to another file)")
    assert plan.read_bytes() == before


def test_output_onto_the_plan_through_a_symlink_is_refused(tmp_path: Path) -> None:
    plan = _plan_copy(tmp_path)
    link = tmp_path / "report.txt"
    link.symlink_to(plan)
    proc = run(["check", str(plan), "--offline", "--output", str(link)])
    assert proc.returncode == 2 and "is also an input of this run" in one_error_line(proc.stderr)


def test_svg_onto_the_gpus_file_is_refused(tmp_path: Path) -> None:
    gpus = tmp_path / "gpus.yaml"
    gpus.write_text("gpus: []\n")
    proc = run(["roofline", str(CONFIGS / "Qwen--Qwen2.5-1.5B"), "--gpu", "h100", "--gpus-file", str(gpus),
                "--svg", str(gpus)])
    assert proc.returncode == 2, proc.stderr
    assert "--svg: " in one_error_line(proc.stderr) and "is also an input of this run" in proc.stderr
    assert gpus.read_text() == "gpus: []\n"


@pytest.mark.parametrize(("path", "why"), [
    ("{tmp}/no/such/folder/report.txt", "No such file or directory"),
    ("{tmp}", "Is a directory"),
])
def test_an_unwritable_output_path_is_one_line(tmp_path: Path, path: str, why: str) -> None:
    plan = _plan_copy(tmp_path)
    target = path.format(tmp=tmp_path)
    proc = run(["check", str(plan), "--offline", "--output", target])
    assert proc.returncode == 2
    assert one_error_line(proc.stderr) == f"Error: --output: cannot write {target}: {why}"


def _env_run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVPLAN_", "COLUMNS"))}
    full.update(env, HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, env=full, timeout=60,
                          check=False, encoding=env.get("PYTHONIOENCODING", "utf-8"), errors="strict")


@pytest.mark.parametrize("columns", ["0", "1", "99999999"])
def test_an_absurd_columns_still_prints_the_whole_table(columns: str) -> None:
    """Rich takes COLUMNS=0 as a width of 0 and printed nothing (exit 0); the width is held to 40..10,000."""
    proc = _env_run(["size", str(CONFIGS / "Qwen--Qwen2.5-1.5B")], COLUMNS=columns)
    assert proc.returncode == 0, proc.stderr
    assert "28,672" in proc.stdout and "KV per token: 28,672 bytes" in " ".join(proc.stdout.split())


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_that_cannot_show_unicode_gets_the_whole_output_escaped(encoding: str) -> None:
    """It was 'the input holds bytes that are not UTF-8 text' (the wrong cause) and no output."""
    proc = _env_run(["size", str(CONFIGS / "Qwen--Qwen2.5-1.5B")], PYTHONIOENCODING=encoding)
    assert proc.returncode == 0, proc.stderr
    dot = "\\xb7" if encoding == "ascii" else "\u00b7"  # Latin-1 has the middle dot; ASCII escapes it
    assert f"Qwen--Qwen2.5-1.5B {dot} KV bfloat16" in proc.stdout and "\\u2014" in proc.stdout
    bad = _env_run(["size", "no/such/path.json"], PYTHONIOENCODING=encoding)
    assert bad.returncode == 2 and one_error_line(bad.stderr)


def test_a_long_serve_simulation_reports_progress_to_its_callback() -> None:
    """The pure core calls progress(finished, total) every PROGRESS_EVERY steps and once at the end."""
    from kvplan.sim.scheduler import PROGRESS_EVERY, FixedCost, SchedulerConfig, simulate_serve
    from kvplan.sim.workloads import ServeRequest

    calls: list[tuple[int, int]] = []
    requests = [ServeRequest(prompt_len=16, output_len=PROGRESS_EVERY, arrival_s=float(i)) for i in range(3)]
    report = simulate_serve(requests, SchedulerConfig(num_gpu_blocks=10_000, block_size=16, max_num_seqs=1),
                            FixedCost(per_step_s=0.01, per_token_s=0.0),
                            progress=lambda done, total: calls.append((done, total)))
    assert report.completed == 3
    assert calls[-1] == (3, 3) and len(calls) >= 3
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)  # never goes back


def test_no_progress_on_stderr_when_it_is_not_a_terminal() -> None:
    proc = run(["simulate", "serve", "--num-gpu-blocks", "20000", "--num-requests", "30000", "--request-rate",
                "inf", "--prompt-len", "16", "--output-len", "2", "--step-ms", "1", "--json"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_on_a_terminal_progress_goes_to_stderr_and_stdout_stays_clean() -> None:
    """FORCE_COLOR makes Rich treat stderr as a terminal (as a user's shell is)."""
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVPLAN_"))}
    proc = subprocess.run([sys.executable, "-m", "kvplan", "simulate", "serve", "--num-gpu-blocks", "20000",
                           "--num-requests", "30000", "--request-rate", "inf", "--prompt-len", "16",
                           "--output-len", "2", "--step-ms", "1", "--json"], capture_output=True, text=True,
                          env={**env, "FORCE_COLOR": "1"}, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["num_requests"] == 30_000
    assert "simulating" in proc.stderr and "/30000" in proc.stderr
