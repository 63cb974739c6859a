"""Speed: median wall time of common kvplan commands next to bare `python -c pass`, and a sweep of
`fit` over the whole GPU catalog × TP 1/2/4/8 × three context lengths.

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
    ("kvplan check examples/plan.yaml", [sys.executable, "-m", "kvplan", "check", PLAN, "--offline"]),
    ("kvplan fit (no --gpu: catalog sweep)", [sys.executable, "-m", "kvplan", "fit", CONFIG, "--max-model-len", "32k"]),
]
SWEEP_TP = (1, 2, 4, 8)
SWEEP_CONTEXTS = (4096, 32768, 131072)


def fit_sweep() -> tuple[int, float]:
    """In-process: plan_fit for every catalog GPU × TP × context; (plans made, seconds)."""
    sys.path.insert(0, str(ROOT))
    from kvplan.hardware.gpus import load_catalog
    from kvplan.model.hub import load_local
    from kvplan.vllm.fit import plan_fit
    from kvplan.vllm.settings import ServeSettings

    model = load_local(str(ROOT / "tests" / "fixtures" / "configs" / "meta-llama--Meta-Llama-3.1-70B"))
    gpus = list(load_catalog().values())
    t0 = time.perf_counter()
    plans = 0
    for gpu in gpus:
        for tp in SWEEP_TP:
            for ctx in SWEEP_CONTEXTS:
                plan_fit(model, gpu, ServeSettings(tp=tp, max_model_len=ctx))
                plans += 1
    return plans, time.perf_counter() - t0


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
    plans, seconds = fit_sweep()
    print(f"fit sweep (Llama-3.1-70B): {plans} plans (GPUs × TP {SWEEP_TP} × contexts {SWEEP_CONTEXTS}) "
          f"in {seconds:.2f} s = {seconds / plans * 1000:.2f} ms per plan, advice included")


if __name__ == "__main__":
    main()
