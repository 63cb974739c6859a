"""Start-up speed: median wall time of common kvplan commands next to bare `python -c pass`.

Run: python benchmarks/startup.py [--runs 15]
Each command runs in a fresh interpreter, as a user's shell runs it; local inputs only (no network).
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = str(ROOT / "tests" / "fixtures" / "configs" / "Qwen--Qwen2.5-7B")
PLAN = str(ROOT / "examples" / "plan.yaml")

COMMANDS: list[tuple[str, list[str]]] = [
    ("python -c pass", [sys.executable, "-c", "pass"]),
    ("kvplan --help", [sys.executable, "-m", "kvplan", "--help"]),
    ("kvplan size (local config)", [sys.executable, "-m", "kvplan", "size", CONFIG]),
    ("kvplan size --json", [sys.executable, "-m", "kvplan", "size", CONFIG, "--json"]),
    ("kvplan fit --gpu h100", [sys.executable, "-m", "kvplan", "fit", CONFIG, "--gpu", "h100"]),
    ("kvplan fit --json", [sys.executable, "-m", "kvplan", "fit", CONFIG, "--gpu", "h100", "--json"]),
    ("kvplan check examples/plan.yaml", [sys.executable, "-m", "kvplan", "check", PLAN]),
]


def median_seconds(cmd: list[str], runs: int) -> float | None:
    """Median wall time of `runs` runs after one warm-up; None when the command fails."""
    if subprocess.run(cmd, capture_output=True, check=False).returncode not in (0, 1):
        return None
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    base = None
    print(f"{'command':36s} {'median ms':>10s} {'× python':>9s}")
    for name, cmd in COMMANDS:
        t = median_seconds(cmd, args.runs)
        if t is None:
            print(f"{name:36s} {'(failed)':>10s}")
            continue
        base = base or t
        print(f"{name:36s} {t * 1000:10.1f} {t / base:9.1f}")


if __name__ == "__main__":
    main()
