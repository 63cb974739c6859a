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


def load_points(path: Path = DATA) -> list[MeasuredPoint]:
    """Every measured point as an Observation on the rated roofs of its GPU."""
    points = []
    for p in yaml.safe_load(path.read_text(encoding="utf-8"))["points"]:
        k = p["kvplan_inputs"]
        gpu = get_gpu(k["gpu"])
        costs = rl.model_costs(load_model(str(ROOT / k["config"])), tp=k["tp"], gpu_flops=gpu.flops)
        obs = rl.measured_observation(
            p["id"], costs, rl.roof_from_gpu(gpu, costs.compute_dtype), kind=k["compare"],
            value=float(p["measured"]["value"]), batch=k["batch"], context=k["context"], prompt=k.get("prompt"),
            output=k.get("output_tokens"))
        points.append(MeasuredPoint(p["id"], p["class"], split_of(p["id"]), obs))
    return points


def calibration_fit(points: list[MeasuredPoint]) -> sm.SpeedCalibration:
    """The speed model fitted on the calibration half, at the precision kvplan ships."""
    return sm.rounded(sm.fit_speed_model([p.observation for p in points if p.half == "calibration"]))
