"""The published, measured speeds (tests/fixtures/data/roofline-measured.yaml) as the speed model sees them.

Shared by tests/test_speed_model.py and benchmarks/speed.py. Every point belongs to a half by the sha256
of its id (odd → validation), the startup-log corpus's rule (benchmarks/accuracy.py), fixed before any fit.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import yaml

from kvplan.hardware import roofline as rl
from kvplan.hardware import speed_model as sm
from kvplan.hardware.gpus import get_gpu
from kvplan.model.hub import load_model
from kvplan.vllm.architectures import served_quantization_methods
from kvplan.vllm.quantization import apply_quantization

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "fixtures" / "data" / "roofline-measured.yaml"


def split_of(point_id: str) -> str:
    """The half a point belongs to: sha256 of its id, odd → validation."""
    return "validation" if int(hashlib.sha256(point_id.encode("utf-8")).hexdigest(), 16) % 2 == 1 else "calibration"


@dataclass(frozen=True)
class MeasuredPoint:
    id: str
    cls: str
    half: str
    observation: sm.Observation


# Settings the speed model does not model yet: points that use them are listed, not fitted or scored.
NOT_MODELLED = {
    "dp_attention": "attention data parallelism (each rank its own requests and KV)",
    "ep": "expert parallelism (experts whole on EP ranks, all-to-all dispatch)",
    "speculative": "speculative decoding (draft cost and acceptance)",
    "dp": "data-parallel replicas",
}
UNMODELLED_FIGURES = {
    "prefill_tok_s_per_gpu": "a prefill-only serving run (concurrent prompts chunked by the scheduler)",
    "output_tok_s": "a serving run's throughput (continuous batching over the run)",
}


def load_points(path: Path = DATA) -> list[MeasuredPoint]:
    """Every measured point the speed model can express, as an Observation on the rated roofs of its GPU."""
    return [p for p, _ in _load(path) if p is not None]


def skipped_points(path: Path = DATA) -> list[tuple[str, str]]:
    """(id, why) of the points that use a setting the speed model does not model."""
    return [(pid, why) for p, (pid, why) in _load(path) if p is None]


def _load(path: Path) -> list[tuple[MeasuredPoint | None, tuple[str, str]]]:
    out: list[tuple[MeasuredPoint | None, tuple[str, str]]] = []
    for p in yaml.safe_load(path.read_text(encoding="utf-8"))["points"]:
        k = p["kvplan_inputs"]
        unmodelled = [why for key, why in NOT_MODELLED.items() if k.get(key) not in (None, False, 1)]
        if k["compare"] in UNMODELLED_FIGURES:
            unmodelled.append(UNMODELLED_FIGURES[k["compare"]])
        if unmodelled:
            out.append((None, (p["id"], "; ".join(unmodelled))))
            continue
        gpu = get_gpu(k["gpu"])
        model = apply_quantization(load_model(str(ROOT / k["config"])), k.get("quantization"),
                                   served_quantization_methods())
        costs = rl.model_costs(model, tp=k["tp"], kv_cache_dtype=k.get("kv_cache_dtype", "auto"), gpu_flops=gpu.flops)
        value = float(p["measured"]["value"])
        if k["compare"].endswith("_ms") and p["measured"].get("unit") == "s":  # published in seconds
            value *= 1000
        obs = rl.measured_observation(
            p["id"], costs, rl.roof_from_gpu(gpu, costs.compute_dtype), kind=k["compare"], value=value,
            batch=k["batch"], context=k["context"], prompt=k.get("prompt"),
            output=k.get("output_tokens"), gpus=k["tp"])
        out.append((MeasuredPoint(p["id"], p["class"], split_of(p["id"]), obs), (p["id"], "")))
    return out


def calibration_fit(points: list[MeasuredPoint]) -> sm.SpeedCalibration:
    """The speed model fitted on the calibration half, at the precision kvplan ships."""
    return sm.rounded(sm.fit_speed_model([p.observation for p in points if p.half == "calibration"]))
