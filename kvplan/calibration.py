"""Compare what a vLLM server reported at startup with kvplan's prediction, term by term (pure).

The memory budget has the same terms in vLLM's log and in kvplan's model (vllm-reference.md §1.1
step 6): requested = ceil(total × utilization); available KV = requested − weights − non-torch growth
− activation peak − CUDA-graph estimate; then blocks = available // bytes_per_block. `observed_terms`
reads those terms from a StartupLog; `compare_terms` sets them against predicted numbers.

The prediction itself comes from kvplan's fit module, which `kvplan calibrate` will call once it
exists; until then CalibrationReport.comparison stays None.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from kvplan.startup_log import StartupLog

Unit = Literal["bytes", "blocks", "tokens"]

# term → unit, in budget order.
TERMS: Final[Mapping[str, Unit]] = {
    "total_gpu_memory": "bytes",
    "requested_memory": "bytes",
    "weights": "bytes",
    "non_torch": "bytes",
    "activation_peak": "bytes",
    "cuda_graph": "bytes",
    "available_kv": "bytes",
    "num_gpu_blocks": "blocks",
    "kv_cache_tokens": "tokens",
}


@dataclass(frozen=True)
class TermComparison:
    """One budget term: what the server reported and what kvplan predicts (None where unknown)."""

    term: str
    unit: Unit
    observed: int | None
    predicted: int | None

    @property
    def difference(self) -> int | None:
        """predicted − observed, when both are known."""
        if self.observed is None or self.predicted is None:
            return None
        return self.predicted - self.observed


@dataclass(frozen=True)
class CalibrationReport:
    """`kvplan calibrate`'s result: what the log showed, and (later) the comparison with kvplan."""

    source: str
    log: StartupLog
    comparison: tuple[TermComparison, ...] | None = None
    overrides: tuple[str, ...] = ()  # kvplan flags that reproduce the server, e.g. "--activation-memory 1.9GiB"


def observed_terms(log: StartupLog) -> dict[str, int | None]:
    """The budget terms a startup log shows, by TERMS name (None where the log is silent).

    The CUDA-graph term is the profiler's estimate when logged (that is what vLLM subtracts before sizing
    KV, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1), else the measured graph memory.
    """
    graph = log.cuda_graph_estimate_bytes if log.cuda_graph_estimate_bytes is not None else log.cuda_graph_bytes
    return {
        "total_gpu_memory": log.total_gpu_memory_bytes,
        "requested_memory": log.requested_memory_bytes,
        "weights": log.model_weights_bytes,
        "non_torch": log.non_torch_bytes,
        "activation_peak": log.activation_peak_bytes,
        "cuda_graph": graph,
        "available_kv": log.available_kv_bytes,
        "num_gpu_blocks": log.num_gpu_blocks,
        "kv_cache_tokens": log.kv_cache_tokens,
    }


def compare_terms(log: StartupLog, predicted: Mapping[str, int | None]) -> tuple[TermComparison, ...]:
    """Every term the log or the prediction knows, side by side, in budget order."""
    unknown = set(predicted) - set(TERMS)
    if unknown:
        raise ValueError(f"unknown budget terms: {sorted(unknown)}")  # a caller bug, not a user error
    seen = observed_terms(log)
    return tuple(
        TermComparison(term, unit, seen[term], predicted.get(term))
        for term, unit in TERMS.items()
        if seen[term] is not None or predicted.get(term) is not None
    )
