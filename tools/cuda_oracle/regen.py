#!/usr/bin/env python3
"""Regenerate tests/fixtures/oracle-cuda/*.json from vLLM 0.33's own KV planner with CUDA rules.

Dev tool only: kvplan, its tests and CI never run it (the CUDA-oracle venv is 4 GB). Stdlib only.
It writes one JOBS.jsonl per (GPU, oracle flavour) for the shared vllm-cuda-oracle kit's
``golden_server.py`` and runs it with the oracle venv's python through ``hooked_server.py`` (which adds
read-only hooks: per-layer backend and spec, scheduler-group layer names, vLLM's own log line).
Then it writes one trimmed golden per case, ``index.json`` and ``FAILURES.md``.
See tests/fixtures/oracle-cuda/README.md.

    python tools/cuda_oracle/regen.py --python /tmp/vllm033/venv/bin/python \\
        --oracle-dir /path/to/vllm-cuda-oracle --raw-dir /tmp/cuda_goldraw \\
        [--set configs|extra|corpus|all] [--only SUBSTRING ...] [-j 2] [--watch-corpus]
        [--from-raw] [--list]

A case whose oracle run fails for the oracle's own reasons (crash, import error of a stubbed
kernel library, ...) is retried once with golden_server.py ``--extra`` (fake_cuda_extra.py).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from golden_json import dumps, layer_index, ranges  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "fixtures" / "configs"
CORPUS = ROOT / "tests" / "fixtures" / "corpus" / "configs"
CORPUS_DONE = ROOT / "tests" / "fixtures" / "corpus" / ".done"
OUT = ROOT / "tests" / "fixtures" / "oracle-cuda"
HOOKED_SERVER = Path(__file__).resolve().parent / "hooked_server.py"
HOOK_MARK = "KVPLAN_HOOK_JSON "
GOLDEN_FORMAT = 1
KV_20GIB = 21474836480


@dataclass(frozen=True)
class Case:
    config: str  # folder name under tests/fixtures/configs or tests/fixtures/corpus/configs
    variant: str
    gpu: str  # golden_server.py --gpu key
    args: tuple[str, ...] = ()  # cuda_oracle.py options besides MODEL_DIR, --gpu, --kv-cache-memory-bytes
    source: str = "configs"  # "configs" | "corpus"
    ext: bool = False  # run through cuda_oracle_ext.py (draft models, DCP group)
    why: str = ""
    set: str = "configs"  # "configs" | "extra" | "corpus" | "dsv4"
    kv_bytes: int = KV_20GIB

    @property
    def name(self) -> str:
        return f"{self.config}__{self.variant}"

    @property
    def config_dir(self) -> Path:
        return (CONFIGS if self.source == "configs" else CORPUS) / self.config

    def argv(self) -> list[str]:
        return [str(self.config_dir), "--kv-cache-memory-bytes", str(self.kv_bytes), *self.args]

    @property
    def late_stubs(self) -> tuple[str, ...]:
        """Import stubs hooked_server.py installs in the child on the --extra retry (KVPLAN_ORACLE_LATE_STUBS):
        DeepSeek-V4's layers import the CuTe-DSL packages (cutlass, quack) when they are built."""
        try:
            cfg = json.loads((self.config_dir / "config.json").read_text())
        except (OSError, ValueError):
            return ()
        return DSV4_LATE_STUBS if cfg.get("model_type") == "deepseek_v4" else ()


# --------------------------------------------------------------------------------- case matrix
VARIANTS: list[tuple[str, str, tuple[str, ...], str]] = [
    ("h100", "h100", (), "H100 80GB, vLLM serve defaults"),
    ("b200", "b200", (), "B200 (SM100), vLLM serve defaults"),
    ("a100", "a100-80", (), "A100-SXM4-80GB (SM80), vLLM serve defaults"),
    ("h100-fp8", "h100", ("--kv-cache-dtype", "fp8"), "H100, fp8 KV cache"),
    ("h100-tp2", "h100", ("--tp", "2"), "H100, tensor parallel 2"),
]


def config_folders(root: Path) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "config.json").is_file())


def matrix(folders: list[str], source: str) -> list[Case]:
    return [Case(f, v, gpu, args, source=source, why=why, set=source)
            for f in folders for v, gpu, args, why in VARIANTS]


def ea(key: str, value: object) -> tuple[str, str]:
    return ("--engine-arg", f"{key}={json.dumps(value, separators=(',', ':'))}")


