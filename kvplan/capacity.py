"""KV-cache capacity as vLLM plans it: block size, groups, blocks, tokens, concurrency, fit check.

Pure core. The block maths follows vLLM 0.33 exactly (file:function cited per step):

1. block size: 16, the attention backend's preference, `--block-size`; hybrid models raise it so an
   attention page holds a Mamba/GDN state (platforms/interface.py:_align_hybrid_block_size);
2. groups (v1/core/kv_cache_planning.py:get_kv_cache_groups): one group for a uniform model, else
   page-size unification, buckets, `group_size` with the 1.5× rule and a round-robin split;
3. bytes per block = max over groups of Σ pages, per worker; num_blocks = available // bytes per
   block, min over workers (get_kv_cache_configs);
4. fit check on `available − bytes_per_block` (the null block), vLLM's refusal message and its
   binary-searched estimated max model length (_check_enough_kv_cache_memory);
5. capacity log: concurrency = num_blocks / blocks per request, tokens = int(concurrency × max_model_len)
   (v1/core/kv_cache_utils.py:get_max_concurrency_for_kv_cache_config, get_kv_cache_capacity).

On top of vLLM: the preemption verdict (when max_num_seqs requests of a given length outgrow the
usable blocks), numeric advice, and `plan_fit`, the one entry point that turns a model, a GPU and
`vllm serve` settings into a `FitReport`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from kvplan.errors import InvalidParameter
from kvplan.kv import KV_CACHE_DTYPES, CacheKind, KVCacheSpec
from kvplan.units import GiB, cdiv, format_gib_vllm
from kvplan.vllm_defaults import (
    FP8_KV_DTYPES,
    MIN_KERNEL_BLOCK_SIZE,
    MLA_HYBRID_MIN_ALIGN,
    MambaCacheMode,
    PerformanceMode,
    Usage,
)

if TYPE_CHECKING:
    from kvplan.config import ModelSpec
    from kvplan.memory import MemoryTerm
    from kvplan.weights import MoeBackend

# v1/core/kv_cache_planning.py:_get_kv_cache_groups_uniform_page_size: when the largest bucket is
# under 1.5× the smallest, the group size is the largest bucket (less padding).
GROUP_SIZE_MAX_RATIO = 1.5
# v1/core/block_pool.py:BlockPool.__init__ pops block 0 as the null block.
NULL_BLOCKS = 1
# Mamba blocks per request (v1/kv_cache_interface.py:MambaSpec.max_memory_usage_bytes): align mode keeps
# 2 running states (+ speculative + prefill-checkpoint blocks); none mode 1 state (+ speculative).
MAMBA_ALIGN_RUNNING_BLOCKS = 2
MAMBA_NONE_BLOCKS = 1

CONSERVING_MEMORY_URL = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"
NO_MEMORY_MESSAGE = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
    "the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). "
    f"See {CONSERVING_MEMORY_URL} for more details."
)


# =============================================================================================
# Groups
# =============================================================================================


@dataclass(frozen=True)
class KVCacheGroup:
    """One KV-cache group (vLLM KVCacheGroupSpec): layers that share block ids.

    Each block id of the group stands for one page in every layer of the group.
    """

    kind: CacheKind
    layers: tuple[int, ...]  # global layer indices, over all PP stages
    block_size: int  # tokens per block of this group
    page_size_bytes: int  # one layer's page, after hybrid padding / page unification
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    layer_page_bytes: tuple[int, ...] = ()  # per layer when pages differ (one group of one type)

    def pages(self) -> tuple[int, ...]:
        """Page bytes of each layer, in `layers` order."""
        return self.layer_page_bytes or (self.page_size_bytes,) * len(self.layers)

    def blocks_per_request(self, tokens: int, in_flight_tokens: int, mamba_blocks: int) -> int:
        """Blocks one request of `tokens` tokens holds in this group (max_memory_usage_bytes / page).

        full/MLA: cdiv(L, bs); sliding window W: cdiv(min(W − 1 + in-flight, L), bs) + 1;
        chunked-local C: cdiv(min(C + in-flight, L), bs); Mamba: a fixed count per request.
        """
        if self.kind == "mamba":
            return mamba_blocks
        if self.kind == "sliding_window" and self.sliding_window is not None:
            return cdiv(min(self.sliding_window - 1 + in_flight_tokens, tokens), self.block_size) + 1
        if self.kind == "chunked_local" and self.attention_chunk_size is not None:
            return cdiv(min(self.attention_chunk_size + in_flight_tokens, tokens), self.block_size)
        return cdiv(tokens, self.block_size)


@dataclass(frozen=True)
class HybridAlignment:
    """Result of `_align_hybrid_block_size` for a model with Mamba/GDN layers."""

    block_size: int
    raised: bool  # the block size was raised to hold the state page
    attention_bytes_per_token: int  # one token of one attention layer, per rank
    mamba_page_bytes: int  # largest state page, unpadded
    mamba_page_padded_bytes: int
    padding_pct: float


def mamba_blocks_per_request(
    mode: MambaCacheMode, num_speculative_blocks: int = 0, prefill_checkpoint_blocks: int = 0
) -> int:
    """Blocks per request of a Mamba group (MambaSpec.max_memory_usage_bytes / page)."""
    if mode == "align":
        return MAMBA_ALIGN_RUNNING_BLOCKS + num_speculative_blocks + prefill_checkpoint_blocks
    return MAMBA_NONE_BLOCKS + num_speculative_blocks


def align_hybrid_block_size(
    specs: Sequence[KVCacheSpec],
    block_size: int,
    *,
    mamba_cache_mode: MambaCacheMode,
    checkpoint_alignment: int = 1,
    min_kernel_block_size: int = MIN_KERNEL_BLOCK_SIZE,
) -> HybridAlignment | None:
    """platforms/interface.py:Platform._align_hybrid_block_size (None without Mamba layers).

    align = max(kernel block, block size) (≥ 128 for MLA), lcm'd with the state-checkpoint alignment
    in `align` mode; attention block = align × cdiv(mamba page, align × attention page of one token),
    rounded to the kernel block; the state page is then padded to block × attention page.
    """
    mamba = [s for s in specs if s.kind == "mamba"]
    attention = [s for s in specs if s.kind != "mamba"]
    if not mamba:
        return None
    mamba_page = max(s.state_bytes for s in mamba)
    if not attention:  # attention-free recurrent model: nothing to align with
        return HybridAlignment(block_size, False, 0, mamba_page, mamba_page, 0.0)
    attn = attention[0]
    per_token = attn.bytes_per_token
    align = max(min_kernel_block_size, block_size)
    if attn.kind == "mla":
        align = max(align, MLA_HYBRID_MIN_ALIGN)
    if mamba_cache_mode == "align":
        align = math.lcm(align, max(1, checkpoint_alignment))
    attn_block = align * cdiv(mamba_page, align * per_token)
    attn_block = cdiv(attn_block, min_kernel_block_size) * min_kernel_block_size
    raised = block_size < attn_block
    final = attn_block if raised else block_size
    padded = final * per_token
    pct = (padded - mamba_page) / mamba_page * 100
    return HybridAlignment(final, raised, per_token, mamba_page, padded, pct)


@dataclass(frozen=True)
class _Slot:
    """A layer on its way into a group: its spec's kind/shape, block size and page."""

    layer: int
    spec: KVCacheSpec
    kind: CacheKind
    block_size: int
    page: int

    def key(self) -> tuple[object, ...]:
        s = self.spec
        return (
            self.kind,
            self.block_size,
            self.page,
            s.num_kv_heads,
            s.head_size,
            s.head_size_v,
            s.dtype_bytes,
            s.sliding_window if self.kind == "sliding_window" else None,
            s.attention_chunk_size if self.kind == "chunked_local" else None,
            s.state_bytes,
        )


