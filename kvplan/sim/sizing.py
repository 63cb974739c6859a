"""Sizing the simulators: the pool (given in blocks, in tokens, or from a `kvplan fit` result), the
scheduler limits of a fitted deployment, and step times from its roofline.

How a fitted pool maps onto the simulators' one pool of blocks (kvplan's choice, stated in every
`--model/--gpu` run):

* one KV-cache group (dense or MLA models, and hybrids whose windows vLLM promotes to full attention):
  the simulator's pool is vLLM's, exactly;
* full attention plus sliding-window or chunked-local groups: all groups share vLLM's num_gpu_blocks
  (`kv_cache_utils.py:get_kv_cache_configs`: one pool of block ids, each id one page in every layer of
  a group). The simulator tracks the full-attention blocks: with F full-attention groups every block of
  tokens takes F ids, so it gets (num_gpu_blocks − 1) ÷ F usable blocks. The windowed groups' blocks (a
  bounded number per running request) are not simulated, so the pool is optimistic by up to that many
  per running request; the report gives the figure;
* refused: models with Mamba/linear-attention state groups (a fixed number of blocks per request, block
  sizes raised to hundreds of tokens, prefix hits only at state checkpoints) and models with no
  full-attention group (vLLM frees blocks that leave the window; the simulator never does).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kvplan.errors import InvalidParameter

if TYPE_CHECKING:
    from kvplan.hardware.roofline import RooflineCost
    from kvplan.vllm.report import FitReport

# GroupSummary.kind values (kv.py CacheKind) by how the simulator treats them.
FULL_ATTENTION_KINDS = frozenset({"full", "mla"})
WINDOWED_KINDS = frozenset({"sliding_window", "chunked_local"})
STATE_KINDS = frozenset({"mamba"})
NULL_BLOCKS = 1  # v1/core/block_pool.py: BlockPool.__init__ pops block 0 as the null block
ROOFLINE_COST_MODEL = "roofline"  # ServeReport.cost_model of a run timed by RooflineStepCost


def num_gpu_blocks_from(*, num_gpu_blocks: int | None, kv_tokens: int | None, block_size: int) -> int:
    """vLLM's num_gpu_blocks (null block included) from `--num-gpu-blocks` or `--kv-tokens`.

    `--kv-tokens` is the figure of vLLM's start-up log line "GPU KV cache size: N tokens", which is
    num_gpu_blocks × block_size for a model with one KV-cache group (`kv_cache_utils.py`), so
    21,520 tokens at block size 16 are 1,345 blocks (1,344 usable).
    """
    if block_size < 1:
        raise InvalidParameter(f"block-size must be ≥ 1, got {block_size}")
    if (num_gpu_blocks is None) == (kv_tokens is None):
        raise InvalidParameter("give the pool size as exactly one of --num-gpu-blocks or --kv-tokens",
                               hint="vLLM logs it at start-up: 'GPU KV cache size: N tokens'")
    blocks = num_gpu_blocks if num_gpu_blocks is not None else (kv_tokens or 0) // block_size
    if blocks < 2:
        raise InvalidParameter(f"the pool needs at least 2 blocks (block 0 is the null block), got {blocks}")
    return blocks


class FitLike(Protocol):
    """What `pool_from_fit` needs from a `kvplan fit` result."""

    @property
    def num_gpu_blocks(self) -> int:
        """vLLM's num_gpu_blocks, null block included."""
        ...


def pool_from_fit(report: FitLike) -> int:
    """vLLM's num_gpu_blocks of a `fit` result, refused below 2. Exact for one KV-cache group; use
    `fitted_pool` for the mapping of hybrid models."""
    blocks = int(report.num_gpu_blocks)
    if blocks < 2:
        raise InvalidParameter(f"the fitted KV cache has {blocks} blocks: nothing to simulate",
                               hint="the model does not fit with these settings; see `kvplan fit`")
    return blocks