def extra_cases() -> list[Case]:
    ds3 = "deepseek-ai--DeepSeek-V3"
    qn = "Qwen--Qwen3-Next-80B-A3B-Instruct"
    q30 = "Qwen--Qwen3-30B-A3B"
    l8 = "meta-llama--Meta-Llama-3.1-8B"
    cases: list[Case] = []
    for gpu in ("h100", "h200"):
        base = ("--tp", "8", "--max-model-len", "8192")
        for suffix, more, why in [
            ("", (), "MLA at TP8 (latent replicated), 8k context"),
            ("-mtp1", ea("speculative_config", {"method": "mtp", "num_speculative_tokens": 1}),
             "MTP draft layer (1 speculative token)"),
            ("-mtp3", ea("speculative_config", {"method": "mtp", "num_speculative_tokens": 3}),
             "MTP draft layer (3 speculative tokens)"),
            ("-dcp2", ea("decode_context_parallel_size", 2), "decode context parallel 2"),
            ("-dcp8", ea("decode_context_parallel_size", 8), "decode context parallel 8"),
        ]:
            cases.append(Case(ds3, f"{gpu}-tp8-mml8192{suffix}", gpu, base + more, ext=True,
                              why=why, set="extra"))
    # Qwen3-Next + MTP. The 63.2x -> 51.9x -> 42.4x of the reference comes from TP1 with
    # --max-model-len 8192 (1517 blocks / 24, 1401 / 27, 1401 / 33 blocks per request);
    # TP2/TP4 at 32k are kept too.
    for tp, mml in ((1, 8192), (2, 32768), (4, 32768)):
        base = (("--tp", str(tp)) if tp > 1 else ()) + ("--max-model-len", str(mml))
        for suffix, more, why in [
            ("", (), f"GDN hybrid, {mml // 1024}k context"),
            ("-mtp1", ea("speculative_config", {"method": "mtp", "num_speculative_tokens": 1}),
             "MTP 1: speculative blocks in the GDN state + draft attention layer"),
            ("-mtp3", ea("speculative_config", {"method": "mtp", "num_speculative_tokens": 3}),
             "MTP 3"),
        ]:
            cases.append(Case(qn, f"h100-tp{tp}-mml{mml}{suffix}", "h100", base + more, ext=True,
                              why=why, set="extra"))
    yarn = {"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                             "original_max_position_embeddings": 32768},
            "max_position_embeddings": 131072}
    cases.append(Case(q30, "h100-yarn-mml131072", "h100",
                      ("--max-model-len", "131072") + ea("hf_overrides", yarn),
                      why="YaRN x4 through hf_overrides, 128k context", set="extra"))
    cases.append(Case(l8, "h100-lora4-r64", "h100",
                      ea("enable_lora", True) + ea("max_loras", 4) + ea("max_lora_rank", 64),
                      why="LoRA on (4 adapters, rank 64): the KV plan only; LoRA weights and "
                          "activations change the memory profile, which this oracle does not measure",
                      set="extra"))
    cases.append(Case(q30, "h100-tp2-ep", "h100", ("--tp", "2") + ea("enable_expert_parallel", True),
                      why="expert parallel on, TP2 (EP does not change the KV plan)", set="extra"))
    # Issue 22: a multimodal prefix LM whose head size the composite backends (TRITON_FLASHINFER on SM10x,
    # TRITON_FLASH_ATTN on SM90: head_sizes 256, 512) refuse; no real gemma-3 config with 128-wide heads
    # (gemma-3-27b) was found in the indexed sources, so gemma-3-4b-it's own config gets head_dim 128.
    g3 = "google--gemma-3-4b-it"
    for gpu in ("b200", "h100"):
        cases.append(Case(g3, f"{gpu}-hd128", gpu, ea("hf_overrides", {"text_config": {"head_dim": 128}}),
                          why="mm-prefix LM with head_dim 128 (hf_overrides): the composite backend refuses "
                              "that head size, vLLM takes the next backend of its priority list",
                          set="extra"))
    # Issue 22: a DeepSeek-V2 config with zero qk_nope_head_dim / qk_rope_head_dim is built as plain MHA
    # (deepseek_v2.py:DeepseekV2DecoderLayer, DeepseekAttention). DeepSeek-OCR's language model is one, but its
    # vLLM class needs the tokenizer, which the fixture folder has not; DeepSeek-V2-Lite's own config gets the
    # zero dims instead (its kv_lora_rank kept: transformers 5.19's strict DeepseekV2Config refuses a null one,
    # which only vLLM's DeepseekVLV2TextConfig allows).
    cases.append(Case("deepseek-ai--DeepSeek-V2-Lite", "h100-mha-latent", "h100",
                      ea("hf_overrides", {"qk_nope_head_dim": 0, "qk_rope_head_dim": 0}),
                      why="DeepSeek-V2 with qk_nope_head_dim = qk_rope_head_dim = 0 (hf_overrides): "
                          "DeepseekAttention", set="extra"))
    return cases


