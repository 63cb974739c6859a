#!/usr/bin/env python3
"""Run the shared ROCm oracle (/work/shared/tools/vllm-rocm-oracle/rocm_oracle.py) with vLLM's workspace manager
set up first, as a GPU worker sets it up before it builds the model (v1/worker/gpu_worker.py calls
v1/worker/workspace.py:init_workspace_manager(device)); here the device is `meta`, where the oracle builds, and
torch.accelerator.empty_cache (which the manager calls when it grows) is a no-op, as the CPU torch has no device.

Without it the sparse-MLA impl (v1/attention/backends/mla/rocm_aiter_mla_sparse.py, its __init__ takes a buffer
from current_workspace_manager()) stops the oracle with "WorkspaceManager not initialized" (FAILURES.md). Same
arguments as rocm_oracle.py; the oracle itself is unchanged.

    python scripts/rocm_oracle_workspace.py CONFIG_DIR --gpu mi300x --tp 8 ... > answer.json
"""
from __future__ import annotations

import os
import sys

ORACLE = os.environ.get("ROCM_ORACLE_DIR", "/work/shared/tools/vllm-rocm-oracle")
sys.path.insert(0, ORACLE)
import rocm_oracle  # type: ignore[import-not-found]  # noqa: E402

_plan = rocm_oracle.plan


def _plan_with_workspace(args, cfg, create):  # type: ignore[no-untyped-def]
    import torch
    from vllm.v1.worker.workspace import init_workspace_manager

    init_workspace_manager(torch.device("meta"))
    # WorkspaceManager._ensure_workspace_size empties the allocator's cache before growing the buffer; the CPU
    # torch the oracle runs on has no accelerator to ask, and a meta buffer holds no memory to free.
    torch.accelerator.empty_cache = lambda: None
    return _plan(args, cfg, create)


rocm_oracle.plan = _plan_with_workspace

if __name__ == "__main__":
    sys.exit(rocm_oracle.main())
