"""kvplan against vLLM 0.33's own KV planner: the oracle goldens' pass rule, in one place for the tests
(test_cuda_golden.py, test_rocm.py) and the coverage counts (benchmarks/coverage.py, coverage_rocm.py).

Every golden is one config × GPU × settings case that vLLM's code answered (blocks, tokens, concurrency, block
size, attention backend), refused with its own error, or refused at config time: tests/fixtures/oracle-cuda/
(CUDA rules, made by tools/cuda_oracle/regen.py) and tests/fixtures/oracle-rocm/ (vLLM's `RocmPlatform`,
scripts/rocm_goldens.py). kvplan plans the same case through the library (`kvplan.fit`, what `kvplan fit` calls)
with `--kv-cache-memory-bytes` (the oracle's input) and each case lands in one class:

  exact             answered, and kvplan's num_blocks, attention block size and vLLM log line are equal (on ROCm,
                    the attention backend(s) too)
  refused-vllm      both refuse, and kvplan's message is vLLM's own reason (on ROCm, a capacity refusal after
                    planning also has vLLM's attention backend(s) and block size)
  refused-kvplan    kvplan refuses a case vLLM answers, or refuses with a reason that is not vLLM's (target: 0)
  wrong             kvplan answers with other numbers, or answers a case vLLM refuses
  not-modelled      the case sets an engine argument kvplan does not model: not judged, but counted
  oracle-failure    the oracle itself failed (FAILURES.md): no verdict to judge against, counted

`passes` is the rule: exact or refused-vllm.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kvplan
from kvplan.errors import KvplanError

ROOT = Path(__file__).resolve().parents[1]
CUDA_GOLDENS = ROOT / "tests" / "fixtures" / "oracle-cuda"
ROCM_GOLDENS = ROOT / "tests" / "fixtures" / "oracle-rocm"
CLASSES = ("exact", "refused-vllm", "refused-kvplan", "wrong", "not-modelled", "oracle-failure")
PASSING = frozenset({"exact", "refused-vllm"})
UNJUDGED = frozenset({"not-modelled", "oracle-failure"})
# The oracle's fake GPUs (vllm-cuda-oracle/fake_cuda.py, vllm-rocm-oracle) → kvplan's catalog ids.
GPU_IDS = {"h100": "h100-sxm", "h200": "h200", "b200": "b200", "a100-80": "a100-80gb-sxm",
           "mi300x": "mi300x", "mi325x": "mi325x", "mi355x": "mi355x"}
# Engine arguments of the goldens that kvplan models, passed to kvplan.fit by name; LoRA's are accepted but left
# out (LoRA leaves the KV plan as it is: its memory is not the oracle's to measure). Any other: not-modelled.
MODELLED_ARGS = frozenset({"speculative_config", "decode_context_parallel_size", "enable_expert_parallel",
                           "hf_overrides"})
UNMEASURED_ARGS = frozenset({"enable_lora", "max_loras", "max_lora_rank"})


@dataclass(frozen=True)
class Outcome:
    """One golden case judged: its class (CLASSES) and what differs, or vLLM's / kvplan's reason."""

    case: str
    family: str
    cls: str
    detail: str

    @property
    def judged(self) -> bool:
        """Whether the case has a verdict to hold kvplan to (not an oracle failure or an unmodelled flag)."""
        return self.cls not in UNJUDGED


def passes(outcome: Outcome) -> bool:
    """The pass rule: kvplan plans the case as vLLM does, or refuses it with vLLM's own reason."""
    return outcome.cls in PASSING


def goldens(folder: Path = CUDA_GOLDENS) -> list[dict[str, Any]]:
    """Every golden case of a folder, sorted by name (index.json excluded)."""
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*__*.json"))]


def _unmodelled(g: dict[str, Any], *, rocm: bool = False) -> list[str]:
    """The engine arguments of a case kvplan does not model (block_size and max_num_seqs are the oracle's; the ROCm
    oracle's --block-size is planned as `kvplan fit --block-size` plans it)."""
    inputs = g["inputs"]
    args = set(inputs.get("engine_args") or {}) - MODELLED_ARGS - UNMEASURED_ARGS
    oracle_flags = ("max_num_seqs",) if rocm else ("block_size", "max_num_seqs")
    return sorted(args | {k for k in oracle_flags if inputs.get(k)})


