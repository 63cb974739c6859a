"""Start-up cost: CPU time and wall time of kvplan's everyday commands, and of the peer CLIs' same
queries, each next to bare `python -c pass`.

Run: python benchmarks/startup.py [--runs 21] [--no-peers] [--sweep]

Every command runs in a fresh interpreter, as a user's shell runs it, on local inputs only (no network).
CPU time is the child's own user + sys time (os.wait4), the figure that does not depend on how busy the
machine is; wall time is the time from spawn to exit. Commands run round-robin (one of each per round) so
that a burst of load elsewhere hits them all alike; the table shows the median over the rounds.
Children run without PYTHONDONTWRITEBYTECODE, so the warm-up run leaves kvplan's .pyc files as any
installed package has them (pip compiles the peers' at install); with it set, every kvplan run would
compile its modules from source first (about 25 ms more for `size`).

The peers (kvfit, hf-mem, modelinfo-cli from PyPI) are installed into a scratch venv on first use
(--peers-venv, default /tmp/kvplan-peers). None of them reads a local config.json offline: kvfit and
hf-mem take a Hub id only, modelinfo a weights file (.safetensors/.gguf/.pt) or a Hub id. So for them
the table has `--help` only; a peer that cannot be installed is reported and skipped.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = str(ROOT / "tests" / "fixtures" / "configs" / "Qwen--Qwen2.5-7B")
SWEEP_TP = (1, 2, 4, 8)
SWEEP_CONTEXTS = (4096, 32768, 131072)

# (PyPI package, console script, why only --help is measured)
PEERS: list[tuple[str, str, str]] = [
    ("kvfit", "kvfit", "takes a Hub id or URL only"),
    ("hf-mem", "hf-mem", "takes --model-id on the Hub only"),
    ("modelinfo-cli", "modelinfo", "takes a weights file or a Hub id, not config.json"),
]


def _kvplan() -> str:
    """The installed `kvplan` console script next to this interpreter (what a user runs), else `-m`."""
    script = Path(sys.executable).with_name("kvplan")
    return str(script) if script.exists() else ""


def kvplan_commands() -> list[tuple[str, list[str]]]:
    script = _kvplan()
    base = [script] if script else [sys.executable, "-m", "kvplan"]
    return [
        ("kvplan --help", [*base, "--help"]),
        ("kvplan size <local config>", [*base, "size", CONFIG]),
        ("kvplan fit <local config> --gpu h100", [*base, "fit", CONFIG, "--gpu", "h100"]),
    ]


def ensure_peers(venv: Path) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """Install the peers into `venv` when missing; their `--help` commands and notes on what failed."""
    bindir = venv / "bin"
    notes: list[str] = []
    if not (bindir / "python").exists():
        print(f"creating {venv} for the peer CLIs…", file=sys.stderr)
        proc = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            return [], [f"peers: cannot create {venv}: {proc.stderr.strip()[-200:]}"]
    commands: list[tuple[str, list[str]]] = []
    for package, script, why in PEERS:
        exe = bindir / script
        if not exe.exists():
            print(f"installing {package} into {venv}…", file=sys.stderr)
            proc = subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", package],
                                  capture_output=True, text=True, check=False)
            if proc.returncode != 0 or not exe.exists():
                tail = (proc.stderr.strip().splitlines() or ["no console script"])[-1]
                notes.append(f"{package}: not installed ({tail[:120]})")
                continue
        commands.append((f"{script} --help", [str(exe), "--help"]))
        notes.append(f"{script}: --help only ({why}; no offline query on a local config)")
    return commands, notes


CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_once(cmd: list[str]) -> tuple[float, float, int]:
    """(CPU seconds of the child: user + sys, wall seconds, exit status) of one run."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=CHILD_ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4; tell Popen so
    return usage.ru_utime + usage.ru_stime, wall, proc.returncode


def measure(commands: list[tuple[str, list[str]]], runs: int) -> dict[str, tuple[float, float] | None]:
    """Median (CPU, wall) per command over `runs` round-robin rounds after one warm-up each; None = failed."""
    alive = []
    results: dict[str, tuple[float, float] | None] = {}
    for name, cmd in commands:
        # Warm-up (page cache, .pyc); exit 1 is a failed capacity check, still a run, unless it is a crash.
        warm = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=CHILD_ENV,
                              check=False)
        if warm.returncode in (0, 1) and "Traceback (most recent call last)" not in warm.stderr:
            alive.append((name, cmd))
        else:
            results[name] = None
    cpu: dict[str, list[float]] = {name: [] for name, _ in alive}
    wall: dict[str, list[float]] = {name: [] for name, _ in alive}
    for _ in range(runs):
        for name, cmd in alive:
            c, w, _ = run_once(cmd)
            cpu[name].append(c)
            wall[name].append(w)
    for name, _ in alive:
        results[name] = (statistics.median(cpu[name]), statistics.median(wall[name]))
    return results


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
                plan_fit(model, gpu, ServeSettings.of(tp=tp, max_model_len=ctx))
                plans += 1
    return plans, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21, help="rounds (each command once per round)")
    ap.add_argument("--no-peers", action="store_true", help="kvplan only")
    ap.add_argument("--peers-venv", type=Path, default=Path(os.environ.get("KVPLAN_PEERS_VENV", "/tmp/kvplan-peers")))
    ap.add_argument("--sweep", action="store_true", help="also time plan_fit over the catalog in-process")
    args = ap.parse_args()

    commands: list[tuple[str, list[str]]] = [("python -c pass", [sys.executable, "-c", "pass"])]
    commands += kvplan_commands()
    notes: list[str] = []
    if not args.no_peers:
        if shutil.which("pip") is None and not (args.peers_venv / "bin" / "python").exists():
            notes.append("peers: skipped (no pip)")
        else:
            peer_commands, notes = ensure_peers(args.peers_venv)
            commands += peer_commands

    results = measure(commands, args.runs)
    base = results.get("python -c pass")
    width = max(len(name) for name, _ in commands)
    print(f"median of {args.runs} runs; Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(f"{'command':{width}s} {'CPU ms':>8s} {'× pass':>7s} {'wall ms':>8s} {'× pass':>7s}")
    for name, _ in commands:
        r = results[name]
        if r is None:
            print(f"{name:{width}s} {'(failed)':>8s}")
            continue
        cpu, wall = r
        ratio_cpu = f"{cpu / base[0]:7.1f}" if base else f"{'':7s}"
        ratio_wall = f"{wall / base[1]:7.1f}" if base else f"{'':7s}"
        print(f"{name:{width}s} {cpu * 1000:8.1f} {ratio_cpu} {wall * 1000:8.1f} {ratio_wall}")
    for note in notes:
        print(f"  {note}")
    if args.sweep:
        plans, seconds = fit_sweep()
        print(f"fit sweep (Llama-3.1-70B): {plans} plans (GPUs × TP {SWEEP_TP} × contexts {SWEEP_CONTEXTS}) "
              f"in {seconds:.2f} s = {seconds / plans * 1000:.2f} ms per plan, advice included")


if __name__ == "__main__":
    main()
