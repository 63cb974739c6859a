"""The block plan for given KV memory: blocks, tokens, concurrency and the fit check, as vLLM plans them.

Pure core. The block maths follows vLLM 0.33 exactly (file:function cited per step):

1. block size: 16, the attention backend's preference, `--block-size`; hybrid models raise it so an
   attention page holds a Mamba/GDN state (platforms/interface.py:_align_hybrid_block_size);
2. groups (v1/core/kv_cache_planning.py:get_kv_cache_groups): one group for a uniform model, else
   page-size unification, buckets, `group_size` with the 1.5× rule and a round-robin split;
3. bytes per block = max over groups of Σ pages, per worker; num_blocks = available // bytes per
   block, min over workers (get_kv_cache_configs);
4. fit check on `available − bytes_per_block` (the null block; the whole available memory up to vLLM 0.28,
   defaults.fit_check_reserves_null_block), vLLM's refusal message and its binary-searched estimated max model
   length (_check_enough_kv_cache_memory);
5. capacity log: concurrency = num_blocks / blocks per request, tokens = int(concurrency × max_model_len)
   (v1/core/kv_cache_utils.py:get_max_concurrency_for_kv_cache_config, get_kv_cache_capacity).

Steps 1–2 live in kv_groups.py; the verdicts on a plan in verdicts.py; `plan_fit` (fit.py) runs the whole
pipeline from a model, a GPU and `vllm serve` settings.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from kvplan.errors import InvalidParameter
from kvplan.model.kv_cache import KVCacheSpec
from kvplan.units import GiB, format_gib_vllm
from kvplan.vllm.defaults import (
    MIN_KERNEL_BLOCK_SIZE,
    REFUSAL_WORDINGS,
    MambaCacheMode,
    VllmVersion,
)
from kvplan.vllm.kv_groups import (
    HybridAlignment,
    KVCacheGroup,
    LayerTupleLayout,
    align_hybrid_block_size,
    build_groups,
    bytes_per_block,
    mamba_blocks_per_request,
)

# v1/core/block_pool.py:BlockPool.__init__ pops block 0 as the null block.
NULL_BLOCKS = 1

CONSERVING_MEMORY_URL = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"
NO_MEMORY_MESSAGE = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
    "the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). "
    f"See {CONSERVING_MEMORY_URL} for more details."
)


@dataclass(frozen=True)
class KVCachePlan:
    """What vLLM's engine core computes from the specs and the available memory per worker."""

    block_size: int  # attention block size, after hybrid alignment
    groups: tuple[KVCacheGroup, ...]
    bytes_per_block: int  # of the worker that bounds num_blocks
    bytes_per_block_per_worker: tuple[int, ...]
    available_kv_bytes: int  # of that worker
    num_gpu_blocks: int  # includes the null block, as vLLM's log
    blocks_per_request: int  # Σ over groups at max_model_len
    max_model_len: int
    in_flight_tokens: int
    mamba_cache_mode: MambaCacheMode
    mamba_blocks: int  # blocks per request of each Mamba group
    max_concurrency: float
    kv_cache_tokens: int
    fits: bool
    refusal: str | None  # vLLM's ValueError text when it would not start
    needed_bytes: int  # KV one max-length request needs (bytes_per_block × blocks_per_request)
    check_bytes: int  # available − bytes_per_block (the null block); the whole available up to vLLM 0.28
    estimated_max_model_len: int | None  # when it does not fit
    log_line: str | None  # vLLM's capacity line (absent when it refuses)
    hybrid: HybridAlignment | None = None
    hma_disabled: bool = False
    vllm_log: tuple[str, ...] = ()  # INFO/WARNING lines vLLM prints while planning

    @property
    def usable_blocks(self) -> int:
        """Blocks requests can use: all but the null block."""
        return max(0, self.num_gpu_blocks - NULL_BLOCKS)

    def request_blocks(self, tokens: int) -> int:
        """Blocks one request of `tokens` tokens holds, over all groups."""
        return sum(g.blocks_per_request(tokens, self.in_flight_tokens, self.mamba_blocks) for g in self.groups)


