"""Large but plausible inputs: the time and peak memory (max RSS) of kvplan on each.

Run: python benchmarks/large_inputs.py [--dir /tmp/kvplan-large] [--timeout 300]

The inputs are generated under --dir (not committed): a 300 MB metrics dump (vLLM's families among a node
exporter's), a 6 MB exposition with 50,000 engines, a 500 MB startup log (vLLM's lines among request
logs), a 2-million-line trace; and the hostile ones, which must be refused at once (/dev/zero as each
kind of file). Each runs as `python -m kvplan …` in a child process; its peak RSS is the child's ru_maxrss.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _write_lines(path: Path, size: int, head: str, filler: str, tail: str = "") -> None:
    if path.exists() and path.stat().st_size >= size:
        return
    block = filler * max(1, (1 << 20) // len(filler))
    with path.open("w", encoding="utf-8") as f:
        f.write(head)
        written = len(head)
        while written < size:
            f.write(block)
            written += len(block)
        f.write(tail)


def generate(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    metrics = (EXAMPLES / "metrics.prom").read_text(encoding="utf-8")
    paths = {"metrics": folder / "metrics-300mb.prom", "engines": folder / "engines-50k.prom",
             "log": folder / "startup-500mb.log", "trace": folder / "trace-2m.jsonl"}
    _write_lines(paths["metrics"], 300 * 10**6, "", 'node_cpu_seconds_total{cpu="0",mode="idle"} 1.234e+06\n',
                 metrics)
    if not paths["engines"].exists():
        with paths["engines"].open("w", encoding="utf-8") as f:
            f.write("# TYPE vllm:num_requests_running gauge\n")
            for i in range(50_000):
                f.write(f'vllm:num_requests_running{{engine="{i}",model_name="m"}} 1.0\n')
            f.write("# TYPE vllm:kv_cache_usage_perc gauge\n")
            for i in range(50_000):
                f.write(f'vllm:kv_cache_usage_perc{{engine="{i}",model_name="m"}} 0.5\n')
    log = (EXAMPLES / "vllm-startup.log").read_text(encoding="utf-8")
    _write_lines(paths["log"], 500 * 10**6, log,
                 'INFO 10-08 12:01:00 [logger.py:43] Received request cmpl-1: prompt: "hello", params: ...\n')
    if not paths["trace"].exists():
        with paths["trace"].open("w", encoding="utf-8") as f:
            for i in range(2_000_000):
                f.write(f'{{"timestamp": {i * 0.001:.3f}, "prompt_len": {128 + i % 512}, "output_len": 16}}\n')
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/kvplan-large", help="where the inputs are generated")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    p = generate(Path(args.dir))
    cases = [
        ("300 MB metrics dump", ["diagnose", str(p["metrics"])]),
        ("6 MB, 50,000 engines", ["diagnose", str(p["engines"]), "--json"]),
        ("500 MB startup log", ["calibrate", str(p["log"]), "--json"]),
        ("2M-line trace (prefix sim)", ["simulate", "prefix", "--scenario", "trace", "--trace", str(p["trace"]),
                                        "--num-gpu-blocks", "100000", "--json"]),
        ("/dev/zero as metrics", ["diagnose", "/dev/zero"]),
        ("/dev/zero as log", ["calibrate", "/dev/zero"]),
        ("/dev/zero as trace", ["simulate", "serve", "--trace", "/dev/zero", "--num-gpu-blocks", "100"]),
        ("/dev/zero as gpus file", ["gpus", "--gpus-file", "/dev/zero"]),
    ]
    print(f"{'input':<30} {'size':>9} {'exit':>7} {'seconds':>8} {'peak MiB':>9}", flush=True)
    for name, argv in cases:
        # Each case in its own measuring process, so ru_maxrss is that case's alone.
        out = subprocess.run([sys.executable, "-c", _ONE, str(args.timeout), *argv], capture_output=True,
                             text=True, cwd=ROOT)
        code, seconds, peak = out.stdout.split()
        target = next((a for a in argv if a.startswith(("/tmp", "/dev", args.dir))), "")
        size = f"{os.path.getsize(target) / 1e6:,.0f} MB" if target and os.path.isfile(target) else "device"
        print(f"{name:<30} {size:>9} {code:>7} {float(seconds):>8.2f} {float(peak):>9.0f}", flush=True)
    return 0


_ONE = """
import resource, subprocess, sys, time
timeout, argv = float(sys.argv[1]), sys.argv[2:]
t = time.perf_counter()
try:
    code = subprocess.run([sys.executable, "-m", "kvplan", *argv], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=timeout).returncode
except subprocess.TimeoutExpired:
    code = "timeout"
print(code, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
"""

if __name__ == "__main__":
    raise SystemExit(main())
