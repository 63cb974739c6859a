#!/usr/bin/env python3
"""Regenerate tests/fixtures/sglang/dsv4-oracle-goldens.json: SGLang 0.5.23's own DSV4PoolConfigurator and
DeepSeekV4TokenToKVPool (tools/sglang_oracle/dsv4_batch.py) on the corpus's DeepSeek-V4 configs.

    . /work/venv/bin/activate; export PYTHONPATH=$PWD
    python tools/sglang_oracle/dsv4_regen.py --oracle /work/shared/tools/sglang-oracle \
        --venv /work/oracle/sglang/venv [--gpus h100,h200,b200,a100-80,mi300x,mi355x]

Cases: each DeepSeek-V4 corpus config kvplan estimates weights for × GPU × TP 1/2/4/8, attention DP 8 at TP 8,
and flag variants on DeepSeek-V4-Flash at TP 8. The free memory before / after the weights is kvplan's estimate
(regen.py:case_inputs), an input recorded with the case. Each case keeps regen.py:compact's fields plus, for a
sized pool, `dsv4` (the MemoryPoolConfig's pool sizes and the configurator's per-token figures) and `log` (every
line SGLang's DSV4 pool code logs while sizing and building the pool; SGLang prints no `KV Cache is allocated` line
for it). One process per GPU, one at a time.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools/sglang_oracle"))

import regen  # noqa: E402

OUT = ROOT / "tests/fixtures/sglang/dsv4-oracle-goldens.json"
MODELS = ["deepseek-ai--DeepSeek-V4-Flash", "deepseek-ai--DeepSeek-V4-Flash-Base", "deepseek-ai--DeepSeek-V4-Pro",
          "deepseek-ai--DeepSeek-V4-Pro-Base", "mlx-community--DeepSeek-V4-Flash-4bit"]
VARIANTS = [["--max-running-requests", "64"], ["--kv-cache-dtype", "bfloat16"], ["--context-length", "65536"],
            ["--mem-fraction-static", "0.8"], ["--page-size", "512"], ["--max-running-requests", "1024"],
            ["--dp", "2", "--enable-dp-attention"], ["--max-total-tokens", "1000000"], ["--max-total-tokens", "2000"],
            ["--set", "swa_full_tokens_ratio=0.05"], ["--attention-backend", "flashinfer"]]


def build_cases(gpus: list[str]) -> list[dict[str, object]]:
    cases: list[dict[str, object]] = []
    for gpu in gpus:
        for name in MODELS:
            for tp in (1, 2, 4, 8):
                flag_sets = [[]] + ([["--dp", "8", "--enable-dp-attention"]] if tp == 8 else [])
                if name == "deepseek-ai--DeepSeek-V4-Flash" and tp == 8:
                    flag_sets += VARIANTS
                for flags in flag_sets:
                    inputs = regen.case_inputs(name, gpu, tp, tp)
                    if inputs is None:
                        continue
                    args = ["--tp", str(tp), *flags, "--avail-gib", str(inputs["avail_gib"]),
                            "--pre-gib", str(inputs["pre_gib"])]
                    cid = f"{name}__{gpu}__tp{tp}" + ("__" + "_".join(f.lstrip("-").replace("=", "-") for f in flags)
                                                     if flags else "")
                    cases.append({"id": cid, "model": name, "gpu": gpu, "tp": tp, "flags": flags, **inputs,
                                  "model_dir": str(regen.model_dir(name)), "args": args})
    return cases


def compact(case: dict[str, object], result: dict[str, object]) -> dict[str, object]:
    out = regen.compact(case, result)
    if "error" in out:
        return out
    resolved = result["resolved"]
    assert isinstance(resolved, dict)
    for k in ("kv_cache_dtype", "max_running_requests", "swa_full_tokens_ratio", "disable_overlap_schedule",
              "dsv4_attn_backend"):
        out["resolved"][k] = resolved.get(k)  # type: ignore[index]
    pool = out["pool"]
    assert isinstance(pool, dict)
    pool.pop("log", None)
    extra = result.get("dsv4") or {}
    assert isinstance(extra, dict)
    if extra:
        pool["dsv4"] = {**extra["config"], **{k: v for k, v in extra["configurator"].items() if k != "class"}}
        pool["log"] = [x for x in result.get("dsv4_log", []) if not str(x).startswith("Setting max_running")]
    built = result["pool"].get("kv_pool_log")  # type: ignore[union-attr]
    if isinstance(built, dict) and "error" in built:  # SGLang sized the pool, then refused building it
        pool["pool_build_error"] = built["error"]
        pool["pool_build_raised_at"] = built.get("raised_at", "").split("site-packages/sglang/")[-1]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", required=True)
    ap.add_argument("--venv", required=True)
    ap.add_argument("--gpus", default=",".join(regen.GPUS))
    a = ap.parse_args()
    gpus = a.gpus.split(",")
    cases = build_cases(gpus)
    by_id = {c["id"]: c for c in cases}
    old = json.loads(OUT.read_text())["cases"] if OUT.exists() else []
    kept = [c for c in old if c["gpu"] not in gpus]
    new = [compact(by_id[r["id"]], r) for r in regen.run_batches("dsv4_batch.py", a.venv, a.oracle, cases, gpus)]
    doc = {"source": "SGLang 0.5.23 (PyPI wheel) run by /work/shared/tools/sglang-oracle (unmodified) through "
                     "tools/sglang_oracle/dsv4_batch.py with faked GPUs; regenerate: python "
                     "tools/sglang_oracle/dsv4_regen.py --oracle DIR --venv VENV",
           "sglang_version": "0.5.23", "cases": kept + new}
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(kept + new)} cases -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
