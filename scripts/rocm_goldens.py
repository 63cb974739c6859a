#!/usr/bin/env python3
"""Turn the ROCm oracle's raw answers into goldens shaped like tests/fixtures/oracle-cuda/ (plain data).

The oracle is vLLM 0.33's own KV planner run with its `RocmPlatform` on a CPU
(/work/shared/tools/vllm-rocm-oracle/rocm_oracle.py, faked amdsmi/HIP and stub aiter/flash_attn packages). It ran
once per row of tests/fixtures/oracle-rocm/cases.tsv, with `--kv-cache-memory-bytes 21474836480`, writing
RAW_DIR/<config>__<suffix>.json; this script only reshapes those answers:

    python scripts/rocm_goldens.py RAW_DIR      # writes tests/fixtures/oracle-rocm/<case>.json
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "oracle-rocm"
KV_BYTES = 21474836480
CORPUS = "tests/fixtures/corpus/configs"  # a row's config folder is here unless its 4th column names another
TOOL = "vllm-rocm-oracle rocm_oracle.py (vLLM 0.33.0's RocmPlatform on a CPU: faked amdsmi/HIP, stub aiter/flash_attn)"


# Errors of the faked environment, not vLLM verdicts (FAILURES.md): a CUDA-only import, a workspace the
# meta-device build never initialises, an aiter kernel the stub package cannot run. Such a case is an
# `oracle_failure`, as in ../oracle-cuda.
ORACLE_FAILURES = ("No module named 'cuda'", "WorkspaceManager not initialized", "fake_rocm: kernel ",
                   "Cannot copy out of meta tensor", "FlashAttention2 has been toggled on",
                   "Cannot access accelerator device",
                   # the corpus holds config.json only: no processor or tokenizer files to load (as ../oracle-cuda)
                   "Failed to load the processor", "object has no attribute 'vocab'",
                   # files the oracle cannot reach: a Mistral-format folder without its consolidated weights,
                   # a speculator's base model on the Hub
                   "Invalid repository ID or local directory specified")


def _error(text: str) -> dict[str, str]:
    kind, _, message = text.partition(": ")
    return {"error_type": kind, "error_message": message}


def _cases() -> list[tuple[str, str, list[str], str]]:
    rows = []
    for line in (OUT / "cases.tsv").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            suffix, config, args, *source = line.split("\t")
            rows.append((suffix, config, args.split(), source[0] if source else CORPUS))
    return rows


def _inputs(raw: dict[str, Any], args: list[str]) -> dict[str, Any]:
    req = raw["request"]
    env = {"VLLM_ROCM_USE_AITER": "1"} if req["use_aiter"] else {}
    for flag, value in zip(args, args[1:], strict=False):  # the oracle's --env K=V, set before vLLM is imported
        if flag == "--env":
            key, _, val = value.partition("=")
            env[key] = val
    return {"gpu": req["gpu"], "oracle_args": [*args, "--kv-cache-memory-bytes", str(KV_BYTES)],
            "tensor_parallel_size": req["tp"], "pipeline_parallel_size": req["pp"],
            "kv_cache_dtype": req["kv_cache_dtype"], "kv_cache_memory_bytes": req["kv_cache_memory_bytes"],
            "max_model_len": req["max_model_len"], "block_size": req["block_size"],
            "max_num_batched_tokens": req["max_num_batched_tokens"], "max_num_seqs": req["max_num_seqs"],
            "usage_context": req["usage_context"], "engine_args": {},
            "aiter_installed": not req["no_aiter"], "env": env}


def _kv_cache(plan: dict[str, Any]) -> dict[str, Any]:
    kv = plan.get("kv_cache_config") or {}
    if "error" in kv:
        return {"refused": True, **_error(kv["error"])}
    return {"refused": False, "num_blocks": kv["num_blocks"], "tokens": kv["kv_cache_size_tokens"],
            "max_concurrency": kv["max_concurrency"], "max_model_len": kv["max_model_len"],
            "max_model_len_before": kv["max_model_len_before"], "blocks_per_request": kv["blocks_per_request"],
            "log_line": kv["log_line"], "log_line_source": "vllm update_kv_cache_capacity",
            "num_kv_cache_tensors_worker0": kv["num_kv_cache_tensors"],
            "kv_cache_tensor_bytes_worker0": kv["kv_cache_tensor_bytes"], "groups": kv["groups"]}


def golden(case: str, config: str, args: list[str], source: str, raw: dict[str, Any], raw_sha: str) -> dict[str, Any]:
    """One case in the oracle-cuda shape, plus the ROCm platform facts vLLM derived."""
    out: dict[str, Any] = {
        "format": 1, "case": case, "why": f"{raw['gpu']} ROCm, {' '.join(args[2:]) or 'vLLM serve defaults'}",
        "status": "answered",
        "model": {"config_dir": config, "source": source,
                  "hf_id": config.replace("--", "/", 1)},
        "oracle": {"tool": TOOL, "vllm_version": raw["vllm_version"], "torch_version": raw["torch_version"],
                   "raw_output_sha256": raw_sha, "platform": raw["platform"], "gcn_arch": raw["gcn_arch"],
                   "cdna_version": raw["cdna_version"], "capability": raw["capability"],
                   "device_name": raw["device_name"], "device_total_memory": raw["device_total_memory"],
                   "fp8_dtype": raw["fp8_dtype"], "is_fp8_fnuz": raw["is_fp8_fnuz"],
                   "flash_attn_package": raw["flash_attn_package"], "aiter": raw["aiter"]},
        "inputs": _inputs(raw, args),
    }
    if "error" in raw:
        out["status"] = "oracle_failure" if any(f in raw["error"] for f in ORACLE_FAILURES) else "config_refused"
        out["config_error"] = _error(raw["error"])
        return out
    plan = raw.get("plan") or {}
    cfg = raw["config"]
    out["resolved"] = {**cfg, "block_size_before_backend_update": plan.get("block_size_before_backend_update"),
                       "block_size": plan.get("block_size"), "mamba_block_size": plan.get("mamba_block_size"),
                       "attn_backends": plan.get("attn_backends"), "attn_layers": plan.get("attn_layers"),
                       "kv_cache_layout": plan.get("kv_cache_layout")}
    if "error" in plan:
        out["status"] = ("oracle_failure" if any(f in plan["error"] for f in ORACLE_FAILURES)
                         else "build_refused")
        out["build_error"] = _error(plan["error"])
        return out
    out["per_pp_rank"] = plan["per_pp_rank"]
    out["kv_cache"] = _kv_cache(plan)
    if out["kv_cache"]["refused"]:
        out["status"] = "refused"
    return out


def main() -> None:
    raw_dir = Path(sys.argv[1])
    written = 0
    for suffix, config, args, source in _cases():
        case = f"{config}__{suffix}"
        path = raw_dir / f"{case}.json"
        if not path.exists() or not path.stat().st_size:
            print(f"missing: {case}")
            continue
        text = path.read_bytes()
        g = golden(case, config, args, source, json.loads(text), hashlib.sha256(text).hexdigest())
        (OUT / f"{case}.json").write_text(json.dumps(g, indent=1, ensure_ascii=False) + "\n")
        written += 1
        print(f"{case}: {g['status']} {g.get('kv_cache', {}).get('num_blocks', '')}")
    print(f"{written} goldens in {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