def blocks_per_request(groups: Iterable[KVCacheGroup], tokens: int, in_flight_tokens: int, mamba_blocks: int) -> int:
    """Σ over groups of cdiv(max_memory_usage_bytes, page) for a request of `tokens` tokens."""
    return sum(g.blocks_per_request(tokens, in_flight_tokens, mamba_blocks) for g in groups)


def estimate_max_model_len(
    groups: Sequence[KVCacheGroup],
    bytes_per_block_: int,
    memory: int,
    max_model_len: int,
    in_flight_tokens: int,
    mamba_blocks: int,
) -> int:
    """Largest L ≤ max_model_len whose request fits in `memory`, 0 if even L=1 does not
    (kv_cache_planning.py:_estimate_max_model_len_from_groups, a binary search)."""

    def fits(length: int) -> bool:
        return bytes_per_block_ * blocks_per_request(groups, length, in_flight_tokens, mamba_blocks) <= memory

    if not fits(1):
        return 0
    lo, hi, best = 1, max_model_len, 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(mid):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def refusal_message(max_model_len: int, needed_bytes: int, check_bytes: int, estimated: int,
                    wording: VllmVersion = REFUSAL_WORDINGS[-1]) -> str:
    """vLLM's ValueError when one max-length request does not fit (_check_enough_kv_cache_memory), in the wording of
    the release `wording` names (defaults.refusal_wording). The unbalanced parenthesis and the spacing are vLLM's;
    0.8's estimate sentence is cut after its first line (an f-string left on its own line in vLLM's source)."""
    v0_14 = wording >= VllmVersion(0, 14)
    gib = format_gib_vllm if v0_14 else (lambda b: f"{b / GiB:.2f}")  # utils format_gib from 0.14, `:.2f` before
    models = "model's" if wording >= VllmVersion(0, 22) else "models's"
    head = (f"To serve at least one request with the {models} max seq len ({max_model_len}), "
            f"({gib(needed_bytes)} GiB KV cache is needed, which is larger than the available KV cache "
            f"memory ({gib(check_bytes)} GiB).")
    sentence = f"Based on the available memory, the estimated maximum model length is {estimated}."
    if wording < VllmVersion(0, 9):
        estimate = " Based on the available memory," if estimated > 0 else ""
        return f"{head}{estimate}  Try increasing `gpu_memory_utilization` or decreasing `max_model_len` " \
            "when initializing the engine."
    if v0_14:
        head += f" {sentence} " if estimated > 0 else " "
    else:
        head += f" {sentence if estimated > 0 else ''} "
    cpu = " (which also controls CPU memory on the CPU backend)" if wording >= VllmVersion(0, 22) else ""
    tail = f" See {CONSERVING_MEMORY_URL} for more details." if wording >= VllmVersion(0, 13) else ""
    return (f"{head}Try increasing `gpu_memory_utilization`{cpu} or decreasing `max_model_len` when initializing "
            f"the engine.{tail}")


def capacity_log_line(tokens: int, max_model_len: int, concurrency: float, device: str = "GPU") -> str:
    """`GPU KV cache size: 2,246,944 tokens, Maximum concurrency for 32,768 tokens per request: 68.57x`
    (v1/core/kv_cache_utils.py:update_kv_cache_capacity)."""
    return (
        f"{device} KV cache size: {tokens:,} tokens, Maximum concurrency for {max_model_len:,} tokens "
        f"per request: {concurrency:.2f}x"
    )


