#!/usr/bin/env python3
"""Regenerate tests/fixtures/sglang/oracle-goldens.json from SGLang 0.5.23's own code (the sglang-oracle).

    . /work/venv/bin/activate; export PYTHONPATH=$PWD
    python tools/sglang_oracle/regen.py --oracle /work/shared/tools/sglang-oracle \
        --venv /work/oracle/sglang/venv --corpus [--gpus h100,h200,b200,a100-80]

1. For each case (MODELS × GPU × TP 1/2/4/8, with --corpus every other corpus config at TP 1 and 8;
   attention DP at TP 8; a few flag variants) it writes the
   free memory SGLang would measure before and after the weights (kvplan's estimate: the inputs
   `--avail-gib` / `--pre-gib`, recorded with the case; the goldens pin SGLang's arithmetic on them, not
   the estimate).
2. It runs tools/sglang_oracle/batch.py in the oracle's venv, one process per GPU (one at a time).
3. It keeps, per case, the resolved defaults and the pool (tokens, running requests, cell, the
   `KV Cache is allocated` line), or SGLang's refusal, and writes them as plain JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "tests/fixtures/sglang/oracle-goldens.json"
GPUS = {"h100": "h100-sxm", "h200": "h200", "b200": "b200", "a100-80": "a100-80gb-sxm", "mi300x": "mi300x",
        "mi355x": "mi355x"}
MODELS = [
    "Qwen--Qwen2.5-7B-Instruct", "Qwen--Qwen3-0.6B", "Qwen--Qwen3-14B", "Qwen--Qwen3-32B", "Qwen--Qwen3-32B-FP8",
    "meta-llama--Llama-3.1-8B-Instruct", "meta-llama--Llama-3.1-70B-Instruct", "meta-llama--Llama-2-7b-chat-hf",
    "mistralai--Mistral-7B-Instruct-v0.2", "mistralai--Mistral-Nemo-Instruct-2407", "01-ai--Yi-34B",
    "Qwen--Qwen2-72B-Instruct", "Qwen--Qwen3-235B-A22B", "Qwen--Qwen3-235B-A22B-FP8",
    "Qwen--Qwen3-Coder-480B-A35B-Instruct", "zai-org--GLM-4.5", "zai-org--GLM-4.5-Air-FP8",
    "deepseek-ai--DeepSeek-V2-Lite-Chat", "deepseek-ai--DeepSeek-V2", "deepseek-ai--DeepSeek-V3-0324",
    "deepseek-ai--DeepSeek-R1", "moonshotai--Kimi-K2-Instruct", "openbmb--MiniCPM3-4B", "unsloth--gemma-2-27b-it",
    "codellama--CodeLlama-34b-Instruct-hf", "bigcode--starcoder2-15b", "allenai--OLMo-2-1124-13B",
    "ibm-granite--granite-3.1-8b-base", "tencent--Hunyuan-7B-Instruct", "rednote-hilab--dots.llm1.inst",
    "mistralai--Mixtral-8x22B-v0.1", "THUDM--glm-4-9b-chat-hf",
    # refused by this slice (SGLang's other pools): recorded so the refusal is pinned too
    "Qwen--Qwen3-Next-80B-A3B-Instruct-FP8", "deepseek-ai--DeepSeek-V3.2",
]
VARIANTS = {  # (model, tp) -> extra flag sets
    ("meta-llama--Llama-3.1-8B-Instruct", 1): [["--kv-cache-dtype", "fp8_e4m3"], ["--mem-fraction-static", "0.7"],
                                               ["--max-running-requests", "128"], ["--context-length", "8192"],
                                               ["--page-size", "16"], ["--chunked-prefill-size", "4096"]],
    ("deepseek-ai--DeepSeek-V3-0324", 8): [["--kv-cache-dtype", "fp8_e4m3"], ["--max-running-requests", "256"],
                                           ["--dp", "2", "--enable-dp-attention"]],
    ("Qwen--Qwen3-32B", 8): [["--dp", "2", "--enable-dp-attention"], ["--dp", "4", "--enable-dp-attention"]],
}


def model_dir(name: str) -> Path:
    for base in ("tests/fixtures/corpus/configs", "tests/fixtures/configs"):
        if (ROOT / base / name / "config.json").exists():
            return ROOT / base / name
    raise SystemExit(f"no config for {name}")


def case_inputs(name: str, gpu: str, tp: int, world: int) -> dict[str, float] | None:
    """kvplan's estimate of (avail, pre) GiB for the case, or None where it cannot estimate the weights."""
    from kvplan.errors import KvplanError
    from kvplan.hardware.gpus import get_gpu
    from kvplan.model.hub import load_local
    from kvplan.sglang.budget import estimate_free_memory
    from kvplan.vllm.memory.weights import estimate_weights

    try:
        spec = load_local(str(model_dir(name)))
    except KvplanError:
        return None  # kvplan cannot read the config at all: no SGLang case
    if spec.weights_unknown:
        return None
    chip = get_gpu(GPUS[gpu])
    try:
        w = estimate_weights(spec, tp=tp, pp=1, arch=chip.arch)
    except KvplanError:
        return None
    free = estimate_free_memory(cuda_total_bytes=chip.cuda_total_bytes, weights_bytes=w.bytes,
                                weights_range=(w.low_bytes, w.high_bytes), world=world)
    return {"avail_gib": round(free.avail_gib, 4), "pre_gib": round(free.pre_gib, 4)}