DSV4_LATE_STUBS = ("cutlass", "quack")
# Issue 22: DeepSeek-V4 Flash and Pro on the GPUs people serve them on, at the TP sizes they use, both KV dtypes.
DSV4_CONFIGS = ("deepseek-ai--DeepSeek-V4-Flash", "deepseek-ai--DeepSeek-V4-Pro")


def dsv4_cases() -> list[Case]:
    cases: list[Case] = []
    for cfg in DSV4_CONFIGS:
        for gpu in ("h100", "h200", "b200"):
            for tp in (2, 4, 8):
                for kv in ("auto", "fp8"):
                    args: tuple[str, ...] = ("--tp", str(tp))
                    if kv != "auto":
                        args += ("--kv-cache-dtype", kv)
                    cases.append(Case(cfg, f"{gpu}-tp{tp}" + ("-fp8" if kv != "auto" else ""), gpu, args,
                                      source="corpus", why=f"{gpu.upper()}, tensor parallel {tp}, {kv} KV cache",
                                      set="dsv4"))
        for n in (1, 3):  # the checkpoint's MTP layer (num_nextn_predict_layers 1) as the draft
            cases.append(Case(cfg, f"h200-tp2-mtp{n}", "h200",
                              ("--tp", "2") + ea("speculative_config", {"method": "mtp", "num_speculative_tokens": n}),
                              source="corpus", ext=True, why=f"H200, TP 2, MTP draft layer ({n} speculative tokens)",
                              set="dsv4"))
    return cases


def all_cases(sets: set[str]) -> list[Case]:
    cases: list[Case] = []
    if "configs" in sets:
        cases += matrix(config_folders(CONFIGS), "configs")
    if "extra" in sets:
        cases += extra_cases()
    if "corpus" in sets:
        taken = set(config_folders(CONFIGS))
        cases += matrix([f for f in config_folders(CORPUS) if f not in taken], "corpus")
    if "dsv4" in sets:
        names = {c.name for c in cases}
        cases += [c for c in dsv4_cases() if c.name not in names]
    return cases


def corpus_duplicates() -> list[str]:
    return sorted(set(config_folders(CORPUS)) & set(config_folders(CONFIGS)))


# --------------------------------------------------------------------------------- trimming
def layer_prefix(name: str) -> str | None:
    m = re.search(r"\.(\d+)\.", name)
    return name[:m.start()] if m else None


def layers_field(names: list[str]) -> str | dict[str, str] | list[str]:
    """Layer names -> "0-4,6" (index ranges); {"model.layers": "3,7", "mtp.layers": "0"} when the
    layers come from more than one stack (e.g. a speculative draft); the names when not indexed."""
    by_prefix: dict[str, list[int]] = {}
    for n in names:
        p, i = layer_prefix(n), layer_index(n)
        if p is None or i is None:
            return names
        by_prefix.setdefault(p, []).append(i)
    if any(len(set(v)) != len(v) for v in by_prefix.values()):
        return names
    if len(by_prefix) == 1:
        return ranges(next(iter(by_prefix.values())))
    return {p: ranges(v) for p, v in by_prefix.items()}


SPEC_DROP = {"is_draft_layer", "uniform_layers"}


def trim_spec(sp: dict) -> dict:
    g = {k: v for k, v in sp.items() if v is not None and k not in SPEC_DROP}
    if g.get("real_page_size_bytes") == g.get("page_size_bytes"):
        g.pop("real_page_size_bytes", None)
    if "shapes" in g:  # MambaSpec: one fixed state per request (per layer)
        g["state_bytes_per_request_per_layer"] = sp.get("real_page_size_bytes", sp.get("page_size_bytes"))
    elif g.get("block_size"):
        b = (sp.get("real_page_size_bytes") or g["page_size_bytes"]) / g["block_size"]
        g["bytes_per_token_per_layer"] = int(b) if b == int(b) else b
    return g


def spec_groups_from_hook(per_layer: dict[str, dict]) -> list[dict]:
    groups: dict[str, dict] = {}
    for name, sp in per_layer.items():
        g = trim_spec(sp)
        key = json.dumps(g, sort_keys=True)
        groups.setdefault(key, {"names": [], "g": g})["names"].append(name)
    out = []
    for v in groups.values():
        names, g = v["names"], v["g"]
        backend = g.pop("backend", None)
        out.append({"num_layers": len(names), "layers": layers_field(names),
                    "first_layer_name": names[0], "backend": backend, **g})
    return out


