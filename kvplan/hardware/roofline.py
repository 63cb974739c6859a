"""How fast decode and prefill can go on one GPU, and what limits them: a roofline model.

A step (one forward pass of the engine) moves bytes through HBM and does FLOPs on the tensor
cores; it cannot be faster than either roof:

    step_time = max(bytes ÷ (bandwidth × bandwidth_efficiency), FLOPs ÷ (peak × compute_efficiency))
                + tensor-parallel all-reduce time

(Williams, Waterman & Patterson, "Roofline", CACM 2009; the decode/prefill reading of it is the
starting document §1: intensity ≈ batch FLOP/byte for decode, ≈ prompt length for prefill.)

Everything here is per GPU (one tensor-parallel rank). Pure: numbers in, frozen dataclasses out. What a
step reads and computes (ModelCosts, StepCost) is model_costs.py's; this module times it on a GPU.

Modelled: weight reads (MoE: only the experts the step's tokens are expected to hit), KV-cache
reads (sliding windows and chunked-local attention capped, MLA's latent, recurrent state),
linear and attention FLOPs, the ring all-reduce of activations under TP. With a speed calibration
(speed_model.py) a roof also carries the efficiencies a GPU class reaches and the per-step overheads
(per layer, per MoE layer, per all-reduce, per step, before a first token), fitted on measured runs;
`Roof.rated()` is the physical bound. Expert parallelism spreads the routed experts whole over TP × DP
ranks, every DP rank's tokens passing through each MoE layer.
Speculative decoding is a range: k draft steps and one verify step of k + 1 queries per request, over an
acceptance range (speculative_point). Not modelled: activations' HBM traffic, pipeline parallelism and
--enforce-eager (said in notes: unmodelled_settings), EP inside a TP group smaller than it, load imbalance
between experts, and CUDA-graph padding of the batch.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from kvplan.errors import InvalidParameter
from kvplan.hardware.model_costs import (
    ACTIVATION_BYTES,
    ALL_REDUCES_PER_LAYER,
    ModelCosts,
    StepCost,
    batch_prefill_cost,
    expected_experts_hit,
    model_costs,
    one_layer_draft,
    step_cost,
)
from kvplan.hardware.speed_model import VLLM, LinkKind, Observation, SpeedCalibration, StepOverheads, StepShape

if TYPE_CHECKING:
    from kvplan.hardware.gpus import GpuSpec
    from kvplan.model.spec import ModelSpec

Bound = Literal["memory", "compute"]
ThroughputLimit = Literal["kv_capacity", "max_num_seqs", "compute", "unknown"]

# --- defaults and constants (each with its source) ----------------------------------------------

# Starting document §1: 39 tok/s × 16.2 GB read per step ≈ 632 GB/s achieved on an 896 GB/s GPU,
# i.e. about 70 % of the rated bandwidth for single-request decode.
DEFAULT_BANDWIDTH_EFFICIENCY = 0.70
# Pope et al., "Efficiently Scaling Transformer Inference" (MLSys 2023, arXiv:2211.05102), abstract:
# "76% MFU during large-batch-size processing of input tokens" (PaLM 540B prefill). A well-tuned
# large GEMM reaches about this; small models and short prompts get less. Measure yours with
# benchmarks/roofline_gpu.py and pass --compute-efficiency.
DEFAULT_COMPUTE_EFFICIENCY = 0.76

# Ring all-reduce moves 2(n−1)/n of the buffer through each GPU's link (Patarasuk & Yuan 2009).
RING_ALLREDUCE_FACTOR_NUM = 2
# gpus.yaml stores NVLink bandwidth bidirectional, as marketed (H100 SXM "900GB/s" = 450 GB/s each
# way); a ring all-reduce sends and receives at the same time, so each direction carries the traffic.
INTERCONNECT_DIRECTIONS = 2
# Largest batch searched for the compute-bound crossing (beyond any real max_num_seqs).
MAX_SEARCH_BATCH = 1 << 24
CHART_MAX_BATCH = 1 << 16  # the chart's curve stops here even if the crossing is further
# Prefill chunks modelled one by one: 65,536 take about 2.5 s (a 1M-token prompt at a 16-token budget is
# 62,500). More is a typo (--context 1e17 would never finish), so it is refused.
MAX_PREFILL_CHUNKS = 1 << 16
DEFAULT_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)


# --- inputs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Roof:
    """One GPU's two ceilings (rated), the efficiencies that scale them, and its link for TP."""

    gpu: str
    bandwidth_bytes_per_s: float  # rated HBM bandwidth
    peak_flops: float  # dense tensor-core FLOP/s for `flops_dtype`
    flops_dtype: str  # bf16 | fp16 | fp8 | fp4
    bandwidth_efficiency: float = DEFAULT_BANDWIDTH_EFFICIENCY
    compute_efficiency: float = DEFAULT_COMPUTE_EFFICIENCY
    kv_bandwidth_efficiency: float | None = None  # KV/state reads' share of the bandwidth (None: as weights)
    interconnect_bytes_per_s: float | None = None  # per GPU, one direction; None = not modelled
    arch: str = "unknown"  # GPU class (GpuSpec.arch): what the speed model's efficiencies are fitted per
    link: LinkKind | None = None  # what TP all-reduces travel over
    overheads: StepOverheads | None = None  # per-step costs on top of the roofs (None: the roofs alone)
    calibration: str = ""  # where the efficiencies and overheads come from

    def __post_init__(self) -> None:
        for name in ("bandwidth_efficiency", "compute_efficiency"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise InvalidParameter(f"{name.replace('_', '-')} must be in (0, 1], got {value}")
        if self.bandwidth_bytes_per_s <= 0 or self.peak_flops <= 0:
            raise InvalidParameter(f"{self.gpu}: bandwidth and peak FLOP/s must be positive")

    @property
    def ridge_point(self) -> float:
        """Rated FLOP/byte at which compute time equals memory time (peak ÷ bandwidth)."""
        return self.peak_flops / self.bandwidth_bytes_per_s

    @property
    def effective_ridge_point(self) -> float:
        """The same crossing after both efficiencies: where this model's bound switches."""
        return (self.peak_flops * self.compute_efficiency) / (
            self.bandwidth_bytes_per_s * self.bandwidth_efficiency
        )

    def rated(self) -> Roof:
        """The physical bound: rated bandwidth and peak FLOP/s, no overheads. No measurement beats it."""
        return dataclasses.replace(self, bandwidth_efficiency=1.0, compute_efficiency=1.0, kv_bandwidth_efficiency=None,
                                   overheads=None)

    @property
    def kv_efficiency(self) -> float:
        """The share of rated bandwidth that KV and recurrent-state reads reach."""
        return self.bandwidth_efficiency if self.kv_bandwidth_efficiency is None else self.kv_bandwidth_efficiency


# --- the formulas -------------------------------------------------------------------------------


def ridge_point(peak_flops: float, bandwidth_bytes_per_s: float) -> float:
    """FLOP/byte where a kernel turns compute-bound: dense peak ÷ HBM bandwidth (Williams et al. 2009).

    H100 SXM BF16: 989 TFLOP/s (half the 1,979 sparse figure) ÷ 3.35 TB/s ≈ 295 (starting document §1).
    """
    if bandwidth_bytes_per_s <= 0:
        raise InvalidParameter("memory bandwidth must be positive")
    return peak_flops / bandwidth_bytes_per_s


@dataclass(frozen=True)
class StepTime:
    """The two roofs' times for one step, the communication added on top, and which roof holds."""

    memory_s: float
    compute_s: float
    comm_s: float
    overhead_s: float = 0.0  # the speed model's per-step costs (0 for the roofs alone)

    @property
    def time_s(self) -> float:
        """max(memory, compute) + all-reduce + overheads: vLLM does not overlap TP communication with compute."""
        return max(self.memory_s, self.compute_s) + self.comm_s + self.overhead_s

    @property
    def bound(self) -> Bound:
        """Which roof holds; at exact equality the step counts as compute-bound."""
        return "compute" if self.compute_s >= self.memory_s else "memory"


def step_time(cost: StepCost, roof: Roof, tp: int = 1, *, first_token: bool = False) -> StepTime:
    """Time of one step at the roofs: each side scaled by its efficiency; all-reduce and overheads on top.

    All-reduce: ring, 2(tp−1)/tp × payload ÷ link bandwidth (Patarasuk & Yuan 2009); its latency is one of
    the speed model's overheads (speed_model.py), with the per-layer, per-MoE-layer and per-step costs.
    Without a link figure the communication's bandwidth term is not modelled (0 s).
    """
    comm = 0.0
    if tp > 1 and roof.interconnect_bytes_per_s and cost.allreduce_bytes:
        ring = RING_ALLREDUCE_FACTOR_NUM * (tp - 1) / tp
        comm = ring * cost.allreduce_bytes / roof.interconnect_bytes_per_s
    if roof.interconnect_bytes_per_s and cost.gather_bytes:
        comm += cost.gather_bytes / roof.interconnect_bytes_per_s
    overhead = 0.0
    if roof.overheads is not None and cost.num_tokens:
        overhead = roof.overheads.time_s(layers=cost.layers, moe_layers=cost.moe_layers,
                                         all_reduces=cost.all_reduces, decode_reqs=cost.decode_reqs,
                                         first_token=first_token)
    return StepTime(
        memory_s=(cost.weight_bytes / roof.bandwidth_efficiency
                  + (cost.kv_bytes + cost.state_bytes) / roof.kv_efficiency) / roof.bandwidth_bytes_per_s,
        compute_s=cost.flops / (roof.peak_flops * roof.compute_efficiency),
        comm_s=comm,
        overhead_s=overhead,
    )


def decode_step_time(costs: ModelCosts, roof: Roof, batch: int, context: int) -> float:
    """Seconds of one decode step of `batch` requests at `context` tokens each (the ITL floor)."""
    return step_time(step_cost(costs, decode_reqs=batch, decode_context=context), roof, costs.tp).time_s


@dataclass(frozen=True)
class RooflineCost:
    """The simulator's cost model: `step_time(num_prefill_tokens, num_decode_reqs, total_context_tokens)`.

    `total_context_tokens` follows the scheduler's protocol (`sim.scheduler.StepCostModel`): the KV
    entries the step attends over in all, its own new tokens included. The tokens already cached are
    that minus the step's new tokens; without a per-request breakdown they are split evenly over the
    requests (the prefill chunk counting as one request), which is exact for uniform batches.
    """

    costs: ModelCosts
    roof: Roof

    def step_time(self, num_prefill_tokens: int, num_decode_reqs: int, total_context_tokens: int) -> float:
        """Seconds of one mixed step (0 when nothing is scheduled)."""
        if num_prefill_tokens <= 0 and num_decode_reqs <= 0:
            return 0.0
        requests = num_decode_reqs + (1 if num_prefill_tokens > 0 else 0)
        cached = max(total_context_tokens - max(num_prefill_tokens, 0) - max(num_decode_reqs, 0), 0)
        per_request = cached // requests
        prefix = cached - per_request * num_decode_reqs if num_prefill_tokens > 0 else 0
        cost = step_cost(
            self.costs,
            decode_reqs=num_decode_reqs,
            decode_context=per_request + 1,  # the decode query attends to itself too
            prefill_tokens=max(num_prefill_tokens, 0),
            prefill_prefix=prefix,
        )
        return step_time(cost, self.roof, self.costs.tp).time_s


# --- decode sweep -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecodePoint:
    """Decode at one batch size and context: speed, latency, and what limits it."""

    batch: int
    context: int
    tokens_per_s: float  # aggregate over the batch (predicted)
    tokens_per_s_per_request: float
    itl_s: float  # inter-token latency = step time (predicted)
    itl_low_s: float  # the prediction's range: measured ÷ predicted on the calibration points
    itl_high_s: float
    bound_itl_s: float  # the physical bound: rated roofs, no overheads (no engine is faster)
    bound_tokens_per_s: float
    overhead_s: float  # the speed model's per-step costs inside itl_s
    bound: Bound
    arithmetic_intensity: float  # FLOP/byte
    bytes: int
    weight_bytes: int
    kv_bytes: int
    state_bytes: int
    flops: int
    attention_flops: int
    memory_s: float
    compute_s: float
    comm_s: float
    expected_experts: float | None  # per MoE layer, None for dense models
    fits_kv_cache: bool | None  # batch ≤ kv_capacity_batch (None when unknown)


def prediction_range(time_s: float, bound_s: float, roof: Roof) -> tuple[float, float]:
    """The range around a predicted time: the calibration's measured ÷ predicted spread, never below the bound."""
    if roof.overheads is None:
        return time_s, time_s
    return max(bound_s, time_s * roof.overheads.ratio_low), max(bound_s, time_s * roof.overheads.ratio_high)


def decode_point(
    costs: ModelCosts, roof: Roof, batch: int, context: int, kv_capacity_batch: int | None = None
) -> DecodePoint:
    """One decode step at `batch` × `context`: tokens/s = batch ÷ step time."""
    if batch < 1:
        raise InvalidParameter(f"batch must be ≥ 1, got {batch}")
    cost = step_cost(costs, decode_reqs=batch, decode_context=context)
    t = step_time(cost, roof, costs.tp)
    floor = step_time(cost, roof.rated(), costs.tp).time_s
    low, high = prediction_range(t.time_s, floor, roof)
    return DecodePoint(
        batch=batch,
        context=context,
        tokens_per_s=batch / t.time_s,
        tokens_per_s_per_request=1.0 / t.time_s,
        itl_s=t.time_s,
        itl_low_s=low,
        itl_high_s=high,
        bound_itl_s=floor,
        bound_tokens_per_s=batch / floor,
        overhead_s=t.overhead_s,
        bound=t.bound,
        arithmetic_intensity=cost.arithmetic_intensity,
        bytes=cost.bytes,
        weight_bytes=cost.weight_bytes,
        kv_bytes=cost.kv_bytes,
        state_bytes=cost.state_bytes,
        flops=cost.flops,
        attention_flops=cost.attention_flops,
        memory_s=t.memory_s,
        compute_s=t.compute_s,
        comm_s=t.comm_s,
        expected_experts=(
            expected_experts_hit(costs.num_experts, costs.experts_per_token, batch) if costs.is_moe else None
        ),
        fits_kv_cache=None if kv_capacity_batch is None else batch <= kv_capacity_batch,
    )


def compute_bound_batch(costs: ModelCosts, roof: Roof, context: int) -> int | None:
    """Smallest decode batch whose compute time reaches its memory time, or None if none does.

    Per request, FLOPs are constant in the batch while bytes fall (weights are shared), so the
    intensity rises with the batch and the crossing is unique: a bisection finds it. With long
    contexts the KV reads (≈ 2·H_q/H_kv/dtype_bytes FLOP/byte for GQA) may keep decode
    memory-bound at any batch: then None.
    """

    def compute_bound(b: int) -> bool:
        t = step_time(step_cost(costs, decode_reqs=b, decode_context=context), roof, costs.tp)
        return t.bound == "compute"

    if not compute_bound(MAX_SEARCH_BATCH):
        return None
    lo, hi = 0, MAX_SEARCH_BATCH  # invariant: lo not compute-bound (or 0), hi compute-bound
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if compute_bound(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class CurvePoint:
    """Decode throughput at one batch with its two ceilings (for the chart)."""

    batch: int
    tokens_per_s: float  # what the model predicts (both roofs and communication)
    memory_roof_tokens_per_s: float  # batch ÷ memory time: the bandwidth ceiling
    compute_roof_tokens_per_s: float  # batch ÷ compute time: the compute ceiling


def decode_curve(costs: ModelCosts, roof: Roof, context: int, max_batch: int) -> tuple[CurvePoint, ...]:
    """Throughput and both ceilings at batch 1, 2, 4, … up to the first power of two ≥ `max_batch`."""
    points: list[CurvePoint] = []
    b = 1
    while True:
        t = step_time(step_cost(costs, decode_reqs=b, decode_context=context), roof, costs.tp)
        points.append(CurvePoint(
            batch=b,
            tokens_per_s=b / t.time_s,
            memory_roof_tokens_per_s=b / t.memory_s if t.memory_s else math.inf,
            compute_roof_tokens_per_s=b / t.compute_s if t.compute_s else math.inf,
        ))
        if b >= max_batch or b >= MAX_SEARCH_BATCH:
            return tuple(points)
        b *= 2


# --- prefill ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrefillChunk:
    """One scheduler step of a chunked prefill: `tokens` new tokens after `start` cached ones."""

    start: int
    tokens: int
    flops: int
    attention_flops: int
    bytes: int
    time_s: float
    bound: Bound


@dataclass(frozen=True)
class PrefillReport:
    """Prefill of one prompt, alone on the GPU: the TTFT floor, at once and chunked."""

    prompt_tokens: int
    flops: int
    linear_flops: int
    attention_flops: int  # the quadratic term (causal: P(P+1)/2 pairs, windows capped)
    bytes: int
    time_s: float  # whole prompt in one step, first token included: the predicted TTFT
    time_low_s: float  # the prediction's range
    time_high_s: float
    bound_time_s: float  # the physical bound: rated roofs, no overheads
    bound: Bound
    tokens_per_s: float
    max_num_batched_tokens: int | None
    chunked_time_s: float  # sum of the chunks' step times (weights re-read each chunk)
    chunks: tuple[PrefillChunk, ...]


def prefill(
    costs: ModelCosts, roof: Roof, prompt_tokens: int, max_num_batched_tokens: int | None = None
) -> PrefillReport:
    """Prefill `prompt_tokens` alone: one step, and in chunks of `max_num_batched_tokens` (vLLM
    chunked prefill, v1/core/sched/scheduler.py: a request gets at most the token budget per step).
    """
    if prompt_tokens < 1:
        raise InvalidParameter(f"prompt must be ≥ 1 token, got {prompt_tokens}")
    if max_num_batched_tokens is not None and max_num_batched_tokens < 1:
        raise InvalidParameter(f"max-num-batched-tokens must be ≥ 1, got {max_num_batched_tokens}")
    chunk = max_num_batched_tokens or prompt_tokens
    if -(prompt_tokens // -chunk) > MAX_PREFILL_CHUNKS:
        raise InvalidParameter(f"a {prompt_tokens:,}-token prompt in chunks of {chunk:,} tokens is more than "
                               f"{MAX_PREFILL_CHUNKS:,} prefill steps",
                               hint="give a shorter --prompt / --context or a larger --max-num-batched-tokens")
    whole = step_cost(costs, prefill_tokens=prompt_tokens)
    t = step_time(whole, roof, costs.tp, first_token=True)
    floor = step_time(whole, roof.rated(), costs.tp).time_s
    low, high = prediction_range(t.time_s, floor, roof)
    chunks: list[PrefillChunk] = []
    for start in range(0, prompt_tokens, chunk):
        n = min(chunk, prompt_tokens - start)
        c = step_cost(costs, prefill_tokens=n, prefill_prefix=start)
        ct = step_time(c, roof, costs.tp, first_token=start == 0)
        chunks.append(PrefillChunk(start, n, c.flops, c.attention_flops, c.bytes, ct.time_s, ct.bound))
    return PrefillReport(
        prompt_tokens=prompt_tokens,
        flops=whole.flops,
        linear_flops=whole.linear_flops,
        attention_flops=whole.attention_flops,
        bytes=whole.bytes,
        time_s=t.time_s,
        time_low_s=low,
        time_high_s=high,
        bound_time_s=floor,
        bound=t.bound,
        tokens_per_s=prompt_tokens / t.time_s,
        max_num_batched_tokens=max_num_batched_tokens,
        chunked_time_s=sum(c.time_s for c in chunks),
        chunks=tuple(chunks),
    )


# --- the report ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RooflineReport:
    """`kvplan roofline`: the GPU's ridge, decode over batch sizes, the two caps, and prefill."""

    model: str
    gpu: str
    tp: int
    dp: int  # data-parallel ranks: batches, tokens/s and the KV capacity are one rank's
    ep: int  # expert-parallel ranks (1: experts TP-split)
    compute_dtype: str
    compute_dtype_reason: str
    bandwidth_bytes_per_s: float
    peak_flops: float
    bandwidth_efficiency: float
    kv_bandwidth_efficiency: float | None  # KV reads' share (None: as the weights')
    compute_efficiency: float
    ridge_point: float  # rated FLOP/byte for compute_dtype
    effective_ridge_point: float  # after the efficiencies
    ridge_points: dict[str, float]  # rated FLOP/byte for every dtype the GPU lists
    context: int
    weight_bytes: int  # stored on one GPU
    kv_bytes_per_token: int  # on one GPU
    kv_capacity_batch: int | None
    max_num_seqs: int | None
    compute_bound_batch: int | None
    throughput_limit: ThroughputLimit
    limit_point: DecodePoint | None  # decode at the batch where throughput stops growing
    batches: tuple[DecodePoint, ...]
    prefill: PrefillReport
    curve: tuple[CurvePoint, ...]  # powers of two past the largest batch of interest
    communication: str  # how TP all-reduce was treated
    speed_model: str  # where the efficiencies and overheads come from ("" for the roofs alone)
    overheads: StepOverheads | None  # the per-step costs in every predicted time
    notes: tuple[str, ...]
    speculative: tuple[SpeculativePoint, ...] = ()  # decode with the deployment's speculative draft, per batch
    engine: str = "vllm"  # whose KV capacity and running-request cap (max_num_seqs: SGLang's max_running_requests)


def throughput_limit(
    kv_capacity_batch: int | None, compute_bound: int | None, max_num_seqs: int | None = None
) -> tuple[ThroughputLimit, int | None]:
    """What stops decode throughput from growing with the batch first, and at which batch.

    Memory-bound throughput grows with the batch (the weights are shared). It stops growing at the
    first of: the KV cache holding no more requests of the context, vLLM's max_num_seqs (the
    scheduler runs no more requests at once, v1/core/sched/scheduler.py), or the step turning
    compute-bound. Ties go to compute, then the KV cache. Unknown without the KV capacity.
    """
    if kv_capacity_batch is None:
        return "unknown", None
    caps: list[tuple[int, int, ThroughputLimit]] = [(kv_capacity_batch, 1, "kv_capacity")]
    if compute_bound is not None:
        caps.append((compute_bound, 0, "compute"))
    if max_num_seqs is not None:
        caps.append((max_num_seqs, 2, "max_num_seqs"))
    batch, _, name = min(caps)
    return name, batch


def _communication(costs: ModelCosts, roof: Roof) -> str:
    """How the step's TP all-reduces were costed, in words."""
    if costs.tp <= 1:
        return "none (single GPU)"
    latency = (f"{roof.overheads.allreduce_s * 1e6:,.1f} µs latency each ({roof.link}, fitted)"
               if roof.overheads is not None else "latency not modelled")
    if not roof.interconnect_bytes_per_s:
        return f"bandwidth not modelled: the GPU has no interconnect figure; {latency}"
    return (f"ring all-reduce, {ALL_REDUCES_PER_LAYER} per layer of tokens × hidden × {ACTIVATION_BYTES} B, "
            f"at {roof.interconnect_bytes_per_s / 1e9:,.0f} GB/s each way per GPU, added to the step "
            f"(not overlapped); {latency}")


def roofline(
    costs: ModelCosts,
    roof: Roof,
    *,
    context: int,
    batches: Sequence[int] = DEFAULT_BATCHES,
    prompt_tokens: int | None = None,
    max_num_batched_tokens: int | None = None,
    kv_capacity_batch: int | None = None,
    max_num_seqs: int | None = None,
    gpu_flops: Mapping[str, float] | None = None,
) -> RooflineReport:
    """Decode over `batches` at `context`, the compute-bound and KV-capacity batches, and prefill.

    `kv_capacity_batch`: how many requests of `context` tokens the KV cache holds (from `fit`);
    `max_num_seqs`: vLLM's cap on running requests.
    `prompt_tokens` defaults to `context`. `gpu_flops` (dtype → dense FLOP/s) adds per-dtype ridges.
    """
    if context < 0:
        raise InvalidParameter(f"context must be ≥ 0, got {context}")
    if not batches:
        raise InvalidParameter("give at least one batch size")
    if kv_capacity_batch is not None and kv_capacity_batch < 0:
        raise InvalidParameter(f"kv capacity batch must be ≥ 0, got {kv_capacity_batch}")
    points = tuple(decode_point(costs, roof, b, context, kv_capacity_batch) for b in sorted(set(batches)))
    crossing = compute_bound_batch(costs, roof, context)
    limit, limit_batch = throughput_limit(kv_capacity_batch, crossing, max_num_seqs)
    ridges = {
        dtype: ridge_point(flops, roof.bandwidth_bytes_per_s) for dtype, flops in (gpu_flops or {}).items()
    }
    ridges.setdefault(roof.flops_dtype, roof.ridge_point)
    communication = _communication(costs, roof)
    interesting = [*batches, kv_capacity_batch or 0, crossing or 0]
    curve = decode_curve(costs, roof, context, min(CHART_MAX_BATCH, 2 * max(interesting)))
    return RooflineReport(
        model=costs.name,
        gpu=roof.gpu,
        tp=costs.tp,
        dp=costs.dp,
        ep=costs.ep,
        compute_dtype=roof.flops_dtype,
        compute_dtype_reason=costs.compute_dtype_reason,
        bandwidth_bytes_per_s=roof.bandwidth_bytes_per_s,
        peak_flops=roof.peak_flops,
        bandwidth_efficiency=roof.bandwidth_efficiency,
        kv_bandwidth_efficiency=roof.kv_bandwidth_efficiency,
        compute_efficiency=roof.compute_efficiency,
        ridge_point=roof.ridge_point,
        effective_ridge_point=roof.effective_ridge_point,
        ridge_points=ridges,
        context=context,
        weight_bytes=costs.weight_bytes,
        kv_bytes_per_token=costs.kv_bytes_per_token,
        kv_capacity_batch=kv_capacity_batch,
        max_num_seqs=max_num_seqs,
        compute_bound_batch=crossing,
        throughput_limit=limit,
        limit_point=(
            decode_point(costs, roof, limit_batch, context, kv_capacity_batch) if limit_batch else None
        ),
        batches=points,
        prefill=prefill(costs, roof, prompt_tokens if prompt_tokens is not None else max(context, 1),
                        max_num_batched_tokens),
        curve=curve,
        communication=communication,
        speed_model=roof.calibration,
        overheads=roof.overheads,
        notes=costs.notes,
    )


# --- speculative decoding --------------------------------------------------------------------------

# DeepSeek-V3 technical report (arXiv:2412.19437) §5.4.3: "the acceptance rate of the second token prediction
# ranges between 85% and 90%" (one MTP module drafting one token).
MTP_ACCEPTANCE = (0.85, 0.90)
# EAGLE, EAGLE-3, a separate draft model: an assumption, neither fitted nor sourced (no measured point of ours ran
# with a draft): a drafted token is accepted with probability 0.5 to 0.9 (MTP's measured 0.85–0.90 near the top);
# it is printed beside every figure that rests on it.
DRAFT_ACCEPTANCE = (0.5, 0.9)


def tokens_per_verify_step(acceptance: float, drafted: int) -> float:
    """Expected tokens a request gains per verify step: (1 − α^(k+1)) ÷ (1 − α) for k drafted tokens, each accepted
    with probability α independently (Leviathan, Kalman & Matias, ICML 2023, eq. 1); α = 1 gives k + 1."""
    if not 0.0 <= acceptance <= 1.0 or drafted < 0:
        raise InvalidParameter(f"acceptance must be in [0, 1] and drafted tokens ≥ 0, got {acceptance}, {drafted}")
    if acceptance == 1.0:
        return drafted + 1.0
    return (1.0 - acceptance ** (drafted + 1)) / (1.0 - acceptance)


@dataclass(frozen=True)
class SpeculativePoint:
    """Decode with a speculative draft at one batch: each step drafts k tokens, then verifies k + 1 per request."""

    batch: int
    method: str
    num_speculative_tokens: int
    acceptance_low: float  # per drafted token (the range assumed: MTP_ACCEPTANCE or DRAFT_ACCEPTANCE)
    acceptance_high: float
    step_s: float  # k draft steps + one verify step (predicted)
    draft_s: float
    tokens_per_step_low: float  # per request
    tokens_per_step_high: float
    itl_low_s: float  # per output token: step ÷ tokens per step (at the high and the low acceptance)
    itl_high_s: float
    tokens_per_s_low: float
    tokens_per_s_high: float


def speculative_point(costs: ModelCosts, roof: Roof, batch: int, context: int, *, method: str, drafted: int,
                      draft: ModelCosts | None = None) -> SpeculativePoint:
    """A speculative decode step at `batch` × `context`: `drafted` draft steps, then one verify step of k + 1
    queries per request (vLLM v1 spec decode: the target scores all drafted tokens in one forward pass).

    `draft`: a separate draft model's costs; without one (MTP, EAGLE) the draft is one layer of the target's shapes
    with its LM head (model_costs.one_layer_draft, an estimate). Acceptance: MTP_ACCEPTANCE for MTP, else
    DRAFT_ACCEPTANCE (an assumption). The range is the acceptance's alone; the step time's own range is not added.
    """
    if drafted < 1:
        raise InvalidParameter(f"num_speculative_tokens must be ≥ 1, got {drafted}")
    verify = step_time(step_cost(costs, decode_reqs=batch, decode_context=context, queries_per_request=drafted + 1),
                       roof, costs.tp).time_s
    drafter = draft if draft is not None else one_layer_draft(costs)
    draft_s = drafted * decode_step_time(drafter, roof, batch, context)
    low, high = MTP_ACCEPTANCE if method == "mtp" else DRAFT_ACCEPTANCE
    few, many = tokens_per_verify_step(low, drafted), tokens_per_verify_step(high, drafted)
    step = verify + draft_s
    return SpeculativePoint(batch, method, drafted, low, high, step, draft_s, few, many, step / many, step / few,
                            batch * few / step, batch * many / step)


def unmodelled_settings(*, pp: int = 1, enforce_eager: bool = False) -> tuple[str, ...]:
    """What in a deployment the predicted times leave out, in words (each a note beside the prediction).

    Every fitted point ran with CUDA graphs and without pipeline parallelism
    (tests/fixtures/data/roofline-measured.yaml): the per-layer costs are those of graph replays, and a step
    is one pass over every layer on one GPU's share of them.
    """
    notes: list[str] = []
    if pp > 1:
        notes.append(f"pipeline parallelism ({pp} stages) is not in the step times: they are one TP group's pass over "
                     f"all layers; a stage holds about 1/{pp} of them, and a token crosses every stage in turn")
    if enforce_eager:
        notes.append("--enforce-eager: the per-layer costs are fitted on runs with CUDA graphs; without them each "
                     "kernel is launched from Python, and measured decode ran 1.1–4.3× slower at small batches "
                     "(vLLM PR #1440: Llama-2-7B 1.2 s vs 1.05 s; vllm-omni #7960: 1.7–4.3× on A800 and H200): "
                     "not modelled")
    return tuple(notes)


# --- from a ModelSpec ----------------------------------------------------------------------------


def roof_from_gpu(
    gpu: GpuSpec,
    flops_dtype: str,
    *,
    bandwidth_efficiency: float | None = None,
    compute_efficiency: float | None = None,
    calibration: SpeedCalibration | None = None,
) -> Roof:
    """The roof of a catalog GPU for matmuls in `flops_dtype` (GpuSpec.resolve_flops falls back to a
    wider dtype the chip lists; the roof says which one it used).

    With a `calibration` (speed_model.py) the roof predicts: the GPU class's fitted efficiencies (an
    efficiency given here wins) and the per-step overheads. Without one it is the plain roofline at the
    given efficiencies (default 0.70 and 0.76). The catalog's interconnect figure is bidirectional; the
    roof keeps one direction.
    """
    from kvplan.hardware.nodes import PCIE_SERVER, node_shape

    flops = gpu.resolve_flops(flops_dtype)
    link = gpu.interconnect_bytes_per_s
    kind: LinkKind = "nvlink" if link and node_shape(gpu.id) is not PCIE_SERVER else "pcie"
    overheads, how, kv_efficiency = None, "", None
    if calibration is not None:
        bw, fl, overheads, how = calibration.for_gpu(gpu.arch, kind)
        kv_efficiency = calibration.kv_efficiency(gpu.arch) if bandwidth_efficiency is None else None
        bandwidth_efficiency = bw if bandwidth_efficiency is None else bandwidth_efficiency
        compute_efficiency = fl if compute_efficiency is None else compute_efficiency
    return Roof(
        gpu=gpu.id,
        bandwidth_bytes_per_s=gpu.require_bandwidth(),
        peak_flops=flops.flops,
        flops_dtype=flops.dtype,
        bandwidth_efficiency=DEFAULT_BANDWIDTH_EFFICIENCY if bandwidth_efficiency is None else bandwidth_efficiency,
        compute_efficiency=DEFAULT_COMPUTE_EFFICIENCY if compute_efficiency is None else compute_efficiency,
        kv_bandwidth_efficiency=kv_efficiency,
        interconnect_bytes_per_s=link / INTERCONNECT_DIRECTIONS if link else None,
        arch=gpu.arch,
        link=kind,
        overheads=overheads,
        calibration=how,
    )


def deployment_roofline(
    model: ModelSpec, gpu: GpuSpec, *, tp: int = 1, kv_cache_dtype: str = "auto", weights_bytes: int | None = None,
    bandwidth_efficiency: float | None = None, compute_efficiency: float | None = None, dp: int = 1,
    expert_parallel: bool = False,
) -> tuple[ModelCosts, Roof]:
    """The model's per-GPU costs and the predicting roof (speed_model.CALIBRATION) on `gpu`: what `roofline`,
    `simulate serve` and `check` all time steps with. An efficiency given here replaces the fitted one."""
    from kvplan.hardware.speed_model import CALIBRATION

    costs = model_costs(model, tp=tp, kv_cache_dtype=kv_cache_dtype, gpu_flops=gpu.flops, weights_bytes=weights_bytes,
                        dp=dp, expert_parallel=expert_parallel)
    roof = roof_from_gpu(gpu, costs.compute_dtype, bandwidth_efficiency=bandwidth_efficiency,
                         compute_efficiency=compute_efficiency, calibration=CALIBRATION)
    return costs, roof


# --- measured speeds as the speed model sees them ---------------------------------------------------

# What a published figure measures (tests/fixtures/data/roofline-measured.yaml's `compare`).
MEASURED_KINDS: tuple[str, ...] = ("per_request_tok_s", "itl_ms", "tpot_ms", "ttft_ms", "static_batch_e2e_ms",
                                   "static_batch_out_tok_s", "static_batch_out_tok_s_per_gpu")


def measured_observation(
    point_id: str, costs: ModelCosts, roof: Roof, *, kind: str, value: float, batch: int, context: int,
    prompt: int | None = None, output: int | None = None, gpus: int = 1, engine: str = VLLM,
) -> Observation:
    """A published measurement as the steps it spans (speed_model.Observation), from its settings.

    per_request_tok_s / itl_ms / tpot_ms: one decode step of `batch` requests at `context` (1 ÷ tok/s,
    ms ÷ 1000). ttft_ms: the prefill of `batch` prompts of `prompt` tokens, first token included.
    static_batch_*: that prefill, then `output − 1` decode steps at `context` (the mean context over the
    run): the first output token comes out of the prefill; `_per_gpu` figures are over `gpus` GPUs.
    `engine` is whose overheads the measurement carries (speed_model.ENGINES).
    """
    if kind not in MEASURED_KINDS:
        raise InvalidParameter(f"unknown measured figure {kind!r}; expected one of {', '.join(MEASURED_KINDS)}")
    if value <= 0:
        raise InvalidParameter(f"{point_id}: measured value must be positive, got {value}")
    rated = roof.rated()

    def shape(cost: StepCost, count: float = 1.0) -> StepShape:
        t = step_time(cost, rated, costs.tp)
        weights_s = cost.weight_bytes / rated.bandwidth_bytes_per_s
        return StepShape(weights_s, t.compute_s, t.comm_s, cost.layers, cost.moe_layers, cost.all_reduces, count,
                         kv_s=t.memory_s - weights_s, decode_reqs=cost.decode_reqs)

    decode = step_cost(costs, decode_reqs=batch, decode_context=context)
    if kind in ("per_request_tok_s", "itl_ms", "tpot_ms"):
        seconds = 1.0 / value if kind == "per_request_tok_s" else value / 1e3
        return Observation(point_id, roof.arch, roof.link, (shape(decode),), False, seconds, engine)
    if prompt is None:
        raise InvalidParameter(f"{point_id}: {kind} needs the prompt length")
    steps = [shape(batch_prefill_cost(costs, batch, prompt))]
    if kind == "ttft_ms":
        return Observation(point_id, roof.arch, roof.link, tuple(steps), True, value / 1e3, engine)
    if output is None or output < 1:
        raise InvalidParameter(f"{point_id}: {kind} needs the output length")
    if output > 1:
        steps.append(shape(decode, output - 1))
    per_gpu = gpus if kind == "static_batch_out_tok_s_per_gpu" else 1
    seconds = value / 1e3 if kind == "static_batch_e2e_ms" else batch * output / (value * per_gpu)
    return Observation(point_id, roof.arch, roof.link, tuple(steps), True, seconds, engine)