@dataclass(frozen=True)
class FittedPool:
    """What a `--model/--gpu` simulation takes from `kvplan fit` (capacity.plan_fit), and how vLLM's
    pool maps onto the simulator's (see the module docstring).

    `num_gpu_blocks`, `block_size`, `kv_cache_tokens` are vLLM's (fit's); `sim_num_gpu_blocks` and
    `sim_block_size` the simulator's pool (null block included) and block. `untracked_blocks_per_request`:
    blocks the windowed groups hold per running request (fit's worst case, at max_model_len with the
    in-flight tokens), not simulated.
    """

    model: str
    gpu: str
    gpu_name: str
    tp: int
    pp: int
    kv_cache_dtype: str
    gpu_memory_utilization: float
    kv_cache_memory_bytes_given: bool
    available_kv_bytes: int
    bytes_per_block: int
    num_gpu_blocks: int
    block_size: int
    kv_cache_tokens: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    settings_sources: dict[str, str]
    num_groups: int
    full_attention_groups: int
    windowed_groups: int
    untracked_blocks_per_request: int
    sim_num_gpu_blocks: int
    sim_block_size: int
    kv_bytes_per_token: int | None  # per GPU, all layers; None when the groups' pages differ
    exact: bool  # the simulator's pool is vLLM's
    mapping: str
    compute_dtype: str | None = None  # the roofline's matmul dtype, when it times the steps
    notes: tuple[str, ...] = ()

    @property
    def sim_kv_tokens(self) -> int:
        """Tokens the simulator's usable blocks hold."""
        return (self.sim_num_gpu_blocks - NULL_BLOCKS) * self.sim_block_size


def fitted_pool(report: FitReport) -> FittedPool:
    """The simulators' pool and engine limits for a fitted deployment; InvalidParameter when vLLM would
    not start or the model's KV-cache groups cannot be simulated faithfully (module docstring)."""
    if not report.fits:
        raise InvalidParameter(f"vLLM would not start {report.model} on {report.gpu_name} with these settings: "
                               f"{report.error or report.startup}",
                               hint="see `kvplan fit` for the memory budget and the changes that fix it")
    blocks = pool_from_fit(report)
    groups = report.groups
    kinds = [g.kind for g in groups]
    state = sum(1 for k in kinds if k in STATE_KINDS)
    full = [g for g in groups if g.kind in FULL_ATTENTION_KINDS]
    windowed = [g for g in groups if g.kind in WINDOWED_KINDS]
    if state:
        raise InvalidParameter(
            f"{report.model}: {state} of its {len(groups)} KV-cache groups hold Mamba/linear-attention state "
            f"(a fixed number of {report.block_size}-token blocks per request, prefix hits only at state "
            "checkpoints), which the simulators cannot represent faithfully",
            hint=f"`kvplan fit` gives its capacity; to simulate its attention layers alone, pass --num-gpu-blocks "
            f"{blocks} --block-size {report.block_size}")
    if not full:
        windows = sorted({g.sliding_window or g.attention_chunk_size or 0 for g in windowed})
        raise InvalidParameter(
            f"{report.model}: every KV-cache group is windowed ({', '.join(f'{w:,}' for w in windows)} tokens); vLLM "
            "frees the blocks that leave the window and the simulators never do",
            hint=f"to simulate it as full attention, exact while prompt + output stay within the window and "
            f"pessimistic beyond, pass --num-gpu-blocks {blocks} --block-size {report.block_size}")
    sim_bs = full[0].block_size
    untracked = sum(g.blocks_per_request for g in windowed)
    usable = (blocks - NULL_BLOCKS) // len(full)
    exact = len(groups) == 1
    if exact:
        mapping = (f"one KV-cache group: the simulator's pool is vLLM's {blocks:,} blocks × {sim_bs} tokens "
                   f"({blocks - NULL_BLOCKS:,} usable).")
    else:
        tracked = "the full-attention group" if len(full) == 1 else f"the {len(full)} full-attention groups"
        mapping = (
            f"{len(groups)} KV-cache groups share vLLM's {blocks:,} blocks (each block id is one page in every "
            f"layer of a group). The simulator tracks {tracked}: (num_gpu_blocks − 1) ÷ {len(full)} = {usable:,} "
            f"usable blocks of {sim_bs} tokens."
        )
        if windowed:
            them = ("windowed group (sliding window or chunked local attention) also holds" if len(windowed) == 1
                    else f"{len(windowed)} windowed groups (sliding window or chunked local attention) also hold")
            mapping += (
                f" The {them} up to {untracked:,} blocks per running request "
                f"(fit's figure at max_model_len), not simulated: the pool is optimistic by up to "
                f"{untracked / len(full):,.0f} blocks per running request.")
    per_token = report.bytes_per_block // report.block_size if exact else None
    return FittedPool(
        model=report.model, gpu=report.gpu, gpu_name=report.gpu_name, tp=report.tp, pp=report.pp,
        kv_cache_dtype=report.kv_cache_dtype, gpu_memory_utilization=report.gpu_memory_utilization,
        kv_cache_memory_bytes_given=report.kv_cache_memory_bytes_given,
        available_kv_bytes=report.available_kv_bytes, bytes_per_block=report.bytes_per_block,
        num_gpu_blocks=blocks, block_size=report.block_size, kv_cache_tokens=report.kv_cache_tokens,
        max_model_len=report.max_model_len, max_num_seqs=report.max_num_seqs,
        max_num_batched_tokens=report.max_num_batched_tokens,
        settings_sources={k: v for k, v in report.settings_sources.items()
                          if k in ("max_num_seqs", "max_num_batched_tokens", "max_model_len")},
        num_groups=len(groups), full_attention_groups=len(full), windowed_groups=len(windowed),
        untracked_blocks_per_request=untracked, sim_num_gpu_blocks=usable + NULL_BLOCKS, sim_block_size=sim_bs,
        kv_bytes_per_token=per_token, exact=exact, mapping=mapping,
    )


