#!/usr/bin/env python3
"""Coverage of kvplan against vLLM 0.33's own KV planner with CUDA rules (tests/fixtures/oracle-cuda/).

Every golden is one config × GPU × settings case that vLLM's code answered, refused with its own error, or refused
at config time; kvplan plans it through the library (`kvplan.fit`) with `--kv-cache-memory-bytes` (the oracle's
input). The classes and the pass rule are tests/vllm_goldens.py's, the ones tests/test_cuda_golden.py holds kvplan
to: exact, refused-vllm (both pass), refused-kvplan, wrong, and the cases not judged but counted — not-modelled
(an engine argument kvplan does not model) and oracle-failure (FAILURES.md).

    python benchmarks/coverage.py [--verbose]      # the table, then every judged case that is not exact
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import vllm_goldens  # noqa: E402


def main() -> None:
    vllm_goldens.coverage_main(
        __doc__, 'vLLM 0.33 CUDA-oracle goldens', vllm_goldens.classify, vllm_goldens.CUDA_GOLDENS)


if __name__ == "__main__":
    main()