def split_error(text: str) -> dict:
    typ, _, msg = text.partition(": ")
    if not re.fullmatch(r"[A-Za-z_][\w.]*", typ or ""):
        typ, msg = None, text
    return {"error_type": typ, "error_message": msg}


def parse_refusal(text: str) -> dict:
    d: dict = {"refused": True, **split_error(text)}
    m = re.search(r"estimated maximum model length is (\d+)", text)
    d["estimated_max_model_len"] = int(m.group(1)) if m else None
    m = re.search(r"max seq len \((\d+)\), \(([\d.]+) GiB KV cache is needed.*?memory \(([\d.]+) GiB\)",
                  text)
    if m:
        d["refusal_max_model_len"] = int(m.group(1))
        d["needed_gib_text"], d["available_gib_text"] = m.group(2), m.group(3)
    return d


ORACLE_ERROR_TYPES = {"ImportError", "ModuleNotFoundError", "AttributeError", "TypeError",
                      "NameError", "KeyError", "IndexError", "AssertionError", "RecursionError",
                      "OSError", "FileNotFoundError", "UnboundLocalError"}
ORACLE_ERROR_WORDS = ("fake_cuda", "_Stub", "_Perm", "CUDA kernel", "torch.ops.", "meta tensor",
                      "Cannot copy out of meta tensor", "libcuda", "nvidia-smi", "NVML",
                      "No module named",
                      # a GPU install vendors DeepGEMM (the stubbed extension fails to import here)
                      "requires DeepGEMM support in the current vLLM environment",
                      # the fixtures are config.json only: no processor/tokenizer files to load
                      "Failed to load the processor")


def is_oracle_error(text: str, trace: str = "") -> bool:
    """True when the failure is this oracle's (stubs, missing kernel libraries, fake devices), not
    vLLM refusing the deployment. Heuristic; every non-answer is listed in FAILURES.md/README."""
    typ = split_error(text)["error_type"] or ""
    if typ in ORACLE_ERROR_TYPES:
        return True
    blob = text + "\n" + trace
    return any(w in blob for w in ORACLE_ERROR_WORDS)


def read_hook(log_path: Path) -> tuple[dict, str]:
    hook: dict = {}
    tail = ""
    if log_path.exists():
        lines = log_path.read_text(errors="replace").splitlines()
        for ln in lines:
            if ln.startswith(HOOK_MARK):
                try:
                    hook = json.loads(ln[len(HOOK_MARK):])
                except json.JSONDecodeError:
                    pass
        other = [ln for ln in lines if ln.strip() and not ln.startswith(HOOK_MARK)]
        tail = "\n".join(other[-12:])
    return hook, tail


def classify(raw: dict | None) -> str:
    """answered | refused | config_refused | build_refused | oracle_failure"""
    if not raw or "crash" in raw:
        return "oracle_failure"
    if "error" in raw:
        return "oracle_failure" if is_oracle_error(raw["error"]) else "config_refused"
    plan = raw.get("plan") or {}
    if "error" in plan:
        return "oracle_failure" if is_oracle_error(plan["error"], plan.get("trace", "")) \
            else "build_refused"
    kc = plan.get("kv_cache_config")
    if kc is None:
        return "oracle_failure"
    if "error" in kc:
        return "oracle_failure" if is_oracle_error(kc["error"]) else "refused"
    return "answered"