@dataclass(frozen=True)
class BlockPlanSettings:
    """What the block plan reads besides the specs and the memory: the KV settings as resolve_settings left them
    (vllm/settings.py) and the speculative / context-parallel extras.

    `block_size` is the size after the backend's preference (or `--block-size`); hybrid alignment is applied by
    the plan. Mamba/GDN layers: `mamba_cache_mode` (align with prefix caching), the state-checkpoint token
    alignment and the extra checkpoint blocks of the GDN kernel (vllm_defaults.gdn_*).
    `tokens_per_group_block`: count "GPU KV cache size" as vLLM ≤ 0.20 printed it (see _counted_plan).
    `dsv4_layer_tuples`: DeepSeek-V4 grouped and counted as vLLM ≤ 0.28 did (kv_groups.LayerTupleLayout).
    `merged_pp_fit_check`: the one-request check of vLLM 0.14–0.16, the whole model's layers against the smallest
    stage's memory (see _fit_check). `reserve_null_block`: the check (and its estimated max model length) runs on the
    available memory less one block, as from vLLM 0.29; up to 0.28 on all of it
    (defaults.fit_check_reserves_null_block). `override_sets_checked_memory`: with `num_blocks_override`, the check
    runs on override × bytes per block, as from vLLM 0.21; up to 0.20 on the memory given
    (defaults.override_sets_checked_memory)."""

    block_size: int
    max_model_len: int
    in_flight_tokens: int
    mamba_cache_mode: MambaCacheMode = "align"
    mamba_checkpoint_alignment: int = 1
    mamba_prefill_checkpoint_blocks: int = 0
    min_kernel_block_size: int = MIN_KERNEL_BLOCK_SIZE
    disable_hybrid_kv_cache_manager: bool = False
    sliding_window_block_size: int | None = None
    num_speculative_blocks: int = 0
    context_parallel: int = 1  # --decode-context-parallel-size
    num_blocks_override: int | None = None  # --num-gpu-blocks-override
    tokens_per_group_block: bool = False
    dsv4_layer_tuples: bool = False
    merged_pp_fit_check: bool = False  # vLLM 0.14–0.16 (defaults.pp_fit_check_merged)
    reserve_null_block: bool = True  # vLLM 0.29+ (defaults.fit_check_reserves_null_block)
    override_sets_checked_memory: bool = True  # vLLM 0.21+ (defaults.override_sets_checked_memory)
    refusal_wording: VllmVersion = REFUSAL_WORDINGS[-1]  # defaults.refusal_wording


@dataclass(frozen=True)
class _Layout:
    """The block size, groups and per-request blocks of a plan, before any memory is counted."""

    block_size: int
    hybrid: HybridAlignment | None
    groups: tuple[KVCacheGroup, ...]
    hma_disabled: bool
    mamba_blocks: int
    blocks_per_request: int
    vllm_log: tuple[str, ...]
    tuples: LayerTupleLayout | None = None  # vLLM ≤ 0.28's DeepSeek-V4 accounting (kv_groups.LayerTupleLayout)


@dataclass(frozen=True)
class _FitCheck:
    """The outcome of the per-worker fit check: vLLM's refusal (None when it fits) and the numbers it quotes."""

    refusal: str | None
    estimated_max_model_len: int | None
    needed_bytes: int
    check_bytes: int


def _worker_budgets(
    specs_per_worker: Sequence[Sequence[KVCacheSpec]], available_kv_bytes: int | Sequence[int],
    block_size: int, max_model_len: int,
) -> tuple[list[list[KVCacheSpec]], list[int]]:
    """Validate the inputs; the specs and the available KV bytes of each worker (PP stage)."""
    if block_size < 1:
        raise InvalidParameter(f"--block-size must be ≥ 1, got {block_size}")
    if max_model_len < 1:
        raise InvalidParameter(f"--max-model-len must be ≥ 1, got {max_model_len}")
    workers = [list(w) for w in specs_per_worker]
    if isinstance(available_kv_bytes, int):
        return workers, [available_kv_bytes] * len(workers)
    avail = list(available_kv_bytes)
    if len(avail) != len(workers):
        raise InvalidParameter("one available-memory value per worker is needed")
    return workers, avail