def corpus_models() -> list[str]:
    """Every corpus config (tests/fixtures/corpus/configs) not already in MODELS: sized at TP 1 and 8."""
    names = sorted(p.parent.name for p in (ROOT / "tests/fixtures/corpus/configs").glob("*/config.json"))
    return [n for n in names if n not in MODELS]


def build_cases(gpus: list[str], corpus: bool = False) -> list[dict[str, object]]:
    cases: list[dict[str, object]] = []
    plan = [(name, (1, 2, 4, 8)) for name in MODELS]
    if corpus:
        plan += [(name, (1, 8)) for name in corpus_models()]
    for gpu in gpus:
        for name, tps in plan:
            for tp in tps:
                flag_sets = [[]] + ([["--dp", "8", "--enable-dp-attention"]] if tp == 8 else [])
                flag_sets += VARIANTS.get((name, tp), [])
                for flags in flag_sets:
                    inputs = case_inputs(name, gpu, tp, tp)
                    if inputs is None:
                        continue
                    args = ["--tp", str(tp), *flags, "--avail-gib", str(inputs["avail_gib"]),
                            "--pre-gib", str(inputs["pre_gib"])]
                    cid = f"{name}__{gpu}__tp{tp}" + ("__" + "_".join(f.lstrip("-") for f in flags) if flags else "")
                    cases.append({"id": cid, "model": name, "gpu": gpu, "tp": tp, "flags": flags, **inputs,
                                  "model_dir": str(model_dir(name)), "args": args})
    return cases


def compact(case: dict[str, object], result: dict[str, object]) -> dict[str, object]:
    """What the tests pin: the case, SGLang's resolved defaults, and its pool (or its refusal)."""
    out = {k: case[k] for k in ("id", "model", "gpu", "tp", "flags", "avail_gib", "pre_gib")}
    if "error" in result:
        out["error"] = result["error"]
        return out
    r = result["resolved"]
    assert isinstance(r, dict)
    cg = r["cuda_graph"]
    out["resolved"] = {k: r[k] for k in ("mem_fraction_static", "chunked_prefill_size", "max_prefill_tokens",
                                        "page_size", "attention_backend", "attn_dp_size",
                                        "schedule_conservativeness")}
    out["resolved"].update(decode_max_bs=cg["decode"]["max_bs"], decode_num_bs=cg["decode"]["num_bs"],
                           prefill_backend=cg["prefill"]["backend"], prefill_max_bs=cg["prefill"]["max_bs"],
                           prefill_num_bs=cg["prefill"]["num_bs"])
    p = result["pool"]
    assert isinstance(p, dict)
    keep = ("kv_cache_dtype_torch", "use_mla_backend", "is_hybrid_swa", "mambaish", "num_kv_heads_per_rank",
            "num_kv_layers", "context_len", "pool_configurator", "cell_size_bytes", "refusal",
            "profiled_budget_bytes", "max_total_num_tokens", "max_running_requests", "error")
    out["pool"] = {k: p[k] for k in keep if k in p}
    logs = p.get("kv_pool_log")
    if isinstance(logs, list):
        out["pool"]["log"] = [x.get("log") for x in logs]
    return out


def _merged(old: list[dict[str, object]],
            new: list[dict[str, object]]) -> list[dict[str, object]]:
    """The old cases in their order, each rerun one replaced in place; cases new to the file at the end."""
    fresh = {c["id"]: c for c in new}
    out = [fresh.pop(str(c["id"]), c) for c in old]
    return out + list(fresh.values())


def run_batches(script: str, venv: str, oracle: str, cases: list[dict], gpus: list[str]) -> list[dict]:
    """Run tools/sglang_oracle/SCRIPT (batch.py's argument form) in the oracle's venv, one process per GPU (SGLang
    reads the faked GPU once, at import), and return every case's result in GPU order."""
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "cases.json")
        json.dump(cases, open(path, "w"))
        for gpu in gpus:
            out = os.path.join(tmp, f"{gpu}.json")
            subprocess.run([os.path.join(venv, "bin/python"), str(ROOT / "tools/sglang_oracle" / script),
                            oracle, path, gpu, out], check=True)
            results += json.load(open(out))
    return results


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", required=True)
    ap.add_argument("--venv", required=True)
    ap.add_argument("--gpus", default=",".join(GPUS))
    ap.add_argument("--corpus", action="store_true", help="also every other corpus config at TP 1 and 8")
    ap.add_argument("--models", help="only these models (comma-separated): their cases are replaced, the rest kept")
    a = ap.parse_args()
    gpus = a.gpus.split(",")
    cases = build_cases(gpus, corpus=a.corpus)
    if a.models:
        only = set(a.models.split(","))
        cases = [c for c in cases if c["model"] in only]
    by_id = {c["id"]: c for c in cases}
    old = json.loads(OUT.read_text())["cases"] if OUT.exists() else []
    kept = [c for c in old if c["id"] not in by_id] if a.models else [c for c in old if c["gpu"] not in gpus]
    new = [compact(by_id[r["id"]], r) for r in run_batches("batch.py", a.venv, a.oracle, cases, gpus)]
    doc = {"source": "SGLang 0.5.23 (PyPI wheel) run by /work/shared/tools/sglang-oracle with faked GPUs; "
                     "regenerate: python tools/sglang_oracle/regen.py --oracle DIR --venv VENV",
           "sglang_version": "0.5.23", "cases": _merged(old, new) if a.models else kept + new}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(kept + new)} cases -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