def _plan(g: dict[str, Any], *, rocm: bool) -> kvplan.FitReport:
    """kvplan's plan of a golden case through the library, as `kvplan fit … --kv-cache-memory-bytes` plans it."""
    inputs = g["inputs"]
    args = {k: v for k, v in (inputs.get("engine_args") or {}).items() if k in MODELLED_ARGS}
    extra: dict[str, Any] = {}
    environ: dict[str, str] = {}
    if rocm:
        extra["rocm_aiter"] = bool(inputs["aiter_installed"])
        if inputs.get("block_size"):
            extra["block_size"] = inputs["block_size"]
        extra["usage"] = inputs.get("usage_context") or "serve"
        if (inputs.get("env") or {}).get("VLLM_ROCM_USE_AITER") == "1":
            environ["VLLM_ROCM_USE_AITER"] = "1"
    model_dir = ROOT / str(g["model"]["source"]) / str(g["model"]["config_dir"])
    report = kvplan.fit(
        str(model_dir), GPU_IDS[str(inputs["gpu"])], advise=False, environ=environ, **args, **extra,
        tensor_parallel_size=inputs["tensor_parallel_size"], pipeline_parallel_size=inputs["pipeline_parallel_size"],
        kv_cache_dtype=inputs["kv_cache_dtype"], kv_cache_memory_bytes=inputs["kv_cache_memory_bytes"],
        max_model_len=inputs["max_model_len"], max_num_batched_tokens=inputs["max_num_batched_tokens"],
        weights_memory="0",  # the oracle builds the model on the meta device: no weights, no out-of-memory check
    )
    assert isinstance(report, kvplan.FitReport)
    return report


def vllm_message(g: dict[str, Any]) -> str:
    """vLLM's refusal of a case: at config time, while building the model, or planning the KV cache."""
    if g["status"] == "config_refused":
        return str(g["config_error"]["error_message"])
    if g["status"] == "build_refused":
        return str(g["build_error"]["error_message"])
    return str(g["kv_cache"]["error_message"])


# vLLM's refusals, by the words that say which one it is (vLLM 0.33: registry.py, config/model.py,
# transformers' dynamic_module_utils.py / AutoConfig, models/transformers/base.py, quantization/utils).
VLLM_REASONS = (
    "contains custom code which must be executed",
    "Should have a `model_type` key",
    "are not supported for now",
    "was supported in vLLM until",
    "does not dispatch through the Transformers attention interface",
    "Unknown quantization method",
    "No model architectures are specified",
    "GPTQ group activation ordering (desc_act=True) is no longer supported",
    "but Transformers does not recognize this architecture",
    "must be equal to the number of `layer_types`",
    "No valid attention backend found",
    "FP8 KV cache is not supported by the Triton",
)
# vLLM's ROCm refusals (platforms/rocm.py: get_attn_backend_cls, get_mla_prefill_backend_cls).
ROCM_REASONS = ("No valid attention backend found", "No valid MLA prefill backend found")


# The same refusal in other words: kvplan's TP check (model/parallel.py) and vLLM's (config/parallel.py:
# "Total number of attention heads (28) must be divisible by tensor parallel size (8)"), vLLM's only when both
# name the same head count and TP size.
_KVPLAN_TP = re.compile(r"--tensor-parallel-size (\d+) does not divide the (\d+) attention heads")
_VLLM_TP = re.compile(r"Total number of attention heads \((\d+)\) must be divisible by tensor parallel size \((\d+)\)")


def same_reason(kvplan_message: str, vllm_message: str, *, rocm: bool = False) -> bool:
    """kvplan states vLLM's reason: the same refusal by its key words, or vLLM's sentence itself."""
    reasons = (*ROCM_REASONS, *VLLM_REASONS) if rocm else VLLM_REASONS
    if any(r in kvplan_message and r in vllm_message for r in reasons):
        return True
    ours, theirs = _KVPLAN_TP.search(kvplan_message), _VLLM_TP.search(vllm_message)
    if ours and theirs and (ours.group(2), ours.group(1)) == theirs.groups():
        return True
    head = kvplan_message.split(" (vLLM")[0].split("; served by")[0].split(" (served")[0].rstrip(".")
    return head in vllm_message or vllm_message in kvplan_message


def _unjudged(g: dict[str, Any], case: str, family: str, *, rocm: bool = False) -> Outcome | None:
    if g["status"] == "oracle_failure":  # the oracle's own failure (FAILURES.md): no verdict
        return Outcome(case, family, "oracle-failure", "see FAILURES.md")
    flags = _unmodelled(g, rocm=rocm)
    if flags:
        return Outcome(case, family, "not-modelled", f"engine arguments kvplan does not model: {', '.join(flags)}")
    return None


def classify(g: dict[str, Any]) -> Outcome:
    """The class of one CUDA golden case."""
    case, family = str(g["case"]), str(g["model"].get("family") or "")
    unjudged = _unjudged(g, case, family)
    if unjudged is not None:
        return unjudged
    try:
        r = _plan(g, rocm=False)
    except KvplanError as exc:
        if g["status"] != "answered" and same_reason(str(exc), vllm_message(g)):
            return Outcome(case, family, "refused-vllm", str(exc)[:160])
        return Outcome(case, family, "refused-kvplan", str(exc)[:160])
    if g["status"] == "answered":
        kv = g["kv_cache"]
        got = (r.cache.num_gpu_blocks, r.cache.block_size, r.verdict.log_line)
        want = (kv["num_blocks"], g["resolved"]["block_size"], kv["log_line"])
        if got == want:
            return Outcome(case, family, "exact", "")
        return Outcome(case, family, "wrong", f"kvplan {got} vLLM {want}")
    if not r.verdict.fits and r.verdict.error == vllm_message(g):
        return Outcome(case, family, "refused-vllm", r.verdict.error[:160])
    return Outcome(case, family, "wrong", f"kvplan: {r.verdict.startup}; vLLM: {vllm_message(g)[:120]}")