def _hybrid_block_size(
    flat: Sequence[KVCacheSpec], block_size: int, *, mamba_cache_mode: MambaCacheMode,
    mamba_checkpoint_alignment: int, min_kernel_block_size: int,
) -> tuple[HybridAlignment | None, int, int | None, list[str]]:
    """Attention block size and padded Mamba page, with vLLM's log lines
    (platforms/interface.py:_align_hybrid_block_size)."""
    hybrid = align_hybrid_block_size(
        flat,
        block_size,
        mamba_cache_mode=mamba_cache_mode,
        checkpoint_alignment=mamba_checkpoint_alignment,
        min_kernel_block_size=min_kernel_block_size,
    )
    log: list[str] = []
    if hybrid is None or not hybrid.attention_bytes_per_token:
        return hybrid, block_size, None, log
    bs = hybrid.block_size
    if hybrid.raised:
        log.append(
            f"Setting attention block size to {bs} tokens to ensure that attention page size is >= mamba page size."
        )
    if hybrid.padding_pct > 0:
        log.append(
            f"Padding mamba page size by {hybrid.padding_pct:.2f}% to ensure that mamba page size and "
            "attention page size are exactly equal."
        )
    return hybrid, bs, hybrid.mamba_page_padded_bytes, log


def _layout(flat: Sequence[KVCacheSpec], c: BlockPlanSettings) -> _Layout:
    """Block size, KV cache groups and blocks per request (steps 1–2: kv_cache_planning.py:get_kv_cache_groups)."""
    hybrid, bs, padded, log = _hybrid_block_size(
        flat, c.block_size, mamba_cache_mode=c.mamba_cache_mode,
        mamba_checkpoint_alignment=c.mamba_checkpoint_alignment, min_kernel_block_size=c.min_kernel_block_size,
    )
    grouping = build_groups(
        flat,
        bs,
        mamba_page_padded_bytes=padded,
        disable_hybrid_kv_cache_manager=c.disable_hybrid_kv_cache_manager,
        sliding_window_block_size=c.sliding_window_block_size,
        dsv4_layer_tuples=c.dsv4_layer_tuples,
    )
    log.extend(grouping.warnings)
    mamba_blocks = mamba_blocks_per_request(c.mamba_cache_mode, c.num_speculative_blocks,
                                            c.mamba_prefill_checkpoint_blocks)
    if grouping.tuples is not None:
        bpr = grouping.tuples.blocks_per_request(c.max_model_len, c.in_flight_tokens)
    else:
        bpr = blocks_per_request(grouping.groups, c.max_model_len, c.in_flight_tokens, mamba_blocks)
    return _Layout(bs, hybrid, grouping.groups, grouping.hma_disabled, mamba_blocks, bpr, tuple(log), grouping.tuples)


