"""Robustness: how many random and mutated inputs each parser and command was fed, and how many ended badly.

Run: python benchmarks/robustness.py [--scale 10] [--only config] [--show 3]

The strategies are the test suite's (tests/test_robustness_parsers.py, tests/test_robustness_cli.py), run
with `--scale` times CI's example count and derandomized, so two runs try the same cases. "Bad" means
anything but a result or a KvplanError for a parser, and anything but exit 0 / one `Error:` line (exit 2)
for a command, or a hang (5 s). Target: 0 bad. Distinct problems are listed under the table.
`--only network` runs tests/test_robustness_network.py's hostile Hub cases (each a fresh interpreter).
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_robustness_cli import CLI_TARGETS  # noqa: E402
from tests.test_robustness_parsers import TARGETS, FuzzTarget, fuzz  # noqa: E402


def _kind(problem: str) -> str:
    """Group problems by exception type and the kvplan line that raised it (values differ case to case)."""
    first = problem.splitlines()[0]
    if first.endswith(")") and " (at " in first:
        return first.split(":", 1)[0] + " at " + first.rsplit(" (at ", 1)[1][:-1] + ": " + first[:160]
    return first[:200]


def run(target: FuzzTarget, examples: int) -> tuple[int, Counter[str], float]:
    """(cases tried, bad outcomes by problem, seconds)."""
    tried = 0
    problems: Counter[str] = Counter()

    def on_case(case: Any, problem: str | None) -> None:
        nonlocal tried
        tried += 1
        if problem is not None:
            problems[_kind(problem)] += 1

    started = time.perf_counter()
    fuzz(target, examples, on_case=on_case, fail=False)
    return tried, problems, time.perf_counter() - started


def run_network(show: int) -> int:
    """tests/test_robustness_network.py's CASES against a hostile test Hub on 127.0.0.1: outcomes counted,
    the slowest cases listed. Returns the number of bad cases."""
    import tempfile

    from tests.conftest import hub_repos
    from tests.test_robustness_network import CASES, add_hostile_repos, problem, run_case

    hub = hub_repos()
    add_hostile_repos(hub)
    hub.start()
    outcomes: Counter[str] = Counter()
    timings, bad = [], []
    try:
        for case in CASES:
            with tempfile.TemporaryDirectory() as home:
                try:
                    out = run_case(case, hub.endpoint, Path(home) / "hf")
                except Exception as exc:  # noqa: BLE001 (a hang past the case limit is an outcome to count)
                    outcomes["hung past 20 s"] += 1
                    bad.append(f"{case.name}: {type(exc).__name__}")
                    continue
            trouble = problem(case, out)
            kind = ("traceback" if "Traceback" in out.stderr else "internal error" if "internal error" in out.stderr
                    else "result" if out.returncode == 0 else f"one Error line, exit {out.returncode}")
            outcomes[kind] += 1
            timings.append((out.seconds, case.name))
            if trouble:
                bad.append(f"{case.name}: {trouble}")
    finally:
        hub.stop()
    print(f"\nnetwork: {len(CASES)} cases: " + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items())))
    print("slowest: " + ", ".join(f"{name} {s:.1f} s" for s, name in sorted(timings, reverse=True)[:show]))
    for line in bad:
        print(f"  bad: {line}")
    return len(bad)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=10.0, help="examples = CI's count × this (default 10)")
    parser.add_argument("--only", default="", help="run only targets whose name contains this")
    parser.add_argument("--show", type=int, default=3, help="distinct problems to list per target")
    args = parser.parse_args()

    targets = [t for t in (*TARGETS, *CLI_TARGETS) if args.only.lower() in t.name.lower()]
    rows = []
    print(f"{'input':<26} {'cases':>7} {'bad':>5} {'distinct':>8} {'seconds':>8}", flush=True)
    for target in targets:
        tried, problems, seconds = run(target, max(1, round(target.examples * args.scale)))
        rows.append((target.name, problems))
        print(f"{target.name:<26} {tried:>7} {sum(problems.values()):>5} {len(problems):>8} {seconds:>8.1f}",
              flush=True)
    total_bad = sum(sum(p.values()) for _, p in rows)
    if args.only.lower() in "network":
        total_bad += run_network(max(args.show, 5))
    print(f"\n{total_bad} bad case(s) in all")
    for name, problems in rows:
        for problem, n in problems.most_common(args.show):
            print(f"  {name}: {n}× {problem}")
    return 1 if total_bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