# kvplan's backend names → vLLM's get_name() (rocm_aiter_fa.py: AiterFlashAttentionBackend.get_name is FLASH_ATTN).
GET_NAME = {"ROCM_AITER_FA": "FLASH_ATTN"}
# get_name()s of the attention-layer backends in a golden's attn_backends (not Mamba/GDN/indexer ones).
ATTENTION_NAMES = frozenset({"ROCM_ATTN", "FLASH_ATTN", "ROCM_AITER_UNIFIED_ATTN", "TRITON_ATTN", "ROCM_AITER_MLA",
                             "TRITON_MLA", "ROCM_AITER_TRITON_MLA", "ROCM_AITER_MLA_SPARSE", "TRITON_ATTN_DIFFKV",
                             "ROCM_FLASHMLA_SPARSE_DSV4"})


def classify_rocm(g: dict[str, Any]) -> Outcome:
    """The class of one ROCm golden case (its aiter mode: installed, absent, or enabled with
    VLLM_ROCM_USE_AITER=1); the attention backend(s) vLLM picked are judged too."""
    case = str(g["case"])
    unjudged = _unjudged(g, case, "", rocm=True)
    if unjudged is not None:
        return unjudged
    try:
        r = _plan(g, rocm=True)
    except KvplanError as exc:
        if g["status"] != "answered" and same_reason(str(exc), vllm_message(g), rocm=True):
            return Outcome(case, "", "refused-vllm", str(exc)[:160])
        return Outcome(case, "", "refused-kvplan", str(exc)[:160])
    names = sorted({GET_NAME.get(n, n) for n in r.deployment.attention_backend.split(" + ")})
    resolved = g.get("resolved")  # absent when vLLM refused the config itself
    golden_names = sorted(set((resolved or {}).get("attn_backends") or ()) & ATTENTION_NAMES) or names  # none: Mamba
    if g["status"] == "answered":
        kv = g["kv_cache"]
        got = (r.cache.num_gpu_blocks, r.cache.block_size, r.verdict.log_line, names)
        want = (kv["num_blocks"], g["resolved"]["block_size"], kv["log_line"], golden_names)
        if got == want:
            return Outcome(case, "", "exact", r.deployment.attention_backend)
        return Outcome(case, "", "wrong", f"kvplan {got} {r.deployment.attention_backend}; vLLM {want} "
                                          f"{g['resolved']['attn_backends']}")
    # refused later, planned alike
    if resolved and (names, r.cache.block_size) != (golden_names, resolved["block_size"]):
        return Outcome(case, "", "wrong", f"kvplan {names} {r.cache.block_size}; vLLM {golden_names} "
                                          f"{g['resolved']['block_size']}")
    if not r.verdict.fits and r.verdict.error == vllm_message(g):
        return Outcome(case, "", "refused-vllm", r.verdict.error[:160])
    return Outcome(case, "", "wrong", f"kvplan: {r.verdict.startup}; vLLM: {vllm_message(g)[:160]}")


def report_lines(title: str, outcomes: list[Outcome], elapsed: float, *, verbose: bool) -> list[str]:
    """The counts by class (every case counted, the unjudged ones too), then every judged case that is not exact
    (all of them with `verbose`)."""
    counts = {cls: sum(o.cls == cls for o in outcomes) for cls in CLASSES}
    judged = [o for o in outcomes if o.judged]
    configs = {o.case.split("__")[0] for o in judged}
    lines = [f"{title}: {len(judged)} cases judged over {len(configs)} configs, {len(outcomes) - len(judged)} not "
             f"({elapsed:.1f} s)"]
    lines += [f"  {cls:15s} {counts[cls]:4d}" for cls in CLASSES]
    lines += [f"{o.cls:15s} {o.case}: {o.detail}" for o in outcomes
              if verbose or (o.cls != "exact" and o.cls != "oracle-failure")]
    return lines


def coverage_main(doc: str | None, title: str, judge: Callable[[dict[str, Any]], Outcome], folder: Path) -> None:
    """The coverage benchmarks' command (benchmarks/coverage.py, coverage_rocm.py): every golden in `folder`
    judged by `judge`, and the report printed; `--verbose` lists the exact cases too."""
    import argparse
    import time

    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--verbose", action="store_true", help="also list the exact cases")
    args = ap.parse_args()
    start = time.perf_counter()
    outcomes = [judge(g) for g in goldens(folder)]
    print("\n".join(report_lines(title, outcomes, time.perf_counter() - start, verbose=args.verbose)))
