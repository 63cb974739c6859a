#!/usr/bin/env python3
"""Coverage of kvplan against vLLM 0.33's own KV planner with its ROCm rules (tests/fixtures/oracle-rocm/).

The ROCm sibling of benchmarks/coverage.py: every golden is one corpus config × AMD GPU (MI300X, MI325X, MI355X)
× aiter mode (installed — vLLM's ROCm images —, absent — a bare pip install —, or enabled with
VLLM_ROCM_USE_AITER=1) × settings case, answered or refused by vLLM's `RocmPlatform`
(/work/shared/tools/vllm-rocm-oracle). kvplan plans the same case through the library with
`--kv-cache-memory-bytes` and the same aiter choice; the classes and the pass rule are tests/vllm_goldens.py's
(classify_rocm: exact also needs vLLM's attention backend(s), and so does a capacity refusal after planning),
the ones tests/test_rocm.py holds kvplan to.

    python benchmarks/coverage_rocm.py [--verbose]
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import vllm_goldens  # noqa: E402


def main() -> None:
    vllm_goldens.coverage_main(
        __doc__, "kvplan vs vLLM 0.33's ROCm planner", vllm_goldens.classify_rocm, vllm_goldens.ROCM_GOLDENS)


if __name__ == "__main__":
    main()
