"""How close kvplan comes to real vLLM startup logs (tests/fixtures/data/vllm-startup-logs.yaml).

Run: python benchmarks/accuracy.py [--verbose]

Two checks per record, where the record allows them:

A. KV token count from the log's own "Available KV cache memory": kvplan's block maths must give the
   logged block count. The log rounds the GiB to 2 decimals, so kvplan plans the whole ±0.005 GiB
   interval; "exact" means the logged count falls inside it. Target: exact to the block.
B. Available KV memory predicted from GPU, model and settings only (catalog GPU, config.json, the flags
   the log shows, vLLM version rules): relative error against the logged value, and the error of each
   term (weights, activation peak, non-torch) where the log states it. Target: median within 2 %.
   The weights term is kvplan's loaded-weights estimate (estimate_weights: stored checkpoint
   plus what loading adds on the GPU's architecture), passed to plan_fit explicitly so the benchmark
   measures it whether or not plan_fit computes it itself.

Records are mapped to fixture configs where one holds the same architecture; others are skipped with
the reason. V0-engine logs (vLLM ≤ 0.10 V0 worker) take part in A only: their profiler differs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvplan.hardware.gpus import GpuSpec, custom_gpu, get_gpu  # noqa: E402
from kvplan.model.config import ModelSpec  # noqa: E402
from kvplan.model.hub import load_local  # noqa: E402
from kvplan.model.kv_cache import KVCacheSpec, kv_cache_specs  # noqa: E402
from kvplan.units import GiB  # noqa: E402
from kvplan.vllm.block_plan import plan_kv_cache  # noqa: E402
from kvplan.vllm.defaults import parse_vllm_version  # noqa: E402
from kvplan.vllm.fit import plan_fit  # noqa: E402
from kvplan.vllm.memory.weights import MOE_BACKENDS, MoeBackend, default_mxfp4_backend, estimate_weights  # noqa: E402
from kvplan.vllm.settings import ServeSettings  # noqa: E402

LOGS = ROOT / "tests" / "fixtures" / "data" / "vllm-startup-logs.yaml"
CONFIGS = ROOT / "tests" / "fixtures" / "configs"
ROUNDING_GIB = 0.005  # the logs print GiB with 2 decimals

# Record model → fixture config with the same architecture (and why it stands in).
FIXTURE_FOR_MODEL = {
    "meta-llama/Llama-3.1-8B-Instruct": ("meta-llama--Meta-Llama-3.1-8B", "same architecture as the base model"),
    "openai/gpt-oss-20b": ("openai--gpt-oss-20b", "same checkpoint"),
    "openai/gpt-oss-120b": ("openai--gpt-oss-120b", "same checkpoint"),
    "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic": (
        "nvidia--Llama-3.1-70B-Instruct-FP8",
        "Llama-3.1/3.3-70B architecture with FP8 linear weights (ModelOpt export instead of compressed-tensors)",
    ),
}
# Records whose model has no fixture config but whose own notes state the KV geometry (check A only).
GEOMETRY_FROM_RECORD = {
    # "the doc verifies 28.20 GiB / 184,832 tokens = 163,840 B/token (40 layers x 8 KV heads x 128 x 2 x 2)"
    "mistralai/Mistral-Small-3.2-24B-Instruct-2506": [KVCacheSpec(i, "full", 8, 128, 128, 2) for i in range(40)],
}
# vLLM release each V1 record ran, when the record does not say: llm-d's notes say image v0.11.0; the
# two GitHub issues are dated Oct 2025 (0.11) and Aug 2025 (0.10).
VERSION_FOR_RECORD = {"vllm-27508-h100-gpt-oss-120b": "0.11", "vllm-23278-h100-gpt-oss-120b": "0.10"}
# MoE kernel, only where the log's own text names it (not inferred from its numbers).
MOE_BACKEND_FOR_RECORD: dict[str, MoeBackend] = {
    # "marlin_utils_fp4.py:196] ... Weight-only FP4 compression will be used leveraging the Marlin kernel"
    "vllm-23278-h100-gpt-oss-120b": "marlin",
}


@dataclass
class RowA:
    record: str
    logged: str
    predicted: str
    exact: bool


@dataclass
class RowB:
    record: str
    logged_gib: float
    predicted_gib: float
    error_pct: float
    terms: str
    with_logged_weights_pct: float | None  # the same prediction with the log's weights (isolates weights.py)
    note: str


def _is_v0(rec: dict[str, Any]) -> bool:
    text = f"{rec.get('vllm_version')} {rec.get('log_excerpt')} {rec.get('notes')}"
    return "V0" in text or "v0.7" in text or "V0-era" in text


def _version(rec: dict[str, Any]) -> str | None:
    if rec["id"] in VERSION_FOR_RECORD:
        return VERSION_FOR_RECORD[rec["id"]]
    if rec["id"].startswith("llmd-"):
        return "0.11"
    return None


def _gpu(rec: dict[str, Any]) -> GpuSpec | None:
    name = (rec.get("gpu") or "").lower()
    for key, gpu_id in (("h100", "h100"), ("3090", "rtx-3090"), ("l40s", "l40s"), ("t4", "t4"), ("4060", None)):
        if key in name:
            return get_gpu(gpu_id) if gpu_id else None
    return None


def _model(rec: dict[str, Any]) -> tuple[ModelSpec | None, str]:
    hit = FIXTURE_FOR_MODEL.get(rec["model"])
    if hit is None:
        return None, f"no fixture config for {rec['model']!r}"
    return load_local(str(CONFIGS / hit[0])), hit[1]


def check_tokens(rec: dict[str, Any], verbose: bool) -> RowA | str:
    """A: the logged block / token / needed-memory figures from the logged available memory."""
    if rec.get("available_kv_gib") is None or rec["available_kv_gib"] <= 0:
        return "no positive available KV memory in the log"
    if rec.get("num_gpu_blocks") is None and rec.get("kv_cache_tokens") is None and rec.get("kv_needed_gib") is None:
        return "the log gives no block, token or needed-memory count"
    model, _ = _model(rec)
    if model is not None:
        specs = kv_cache_specs(model, tp=rec.get("tp") or 1)
    elif rec["model"] in GEOMETRY_FROM_RECORD:
        specs = [GEOMETRY_FROM_RECORD[rec["model"]]]
    else:
        return f"no fixture config or stated geometry for {rec['model']!r}"
    block = rec.get("block_size") or 16
    max_len = rec.get("max_model_len") or rec.get("max_concurrency_len") or (model.max_model_len if model else 0)
    mnbt = 1024 if "--max-num-batched-tokens 1024" in (rec.get("log_excerpt") or "") else 8192
    in_flight = mnbt  # every record predates async scheduling (vLLM < 0.12): one batch in flight
    lo_b = int((rec["available_kv_gib"] - ROUNDING_GIB) * GiB)
    hi_b = int((rec["available_kv_gib"] + ROUNDING_GIB) * GiB)
    lo = plan_kv_cache(specs, lo_b, block, max_len, in_flight)
    hi = plan_kv_cache(specs, hi_b, block, max_len, in_flight)
    mid = plan_kv_cache(specs, int(rec["available_kv_gib"] * GiB), block, max_len, in_flight)
    if rec.get("num_gpu_blocks") is not None:
        logged = rec["num_gpu_blocks"]
        exact = lo.num_gpu_blocks <= logged <= hi.num_gpu_blocks
        return RowA(rec["id"], f"{logged:,} blocks", f"{lo.num_gpu_blocks:,}–{hi.num_gpu_blocks:,} blocks", exact)
    if rec.get("kv_cache_tokens") is not None:
        logged = rec["kv_cache_tokens"]
        exact = lo.kv_cache_tokens <= logged <= hi.kv_cache_tokens
        return RowA(rec["id"], f"{logged:,} tokens", f"{lo.kv_cache_tokens:,}–{hi.kv_cache_tokens:,} tokens", exact)
    needed = f"{mid.needed_bytes / GiB:.2f}"
    return RowA(
        rec["id"],
        f"{rec['kv_needed_gib']:.2f} GiB needed",
        f"{needed} GiB needed",
        needed == f"{rec['kv_needed_gib']:.2f}",
    )


def predict_available(rec: dict[str, Any]) -> RowB | str:
    """B: available KV memory from GPU, model and settings."""
    if _is_v0(rec):
        return "V0 engine: its memory profiler is not what kvplan models"
    if rec.get("available_kv_gib") is None:
        return "the log gives no available KV memory"
    version = _version(rec)
    if version is None:
        return "vLLM version unknown"
    model, why = _model(rec)
    if model is None:
        return why
    gpu = _gpu(rec)
    if gpu is None:
        if rec.get("total_gpu_memory_gib") is None:
            return f"GPU {rec.get('gpu')!r} not in the catalog and no total in the log"
        gpu = custom_gpu(f"{rec['total_gpu_memory_gib']}GiB")
    mnbt = 1024 if "--max-num-batched-tokens 1024" in (rec.get("log_excerpt") or "") else None
    settings = ServeSettings(
        tp=rec.get("tp") or 1,
        gpu_memory_utilization=rec.get("gpu_memory_utilization"),
        max_model_len=rec.get("max_model_len"),
        max_num_batched_tokens=mnbt,
        vllm_version=version,
        kv_cache_memory_bytes=None,
    )
    backend = MOE_BACKEND_FOR_RECORD.get(rec["id"])
    weights = estimate_weights(model, tp=settings.tp, pp=1, arch=gpu.arch, version=parse_vllm_version(version),
                                      moe_backend=backend)
    r = plan_fit(model, gpu, replace(settings, weights_bytes=weights.bytes), advise=False)
    logged = rec["available_kv_gib"]
    predicted = r.available_kv_bytes / GiB
    parts = []
    for name, key in (
        ("weights", "model_weights_gib"),
        ("activation", "activation_peak_gib"),
        ("non_torch", "non_torch_gib"),
    ):
        term = next(t for t in r.memory_terms if t.name == name)
        if rec.get(key) is not None:
            parts.append(f"{name} {term.bytes / GiB:.2f}/{rec[key]:.2f}")
    with_weights: float | None = None
    if rec.get("model_weights_gib") is not None:
        fixed = plan_fit(model, gpu, replace(settings, weights_bytes=int(rec["model_weights_gib"] * GiB)), advise=False)
        with_weights = (fixed.available_kv_bytes / GiB - logged) / abs(logged) * 100
    note = _moe_backend_note(rec, model, gpu, version, backend)
    # The log's own terms must add up to util × total (vLLM ≤ 0.20 subtracted no CUDA-graph estimate).
    keys = ("model_weights_gib", "activation_peak_gib", "non_torch_gib", "total_gpu_memory_gib")
    if all(rec.get(k) is not None for k in keys):
        implied = (rec["model_weights_gib"] + rec["activation_peak_gib"] + rec["non_torch_gib"] + logged) / rec[
            "total_gpu_memory_gib"
        ]
        if abs(implied - r.gpu_memory_utilization) > 0.005:
            note += ("; " if note else "") + (
                f"the log's terms add up to utilization {implied:.3f}, not the recorded {r.gpu_memory_utilization}")
    return RowB(
        rec["id"], logged, predicted, (predicted - logged) / abs(logged) * 100, ", ".join(parts), with_weights, note
    )


def _moe_backend_note(
    rec: dict[str, Any], model: ModelSpec, gpu: GpuSpec, version: str, backend: MoeBackend | None
) -> str:
    """Diagnostic only: which MXFP4 kernel layout the logged weights match, when not the one predicted."""
    if rec.get("model_weights_gib") is None or model.quant is None or model.quant.method != "mxfp4":
        return ""
    v = parse_vllm_version(version)
    used = backend or default_mxfp4_backend(gpu.arch, v)
    sizes = {b: estimate_weights(model, tp=rec.get("tp") or 1, pp=1, arch=gpu.arch, version=v,
                                        moe_backend=b).bytes / GiB for b in MOE_BACKENDS}
    best = min(sizes, key=lambda b: abs(sizes[b] - rec["model_weights_gib"]))
    if best == used:
        return ""
    return (f"logged weights {rec['model_weights_gib']:.2f} GiB match the {best} layout ({sizes[best]:.2f}), "
            f"not vLLM {version}'s default {used} ({sizes[used] if used else 0:.2f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true", help="also list skipped records with the reason")
    args = parser.parse_args()
    records = yaml.safe_load(LOGS.read_text())["records"]

    print("A. KV blocks/tokens from the logged available memory (±0.005 GiB rounding)")
    rows_a: list[RowA] = []
    for rec in records:
        res = check_tokens(rec, args.verbose)
        if isinstance(res, str):
            if args.verbose:
                print(f"   skip {rec['id']}: {res}")
            continue
        rows_a.append(res)
        print(
            f"   {'exact' if res.exact else 'MISS '}  {res.record:42} logged {res.logged:>22}   kvplan {res.predicted}"
        )
    exact = sum(r.exact for r in rows_a)
    print(f"   → {exact}/{len(rows_a)} exact to the block\n")

    print("B. Available KV memory predicted from GPU, model and settings (kvplan / log)")
    rows_b: list[RowB] = []
    for rec in records:
        res_b = predict_available(rec)
        if isinstance(res_b, str):
            if args.verbose:
                print(f"   skip {rec['id']}: {res_b}")
            continue
        rows_b.append(res_b)
        w = "" if res_b.with_logged_weights_pct is None else f"{res_b.with_logged_weights_pct:+6.1f}%"
        print(
            f"   {res_b.record:38} {res_b.predicted_gib:7.2f} / {res_b.logged_gib:6.2f} GiB {res_b.error_pct:+7.1f}%"
            f"  {w:>7}   ({res_b.terms})"
        )
        if res_b.note:
            print(f"   {'':38} note: {res_b.note}")
    print("   (columns: kvplan / log, error, error with the log's own weights in place of kvplan's)")
    if rows_b:
        errors = [abs(r.error_pct) for r in rows_b]
        big = [abs(r.error_pct) for r in rows_b if r.logged_gib > 10]
        fixed = [abs(r.with_logged_weights_pct) for r in rows_b if r.with_logged_weights_pct is not None]
        print(
            f"   → median |error| {statistics.median(errors):.1f}% over {len(rows_b)} records"
            + (f"; {statistics.median(big):.1f}% over the {len(big)} with > 10 GiB of KV" if big else "")
        )
        if fixed:
            print(f"   → with the logged weights: median |error| {statistics.median(fixed):.1f}% over {len(fixed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
