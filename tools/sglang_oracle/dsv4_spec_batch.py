#!/usr/bin/env python3
"""DeepSeek-V4 with its MTP draft: dsv4_batch.py's DSV4 pool capture with spec_oracle.py's speculative pool step.

spec_oracle.py (imported first) replaces the shared oracle's resolve/pool steps with ones that keep the
speculative algorithm (the shared oracle refuses it); dsv4_batch.main then replaces kv_pool_sizes with the DSV4
pool build and log capture. Same CASES.json as dsv4_batch.py (cases pass `--set speculative_algorithm=NEXTN`):

    SPEC_ORACLE_WITH_POOL=1 VENV/bin/python tools/sglang_oracle/dsv4_spec_batch.py ORACLE_DIR CASES.json GPU OUT.json
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spec_oracle  # noqa: E402,F401  (patches sglang_oracle.resolve / .pool)
import dsv4_batch  # noqa: E402

if __name__ == "__main__":
    os.environ.setdefault("SPEC_ORACLE_WITH_POOL", "1")
    sys.exit(dsv4_batch.main())
