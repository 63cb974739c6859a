#!/usr/bin/env python3
"""Coverage of kvplan against vLLM 0.33's own KV planner with its ROCm rules (tests/fixtures/oracle-rocm/).

The ROCm sibling of benchmarks/coverage.py: every golden is one corpus config × AMD GPU (MI300X, MI325X, MI355X)
× aiter mode (installed — vLLM's ROCm images —, absent — a bare pip install —, or enabled with
VLLM_ROCM_USE_AITER=1) × settings case, answered or refused by vLLM's `RocmPlatform`
(/work/shared/tools/vllm-rocm-oracle). kvplan plans the same case with `--kv-cache-memory-bytes` and the same
aiter choice, and each case lands in one class:

  exact             answered, and kvplan's num_blocks, attention block size, vLLM log line and attention
                    backend(s) are vLLM's
  refused-vllm      both refuse, and kvplan's message is vLLM's own reason (a capacity refusal after planning
                    also has vLLM's attention backend(s) and block size)
  refused-kvplan    kvplan refuses a case vLLM answers, or refuses with a reason that is not vLLM's (target: 0)
  wrong             kvplan answers with other numbers, or answers a case vLLM refuses

    python benchmarks/coverage_rocm.py [--verbose]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_spec = importlib.util.spec_from_file_location("kvplan_cuda_coverage", ROOT / "benchmarks" / "coverage.py")
assert _spec is not None and _spec.loader is not None
cuda = importlib.util.module_from_spec(_spec)
sys.modules["kvplan_cuda_coverage"] = cuda
_spec.loader.exec_module(cuda)

from kvplan.cli.common import load_model  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.hardware.gpus import get_gpu  # noqa: E402
from kvplan.vllm.fit import plan_fit  # noqa: E402

GOLDENS = ROOT / "tests" / "fixtures" / "oracle-rocm"
GPU_IDS = {"mi300x": "mi300x", "mi325x": "mi325x", "mi355x": "mi355x"}
# vLLM's ROCm refusals, by their key words (platforms/rocm.py: get_attn_backend_cls, get_mla_prefill_backend_cls).
# kvplan's backend names → vLLM's get_name() (rocm_aiter_fa.py: AiterFlashAttentionBackend.get_name is FLASH_ATTN).
GET_NAME = {"ROCM_AITER_FA": "FLASH_ATTN"}
# get_name()s of the attention-layer backends in a golden's attn_backends (not Mamba/GDN/indexer ones).
ATTENTION_NAMES = frozenset({"ROCM_ATTN", "FLASH_ATTN", "ROCM_AITER_UNIFIED_ATTN", "TRITON_ATTN", "ROCM_AITER_MLA",
                             "TRITON_MLA", "ROCM_AITER_TRITON_MLA", "ROCM_AITER_MLA_SPARSE", "TRITON_ATTN_DIFFKV",
                             "ROCM_FLASHMLA_SPARSE_DSV4"})
ROCM_REASONS = ("No valid attention backend found", "No valid MLA prefill backend found")


def goldens() -> list[dict[str, object]]:
    """Every ROCm golden case, sorted by name."""
    return [json.loads(p.read_text()) for p in sorted(GOLDENS.glob("*__*.json"))]


# The same refusal in other words: kvplan's TP check (model/parallel.py) and vLLM's
# (config/parallel.py: "Total number of attention heads (28) must be divisible by tensor parallel size (8)"),
# counted as vLLM's only when both name the same head count and TP size.
_KVPLAN_TP = re.compile(r"--tensor-parallel-size (\d+) does not divide the (\d+) attention heads")
_VLLM_TP = re.compile(r"Total number of attention heads \((\d+)\) must be divisible by tensor parallel size \((\d+)\)")


def _same_reason(kvplan_message: str, vllm_message: str) -> bool:
    if any(r in kvplan_message and r in vllm_message for r in ROCM_REASONS):
        return True
    ours, theirs = _KVPLAN_TP.search(kvplan_message), _VLLM_TP.search(vllm_message)
    if ours and theirs and (ours.group(2), ours.group(1)) == theirs.groups():
        return True
    return bool(cuda._same_reason(kvplan_message, vllm_message))


def classify(g: dict) -> cuda.Outcome | None:  # type: ignore[type-arg,name-defined]
    """The class of one ROCm golden case (None: flags kvplan does not model)."""
    inputs = g["inputs"]
    # --block-size is modelled (ServeSettings.block_size); the CUDA coverage's reader leaves such cases out
    s = cuda._settings({**g, "inputs": {**inputs, "block_size": None}})
    if s is None or g["status"] == "oracle_failure":  # the oracle's own failure (oracle-rocm/FAILURES.md)
        return None
    s = replace(s, block_size=inputs.get("block_size"), usage=inputs.get("usage_context") or "serve")
    env = inputs.get("env") or {}
    s = replace(s, rocm_aiter_installed=bool(inputs["aiter_installed"]),
                rocm_use_aiter=env.get("VLLM_ROCM_USE_AITER") == "1")
    case = str(g["case"])
    model_dir = ROOT / str(g["model"]["source"]) / str(g["model"]["config_dir"])
    try:
        model = load_model(str(model_dir))
        r = plan_fit(model, get_gpu(GPU_IDS[str(inputs["gpu"])]), s, advise=False)
    except KvplanError as exc:
        if g["status"] != "answered" and _same_reason(str(exc), cuda._vllm_message(g)):
            return cuda.Outcome(case, "", "refused-vllm", str(exc)[:160])
        return cuda.Outcome(case, "", "refused-kvplan", str(exc)[:160])
    names = sorted({GET_NAME.get(n, n) for n in r.attention_backend.split(" + ")})
    golden_names = sorted(set(g["resolved"]["attn_backends"] or ()) & ATTENTION_NAMES) or names  # none: Mamba
    if g["status"] == "answered":
        kv = g["kv_cache"]
        got = (r.num_gpu_blocks, r.block_size, r.log_line, names)
        want = (kv["num_blocks"], g["resolved"]["block_size"], kv["log_line"], golden_names)
        if got == want:
            return cuda.Outcome(case, "", "exact", r.attention_backend)
        return cuda.Outcome(case, "", "wrong", f"kvplan {got} {r.attention_backend}; vLLM {want} "
                                               f"{g['resolved']['attn_backends']}")
    if (names, r.block_size) != (golden_names, g["resolved"]["block_size"]):  # refused later, but planned alike
        return cuda.Outcome(case, "", "wrong", f"kvplan {names} {r.block_size}; vLLM {golden_names} "
                                               f"{g['resolved']['block_size']}")
    if not r.fits and r.error == cuda._vllm_message(g):
        return cuda.Outcome(case, "", "refused-vllm", r.error[:160])
    return cuda.Outcome(case, "", "wrong", f"kvplan: {r.startup}; vLLM: {cuda._vllm_message(g)[:160]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--verbose", action="store_true", help="also list the exact cases")
    args = ap.parse_args()
    start = time.perf_counter()
    outcomes = [o for o in (classify(g) for g in goldens()) if o is not None]
    cuda.print_report("kvplan vs vLLM 0.33's ROCm planner", outcomes, time.perf_counter() - start,
                      verbose=args.verbose)


if __name__ == "__main__":
    main()
