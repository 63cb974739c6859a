"""The published, measured speeds (tests/fixtures/data/roofline-measured.yaml) as the speed model sees them.

Shared by tests/test_speed_model.py and benchmarks/speed.py. Every point belongs to a half by the sha256
of its id (odd → validation), the startup-log corpus's rule (benchmarks/accuracy.py), fixed before any fit.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import yaml

from kvplan.hardware import model_costs as mc
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
    "speculative": "speculative decoding (draft cost and acceptance)",
    # The same B200 deployment ran 8.47 ms per token with FlashInfer's trtllm-gen MoE and 12.65 ms with its CUTLASS
    # MoE (sglang PR #8552): the MoE kernel alone moves the step 49 %, and kvplan has no input that says which runs.
    "moe_backend": "a MoE kernel backend chosen by flag (kvplan has no input for the MoE kernel)",
}
UNMODELLED_FIGURES = {
    "prefill_tok_s_per_gpu": "a prefill-only serving run (concurrent prompts chunked by the scheduler)",
}


def engine_of(source: dict[str, object]) -> str:
    """The engine family whose overheads a point carries (speed_model.ENGINES), from its source's `engine`."""
    name = str(source.get("engine", "")).lower()
    if name.startswith(("tensorrt-llm", "nvidia nemo")):
        return "tensorrt-llm"
    if name.startswith("gpt-fast"):
        return "gpt-fast"
    if name.startswith(("vllm", "sglang")):
        return sm.VLLM
    raise ValueError(f"unknown engine {name!r}")


def _parallel(k: dict[str, object]) -> tuple[int, int, bool] | str:
    """(tp, dp, expert_parallel) as kvplan plans the point, or why it cannot.

    Attention data parallelism is vLLM's `-dp N --enable-expert-parallel` (attention TP 1 on each of N ranks);
    TensorRT-LLM writes it `tp N, ep N, enable_attention_dp` (the file's `dp_attention`). EP inside a TP group
    smaller than it (TensorRT-LLM's `tp 8, ep 2`) is not a vLLM layout.
    """
    tp, dp, ep = int(str(k["tp"])), int(str(k.get("dp") or 1)), int(str(k.get("ep") or 1))
    if k.get("dp_attention"):
        ranks = tp * dp
        if ep != ranks:
            return f"attention DP over {ranks} ranks with EP {ep}"
        return 1, ranks, True
    if ep > 1 and ep != tp * dp:
        return f"EP {ep} inside TP {tp} (TensorRT-LLM's hybrid MoE parallelism)"
    return tp, dp, ep > 1


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
        layout = _parallel(k)
        if isinstance(layout, str):
            unmodelled.append(layout)
        if unmodelled or isinstance(layout, str):
            out.append((None, (p["id"], "; ".join(unmodelled))))
            continue
        tp, dp, ep = layout
        gpu = get_gpu(k["gpu"])
        model = apply_quantization(load_model(str(ROOT / k["config"])), k.get("quantization"),
                                   served_quantization_methods())
        costs = mc.model_costs(model, tp=tp, kv_cache_dtype=k.get("kv_cache_dtype", "auto"), gpu_flops=gpu.flops,
                               dp=dp, expert_parallel=ep)
        value = float(p["measured"]["value"])
        if k["compare"].endswith("_ms") and p["measured"].get("unit") == "s":  # published in seconds
            value *= 1000
        kind, batch = k["compare"], k["batch"]
        if kind == "output_tok_s":
            # A serving run's output tokens/s over all GPUs, as one rank's static batch of its share of the
            # requests (each prefilled once, then decoded): the same work, scheduled differently.
            kind, batch, value = "static_batch_out_tok_s", -(-batch // dp), value / dp
        obs = rl.measured_observation(
            p["id"], costs, rl.roof_from_gpu(gpu, costs.compute_dtype), kind=kind, value=value,
            batch=batch, context=k["context"], prompt=k.get("prompt"),
            output=k.get("output_tokens"), gpus=tp, engine=engine_of(p["source"]))
        out.append((MeasuredPoint(p["id"], p["class"], split_of(p["id"]), obs), (p["id"], "")))
    return out


def calibration_fit(points: list[MeasuredPoint]) -> sm.SpeedCalibration:
    """The speed model fitted on the calibration half, at the precision kvplan ships."""
    return sm.rounded(sm.fit_speed_model([p.observation for p in points if p.half == "calibration"]))
