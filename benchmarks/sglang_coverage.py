#!/usr/bin/env python3
"""Coverage of kvplan's SGLang rules against SGLang 0.5.23's own code (tests/fixtures/sglang/oracle-goldens.json).

Each golden is one config × GPU × flags case the SGLang oracle answered (resolved defaults, pool, refusal) or
could not run. kvplan plans it from the same free-memory figures and each case lands in one class:

  exact            every resolved default, the budget, tokens, running requests and the log line are equal
  refused-sglang   both refuse, kvplan with SGLang's own reason (e.g. custom code without --trust-remote-code,
                   no room for a hybrid's Mamba state)
  refused-source   kvplan refuses with the assertion SGLang's model class raises when TP does not split the
                   heads (its __init__, which the oracle never builds: ported from SGLang's source)
  refused-kvplan   kvplan refuses a pool this slice does not model (Mamba, DSA, sliding-window, multimodal …)
  oracle-fault     the golden is the oracle's fault, not SGLang's rule (tests/sglang_goldens.py:ORACLE_FAULTS)
  wrong            any figure differs (target: 0)

    python benchmarks/sglang_coverage.py [--verbose]
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import sglang_goldens  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--verbose", action="store_true", help="print every case that is not exact")
    a = ap.parse_args()
    by_gpu: dict[str, Counter[str]] = {}
    reasons: Counter[str] = Counter()
    for case in sglang_goldens.load_cases():
        o = sglang_goldens.replay(case)
        cls = sglang_goldens.classify(o)
        by_gpu.setdefault(case["gpu"], Counter())[cls] += 1
        if cls == "refused-kvplan":
            reasons[(o.refusal or "").split(":", 1)[-1].split("(")[0].strip()[:70]] += 1
        if a.verbose and cls != "exact":
            print(f"{cls:15} {case['id']}: {o.mismatches or o.refusal}")
    classes = ("exact", "refused-sglang", "refused-source", "refused-kvplan", "oracle-fault", "wrong")
    print(f"{'gpu':10}" + "".join(f"{c:>16}" for c in classes))
    total: Counter[str] = Counter()
    for gpu, counts in sorted(by_gpu.items()):
        total.update(counts)
        print(f"{gpu:10}" + "".join(f"{counts[c]:>16}" for c in classes))
    print(f"{'all':10}" + "".join(f"{total[c]:>16}" for c in classes))
    print("\nrefused by kvplan, by reason:")
    for reason, n in reasons.most_common():
        print(f"  {n:5}  {reason}")
    print("\noracle faults (kvplan unchecked there):")
    for model, why in sglang_goldens.ORACLE_FAULTS.items():
        print(f"  {model}: {why}")
    return 1 if total["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
