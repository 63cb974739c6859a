#!/usr/bin/env python3
"""Single SGLang-oracle runs into tests/fixtures/sglang/oracle-runs.json (the rules the goldens' grid does not
reach), one oracle process at a time.

    . /work/venv/bin/activate
    python tools/sglang_oracle/single_runs.py RUNS.txt [--oracle DIR] [--venv DIR] [--wrapper spec]

RUNS.txt: one run a line, `ID|MODEL|GPU|AVAIL_GIB|PRE_GIB|ORACLE ARGS` (ARGS shell-quoted, e.g.
`--tp 1 --set "json_model_override_args='{\"num_hidden_layers\": 14}'"`; AVAIL/PRE empty: resolved arguments
only). Each run's resolved defaults and pool (or SGLang's error) are copied from the oracle's JSON into a run
record as the existing ones are (a run of the same id is replaced).
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/fixtures/sglang/oracle-runs.json"
RESOLVED = ("mem_fraction_static", "chunked_prefill_size", "page_size", "attention_backend", "kv_cache_dtype",
            "context_length", "max_running_requests")
POOL = ("kv_cache_dtype_torch", "is_hybrid_swa", "mambaish", "num_kv_heads_per_rank", "head_dim", "num_kv_layers",
        "context_len", "pool_configurator", "cell_size_bytes", "profiled_budget_bytes", "max_total_num_tokens",
        "max_running_requests")


def model_dir(name: str) -> Path:
    for base in ("tests/fixtures/corpus/configs", "tests/fixtures/configs", "tests/fixtures/sglang/configs"):
        if (ROOT / base / name / "config.json").exists():
            return ROOT / base / name
    raise SystemExit(f"no committed config for {name}")


def record(run_id: str, model: str, gpu: str, avail: str, pre: str, args: list[str], out: dict[str, Any]
           ) -> dict[str, Any]:
    rec: dict[str, Any] = {"id": run_id, "model": model, "gpu": gpu, "args": args}
    if avail:
        rec.update(avail_gib=float(avail), pre_gib=float(pre))
    if "error" in out:
        rec["error"] = out["error"]
    resolved = out.get("resolved") or {}
    rec["resolved"] = {k: resolved[k] for k in RESOLVED if resolved.get(k) is not None}
    graph = resolved.get("cuda_graph") or {}
    if graph:
        rec["resolved"].update(decode_max_bs=graph["decode"]["max_bs"], decode_num_bs=graph["decode"]["num_bs"],
                               prefill_backend=graph["prefill"]["backend"])
    pool = out.get("pool")
    if pool:
        rec["pool"] = {k: pool[k] for k in POOL if k in pool}
        logs = [x["log"] for x in pool.get("kv_pool_log", []) if "log" in x]
        if logs:
            rec["pool"]["log"] = logs
        for k in ("error", "log_error", "profile_error"):
            if k in pool:
                rec["pool"][k] = pool[k]
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs")
    ap.add_argument("--oracle", default="/work/shared/tools/sglang-oracle")
    ap.add_argument("--venv", default="/work/oracle/sglang/venv")
    a = ap.parse_args()
    doc = json.loads(OUT.read_text())
    by_id = {r["id"]: i for i, r in enumerate(doc["runs"])}
    for line in Path(a.runs).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        run_id, model, gpu, avail, pre, argtext = line.split("|", 5)
        args = shlex.split(argtext)
        cmd = [f"{a.venv}/bin/python", f"{a.oracle}/sglang_oracle.py", str(model_dir(model)), "--gpu", gpu, *args]
        if avail:
            cmd += ["--avail-gib", avail, "--pre-gib", pre]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        try:
            out = json.loads(proc.stdout)
        except json.JSONDecodeError:
            out = {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:400]}
        rec = record(run_id, model, gpu, avail, pre, args, out)
        if run_id in by_id:
            doc["runs"][by_id[run_id]] = rec
        else:
            by_id[run_id] = len(doc["runs"])
            doc["runs"].append(rec)
        print(run_id, json.dumps(rec.get("pool", rec.get("error")))[:200], flush=True)
        OUT.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