def short_error(text: str) -> str:
    """One line for an error: pydantic's "Value error, ..." line, else the last non-empty line."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("Value error, "):
            return ln[len("Value error, "):].split(" [type=")[0][:500]
    return (lines[-1] if lines else "")[:500]


def last_line(raw: dict | None, log_tail: str) -> str:
    if raw and "error" in raw:
        return short_error(raw["error"])
    plan = (raw or {}).get("plan") or {}
    if "error" in plan:
        return short_error(plan["error"])
    kc = plan.get("kv_cache_config") or {}
    if "error" in kc:
        return short_error(kc["error"])
    lines = [ln for ln in log_tail.splitlines() if ln.strip()]
    pre = f"crash rc={raw['crash']}: " if raw and "crash" in raw else ""
    return pre + (lines[-1][:500] if lines else "(no output)")


def engine_args(case: Case) -> dict:
    out: dict = {}
    a = list(case.args)
    for i, x in enumerate(a):
        if x == "--engine-arg" and i + 1 < len(a):
            k, _, v = a[i + 1].partition("=")
            try:
                out[k] = json.loads(v)
            except json.JSONDecodeError:
                out[k] = v
    return out


def trim(raw: dict, hook: dict, case: Case, status: str, extra_used: bool, log_tail: str) -> dict:
    req = raw.get("request") or {}
    cfg = raw.get("config") or {}
    plan = raw.get("plan") or {}
    facts = hook.get("facts") or {}
    g: dict = {
        "format": GOLDEN_FORMAT,
        "case": case.name,
        "why": case.why or None,
        "status": status,
        "model": {"config_dir": case.config,
                  "source": str(case.config_dir.parent.relative_to(ROOT)),
                  "hf_id": case.config.replace("--", "/", 1)},
        "oracle": {
            "tool": "vllm-cuda-oracle " + ("cuda_oracle_ext.py" if case.ext else "cuda_oracle.py")
                    + " via golden_server.py (tools/cuda_oracle/hooked_server.py)",
            "fake_cuda_extra": extra_used,
            **({"late_stubs": list(case.late_stubs)} if extra_used and case.late_stubs else {}),
            "vllm_version": raw.get("vllm_version"),
            "torch_version": raw.get("torch_version"),
            "device_name": raw.get("device_name"),
            "capability": raw.get("capability"),
            "nvml_total": raw.get("nvml_total"),
        },
        "inputs": {
            "gpu": case.gpu,
            "oracle_args": ["--kv-cache-memory-bytes", str(case.kv_bytes), *case.args],
            "tensor_parallel_size": req.get("tp"),
            "pipeline_parallel_size": req.get("pp"),
            "kv_cache_dtype": req.get("kv_cache_dtype"),
            "kv_cache_memory_bytes": req.get("kv_cache_memory_bytes"),
            "max_model_len": req.get("max_model_len"),
            "block_size": req.get("block_size"),
            "max_num_batched_tokens": req.get("max_num_batched_tokens"),
            "max_num_seqs": req.get("max_num_seqs"),
            "usage_context": req.get("usage_context"),
            "engine_args": engine_args(case),
        },
    }
    if "error" in raw:
        key = "oracle_failure" if status == "oracle_failure" else "config_error"
        g[key] = split_error(raw["error"])
        return g
    r0 = (plan.get("per_pp_rank") or [{}])[0]
    g["resolved"] = {
        "model_class": r0.get("model_class"),
        "architectures": facts.get("architectures"),
        "quantization": facts.get("quantization"),
        "dtype": cfg.get("dtype"),
        "cache_dtype": cfg.get("cache_dtype"),
        "max_model_len": cfg.get("max_model_len"),
        "block_size_initial": cfg.get("block_size_initial"),
        "user_specified_block_size": cfg.get("user_specified_block_size"),
        "block_size_before_backend_update": plan.get("block_size_before_backend_update"),
        "block_size": plan.get("block_size"),
        "mamba_block_size": plan.get("mamba_block_size"),
        "mamba_page_size_padded": plan.get("mamba_page_size_padded"),
        "max_num_batched_tokens": cfg.get("max_num_batched_tokens"),
        "max_num_seqs": cfg.get("max_num_seqs"),
        "async_scheduling": cfg.get("async_scheduling"),
        "use_v2_model_runner": cfg.get("use_v2_model_runner"),
        "max_concurrent_batches": cfg.get("max_concurrent_batches"),
        "max_in_flight_tokens": cfg.get("max_in_flight_tokens"),
        "enable_prefix_caching": cfg.get("enable_prefix_caching"),
        "enable_chunked_prefill": facts.get("enable_chunked_prefill"),
        "mamba_cache_mode": cfg.get("mamba_cache_mode"),
        "mamba_cache_dtype": facts.get("mamba_cache_dtype"),
        "mamba_ssm_cache_dtype": cfg.get("mamba_ssm_cache_dtype"),
        "use_mla": cfg.get("use_mla"),
        "is_hybrid": cfg.get("is_hybrid"),
        "speculative_method": facts.get("speculative_method"),
        "num_speculative_tokens": facts.get("num_speculative_tokens"),
        "decode_context_parallel_size": facts.get("decode_context_parallel_size"),
        "enable_expert_parallel": facts.get("enable_expert_parallel"),
        "lora": facts.get("lora"),
        "attn_backends": plan.get("attn_backends"),
        "kv_cache_layout": plan.get("kv_cache_layout"),
    }
    if "error" in plan:
        key = "oracle_failure" if status == "oracle_failure" else "build_error"
        g[key] = split_error(plan["error"].strip())
        if status == "oracle_failure":
            g[key]["trace_tail"] = (plan.get("trace") or "").strip().splitlines()[-6:]
        return g
    hook_ranks = hook.get("per_pp_rank") or []
    ranks = []
    for i, pr in enumerate(plan.get("per_pp_rank") or []):
        if i < len(hook_ranks):
            sgs = spec_groups_from_hook(hook_ranks[i]["per_layer"])
            shared = hook_ranks[i].get("kv_sharing") or {}
        else:
            sgs = [dict(x) for x in pr.get("spec_groups") or []]
            shared = {}
        row = {"pp_rank": pr.get("pp_rank"), "model_class": pr.get("model_class"),
               "num_kv_cache_layers": pr.get("num_kv_cache_layers"), "spec_groups": sgs}
        if shared:
            row["kv_sharing_layers"] = len(shared)
        ranks.append(row)
    g["per_pp_rank"] = ranks
    kc = plan.get("kv_cache_config")
    if kc is None:
        return g
    if "error" in kc:
        if status == "oracle_failure":
            g["oracle_failure"] = split_error(kc["error"])
        else:
            g["kv_cache"] = parse_refusal(kc["error"])
        return g
    backend_of: dict[str, str] = {}
    for hr in hook_ranks:
        for n, sp in hr["per_layer"].items():
            backend_of[n] = sp.get("backend")
    hgroups = hook.get("scheduler_groups") or []
    groups = []
    for i, x in enumerate(kc.get("groups") or []):
        row = dict(x)
        if i < len(hgroups):
            names = hgroups[i]["layer_names"]
            row["layers"] = layers_field(names)
            row["backends"] = sorted({str(backend_of.get(n)) for n in names})
            sp = hgroups[i]["spec"]
            for k in ("sliding_window", "attention_chunk_size", "is_draft"):
                if sp.get(k):
                    row[k] = sp[k]
        groups.append(row)
    g["kv_cache"] = {
        "refused": False,
        "num_blocks": kc["num_blocks"],
        "tokens": kc["kv_cache_size_tokens"],
        "max_concurrency": kc["max_concurrency"],
        "max_model_len": kc["max_model_len"],
        "max_model_len_before": kc.get("max_model_len_before"),
        "blocks_per_request": kc.get("blocks_per_request"),
        "log_line": hook.get("vllm_log_line") or kc.get("log_line"),
        "log_line_source": "vllm update_kv_cache_capacity" if hook.get("vllm_log_line")
                           else "cuda_oracle.py (vLLM's format)",
        "num_kv_cache_tensors_worker0": hook.get("num_kv_cache_tensors_worker0"),
        "kv_cache_tensor_bytes_worker0": hook.get("kv_cache_tensor_bytes_worker0"),
        "groups": groups,
    }
    return g


def summary_row(g: dict) -> dict:
    res = g.get("resolved") or {}
    kc = g.get("kv_cache") or {}
    row: dict = {"file": g["case"] + ".json", "status": g["status"], "gpu": g["inputs"]["gpu"],
                 "args": g["inputs"]["oracle_args"][2:],
                 "block_size": res.get("block_size"), "cache_dtype": res.get("cache_dtype"),
                 "max_model_len": res.get("max_model_len"),
                 "max_in_flight_tokens": res.get("max_in_flight_tokens")}
    if res.get("attn_backends"):
        row["attn_backends"] = res["attn_backends"]
    if kc.get("refused"):
        row["estimated_max_model_len"] = kc.get("estimated_max_model_len")
    elif kc:
        row.update(num_blocks=kc["num_blocks"], tokens=kc["tokens"],
                   max_concurrency=round(kc["max_concurrency"], 4))
    for k in ("config_error", "build_error", "oracle_failure"):
        if k in g:
            row[k] = f"{g[k].get('error_type')}: {short_error(g[k].get('error_message') or '')}"[:300]
    if g["oracle"].get("fake_cuda_extra"):
        row["fake_cuda_extra"] = True
    return {k: v for k, v in row.items() if v is not None}


# --------------------------------------------------------------------------------- running
@dataclass
class Runner:
    python: str
    oracle_dir: str
    oracle_home: str
    raw_dir: Path
    jobs: int
    timeout: int
    log: list[str] = field(default_factory=list)

    def raw_path(self, case: Case, extra: bool) -> Path:
        return self.raw_dir / f"{case.name}{'__extra' if extra else ''}.json"

    def run(self, cases: list[Case], extra: bool) -> None:
        groups: dict[tuple[str, bool, tuple[str, ...]], list[Case]] = {}
        for c in cases:
            groups.setdefault((c.gpu, c.ext, c.late_stubs if extra else ()), []).append(c)
        for (gpu, ext, stubs), cs in groups.items():
            todo = [c for c in cs if not (self.raw_path(c, extra).exists()
                                          and self.raw_path(c, extra).stat().st_size > 0)]
            if not todo:
                continue
            tag = f"{gpu}{'-ext' if ext else ''}{'-extra' if extra else ''}{'-stubs' if stubs else ''}"
            jobs_file = self.raw_dir / f"JOBS.{tag}.jsonl"
            with jobs_file.open("w") as f:
                for c in todo:
                    f.write(json.dumps({"id": c.name, "out": str(self.raw_path(c, extra)),
                                        "argv": c.argv()}) + "\n")
            cmd = [self.python, str(HOOKED_SERVER), "--oracle-dir", self.oracle_dir, "--",
                   "--gpu", gpu, "--jobs", str(jobs_file), "-j", str(self.jobs),
                   "--timeout", str(self.timeout)]
            if extra:
                cmd.append("--extra")
            if ext:
                cmd.append("--ext")
            env = dict(os.environ, CUDA_ORACLE_HOME=self.oracle_home)
            if stubs:
                env["KVPLAN_ORACLE_LATE_STUBS"] = ",".join(stubs)
            t = time.time()
            print(f"[regen] {tag}: {len(todo)} jobs", file=sys.stderr, flush=True)
            p = subprocess.run(cmd, env=env, cwd=str(self.raw_dir), capture_output=True, text=True)
            (self.raw_dir / f"server.{tag}.{int(t)}.log").write_text(p.stderr + p.stdout)
            print(f"[regen] {tag}: rc={p.returncode} {time.time() - t:.0f}s", file=sys.stderr,
                  flush=True)
            for c in todo:  # a server that died leaves no file: mark the case as a crash
                rp = self.raw_path(c, extra)
                if not rp.exists() or rp.stat().st_size == 0:
                    rp.write_text(json.dumps({"crash": f"server rc={p.returncode}"}))


def load_raw(path: Path) -> tuple[dict | None, dict, str]:
    if not path.exists():
        return None, {}, ""
    try:
        raw = json.loads(path.read_text() or "null")
    except json.JSONDecodeError:
        raw = {"crash": "unparsable output"}
    hook, tail = read_hook(path.with_suffix(".log"))
    return raw, hook, tail


def process(cases: list[Case], runner: Runner | None, raw_dir: Path,
            failures: dict[str, dict]) -> dict[str, int]:
    """Run (unless --from-raw), retry oracle failures once with --extra, write the goldens."""
    if runner:
        runner.run(cases, extra=False)
    first = {c.name: load_raw(raw_dir / f"{c.name}.json") for c in cases}
    retry = [c for c in cases if classify(first[c.name][0]) == "oracle_failure"]
    if runner and retry:
        runner.run(retry, extra=True)
    counts: dict[str, int] = {}
    for c in cases:
        raw, hook, tail = first[c.name]
        if raw is None:
            continue
        status = classify(raw)
        extra_used = False
        if status == "oracle_failure":
            fail = {"case": c.name, "error": last_line(raw, tail), "extra": None}
            raw2, hook2, tail2 = load_raw(raw_dir / f"{c.name}__extra.json")
            if raw2 is not None:
                st2 = classify(raw2)
                fail["extra"] = "ok (" + st2 + ")" if st2 != "oracle_failure" \
                    else "failed: " + last_line(raw2, tail2)
                if st2 != "oracle_failure":
                    raw, hook, tail, status, extra_used = raw2, hook2, tail2, st2, True
            failures[c.name] = fail
        g = trim(raw, hook, c, status, extra_used, tail)
        if status == "oracle_failure" and "oracle_failure" not in g:
            g["oracle_failure"] = {"error_type": None, "error_message": last_line(raw, tail)}
        if c.name in failures:
            g["oracle"]["first_run_failure"] = failures[c.name]["error"]
            g["oracle"]["extra_retry"] = failures[c.name]["extra"] or "not run"
        (OUT / f"{c.name}.json").write_text(dumps(g) + "\n")
        counts[status] = counts.get(status, 0) + 1
    return counts


def write_index() -> None:
    index = {}
    for p in sorted(OUT.glob("*__*.json")):
        g = json.loads(p.read_text())
        index[g["case"]] = {"set": None, **summary_row(g)}
    known = {c.name: c for c in all_cases({"configs", "extra", "corpus", "dsv4"})}
    for k, row in index.items():
        row["set"] = known[k].set if k in known else "?"
    (OUT / "index.json").write_text(dumps(index) + "\n")
    # FAILURES.md: every case whose first oracle run failed for the oracle's reasons
    lines = ["# CUDA-oracle failures", "",
             "Cases where the oracle itself failed (a stub, a kernel library this CPU machine lacks, a",
             "crash), as opposed to vLLM refusing the deployment. Each was retried once with",
             "`golden_server.py --extra` (fake_cuda_extra.py); a case the retry answered has a normal",
             "golden (with `oracle.fake_cuda_extra: true`). Written by `tools/cuda_oracle/regen.py`.",
             "", "| case | first run: error (last line) | `--extra` retry |", "|---|---|---|"]
    n = 0
    for k, row in index.items():
        o = json.loads((OUT / row["file"]).read_text())["oracle"]
        if "first_run_failure" in o:
            n += 1
            cells = [str(o["first_run_failure"]), str(o.get("extra_retry"))]
            cells = [x.replace("|", "\\|").replace("\n", " ") for x in cells]
            lines.append(f"| `{k}` | {cells[0]} | {cells[1]} |")
    if not n:
        lines.append("| (none) | | |")
    (OUT / "FAILURES.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", help="python of the CUDA-oracle venv (setup_venv.sh DIR -> DIR/venv/bin/python)")
    ap.add_argument("--oracle-dir", help="folder of the vllm-cuda-oracle kit (golden_server.py)")
    ap.add_argument("--oracle-home", default=None,
                    help="CUDA_ORACLE_HOME (vLLM caches); default: the venv's parent folder")
    ap.add_argument("--raw-dir", required=False, default=None,
                    help="raw oracle JSON + logs (required unless --list); reused: existing outputs are skipped")
    ap.add_argument("--set", action="append", choices=["configs", "extra", "corpus", "dsv4", "all"],
                    default=None, help="case sets (default: configs and extra)")
    ap.add_argument("--only", action="append", default=[], help="case-name substring")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="golden_server.py -j (at most 2)")
    ap.add_argument("--timeout", type=int, default=400, help="per-case timeout (golden_server.py)")
    ap.add_argument("--from-raw", action="store_true", help="only re-trim what --raw-dir holds")
    ap.add_argument("--force", action="store_true", help="delete the selected cases' raw outputs first")
    ap.add_argument("--watch-corpus", action="store_true",
                    help="after the run, poll the corpus every --poll s until its .done exists and "
                         "every corpus folder is processed")
    ap.add_argument("--poll", type=int, default=120)
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    sets = set(a.set or ["configs", "extra"])
    if "all" in sets:
        sets = {"configs", "extra", "corpus", "dsv4"}
    if a.watch_corpus:
        sets.add("corpus")

    def select() -> list[Case]:
        return [c for c in all_cases(sets) if not a.only or any(s in c.name for s in a.only)]

    if a.list:
        for c in select():
            print(c.name, c.gpu, "ext" if c.ext else "", " ".join(c.args))
        return 0
    if not a.raw_dir:
        ap.error("give --raw-dir")
    raw_dir = Path(a.raw_dir).resolve()
    raw_dir.mkdir(parents=True, exist_ok=True)
    OUT.mkdir(parents=True, exist_ok=True)
    runner = None
    if not a.from_raw:
        if not a.python or not a.oracle_dir:
            ap.error("give --python and --oracle-dir (or --from-raw)")
        if a.jobs > 2:
            ap.error("-j is at most 2 (the oracle's memory)")
        # setup_venv.sh DIR puts the python at DIR/venv/bin/python; vLLM's caches live under DIR
        home = a.oracle_home or str(Path(a.python).absolute().parent.parent.parent)
        runner = Runner(a.python, str(Path(a.oracle_dir).resolve()), home, raw_dir, a.jobs,
                        a.timeout)
    failures: dict[str, dict] = {}
    done: set[str] = set()
    while True:
        cases = [c for c in select() if c.name not in done]
        if a.force:
            for c in cases:
                for suf in ("", "__extra"):
                    for ext in (".json", ".log"):
                        (raw_dir / f"{c.name}{suf}{ext}").unlink(missing_ok=True)
        if cases:
            counts = process(cases, runner, raw_dir, failures)
            print(f"[regen] {len(cases)} cases: {counts}", file=sys.stderr, flush=True)
            done |= {c.name for c in cases}
            write_index()
        dups = corpus_duplicates()
        if dups and "corpus" in sets:
            print(f"[regen] corpus folders also in configs/ (skipped): {dups}", file=sys.stderr)
        if not a.watch_corpus:
            break
        finished = CORPUS_DONE.exists()
        pending = [c for c in select() if c.name not in done]
        if finished and not pending:
            break
        time.sleep(a.poll)
    write_index()
    return 0


if __name__ == "__main__":
    sys.exit(main())
