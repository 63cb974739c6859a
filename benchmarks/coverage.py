#!/usr/bin/env python3
"""Coverage of kvplan against vLLM 0.33's own KV planner with CUDA rules (tests/fixtures/oracle-cuda/).

Every golden is one config × GPU × settings case that vLLM's code answered (blocks, tokens, concurrency, block
size), refused with its own error, or refused at config time. kvplan plans the same case with
`--kv-cache-memory-bytes` (the oracle's input) and each case lands in one class:

  exact             answered, and kvplan's num_blocks, attention block size and vLLM log line are equal
  refused-vllm      both refuse, and kvplan's message is vLLM's own reason
  refused-kvplan    kvplan refuses a case vLLM answers, or refuses with a reason that is not vLLM's (target: 0)
  wrong             kvplan answers with other numbers, or answers a case vLLM refuses

    python benchmarks/coverage.py [--verbose]      # the table, then every case that is not exact
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvplan.cli.common import load_model  # noqa: E402
from kvplan.errors import KvplanError  # noqa: E402
from kvplan.hardware.gpus import get_gpu  # noqa: E402
from kvplan.vllm.fit import plan_fit  # noqa: E402
from kvplan.vllm.settings import ServeSettings  # noqa: E402

GOLDENS = ROOT / "tests" / "fixtures" / "oracle-cuda"
# The oracle's fake GPUs (vllm-cuda-oracle/fake_cuda.py) → kvplan's catalog ids.
GPU_IDS = {"h100": "h100-sxm", "h200": "h200", "b200": "b200", "a100-80": "a100-80gb-sxm"}
CLASSES = ("exact", "refused-vllm", "refused-kvplan", "wrong")


@dataclass(frozen=True)
class Outcome:
    case: str
    family: str
    cls: str
    detail: str


def goldens() -> list[dict[str, object]]:
    """Every golden case, sorted by name (index.json excluded)."""
    return [json.loads(p.read_text()) for p in sorted(GOLDENS.glob("*__*.json"))]


# Engine args kvplan models, as ServeSettings fields (LoRA leaves the KV plan as it is: its memory is not the
# oracle's to measure; hf_overrides are applied to the config before it is read).
ENGINE_ARGS = {"speculative_config": "speculative_config", "decode_context_parallel_size":
               "decode_context_parallel_size", "enable_expert_parallel": "enable_expert_parallel",
               "enable_lora": None, "max_loras": None, "max_lora_rank": None, "hf_overrides": None}


def _settings(g: dict) -> ServeSettings | None:  # type: ignore[type-arg]
    inputs = g["inputs"]
    args = inputs.get("engine_args") or {}
    if set(args) - set(ENGINE_ARGS) or inputs.get("block_size") or inputs.get("max_num_seqs"):
        return None  # flags kvplan does not model yet
    extra = {ENGINE_ARGS[k]: v for k, v in args.items() if ENGINE_ARGS[k]}
    if isinstance(extra.get("speculative_config"), dict):  # an EAGLE draft's own config.json, read as the CLI does
        from kvplan.cli.fit import load_speculative_draft

        try:
            extra["speculative_draft"] = load_speculative_draft(extra["speculative_config"])
        except KvplanError:
            pass  # no draft: plan_fit refuses the case with its reason, counted as kvplan's refusal
    return ServeSettings(**extra,  # type: ignore[arg-type]
        tp=inputs["tensor_parallel_size"], pp=inputs["pipeline_parallel_size"],
        kv_cache_dtype=inputs["kv_cache_dtype"], kv_cache_memory_bytes=inputs["kv_cache_memory_bytes"],
        max_model_len=inputs["max_model_len"], max_num_batched_tokens=inputs["max_num_batched_tokens"],
        weights_bytes=0,  # the oracle builds the model on the meta device: no weights, no out-of-memory check
    )


def _vllm_message(g: dict) -> str:  # type: ignore[type-arg]
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


def _same_reason(kvplan_message: str, vllm_message: str) -> bool:
    """kvplan states vLLM's reason: the same refusal by its key words, or vLLM's sentence itself."""
    if any(r in kvplan_message and r in vllm_message for r in VLLM_REASONS):
        return True
    head = kvplan_message.split(" (vLLM")[0].split("; served by")[0].split(" (served")[0].rstrip(".")
    return head in vllm_message or vllm_message in kvplan_message


def classify(g: dict) -> Outcome | None:  # type: ignore[type-arg]
    """The class of one golden case; None for cases whose flags kvplan does not model yet."""
    s = _settings(g)
    if s is None or g["status"] == "oracle_failure":  # the oracle's own failure (FAILURES.md): no verdict
        return None
    model_dir = ROOT / str(g["model"]["source"]) / str(g["model"]["config_dir"])
    family = str(g["model"].get("family") or "")
    case = str(g["case"])
    try:
        # as the CLI loads it: a config vLLM would refuse anyway fails with vLLM's reason
        model = load_model(str(model_dir), hf_overrides=(g["inputs"].get("engine_args") or {}).get("hf_overrides"))
        r = plan_fit(model, get_gpu(GPU_IDS[str(g["inputs"]["gpu"])]), s, advise=False)
    except KvplanError as exc:
        if g["status"] != "answered" and _same_reason(str(exc), _vllm_message(g)):
            return Outcome(case, family, "refused-vllm", str(exc)[:160])
        return Outcome(case, family, "refused-kvplan", str(exc)[:160])
    if g["status"] == "answered":
        kv = g["kv_cache"]
        got = (r.num_gpu_blocks, r.block_size, r.log_line)
        want = (kv["num_blocks"], g["resolved"]["block_size"], kv["log_line"])
        if got == want:
            return Outcome(case, family, "exact", "")
        return Outcome(case, family, "wrong", f"kvplan {got} vLLM {want}")
    if not r.fits and r.error == _vllm_message(g):
        return Outcome(case, family, "refused-vllm", r.error[:160])
    return Outcome(case, family, "wrong", f"kvplan: {r.startup}; vLLM: {_vllm_message(g)[:120]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--verbose", action="store_true", help="also list the exact cases")
    args = ap.parse_args()
    start = time.perf_counter()
    outcomes = [o for o in (classify(g) for g in goldens()) if o is not None]
    print_report("vLLM 0.33 CUDA-oracle goldens", outcomes, time.perf_counter() - start, verbose=args.verbose)


def print_report(title: str, outcomes: list[Outcome], elapsed: float, *, verbose: bool) -> None:
    """The counts by class, then every case that is not exact (all of them with `verbose`)."""
    counts = Counter(o.cls for o in outcomes)
    configs = {o.case.split("__")[0] for o in outcomes}
    print(f"{title}: {len(outcomes)} cases over {len(configs)} configs ({elapsed:.1f} s)")
    for cls in CLASSES:
        print(f"  {cls:15s} {counts[cls]:4d}")
    for o in outcomes:
        if o.cls != "exact" or verbose:
            print(f"{o.cls:15s} {o.case}: {o.detail}")


if __name__ == "__main__":
    main()