@dataclass(frozen=True)
class GroupingResult:
    """Groups plus the warnings vLLM logs while building them."""

    groups: tuple[KVCacheGroup, ...]
    warnings: tuple[str, ...]
    hma_disabled: bool


def _promote(spec: KVCacheSpec) -> CacheKind:
    """kv_cache_planning.py:unify_hybrid_kv_cache_specs: sliding/chunked → full when HMA is off."""
    return "full" if spec.kind in ("sliding_window", "chunked_local") else spec.kind


def build_groups(
    specs: Sequence[KVCacheSpec],
    block_size: int,
    *,
    mamba_page_padded_bytes: int | None = None,
    disable_hybrid_kv_cache_manager: bool = False,
    sliding_window_block_size: int | None = None,
) -> GroupingResult:
    """Group every layer of every worker (kv_cache_planning.py:get_kv_cache_groups).

    With the hybrid manager disabled, sliding-window and chunked-local layers of a hybrid model are cached
    as full attention (unify_hybrid_kv_cache_specs). `sliding_window_block_size` is the kernel block of
    sliding-window layers when it differs from `block_size` (`_largest_kernel_block_within`: 32 on vLLM's
    CPU platform; CUDA keeps the primary block size).
    """
    specs = sorted(specs, key=lambda s: s.layer)
    warnings: list[str] = []
    kinds = {s.kind for s in specs}
    hybrid_attention = len(kinds & {"sliding_window", "chunked_local"}) > 0 and len(kinds) > 1
    promote = disable_hybrid_kv_cache_manager and hybrid_attention
    if promote:
        warnings.append(
            "Hybrid KV cache manager is disabled for this hybrid model: sliding-window and "
            "chunked-local layers are cached like full attention."
        )
    slots: list[_Slot] = []
    for s in specs:
        kind = _promote(s) if promote else s.kind
        if kind == "mamba":
            page = mamba_page_padded_bytes if mamba_page_padded_bytes is not None else s.state_bytes
            slots.append(_Slot(s.layer, s, kind, block_size, page))
        else:
            bs = sliding_window_block_size or block_size if kind == "sliding_window" else block_size
            slots.append(_Slot(s.layer, s, kind, bs, bs * s.bytes_per_token))
    if not slots:
        return GroupingResult((), tuple(warnings), promote)
    first = slots[0]
    # Uniform (is_kv_cache_spec_uniform) or one type with different sizes (UniformTypeKVCacheSpecs): one group.
    if all(sl.kind == first.kind and sl.key()[7:9] == first.key()[7:9] for sl in slots):
        pages = tuple(sl.page for sl in slots)
        uniform = len(set(pages)) == 1
        group = KVCacheGroup(
            first.kind,
            tuple(sl.layer for sl in slots),
            first.block_size,
            max(pages),
            first.spec.sliding_window if first.kind == "sliding_window" else None,
            first.spec.attention_chunk_size if first.kind == "chunked_local" else None,
            () if uniform else pages,
        )
        return GroupingResult((group,), tuple(warnings), promote)
    # unify_kv_cache_spec_page_size: smaller attention pages that divide the largest scale their block
    # size up; the others (and every Mamba page) are padded.
    max_page = max(sl.page for sl in slots)
    unified = []
    for sl in slots:
        if sl.page == max_page:
            unified.append(sl)
        elif sl.kind != "mamba" and sl.page and max_page % sl.page == 0:
            unified.append(replace(sl, block_size=sl.block_size * (max_page // sl.page), page=max_page))
        else:
            unified.append(replace(sl, page=max_page))
    buckets: dict[tuple[object, ...], list[_Slot]] = {}
    for sl in unified:
        buckets.setdefault(sl.key(), []).append(sl)
    sizes = [len(b) for b in buckets.values()]
    group_size = min(sizes)
    if max(sizes) < GROUP_SIZE_MAX_RATIO * group_size:
        group_size = max(sizes)
    groups: list[KVCacheGroup] = []
    for bucket in buckets.values():
        n = cdiv(len(bucket), group_size)
        padding = n * group_size - len(bucket)
        if padding:
            warnings.append(
                f"Add {padding} padding layers, may waste at most {padding / len(bucket) * 100:.2f}% KV cache memory"
            )
        head = bucket[0]
        for i in range(n):
            members = bucket[i::n]
            groups.append(
                KVCacheGroup(
                    head.kind,
                    tuple(m.layer for m in members),
                    head.block_size,
                    max_page,
                    head.spec.sliding_window if head.kind == "sliding_window" else None,
                    head.spec.attention_chunk_size if head.kind == "chunked_local" else None,
                )
            )
    return GroupingResult(tuple(groups), tuple(warnings), promote)


def bytes_per_block(groups: Iterable[KVCacheGroup], layers: Iterable[int] | None = None) -> int:
    """Max over groups of Σ pages of the group's layers (on one worker when `layers` is given)
    (kv_cache_planning.py:_get_kv_cache_bytes_per_block)."""
    keep = None if layers is None else set(layers)
    best = 0
    for g in groups:
        total = sum(p for layer, p in zip(g.layers, g.pages(), strict=True) if keep is None or layer in keep)
        best = max(best, total)
    return best


# =============================================================================================
# The plan for given KV memory
# =============================================================================================


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
    check_bytes: int  # available − bytes_per_block (the null block)
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


def refusal_message(max_model_len: int, needed_bytes: int, check_bytes: int, estimated: int) -> str:
    """vLLM's ValueError when one max-length request does not fit (_check_enough_kv_cache_memory).
    The unbalanced parenthesis is vLLM's."""
    estimate = (
        f" Based on the available memory, the estimated maximum model length is {estimated}." if estimated > 0 else ""
    )
    return (
        f"To serve at least one request with the model's max seq len ({max_model_len}), "
        f"({format_gib_vllm(needed_bytes)} GiB KV cache is needed, which is larger than the available KV cache "
        f"memory ({format_gib_vllm(check_bytes)} GiB).{estimate} Try increasing `gpu_memory_utilization` "
        "(which also controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing "
        "the engine. "
        f"See {CONSERVING_MEMORY_URL} for more details."
    )


def capacity_log_line(tokens: int, max_model_len: int, concurrency: float, device: str = "GPU") -> str:
    """`GPU KV cache size: 2,246,944 tokens, Maximum concurrency for 32,768 tokens per request: 68.57x`
    (v1/core/kv_cache_utils.py:update_kv_cache_capacity)."""
    return (
        f"{device} KV cache size: {tokens:,} tokens, Maximum concurrency for {max_model_len:,} tokens "
        f"per request: {concurrency:.2f}x"
    )


def plan_kv_cache(
    specs_per_worker: Sequence[Sequence[KVCacheSpec]],
    available_kv_bytes: int | Sequence[int],
    block_size: int,
    max_model_len: int,
    in_flight_tokens: int,
    *,
    mamba_cache_mode: MambaCacheMode = "align",
    mamba_checkpoint_alignment: int = 1,
    mamba_prefill_checkpoint_blocks: int = 0,
    min_kernel_block_size: int = MIN_KERNEL_BLOCK_SIZE,
    disable_hybrid_kv_cache_manager: bool = False,
    sliding_window_block_size: int | None = None,
    num_speculative_blocks: int = 0,
) -> KVCachePlan:
    """Blocks, tokens, concurrency and the fit verdict for KV memory given per worker (PP stage).

    `block_size` is the size after the backend's preference (or `--block-size`); hybrid alignment
    is applied here. `available_kv_bytes` is one value for every worker or one per worker.
    Mamba/GDN layers: `mamba_cache_mode` (align with prefix caching), the state-checkpoint token
    alignment and the extra checkpoint blocks of the GDN kernel (vllm_defaults.gdn_*).
    """
    if block_size < 1:
        raise InvalidParameter(f"--block-size must be ≥ 1, got {block_size}")
    if max_model_len < 1:
        raise InvalidParameter(f"--max-model-len must be ≥ 1, got {max_model_len}")
    workers = [list(w) for w in specs_per_worker]
    if isinstance(available_kv_bytes, int):
        avail = [available_kv_bytes] * len(workers)
    else:
        avail = list(available_kv_bytes)
        if len(avail) != len(workers):
            raise InvalidParameter("one available-memory value per worker is needed")
    flat = [s for w in workers for s in w]
    log: list[str] = []
    hybrid = align_hybrid_block_size(
        flat,
        block_size,
        mamba_cache_mode=mamba_cache_mode,
        checkpoint_alignment=mamba_checkpoint_alignment,
        min_kernel_block_size=min_kernel_block_size,
    )
    bs = block_size
    padded: int | None = None
    if hybrid is not None and hybrid.attention_bytes_per_token:
        bs = hybrid.block_size
        padded = hybrid.mamba_page_padded_bytes
        if hybrid.raised:
            log.append(
                f"Setting attention block size to {bs} tokens to ensure that attention page size is >= mamba page size."
            )
        if hybrid.padding_pct > 0:
            log.append(
                f"Padding mamba page size by {hybrid.padding_pct:.2f}% to ensure that mamba page size and "
                "attention page size are exactly equal."
            )
    grouping = build_groups(
        flat,
        bs,
        mamba_page_padded_bytes=padded,
        disable_hybrid_kv_cache_manager=disable_hybrid_kv_cache_manager,
        sliding_window_block_size=sliding_window_block_size,
    )
    log.extend(grouping.warnings)
    groups = grouping.groups
    mamba_blocks = mamba_blocks_per_request(mamba_cache_mode, num_speculative_blocks, mamba_prefill_checkpoint_blocks)
    bpr = blocks_per_request(groups, max_model_len, in_flight_tokens, mamba_blocks)

    if not groups:  # attention-free and state-free: vLLM keeps just the null block
        return KVCachePlan(
            block_size=bs,
            groups=(),
            bytes_per_block=0,
            bytes_per_block_per_worker=(0,) * len(workers),
            available_kv_bytes=min(avail, default=0),
            num_gpu_blocks=NULL_BLOCKS,
            blocks_per_request=0,
            max_model_len=max_model_len,
            in_flight_tokens=in_flight_tokens,
            mamba_cache_mode=mamba_cache_mode,
            mamba_blocks=mamba_blocks,
            max_concurrency=0.0,
            kv_cache_tokens=0,
            fits=True,
            refusal=None,
            needed_bytes=0,
            check_bytes=0,
            estimated_max_model_len=None,
            log_line=None,
            hybrid=hybrid,
            hma_disabled=grouping.hma_disabled,
            vllm_log=tuple(log),
        )

    bpb_workers = tuple(bytes_per_block(groups, [s.layer for s in w]) for w in workers)
    # Each worker sizes its own cache; the smallest count wins (get_kv_cache_configs).
    counted = [(max(0, a // b), i) for i, (a, b) in enumerate(zip(avail, bpb_workers, strict=True)) if b > 0]
    num_blocks, bound = min(counted)
    bpb = bpb_workers[bound]
    # Fit check per worker, in order; the first failure is vLLM's error.
    refusal: str | None = None
    estimated: int | None = None
    needed = bpb * bpr
    check = avail[bound] - bpb
    for a, b in zip(avail, bpb_workers, strict=True):
        if b == 0:
            continue
        c = a - b
        if c <= 0:
            refusal, estimated, needed, check = NO_MEMORY_MESSAGE, 0, b * bpr, c
            break
        if b * bpr > c:
            estimated = estimate_max_model_len(groups, b, c, max_model_len, in_flight_tokens, mamba_blocks)
            refusal, needed, check = refusal_message(max_model_len, b * bpr, c, estimated), b * bpr, c
            break
    concurrency = num_blocks / bpr
    tokens = int(concurrency * max_model_len)
    fits = refusal is None
    return KVCachePlan(
        block_size=bs,
        groups=groups,
        bytes_per_block=bpb,
        bytes_per_block_per_worker=bpb_workers,
        available_kv_bytes=avail[bound],
        num_gpu_blocks=num_blocks,
        blocks_per_request=bpr,
        max_model_len=max_model_len,
        in_flight_tokens=in_flight_tokens,
        mamba_cache_mode=mamba_cache_mode,
        mamba_blocks=mamba_blocks,
        max_concurrency=concurrency,
        kv_cache_tokens=tokens,
        fits=fits,
        refusal=refusal,
        needed_bytes=needed,
        check_bytes=check,
        estimated_max_model_len=estimated,
        log_line=capacity_log_line(tokens, max_model_len, concurrency) if fits else None,
        hybrid=hybrid,
        hma_disabled=grouping.hma_disabled,
        vllm_log=tuple(log),
    )


# =============================================================================================
# Preemption verdict
# =============================================================================================


@dataclass(frozen=True)
class PreemptionVerdict:
    """Whether `concurrency` running requests of `context` tokens can outgrow the usable blocks.

    vLLM admits up to max_num_seqs requests; when a running request needs a block and none is free,
    the newest request is preempted and recomputed later (v1/core/sched/scheduler.py).
    """

    possible: bool
    context: int  # tokens per request (prompt + output) analysed
    concurrency: int  # running requests analysed (capped at max_num_seqs)
    blocks_per_request: int  # at `context`
    blocks_needed: int  # concurrency × blocks_per_request
    usable_blocks: int  # num_gpu_blocks − the null block
    max_requests_at_context: int  # how many such requests fit at once
    from_concurrency: int | None  # first running count that can be preempted at `context` (None: never)
    from_context: int | None  # shortest context at which `concurrency` requests can be preempted (None: never)
    explanation: str


def preemption_verdict(
    plan: KVCachePlan, *, max_num_seqs: int, context: int | None = None, concurrency: int | None = None
) -> PreemptionVerdict:
    """Preemption risk of `concurrency` (default max_num_seqs) requests of `context` (default
    max_model_len) tokens, and where it begins along each axis."""
    ctx = context if context is not None else plan.max_model_len
    running = min(concurrency if concurrency is not None else max_num_seqs, max_num_seqs)
    usable = plan.usable_blocks
    per_req = plan.request_blocks(ctx)
    needed = running * per_req
    max_req = usable // per_req if per_req else max_num_seqs
    from_conc = max_req + 1 if max_req + 1 <= max_num_seqs else None
    # Shortest context at which `running` requests overflow (monotone in the context).
    from_ctx: int | None = None
    if running * plan.request_blocks(plan.max_model_len) > usable:
        lo, hi = 1, plan.max_model_len
        while lo < hi:
            mid = (lo + hi) // 2
            if running * plan.request_blocks(mid) > usable:
                hi = mid
            else:
                lo = mid + 1
        from_ctx = lo
    possible = needed > usable
    if not plan.fits:
        text = "vLLM would not start with these settings, so there is nothing to preempt."
    elif possible:
        text = (
            f"{running:,} requests of {ctx:,} tokens need {needed:,} blocks but only {usable:,} are usable: "
            f"preemption is possible from the {_ordinal(from_conc or running)} such request running at once."
        )
    else:
        text = (
            f"{running:,} requests of {ctx:,} tokens need {needed:,} of the {usable:,} usable blocks: "
            "no preemption at this load."
        )
    return PreemptionVerdict(
        possible and plan.fits, ctx, running, per_req, needed, usable, max_req, from_conc, from_ctx, text
    )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


# =============================================================================================
# Serving settings → FitReport
# =============================================================================================


class GpuLike(Protocol):
    """What planning needs from a GPU (kvplan.gpus.GpuSpec has it)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def cuda_total_bytes(self) -> int: ...
    @property
    def nvml_total_bytes(self) -> int: ...
    @property
    def arch(self) -> str | None: ...


@dataclass(frozen=True)
class ServeSettings:
    """`vllm serve` settings with vLLM's flag names; None means "vLLM's default"."""

    tp: int = 1
    pp: int = 1
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None  # -1: vLLM's auto-fit
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    kv_cache_dtype: str = "auto"
    block_size: int | None = None
    enforce_eager: bool = False
    kv_cache_memory_bytes: int | None = None
    enable_prefix_caching: bool = True
    disable_hybrid_kv_cache_manager: bool | None = None
    performance_mode: PerformanceMode = "balanced"
    usage: Usage = "serve"
    vllm_version: str | None = None
    allow_long_max_model_len: bool = False  # VLLM_ALLOW_LONG_MAX_MODEL_LEN
    # Measured values that replace kvplan's estimates (bytes per GPU).
    weights_bytes: int | None = None
    activation_bytes: int | None = None
    non_torch_bytes: int | None = None
    cuda_graph_bytes: int | None = None
    # Stored bytes of the whole checkpoint (e.g. from the Hub's safetensors metadata), split per GPU
    # like the analytic count; None: parameters × bytes from config.json.
    weights_total_bytes: int | None = None
    # MXFP4 MoE kernel whose weight layout to assume (weights.MOE_BACKENDS); None: vLLM's default for the GPU.
    moe_backend: MoeBackend | None = None
    # The load to judge preemption at (defaults: max_model_len, max_num_seqs).
    context: int | None = None
    concurrency: int | None = None


@dataclass(frozen=True)
class GroupSummary:
    """One KV-cache group, for reports."""

    kind: str
    num_layers: int
    block_size: int
    page_size_bytes: int
    blocks_per_request: int
    sliding_window: int | None = None
    attention_chunk_size: int | None = None


@dataclass(frozen=True)
class Advice:
    """One change that fixes the problem, checked by re-planning with it."""

    change: str  # the flag(s) to pass, e.g. "--gpu-memory-utilization 0.95"
    fixes: str  # "starts" | "no preemption"
    num_gpu_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    detail: str


@dataclass(frozen=True)
class FitReport:
    """Everything `kvplan fit` reports (flat numbers first; rendered by render/fit.py and `--json`)."""

    model: str
    gpu: str
    gpu_name: str
    tp: int
    pp: int
    num_gpus: int
    vllm_version: str
    gpu_memory_utilization: float
    cuda_total_bytes: int
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    available_kv_bytes: int
    kv_cache_dtype: str
    block_size: int
    bytes_per_block: int
    num_gpu_blocks: int
    usable_blocks: int
    blocks_per_request: int
    kv_cache_tokens: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    in_flight_tokens: int
    max_concurrency: float
    fits: bool
    startup: str  # ok | refuses: no KV memory | refuses: max_model_len | refuses: free memory | OOM …
    error: str | None  # the message vLLM (or CUDA) would stop with
    estimated_max_model_len: int | None
    log_line: str | None
    preemption: PreemptionVerdict
    memory_terms: tuple[MemoryTerm, ...]
    kv_cache_memory_bytes_given: bool
    block_size_source: str
    attention_backend: str
    groups: tuple[GroupSummary, ...]
    settings_sources: dict[str, str]
    vllm_log: tuple[str, ...]
    advice: tuple[Advice, ...] = ()
    notes: tuple[str, ...] = ()


def _validate(model: ModelSpec, s: ServeSettings) -> None:
    """vLLM's own argument checks that kvplan can make without a GPU."""
    from kvplan.kv import check_tensor_parallel

    if s.gpu_memory_utilization is not None and not 0 < s.gpu_memory_utilization <= 1:
        raise InvalidParameter(f"--gpu-memory-utilization must be in (0, 1], got {s.gpu_memory_utilization}")
    check_tensor_parallel(model, s.tp)
    if s.pp < 1 or s.pp > model.num_layers:
        raise InvalidParameter(f"--pipeline-parallel-size must be between 1 and {model.num_layers}, got {s.pp}")
    for flag, value in (
        ("--max-num-seqs", s.max_num_seqs),
        ("--max-num-batched-tokens", s.max_num_batched_tokens),
        ("--block-size", s.block_size),
        ("--context", s.context),
        ("--concurrency", s.concurrency),
    ):
        if value is not None and value < 1:
            raise InvalidParameter(f"{flag} must be ≥ 1, got {value}")
    if s.max_model_len is not None and s.max_model_len != -1:
        if s.max_model_len < 1:
            raise InvalidParameter(f"--max-model-len must be ≥ 1 (or -1/auto), got {s.max_model_len}")
        if s.max_model_len > model.max_model_len and not s.allow_long_max_model_len:
            raise InvalidParameter(
                f"User-specified max_model_len ({s.max_model_len}) is greater than the derived max_model_len "
                f"({model.max_model_len}{', ' + model.max_model_len_source if model.max_model_len_source else ''})",
                hint="vLLM refuses this unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set",
            )
    for flag, value in (
        ("--kv-cache-memory-bytes", s.kv_cache_memory_bytes),
        ("--weights-memory", s.weights_bytes),
        ("--activation-memory", s.activation_bytes),
        ("--non-torch-memory", s.non_torch_bytes),
        ("--cuda-graph-memory", s.cuda_graph_bytes),
    ):
        if value is not None and value < 0:
            raise InvalidParameter(f"{flag} must be ≥ 0, got {value}")
    if s.kv_cache_dtype not in KV_CACHE_DTYPES:
        raise InvalidParameter(f"--kv-cache-dtype {s.kv_cache_dtype!r} is not one of {', '.join(KV_CACHE_DTYPES)}")
    if (
        s.max_num_seqs is not None
        and s.max_num_batched_tokens is not None
        and s.max_num_batched_tokens < s.max_num_seqs
    ):
        raise InvalidParameter(
            f"max_num_batched_tokens ({s.max_num_batched_tokens}) must be greater than or equal to "
            f"max_num_seqs ({s.max_num_seqs})",
            hint="vLLM's SchedulerConfig check",
        )


def plan_fit(model: ModelSpec, gpu: GpuLike, settings: ServeSettings, *, advise: bool = True) -> FitReport:
    """Plan a `vllm serve` deployment: memory budget, KV blocks, tokens, concurrency, startup verdict,
    preemption verdict and (with `advise`) changes that fix what fails. Pure."""
    from kvplan import memory
    from kvplan import vllm_defaults as vd
    from kvplan.kv import kv_cache_specs, resolve_kv_cache_dtype

    s = settings
    _validate(model, s)
    version = vd.parse_vllm_version(s.vllm_version or vd.LATEST_VLLM_VERSION)
    sources: dict[str, str] = {}
    notes: list[str] = []

    auto_fit = s.max_model_len == -1
    max_len = model.max_model_len if s.max_model_len in (None, -1) else s.max_model_len
    sources["max_model_len"] = (
        f"model config ({model.max_model_len_source or 'derived'})"
        if s.max_model_len is None
        else ("auto-fit" if auto_fit else "--max-model-len")
    )
    util = (
        s.gpu_memory_utilization if s.gpu_memory_utilization is not None else vd.default_gpu_memory_utilization(version)
    )
    sources["gpu_memory_utilization"] = (
        "--gpu-memory-utilization" if s.gpu_memory_utilization is not None else f"default for vLLM {version}"
    )
    batch = vd.resolve_batch_settings(
        vd.batch_defaults(gpu.nvml_total_bytes, gpu.name, s.usage),
        max_model_len=max_len,
        max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens,
        performance_mode=s.performance_mode,
    )
    sources["max_num_batched_tokens"] = batch.mnbt_source
    sources["max_num_seqs"] = batch.seqs_source
    kv_dtype = resolve_kv_cache_dtype(model, s.kv_cache_dtype)
    sources["kv_cache_dtype"] = (
        "--kv-cache-dtype"
        if s.kv_cache_dtype != "auto"
        else ("auto: checkpoint's KV scheme" if model.quant and model.quant.kv_cache_dtype else "auto: model dtype")
    )
    is_mla = model.mla is not None
    backend = vd.attention_backend(gpu.arch, mla=is_mla, kv_cache_dtype=kv_dtype)
    if s.block_size is not None:
        base_bs, bs_source = s.block_size, "--block-size"
    else:
        base_bs = backend.block_size
        bs_source = (
            f"{backend.name} backend"
            if base_bs != vd.DEFAULT_BLOCK_SIZE
            else f"vLLM default; the {backend.name} backend keeps it"
        )
    in_flight = vd.max_in_flight_tokens(batch.max_num_batched_tokens, s.pp, version)
    mode = vd.mamba_cache_mode(s.enable_prefix_caching)
    has_gdn = any(layer.state is not None and layer.state.variant == "gdn" for layer in model.layers)
    checkpoint = vd.gdn_checkpoint_alignment(gpu.arch) if has_gdn and mode == "align" else 1
    variants = {layer.state.variant for layer in model.layers if layer.state is not None}
    checkpoint_blocks = max((vd.prefill_checkpoint_blocks(v, gpu.arch) for v in variants), default=0)
    checkpoint_blocks = checkpoint_blocks if mode == "align" else 0
    has_chunked = any(layer.kind == "chunked_local" for layer in model.layers)
    hma_off = (
        s.disable_hybrid_kv_cache_manager
        if s.disable_hybrid_kv_cache_manager is not None
        else vd.hybrid_manager_disabled_by_default(has_chunked, version)
    )
    specs = kv_cache_specs(model, tp=s.tp, pp=s.pp, kv_cache_dtype=s.kv_cache_dtype)

    # --- memory budget (the last PP stage: it also runs the sampler) ---
    weights = (
        memory.user_term("weights", s.weights_bytes, "--weights-memory")
        if s.weights_bytes is not None
        else memory.estimate_weights(model, tp=s.tp, pp=s.pp, arch=gpu.arch, version=version,
                                     moe_backend=s.moe_backend, total_bytes=s.weights_total_bytes)
    )
    activation = (
        memory.user_term("activation", s.activation_bytes, "--activation-memory")
        if s.activation_bytes is not None
        else memory.estimate_activation(
            model, tp=s.tp, max_num_batched_tokens=batch.max_num_batched_tokens, max_num_seqs=batch.max_num_seqs
        )
    )
    non_torch = (
        memory.user_term("non_torch", s.non_torch_bytes, "--non-torch-memory")
        if s.non_torch_bytes is not None
        else memory.estimate_non_torch(tp=s.tp, pp=s.pp)
    )
    layers_per_worker = max(len(w) for w in specs) if specs else 0
    graphs = (
        memory.user_term("cuda_graphs", s.cuda_graph_bytes, "--cuda-graph-memory")
        if s.cuda_graph_bytes is not None
        else memory.estimate_cuda_graphs(
            num_layers_on_worker=layers_per_worker,
            max_num_seqs=batch.max_num_seqs,
            max_num_batched_tokens=batch.max_num_batched_tokens,
            arch=gpu.arch,
            enforce_eager=s.enforce_eager,
            version=version,
        )
    )
    budget = memory.memory_budget(
        cuda_total_bytes=gpu.cuda_total_bytes,
        gpu_memory_utilization=util,
        weights=weights,
        activation=activation,
        non_torch=non_torch,
        cuda_graphs=graphs,
        kv_cache_memory_bytes=s.kv_cache_memory_bytes,
        startup_baseline=memory.startup_baseline_bytes(tp=s.tp, pp=s.pp),
    )
    if s.kv_cache_memory_bytes is not None:
        notes.append("--kv-cache-memory-bytes: vLLM skips the memory profile and ignores --gpu-memory-utilization.")

    def kv_plan(length: int) -> KVCachePlan:
        return plan_kv_cache(
            specs,
            budget.available_kv_bytes,
            base_bs,
            length,
            in_flight,
            mamba_cache_mode=mode,
            mamba_checkpoint_alignment=checkpoint,
            mamba_prefill_checkpoint_blocks=checkpoint_blocks,
            min_kernel_block_size=backend.min_kernel_block_size,
            disable_hybrid_kv_cache_manager=hma_off,
        )

    plan = kv_plan(max_len)
    if auto_fit and not plan.fits and plan.estimated_max_model_len:
        notes.append(
            f"Auto-fit max_model_len: reduced from {max_len} to {plan.estimated_max_model_len} to fit in "
            "available KV cache memory (vLLM's --max-model-len auto)."
        )
        max_len = plan.estimated_max_model_len
        plan = kv_plan(max_len)
    if plan.block_size != base_bs:
        bs_source = f"raised from {base_bs} so an attention page holds the Mamba/GDN state"
    elif base_bs != vd.DEFAULT_BLOCK_SIZE and s.block_size is None:
        plan = replace(
            plan, vllm_log=(f"Setting kv cache block size to {base_bs} for {backend.name} backend.", *plan.vllm_log)
        )

    # --- verdicts ---
    startup, error = "ok", None
    total_minus_baseline = budget.startup_free_bytes
    if s.kv_cache_memory_bytes is None and weights.bytes > total_minus_baseline:
        startup, error = (
            "OOM loading weights",
            (
                f"CUDA out of memory while loading the weights: {weights.bytes / GiB:.2f} GiB per GPU do not fit in "
                f"{total_minus_baseline / GiB:.2f} GiB free"
            ),
        )
    elif s.kv_cache_memory_bytes is not None and weights.bytes + s.kv_cache_memory_bytes > total_minus_baseline:
        startup, error = (
            "OOM allocating the KV cache",
            (
                f"CUDA out of memory: {weights.bytes / GiB:.2f} GiB of weights plus the "
                f"{s.kv_cache_memory_bytes / GiB:.2f} GiB asked for with --kv-cache-memory-bytes exceed the "
                f"{total_minus_baseline / GiB:.2f} GiB free per GPU"
            ),
        )
    elif not budget.startup_ok:
        startup, error = "refuses: free memory", budget.startup_error()
    elif plan.refusal == NO_MEMORY_MESSAGE:
        startup, error = "refuses: no KV memory", plan.refusal
    elif plan.refusal is not None:
        startup, error = "refuses: max_model_len", plan.refusal
    fits = startup == "ok"
    preempt = preemption_verdict(
        plan,
        max_num_seqs=batch.max_num_seqs,
        context=min(s.context, max_len) if s.context is not None else None,
        concurrency=s.concurrency,
    )
    if s.context is not None and s.context > max_len:
        notes.append(
            f"--context {s.context:,} is above max_model_len {max_len:,}: vLLM rejects such requests; "
            f"judged at {max_len:,}."
        )
    if s.concurrency is not None and s.concurrency > batch.max_num_seqs:
        notes.append(
            f"--concurrency {s.concurrency} is above max_num_seqs {batch.max_num_seqs}: the rest wait "
            "in the queue, so preemption is judged at max_num_seqs."
        )
    if s.pp > 1:
        notes.append(
            "The same available memory is assumed on every pipeline stage (the last stage's, which also "
            "runs the sampler)."
        )

    report = FitReport(
        model=model.name,
        gpu=gpu.id,
        gpu_name=gpu.name,
        tp=s.tp,
        pp=s.pp,
        num_gpus=s.tp * s.pp,
        vllm_version=str(version),
        gpu_memory_utilization=util,
        cuda_total_bytes=gpu.cuda_total_bytes,
        requested_bytes=budget.requested_bytes,
        weights_bytes=weights.bytes,
        activation_bytes=activation.bytes,
        non_torch_bytes=non_torch.bytes,
        cuda_graph_bytes=graphs.bytes,
        available_kv_bytes=budget.available_kv_bytes,
        kv_cache_dtype=kv_dtype,
        block_size=plan.block_size,
        bytes_per_block=plan.bytes_per_block,
        num_gpu_blocks=plan.num_gpu_blocks,
        usable_blocks=plan.usable_blocks,
        blocks_per_request=plan.blocks_per_request,
        kv_cache_tokens=plan.kv_cache_tokens,
        max_model_len=max_len,
        max_num_seqs=batch.max_num_seqs,
        max_num_batched_tokens=batch.max_num_batched_tokens,
        in_flight_tokens=in_flight,
        max_concurrency=plan.max_concurrency,
        fits=fits,
        startup=startup,
        error=error,
        estimated_max_model_len=plan.estimated_max_model_len,
        log_line=plan.log_line if fits else None,
        preemption=preempt,
        memory_terms=budget.terms,
        kv_cache_memory_bytes_given=s.kv_cache_memory_bytes is not None,
        block_size_source=bs_source,
        attention_backend=backend.name,
        groups=tuple(
            GroupSummary(
                g.kind,
                len(g.layers),
                g.block_size,
                g.page_size_bytes,
                g.blocks_per_request(max_len, in_flight, plan.mamba_blocks),
                g.sliding_window,
                g.attention_chunk_size,
            )
            for g in plan.groups
        ),
        settings_sources=sources,
        vllm_log=plan.vllm_log,
        notes=tuple(notes),
    )
    if advise and (not fits or preempt.possible):
        report = replace(report, advice=tuple(advise_fixes(model, gpu, s, report)))
    return report


# =============================================================================================
# Advice
# =============================================================================================

MAX_ADVISED_UTILIZATION = 0.98  # leave room for the CUDA context and other processes
MIN_ADVISED_UTILIZATION_PCT = 50  # below this, lowering utilization is not advice worth giving
ADVISED_TP_SIZES = (2, 4, 8)


def _problem_solved(before: FitReport, after: FitReport) -> bool:
    if not before.fits:
        return after.fits
    return after.fits and not after.preemption.possible


def advise_fixes(model: ModelSpec, gpu: GpuLike, settings: ServeSettings, report: FitReport) -> list[Advice]:
    """Changes that fix a refusal or a preemption risk, each re-planned through `plan_fit` and kept
    only when it actually fixes the problem: raise gpu_memory_utilization (≤ 0.98), fp8 KV cache,
    more tensor parallelism, a shorter max_model_len, fewer max_num_seqs."""
    out: list[Advice] = []
    fixes = "starts" if not report.fits else "no preemption"

    def attempt(change: str, new: ServeSettings, detail: str) -> bool:
        try:
            after = plan_fit(model, gpu, new, advise=False)
        except InvalidParameter:
            return False
        if _problem_solved(report, after):
            out.append(
                Advice(change, fixes, after.num_gpu_blocks, after.kv_cache_tokens, after.max_concurrency, detail)
            )
            return True
        return False

    # 1. gpu_memory_utilization: the smallest value (in 0.01 steps) that fixes it.
    if settings.kv_cache_memory_bytes is None and report.startup != "OOM loading weights":
        lo = math.floor(report.gpu_memory_utilization * 100) + 1
        hi = round(MAX_ADVISED_UTILIZATION * 100)

        def ok(pct: int) -> bool:
            try:
                return _problem_solved(
                    report, plan_fit(model, gpu, replace(settings, gpu_memory_utilization=pct / 100), advise=False)
                )
            except InvalidParameter:
                return False

        if lo <= hi and ok(hi):
            best = _first_true(lo, hi, ok)
            attempt(
                f"--gpu-memory-utilization {best / 100:.2f}",
                replace(settings, gpu_memory_utilization=best / 100),
                "more of the GPU for vLLM",
            )
    # 1b. Utilization above what is free at startup: the largest value that starts.
    if report.startup == "refuses: free memory":
        top = math.ceil(report.gpu_memory_utilization * 100) - 1
        for pct in range(top, MIN_ADVISED_UTILIZATION_PCT - 1, -1):
            if attempt(
                f"--gpu-memory-utilization {pct / 100:.2f}",
                replace(settings, gpu_memory_utilization=pct / 100),
                "leave room for the CUDA context vLLM finds in use at startup",
            ):
                break
    # 2. fp8 KV cache.
    if report.kv_cache_dtype not in FP8_KV_DTYPES:
        attempt("--kv-cache-dtype fp8", replace(settings, kv_cache_dtype="fp8"), "half the bytes per token")
    # 3. More tensor parallelism (the smallest that works).
    for tp in ADVISED_TP_SIZES:
        if tp > settings.tp and model.num_attention_heads % tp == 0:
            if attempt(
                f"--tensor-parallel-size {tp}",
                replace(settings, tp=tp),
                f"{tp * settings.pp} GPUs: weights and KV heads split {tp} ways",
            ):
                break
    # 4. A shorter max_model_len: to start, or (when the user gave --concurrency) to keep that many resident.
    if settings.max_model_len != -1 and (not report.fits or settings.concurrency is not None):
        length = _advised_max_len(settings, report)
        if length:
            detail = (
                "the longest context that fits"
                if not report.fits
                else (f"the longest context at which {report.preemption.concurrency} requests stay resident")
            )
            attempt(f"--max-model-len {length}", replace(settings, max_model_len=length), detail)
    # 5. Fewer concurrent sequences.
    if report.fits and report.preemption.possible and report.preemption.max_requests_at_context >= 1:
        z = report.preemption.max_requests_at_context
        new = replace(
            settings, max_num_seqs=z, concurrency=None if settings.concurrency is None else min(settings.concurrency, z)
        )
        attempt(f"--max-num-seqs {z}", new, f"at most {z} requests of {report.preemption.context:,} tokens at once")
    return out


def _first_true(lo: int, hi: int, pred: Callable[[int], bool]) -> int:
    """Smallest x in [lo, hi] with pred(x), given pred(hi) and pred monotone."""
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _advised_max_len(settings: ServeSettings, report: FitReport) -> int | None:
    if not report.fits:
        if report.startup == "refuses: max_model_len" and report.estimated_max_model_len:
            return report.estimated_max_model_len
        return None
    if settings.context is not None:  # preemption at a user-given context: max_model_len does not bound it
        return None
    p = report.preemption
    if p.from_context is None or p.from_context <= 1:
        return None
    return p.from_context - 1


# =============================================================================================
# Which hardware: every catalog GPU × TP
# =============================================================================================

SWEEP_TP_SIZES = (1, 2, 4, 8)


@dataclass(frozen=True)
class SweepRow:
    """One GPU × TP option that serves the model at the requested context and concurrency."""

    gpu: str
    gpu_name: str
    tp: int
    num_gpus: int
    cuda_total_bytes: int
    available_kv_bytes: int
    num_gpu_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    requests_at_context: int
    context: int


@dataclass(frozen=True)
class SweepReport:
    """`kvplan fit MODEL` without --gpu."""

    model: str
    context: int
    concurrency: int
    rows: tuple[SweepRow, ...]
    skipped: tuple[str, ...] = field(default=())


def sweep_gpus(
    model: ModelSpec, gpus: Iterable[GpuLike], settings: ServeSettings, tp_sizes: Sequence[int] = SWEEP_TP_SIZES
) -> SweepReport:
    """Every GPU × TP size that starts and keeps `concurrency` (default 1) requests of `context`
    (default max_model_len) resident without preemption; sorted by fewest GPUs, then memory."""
    want = settings.concurrency or 1
    rows: list[SweepRow] = []
    skipped: list[str] = []
    context = settings.context
    for gpu in gpus:
        for tp in tp_sizes:
            if model.num_attention_heads % tp:
                continue
            try:
                r = plan_fit(model, gpu, replace(settings, tp=tp, concurrency=want), advise=False)
            except InvalidParameter as exc:
                skipped.append(f"{gpu.id} tp {tp}: {exc}")
                continue
            context = r.preemption.context
            if r.fits and r.preemption.max_requests_at_context >= want:
                rows.append(
                    SweepRow(
                        gpu.id,
                        gpu.name,
                        tp,
                        tp * settings.pp,
                        gpu.cuda_total_bytes,
                        r.available_kv_bytes,
                        r.num_gpu_blocks,
                        r.kv_cache_tokens,
                        r.max_concurrency,
                        r.preemption.max_requests_at_context,
                        r.preemption.context,
                    )
                )
    rows.sort(key=lambda row: (row.num_gpus, row.cuda_total_bytes, row.gpu))
    return SweepReport(
        model.name, context or settings.max_model_len or model.max_model_len, want, tuple(rows), tuple(skipped)
    )
