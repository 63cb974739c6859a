"""The KV-cache memory budget of one vLLM GPU worker (v1/worker/gpu_worker.py:determine_available_memory).

    requested    = ceil(cudaMemGetInfo total × gpu_memory_utilization)        (exact)
    available KV = requested − weights − activation peak − non-torch growth − CUDA-graph estimate
                 = --kv-cache-memory-bytes, exactly, when that flag is given

The subtracted terms are what vLLM *measures* at startup; kvplan *estimates* them from what
determines them and says so. Each estimate is a named, calibrated formula with its assumption in
words, and each can be replaced by a measured value (`--weights-memory`, `--activation-memory`,
`--non-torch-memory`, `--cuda-graph-memory`). Calibration data: the calibration half of
tests/fixtures/data/vllm-startup-logs.yaml and tests/fixtures/startup-logs/records.yaml
(`benchmarks/accuracy.py` prints the errors, per half). Pure: numbers in, numbers out.

Ranges. Every estimated term carries `low_bytes … high_bytes` around its best value, from the residuals
(log − kvplan) of that term on the calibration half; a measured term (`source == "user"`) and an exact
one have none (low = best = high). The available KV memory's range is requested − Σ high (pessimistic)
… requested − Σ low (optimistic): the terms' errors are assumed to add up, which is conservative.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from kvplan.units import GiB, format_gib_vllm
from kvplan.vllm.defaults import requested_memory

if TYPE_CHECKING:
    pass

TermSource = Literal["estimate", "user", "not subtracted", "none"]

# --- Memory in use before vLLM's first snapshot -----------------------------------------------------
# CUDA context, cuBLAS handles and NCCL buffers are taken before `init_snapshot` and are not charged to
# the budget, but `requested` must fit in what is free then. llm-d H100 logs: "Free memory on device
# 78.57/79.18 GiB" on one GPU, "77.64/79.18 GiB" at TP=2.
STARTUP_BASELINE_BYTES_SINGLE_GPU = round(0.61 * GiB)
STARTUP_BASELINE_BYTES_MULTI_GPU = round(1.54 * GiB)
# An integrated GPU (GB10) shares its memory with the host: vLLM's "free" is the OS's MemAvailable
# (utils/mem_utils.py:MemorySnapshot.measure), so the host's own use counts. Public GB10 logs of
# "Free memory on device (F/121.63 GiB) on startup": 111.18 on a clean host (code-index id 66380900772),
# 110.73 ("the operating system held about 11 GiB", id 57784008357, refused at 0.92), 101.28 on a host running
# k3s and other containers ("roughly 20 GiB", id 70104645611). (best, optimistic, pessimistic) in use:
INTEGRATED_STARTUP_BASELINE_BYTES = (round((121.63 - 110.73) * GiB), round((121.63 - 111.18) * GiB),
                                     round((121.63 - 101.28) * GiB))


@dataclass(frozen=True)
class MemoryTerm:
    """One line of the budget: its bytes, whether kvplan estimated it or the user gave it, and why."""

    name: str  # weights | activation | non_torch | cuda_graphs
    bytes: int
    source: TermSource
    assumption: str
    low: int | None = None  # the estimate's range (None: exact or measured, i.e. `bytes`)
    high: int | None = None

    @property
    def low_bytes(self) -> int:
        """The smallest value the calibration residuals allow (`bytes` for a measured or exact term)."""
        return self.bytes if self.low is None else min(self.low, self.bytes)

    @property
    def high_bytes(self) -> int:
        """The largest value the calibration residuals allow (`bytes` for a measured or exact term)."""
        return self.bytes if self.high is None else max(self.high, self.bytes)


def shifted(term: MemoryTerm, delta: int, note: str, *, low_delta: int | None = None,
            high_delta: int | None = None) -> MemoryTerm:
    """`term` with `delta` bytes more (fewer when negative) and its range moved with it — by `low_delta` /
    `high_delta` at an end when that differs (a part with a range of its own) — and `note` appended to its
    assumption. A term without a range keeps none unless an end moves differently. Stays ≥ 0."""
    def end(current: int | None, edge: int, moved: int | None) -> int | None:
        return None if current is None and moved is None else max(0, edge + (delta if moved is None else moved))

    return replace(term, bytes=max(0, term.bytes + delta), low=end(term.low, term.low_bytes, low_delta),
                   high=end(term.high, term.high_bytes, high_delta), assumption=f"{term.assumption}; {note}")


def with_range(term: MemoryTerm, low: int, high: int) -> MemoryTerm:
    """`term` with the range `low … high` (clamped to contain the best value and to stay ≥ 0)."""
    return replace(term, low=max(0, min(low, term.bytes)), high=max(high, term.bytes))


@dataclass(frozen=True)
class MemoryBudget:
    """Per-GPU memory budget (the bounding worker's)."""

    cuda_total_bytes: int
    gpu_memory_utilization: float
    requested_bytes: int
    weights: MemoryTerm
    activation: MemoryTerm
    non_torch: MemoryTerm
    cuda_graphs: MemoryTerm
    available_kv_bytes: int  # negative when the other terms exceed the request
    kv_cache_memory_bytes: int | None  # --kv-cache-memory-bytes, when it replaced the profile
    startup_free_bytes: int  # estimated free memory at vLLM's first snapshot
    startup_free_range: tuple[int, int] | None = None  # (pessimistic, optimistic) when the host's use counts
    # With PP > 1: every stage's own budget, first to last (fit.py:memory_stage); this budget is one of them.
    stages: tuple[MemoryBudget, ...] = ()
    tightest_stage: int | None = None  # the stage whose block count vLLM keeps for all (fit.py:block_stage)

    @property
    def terms(self) -> tuple[MemoryTerm, MemoryTerm, MemoryTerm, MemoryTerm]:
        """The subtracted terms in vLLM's order."""
        return (self.weights, self.activation, self.cuda_graphs, self.non_torch)

    @property
    def available_kv_range(self) -> tuple[int, int]:
        """(pessimistic, optimistic) available KV memory: every term at its high, then at its low end.
        Exact with --kv-cache-memory-bytes."""
        if self.kv_cache_memory_bytes is not None:
            return self.kv_cache_memory_bytes, self.kv_cache_memory_bytes
        return (self.requested_bytes - sum(t.high_bytes for t in self.terms),
                self.requested_bytes - sum(t.low_bytes for t in self.terms))

    @property
    def startup_ok(self) -> bool:
        """`free at init ≥ requested` (v1/worker/utils.py:request_memory); always true with the override."""
        return self.kv_cache_memory_bytes is not None or self.startup_free_bytes >= self.requested_bytes

    def startup_error(self, device: str = "cuda:0") -> str | None:
        """vLLM's ValueError when the requested memory exceeds what is free at startup."""
        if self.startup_ok:
            return None
        return (
            f"Free memory on device {device} ({format_gib_vllm(self.startup_free_bytes)}/"
            f"{format_gib_vllm(self.cuda_total_bytes)} GiB) on startup is less than desired GPU memory "
            f"utilization ({self.gpu_memory_utilization}, {format_gib_vllm(self.requested_bytes)} GiB). "
            "Decrease GPU memory utilization or reduce GPU memory used by other processes."
        )


def user_term(name: str, value: int, flag: str) -> MemoryTerm:
    """A term the user measured and passed with `flag`."""
    return MemoryTerm(name, value, "user", f"given with {flag}")


def startup_baseline_bytes(*, tp: int, pp: int, integrated: bool = False) -> tuple[int, int, int]:
    """Memory in use before vLLM's first snapshot (CUDA context, cuBLAS, NCCL; on an integrated GPU the
    host's own use): (best, optimistic, pessimistic)."""
    if integrated:
        return INTEGRATED_STARTUP_BASELINE_BYTES
    best = STARTUP_BASELINE_BYTES_MULTI_GPU if tp * pp > 1 else STARTUP_BASELINE_BYTES_SINGLE_GPU
    return best, best, best


def memory_budget(
    *,
    cuda_total_bytes: int,
    gpu_memory_utilization: float,
    weights: MemoryTerm,
    activation: MemoryTerm,
    non_torch: MemoryTerm,
    cuda_graphs: MemoryTerm,
    kv_cache_memory_bytes: int | None = None,
    startup_baseline: tuple[int, int, int] = (STARTUP_BASELINE_BYTES_SINGLE_GPU,) * 3,
) -> MemoryBudget:
    """Combine the terms as vLLM does (v1/worker/gpu_worker.py:determine_available_memory).

    With `kv_cache_memory_bytes` the result is exactly that value: vLLM skips the profiling maths
    and ignores gpu_memory_utilization.
    """
    requested = requested_memory(cuda_total_bytes, gpu_memory_utilization)
    if kv_cache_memory_bytes is not None:
        available = kv_cache_memory_bytes
    else:
        available = requested - weights.bytes - activation.bytes - non_torch.bytes - cuda_graphs.bytes
    return MemoryBudget(
        cuda_total_bytes=cuda_total_bytes,
        gpu_memory_utilization=gpu_memory_utilization,
        requested_bytes=requested,
        weights=weights,
        activation=activation,
        non_torch=non_torch,
        cuda_graphs=cuda_graphs,
        available_kv_bytes=available,
        kv_cache_memory_bytes=kv_cache_memory_bytes,
        startup_free_bytes=cuda_total_bytes - startup_baseline[0],
        startup_free_range=None if len(set(startup_baseline)) == 1 else (
            cuda_total_bytes - startup_baseline[2], cuda_total_bytes - startup_baseline[1]),
    )
