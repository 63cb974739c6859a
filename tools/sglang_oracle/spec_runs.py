#!/usr/bin/env python3
"""Speculative SGLang-oracle runs into tests/fixtures/sglang/spec-oracle-runs.json, one oracle process at a time.

    . /work/venv/bin/activate
    python tools/sglang_oracle/spec_runs.py RUNS.json [--venv DIR]

RUNS.json: a list of {"id", "model", "gpu", "args": {ServerArgs field: value}, "draft": null | config name,
"budget": bytes (default 60 GiB)} or "avail_gib"/"pre_gib" (the free memory, for SGLang's own
_profile_available_bytes). Each runs tools/sglang_oracle/spec_oracle.py (SPEC_ORACLE_WITH_POOL=1: the
target pool's log line too) on the committed config and is recorded as the existing runs are (id, model, gpu,
args, draft, oracle_args_in, resolved, pool or error); a run of the same id is replaced.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/fixtures/sglang/spec-oracle-runs.json"
FLAGS = {"tp_size": "--tp", "dp_size": "--dp", "pp_size": "--pp", "kv_cache_dtype": "--kv-cache-dtype",
         "page_size": "--page-size", "attention_backend": "--attention-backend",
         "max_running_requests": "--max-running-requests", "context_length": "--context-length"}


def model_dir(name: str) -> Path:
    for base in ("tests/fixtures/corpus/configs", "tests/fixtures/configs", "tests/fixtures/sglang/configs"):
        if (ROOT / base / name / "config.json").exists():
            return ROOT / base / name
    raise SystemExit(f"no committed config for {name}")


def oracle_argv(run: dict[str, Any]) -> list[str]:
    if run.get("avail_gib") is not None:  # SGLang's _profile_available_bytes (a Mamba hybrid's state carve)
        argv = ["--gpu", run["gpu"], "--avail-gib", str(run["avail_gib"]), "--pre-gib", str(run["pre_gib"])]
    else:
        argv = ["--gpu", run["gpu"], "--kv-budget-bytes", str(run.get("budget", 60 << 30))]
    for key, value in run["args"].items():
        if key == "enable_dp_attention":
            argv.append("--enable-dp-attention")
        elif key in FLAGS:
            argv += [FLAGS[key], str(value)]
        else:
            argv += ["--set", f"{key}={value}"]
    if run.get("draft"):
        argv += ["--set", f"speculative_draft_model_path={model_dir(run['draft'])}"]
    return argv


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs")
    ap.add_argument("--venv", default="/work/oracle/sglang/venv")
    a = ap.parse_args()
    data = json.loads(OUT.read_text())
    for run in json.loads(Path(a.runs).read_text()):
        cmd = [f"{a.venv}/bin/python", str(ROOT / "tools/sglang_oracle/spec_oracle.py"), str(model_dir(run["model"])),
               *oracle_argv(run)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "SPEC_ORACLE_WITH_POOL": "1"})
        try:
            out = json.loads(proc.stdout)
        except json.JSONDecodeError:
            out = {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
        rec: dict[str, Any] = {"id": run["id"], "model": run["model"], "gpu": run["gpu"], "args": run["args"],
                               "draft": run.get("draft"), "oracle_args_in": out.get("server_args_in")}
        if run.get("avail_gib") is not None:
            rec["avail_gib"], rec["pre_gib"] = run["avail_gib"], run["pre_gib"]
            rec["note"] = "free memory given (--avail-gib/--pre-gib, the grid case's of the same model, GPU and TP)"
        elif run.get("budget") is not None:
            rec["note"] = f"--kv-budget-bytes {run['budget']} (not the file's 60 GiB)"
        for key in ("resolved", "pool", "error", "error_text"):
            if key in out:
                rec[key] = out[key]
        data["runs"] = [r for r in data["runs"] if r["id"] != run["id"]] + [rec]
        print(run["id"], json.dumps(rec.get("pool") or rec.get("error"))[:300], flush=True)
        OUT.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
