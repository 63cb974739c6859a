"""kvplan's CUDA-graph estimate against vLLM's own logged estimate (tests/fixtures/data/cuda-graph-estimates.yaml:
"Profiling CUDA graph memory: PIECEWISE=N, FULL=M" then "Estimated CUDA graph memory: X GiB total")."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kvplan.model.hub import load_local
from kvplan.units import GiB, MiB
from kvplan.vllm.memory.cuda_graphs import (
    GraphCapture,
    compilation_settings,
    cuda_graph_bytes,
    estimate_cuda_graphs,
    extrapolated_graphs,
    graph_counts,
)
from tests.conftest import CONFIGS

LOGS = Path(__file__).parent / "fixtures" / "data" / "cuda-graph-estimates.yaml"
ROOT = Path(__file__).parent.parent
ROUNDING_GIB = 0.005  # the logs print GiB with 2 decimals
RECORDS = yaml.safe_load(LOGS.read_text())["records"]


def _moe_layers(rec: dict[str, object]) -> int:
    """The record's MoE layer count, recounted from the config it names when it names one."""
    config = str(rec.get("model_config") or "").split(" ")[0]
    if not config:
        return int(rec["moe_layers"])  # type: ignore[call-overload]
    model = load_local(str(ROOT / config))
    assert sum(1 for layer in model.layers if layer.moe) == rec["moe_layers"], rec["id"]
    return int(rec["moe_layers"])  # type: ignore[call-overload]


@pytest.mark.parametrize("rec", RECORDS, ids=[r["id"] for r in RECORDS])
def test_the_logged_estimate_lies_inside_kvplans_range(rec: dict[str, object]) -> None:
    pw, full = int(rec["piecewise"]), int(rec["full"])  # type: ignore[call-overload]
    tp = int(rec.get("moe_tp", rec["tp"]))  # type: ignore[call-overload]  # the ranks an expert is split over
    moe = _moe_layers(rec)
    logged = float(rec["estimated_gib"])  # type: ignore[arg-type]
    low = cuda_graph_bytes(pw, full, moe_layers=moe, tp=tp, end="low") / GiB
    high = cuda_graph_bytes(pw, full, moe_layers=moe, tp=tp, end="high") / GiB
    assert low <= logged - ROUNDING_GIB and logged + ROUNDING_GIB <= high, (rec["id"], low, logged, high)


def test_the_minimax_a100_log_pins_the_moe_constant() -> None:
    """MiniMax-M2.7 FP8, A100, TP 4 (vllm#39610): 35 + 19 graphs → 0.67 GiB, 62 MoE layers."""
    assert round(cuda_graph_bytes(35, 19, moe_layers=62, tp=4) / GiB, 2) == 0.67


def test_dense_logs_pin_the_constants() -> None:
    """Qwen2.5-7B (0.22.0): 35 + 19 graphs, 52 extrapolated, 0.37 GiB = 64 MiB + 52 × 6 MiB (0.367); the
    two 64-layer logs within 11% (the per-graph cost does not grow with the layers)."""
    assert extrapolated_graphs(35, 19) == 52
    assert cuda_graph_bytes(35, 19) == 64 * MiB + 52 * 6 * MiB
    assert round(cuda_graph_bytes(35, 19) / GiB, 2) == 0.37
    assert abs(cuda_graph_bytes(51, 35) / GiB - 0.52) / 0.52 < 0.08  # vllm#52872
    assert abs(cuda_graph_bytes(3, 2) / GiB - 0.09) / 0.09 < 0.12  # club3090-434
    assert cuda_graph_bytes(0, 0) == 0


def test_moe_layers_raise_the_estimate_per_graph_and_tp_divides_it() -> None:
    """MiniMax-M2.7 (62 MoE layers) at TP 4 and at TP 2: the MoE part halves from TP 2 to TP 4."""
    at_tp2 = cuda_graph_bytes(35, 19, moe_layers=62, tp=2) - cuda_graph_bytes(35, 19)
    at_tp4 = cuda_graph_bytes(35, 19, moe_layers=62, tp=4) - cuda_graph_bytes(35, 19)
    assert at_tp2 == 52 * (62 * round(0.385 * MiB) // 2) and abs(at_tp2 - 2 * at_tp4) <= 52


def test_capture_counts_of_the_logs_are_kvplans() -> None:
    """The logged capture counts follow from each log's own settings (config/vllm.py:_set_cudagraph_sizes)."""
    assert graph_counts(128, 2048, "hopper") == (35, 19)  # Qwen2.5-7B: max_num_seqs 128, 2,048 tokens
    assert graph_counts(128, 16384, "ampere") == (35, 19)  # MiniMax-M2.7 on A100
    assert graph_counts(32, 8192, "blackwell-rtx") == (11, 7)  # Qwen3.6-35B-A3B, max_num_seqs 32
    one = compilation_settings({"max_cudagraph_capture_size": 1})
    assert graph_counts(1, 8192, "blackwell-rtx", one) == (1, 1)


def test_the_term_carries_the_range_and_names_the_moe_part() -> None:
    t = estimate_cuda_graphs(GraphCapture(128, 16384, arch="ampere", enforce_eager=False, moe_layers_on_worker=62,
                                          tp=4))
    assert t.bytes == cuda_graph_bytes(35, 19, moe_layers=62, tp=4)
    assert (t.low_bytes, t.high_bytes) == (cuda_graph_bytes(35, 19, moe_layers=62, tp=4, end="low"),
                                          cuda_graph_bytes(35, 19, moe_layers=62, tp=4, end="high"))
    assert "62 MoE layers" in t.assumption and "extrapolates 52" in t.assumption
    assert CONFIGS.is_dir()


def test_with_expert_parallelism_the_moe_part_of_the_estimate_is_not_divided_by_tp() -> None:
    """GLM-5.2-NVFP4 at TP 4 with EP on four 184 GiB GPUs (vLLM 0.26.0): 51 + 51 graphs → 4.99 GiB. Each rank holds
    whole experts (FusedMoEParallelConfig.make: tp_size 1 under EP), so the per-MoE-layer cost is TP 1's: kvplan's
    range 3.10 … 10.82 GiB holds it; divided by TP 4 it would top out at 3.68."""
    assert round(cuda_graph_bytes(51, 51, moe_layers=75, tp=1, end="low") / GiB, 2) == 3.10
    assert round(cuda_graph_bytes(51, 51, moe_layers=75, tp=4, end="high") / GiB, 2) == 3.68 < 4.99