def check_request_lengths(lengths: Iterable[int], max_model_len: int) -> None:
    """Refuse what vLLM rejects: a request whose prompt + output exceeds max_model_len (its OpenAI server:
    "This model's maximum context length is M tokens. However, you requested …")."""
    for i, n in enumerate(lengths):
        if n > max_model_len:
            raise InvalidParameter(f"request {i}: prompt + output = {n:,} tokens exceeds max_model_len "
                                   f"{max_model_len:,}", hint="vLLM rejects it; raise --max-model-len")


class RooflineStepCost:
    """`roofline.RooflineCost` as the scheduler calls it (`sim.scheduler.StepCostModel`).

    Both follow the scheduler's protocol (`total_context_tokens` includes the step's new tokens); this
    wrapper only adds the figures the report shows.
    """

    __slots__ = ("roofline",)

    def __init__(self, roofline: RooflineCost) -> None:
        self.roofline = roofline

    def step_time(self, num_prefill_tokens: int, num_decode_reqs: int, total_context_tokens: int) -> float:
        """Seconds of one step at the roofline."""
        return self.roofline.step_time(num_prefill_tokens, num_decode_reqs, total_context_tokens)

    def figures(self) -> dict[str, float]:
        """The roofline's inputs, for the report's `cost_model_params` (per GPU)."""
        costs, roof = self.roofline.costs, self.roofline.roof
        figures = {
            "bandwidth_bytes_per_s": roof.bandwidth_bytes_per_s,
            "bandwidth_efficiency": roof.bandwidth_efficiency,
            "peak_flops": roof.peak_flops,
            "compute_efficiency": roof.compute_efficiency,
            "weight_bytes": float(costs.weight_bytes),
            "kv_bytes_per_token": float(costs.kv_bytes_per_token),
            "tp": float(costs.tp),
        }
        if costs.tp > 1 and roof.interconnect_bytes_per_s:
            figures["interconnect_bytes_per_s"] = roof.interconnect_bytes_per_s
        if roof.overheads is not None:  # the speed model's per-step costs (hardware/speed_model.py)
            o = roof.overheads
            figures.update(step_overhead_s=o.step_s, layer_overhead_s=o.layer_s, moe_layer_overhead_s=o.moe_layer_s)
            if costs.tp > 1:
                figures["allreduce_latency_s"] = o.allreduce_s
        return figures