def _num_blocks(avail: Sequence[int], bpb_workers: Sequence[int]) -> tuple[int, int]:
    """Each worker sizes its own cache; the smallest count wins, and the worker it comes from
    (v1/core/kv_cache_utils.py:get_kv_cache_configs)."""
    counted = [(max(0, a // b), i) for i, (a, b) in enumerate(zip(avail, bpb_workers, strict=True)) if b > 0]
    return min(counted)


def _fit_check(
    layout: _Layout, avail: Sequence[int], bpb_workers: Sequence[int], bound: int,
    max_model_len: int, in_flight_tokens: int, merged: bool = False, reserve_null_block: bool = True,
    wording: VllmVersion = REFUSAL_WORDINGS[-1],
) -> _FitCheck:
    """Fit check per worker, in order; the first failure is vLLM's error
    (v1/core/kv_cache_utils.py:_check_enough_kv_cache_memory). `merged` (vLLM 0.14–0.16 under PP): one check of the
    merged spec, every stage's layers, against the smallest worker's memory (get_kv_cache_configs:
    "_check_enough_kv_cache_memory(min(available_memory), ... global_kv_cache_groups)"). `reserve_null_block`
    (vLLM 0.29+, get_kv_cache_configs: "Reserve the null block"): each worker's memory less its bytes per block; up to
    0.28 the whole memory, the "No available memory" refusal then only at ≤ 0 bytes."""
    if layout.tuples is not None:
        return _tuple_fit_check(layout.tuples, avail[bound], max_model_len, in_flight_tokens, wording)
    bpr = layout.blocks_per_request
    checked = ([(min(avail), sum(bpb_workers))] if merged and len(avail) > 1
               else list(zip(avail, bpb_workers, strict=True)))
    for a, b in checked:
        if b == 0:
            continue
        c = a - b if reserve_null_block else a
        if c <= 0:
            return _FitCheck(NO_MEMORY_MESSAGE, 0, b * bpr, c)
        if b * bpr > c:
            estimated = estimate_max_model_len(layout.groups, b, c, max_model_len, in_flight_tokens,
                                               layout.mamba_blocks)
            return _FitCheck(refusal_message(max_model_len, b * bpr, c, estimated, wording), estimated, b * bpr, c)
    reserved = bpb_workers[bound] if reserve_null_block else 0
    return _FitCheck(None, None, bpb_workers[bound] * bpr, avail[bound] - reserved)


def _tuple_fit_check(tuples: LayerTupleLayout, avail: int, max_model_len: int, in_flight_tokens: int,
                     wording: VllmVersion) -> _FitCheck:
    """vLLM ≤ 0.28's check for DeepSeek-V4: _max_memory_usage_bytes_from_groups against the whole available memory
    (0.23's get_kv_cache_configs passes it unreduced), its estimate the same binary search over that sum."""
    needed = tuples.needed_bytes(max_model_len, in_flight_tokens)
    if avail <= 0:
        return _FitCheck(NO_MEMORY_MESSAGE, 0, needed, avail)
    if needed <= avail:
        return _FitCheck(None, None, needed, avail)
    lo, hi, best = 1, max_model_len, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if tuples.needed_bytes(mid, in_flight_tokens) <= avail:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return _FitCheck(refusal_message(max_model_len, needed, avail, best, wording), best, needed, avail)


def _attention_free_plan(
    layout: _Layout, avail: Sequence[int], max_model_len: int, in_flight_tokens: int,
    mamba_cache_mode: MambaCacheMode,
) -> KVCachePlan:
    """The plan of a model with no attention and no state: vLLM keeps just the null block."""
    return KVCachePlan(
        block_size=layout.block_size,
        groups=(),
        bytes_per_block=0,
        bytes_per_block_per_worker=(0,) * len(avail),
        available_kv_bytes=min(avail, default=0),
        num_gpu_blocks=NULL_BLOCKS,
        blocks_per_request=0,
        max_model_len=max_model_len,
        in_flight_tokens=in_flight_tokens,
        mamba_cache_mode=mamba_cache_mode,
        mamba_blocks=layout.mamba_blocks,
        max_concurrency=0.0,
        kv_cache_tokens=0,
        fits=True,
        refusal=None,
        needed_bytes=0,
        check_bytes=0,
        estimated_max_model_len=None,
        log_line=None,
        hybrid=layout.hybrid,
        hma_disabled=layout.hma_disabled,
        vllm_log=layout.vllm_log,
    )


def _counted_plan(layout: _Layout, workers: Sequence[Sequence[KVCacheSpec]], avail: Sequence[int],
                  c: BlockPlanSettings) -> KVCachePlan:
    """Steps 3–5: bytes per block per worker, the block count, the fit check and the capacity log line.
    `--num-gpu-blocks-override` replaces the count (kv_cache_planning.py:may_override_num_blocks) and, from vLLM 0.21,
    the memory the fit check runs on (get_kv_cache_configs: `adjusted_memory.append(override * bytes_per_block)`).
    "GPU KV cache size" is max_concurrency × max_model_len since vLLM 0.21 (kv_cache_utils.py:
    get_kv_cache_capacity); up to 0.20 `tokens_per_group_block`: num_blocks // groups × the smallest block
    size (kv_cache_utils.py:_report_kv_cache_config), far fewer for a hybrid model's several groups."""
    max_model_len, in_flight_tokens, mamba_cache_mode = c.max_model_len, c.in_flight_tokens, c.mamba_cache_mode
    num_blocks_override, tokens_per_group_block = c.num_blocks_override, c.tokens_per_group_block
    bpb_workers = tuple(bytes_per_block(layout.groups, [s.layer for s in w]) if layout.tuples is None
                        else layout.tuples.bytes_per_block for w in workers)
    num_blocks, bound = _num_blocks(avail, bpb_workers)
    if num_blocks_override is not None:
        num_blocks = num_blocks_override
    checked = ([num_blocks_override * b if b > 0 else a for a, b in zip(avail, bpb_workers, strict=True)]
               if num_blocks_override is not None and c.override_sets_checked_memory else avail)
    check = _fit_check(layout, checked, bpb_workers, bound, max_model_len, in_flight_tokens, c.merged_pp_fit_check,
                       c.reserve_null_block, c.refusal_wording)
    concurrency = num_blocks / layout.blocks_per_request
    tokens = (num_blocks // len(layout.groups) * min(g.block_size for g in layout.groups)
              if tokens_per_group_block else int(concurrency * max_model_len))
    fits = check.refusal is None
    return KVCachePlan(
        block_size=layout.block_size,
        groups=layout.groups,
        bytes_per_block=bpb_workers[bound],
        bytes_per_block_per_worker=bpb_workers,
        available_kv_bytes=avail[bound],
        num_gpu_blocks=num_blocks,
        blocks_per_request=layout.blocks_per_request,
        max_model_len=max_model_len,
        in_flight_tokens=in_flight_tokens,
        mamba_cache_mode=mamba_cache_mode,
        mamba_blocks=layout.mamba_blocks,
        max_concurrency=concurrency,
        kv_cache_tokens=tokens,
        fits=fits,
        refusal=check.refusal,
        needed_bytes=check.needed_bytes,
        check_bytes=check.check_bytes,
        estimated_max_model_len=check.estimated_max_model_len,
        log_line=capacity_log_line(tokens, max_model_len, concurrency) if fits else None,
        hybrid=layout.hybrid,
        hma_disabled=layout.hma_disabled,
        vllm_log=layout.vllm_log,
    )


def plan_kv_cache(specs_per_worker: Sequence[Sequence[KVCacheSpec]], available_kv_bytes: int | Sequence[int],
                  settings: BlockPlanSettings) -> KVCachePlan:
    """Blocks, tokens, concurrency and the fit verdict for KV memory given per worker (PP stage):
    `available_kv_bytes` is one value for every worker or one per worker; `settings` the rest
    (BlockPlanSettings)."""
    c = settings
    workers, avail = _worker_budgets(specs_per_worker, available_kv_bytes, c.block_size, c.max_model_len)
    layout = _layout([s for w in workers for s in w], c)
    if not layout.groups:  # attention-free and state-free: vLLM keeps just the null block
        return _attention_free_plan(layout, avail, c.max_model_len, c.in_flight_tokens, c.mamba_cache_mode)
    if c.context_parallel > 1:
        layout = _context_parallel_layout(layout, c.context_parallel, c.max_model_len, c.in_flight_tokens)
    return _counted_plan(layout, workers, avail, c)


def _context_parallel_layout(layout: _Layout, dcp: int, max_model_len: int, in_flight_tokens: int) -> _Layout:
    """Decode context parallelism shards each request's KV over `dcp` ranks: a block id then stands for
    block_size × dcp tokens of the request (v1/core/kv_cache_utils.py and single_type_kv_cache_manager.py:
    `block_size * dcp_world_size` per block), so requests hold 1/dcp of the blocks and tokens grow ×dcp."""
    groups = tuple(g if g.kind == "mamba" else replace(g, block_size=g.block_size * dcp) for g in layout.groups)
    bpr = blocks_per_request(groups, max_model_len, in_flight_tokens, layout.mamba_blocks)
    return replace(layout, groups=groups, blocks_per_request=bpr)
