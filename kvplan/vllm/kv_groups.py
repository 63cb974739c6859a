"""KV-cache groups as vLLM's KV cache manager forms them, and the blocks one request holds in each.

Hybrid block-size alignment (platforms/interface.py:_align_hybrid_block_size), grouping with page-size
unification and the 1.5× rule (v1/core/kv_cache_planning.py:get_kv_cache_groups), blocks per request by
kind — full, sliding window, chunked local, Mamba (`KVCacheGroup.blocks_per_request`) — and bytes per block.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from kvplan.errors import NotServed
from kvplan.model.kv_cache import CacheKind, KVCacheSpec
from kvplan.units import cdiv
from kvplan.vllm.defaults import (
    MIN_KERNEL_BLOCK_SIZE,
    MLA_HYBRID_MIN_ALIGN,
    MambaCacheMode,
)

# v1/core/kv_cache_planning.py:_get_kv_cache_groups_uniform_page_size: when the largest bucket is
# under 1.5× the smallest, the group size is the largest bucket (less padding).
GROUP_SIZE_MAX_RATIO = 1.5
# Mamba blocks per request (v1/kv_cache_interface.py:MambaSpec.max_memory_usage_bytes): align mode keeps
# 2 running states (+ speculative + prefill-checkpoint blocks); none mode 1 state (+ speculative).
MAMBA_ALIGN_RUNNING_BLOCKS = 2
MAMBA_NONE_BLOCKS = 1


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
    tuples: LayerTupleLayout | None = None  # vLLM ≤ 0.28's DeepSeek-V4 accounting


def _promote(spec: KVCacheSpec) -> CacheKind:
    """kv_cache_planning.py:unify_hybrid_kv_cache_specs: sliding/chunked → full when HMA is off."""
    return "full" if spec.kind in ("sliding_window", "chunked_local") else spec.kind


def _slots(
    specs: Sequence[KVCacheSpec], block_size: int, promote: bool, mamba_page_padded_bytes: int | None,
    sliding_window_block_size: int | None,
) -> list[_Slot]:
    """One slot per layer: its cache kind (promoted when HMA is off), block size and page bytes."""
    slots: list[_Slot] = []
    for s in specs:
        kind = _promote(s) if promote else s.kind
        if kind == "mamba":
            page = mamba_page_padded_bytes if mamba_page_padded_bytes is not None else s.state_bytes
            slots.append(_Slot(s.layer, s, kind, block_size, page))
        else:
            bs = sliding_window_block_size or block_size if kind == "sliding_window" else block_size
            bs = s.block_size or bs  # a cache with a block size of its own (DeepSeek-V4) keeps it
            slots.append(_Slot(s.layer, s, kind, bs, s.page_size_bytes(bs)))
    return slots


def _uniform_group(slots: Sequence[_Slot]) -> KVCacheGroup | None:
    """The single group of a uniform model, or of one type with different sizes; None otherwise
    (kv_cache_planning.py:is_kv_cache_spec_uniform, UniformTypeKVCacheSpecs)."""
    first = slots[0]
    if not all(sl.kind == first.kind and sl.block_size == first.block_size and sl.key()[7:9] == first.key()[7:9]
               for sl in slots):
        return None
    pages = tuple(sl.page for sl in slots)
    uniform = len(set(pages)) == 1
    return KVCacheGroup(
        first.kind,
        tuple(sl.layer for sl in slots),
        first.block_size,
        max(pages),
        first.spec.sliding_window if first.kind == "sliding_window" else None,
        first.spec.attention_chunk_size if first.kind == "chunked_local" else None,
        () if uniform else pages,
    )


def _unify_page_size(slots: Sequence[_Slot]) -> tuple[list[_Slot], int]:
    """Smaller attention pages that divide the largest scale their block size up; the others (and every
    Mamba page) are padded (kv_cache_planning.py:unify_kv_cache_spec_page_size)."""
    max_page = max(sl.page for sl in slots)
    unified = []
    for sl in slots:
        if sl.page == max_page:
            unified.append(sl)
        elif sl.kind != "mamba" and sl.page and max_page % sl.page == 0:
            unified.append(replace(sl, block_size=sl.block_size * (max_page // sl.page), page=max_page))
        else:
            unified.append(replace(sl, page=max_page))
    return unified, max_page


def _group_size(buckets: dict[tuple[object, ...], list[_Slot]]) -> int:
    """Layers per group: the smallest bucket, or the largest when it is under 1.5× the smallest
    (kv_cache_planning.py:get_kv_cache_groups)."""
    sizes = [len(b) for b in buckets.values()]
    group_size = min(sizes)
    if max(sizes) < GROUP_SIZE_MAX_RATIO * group_size:
        group_size = max(sizes)
    return group_size


def _split_buckets(
    buckets: dict[tuple[object, ...], list[_Slot]], group_size: int, max_page: int, warnings: list[str],
) -> list[KVCacheGroup]:
    """Split each bucket round-robin into groups of `group_size` layers, warning about padding layers."""
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
    return groups


def _bucket_key(sl: _Slot) -> tuple[object, ...]:
    """UniformTypeKVCacheSpecs.is_uniform_type: one block size and one type (full attention and MLA share
    FullAttentionSpec's; a sliding window or a chunk size its own value)."""
    base = "full" if sl.kind in ("full", "mla") else sl.kind
    return (base, sl.block_size, sl.spec.sliding_window if sl.kind == "sliding_window" else None,
            sl.spec.attention_chunk_size if sl.kind == "chunked_local" else None)


def approximate_gcd(values: Sequence[int], lower_bound: int) -> int:
    """kv_cache_planning.py:_approximate_gcd: the d in [lower_bound, max(values)] with the least total padding
    Σ (d − x mod d) mod d; ties prefer the larger d."""
    best_d, best_pad = max(1, lower_bound), None
    for d in range(max(1, lower_bound), max(values) + 1):
        pad = sum((d - x % d) % d for x in values)
        if best_pad is None or pad <= best_pad:
            best_d, best_pad = d, pad
    return best_d


@dataclass(frozen=True)
class _Bucket:
    """Layers of one uniform type, by page size (insertion order), as _get_packed_kv_cache_groups buckets them."""

    slots: tuple[_Slot, ...]
    by_page: tuple[tuple[_Slot, ...], ...]

    @property
    def balanced(self) -> bool:  # one layer of each page size per repeat of the layer pattern
        return len({len(v) for v in self.by_page}) == 1

    @property
    def repeats(self) -> int:  # UniformTypeKVCacheSpecs.get_max_layers_per_page_size
        return max(len(v) for v in self.by_page)

    def widest_group_bytes(self, n: int) -> int:
        return sum(cdiv(len(v), n) * v[0].page for v in self.by_page)


def _buckets(slots: Sequence[_Slot]) -> list[_Bucket]:
    grouped: dict[tuple[object, ...], list[_Slot]] = {}
    for sl in slots:
        grouped.setdefault(_bucket_key(sl), []).append(sl)
    out = []
    for members in grouped.values():
        by_page: dict[int, list[_Slot]] = {}
        for sl in members:
            by_page.setdefault(sl.page, []).append(sl)
        out.append(_Bucket(tuple(members), tuple(tuple(v) for v in by_page.values())))
    return out


def _bucket_group(members: Sequence[_Slot]) -> KVCacheGroup:
    head = members[0]
    pages = tuple(m.page for m in members)
    return KVCacheGroup(head.kind, tuple(m.layer for m in members), head.block_size, max(pages),
                        head.spec.sliding_window if head.kind == "sliding_window" else None,
                        head.spec.attention_chunk_size if head.kind == "chunked_local" else None,
                        () if len(set(pages)) == 1 else pages)


def packed_groups(slots: Sequence[_Slot]) -> list[KVCacheGroup]:
    """Groups of a block-outermost layout with mixed page sizes (kv_cache_planning.py:_get_packed_kv_cache_groups):
    layers are bucketed by uniform type; a balanced bucket (as many layers of each page size) is one repeating
    pattern, split into groups of `repeats` pattern repeats, the _approximate_gcd of the balanced buckets' repeat
    counts at or above the largest mixed-page balanced bucket's (which stays whole); the other buckets stay whole,
    and a Mamba state bucket (or, with no repeat count, a sliding-window one) is split to fit the block the others
    need. A block then holds every group's pages side by side: bytes per block = max over groups of Σ pages."""
    buckets = _buckets(slots)
    floor = max((b.repeats for b in buckets if b.balanced and len(b.by_page) > 1), default=0)
    repeats = approximate_gcd([b.repeats for b in buckets if b.balanced], floor) if floor else None

    def num_groups(b: _Bucket) -> int:
        return cdiv(b.repeats, repeats) if b.balanced and repeats is not None else 1

    def is_state(b: _Bucket) -> bool:
        return b.slots[0].kind == "mamba" or (repeats is None and b.slots[0].kind == "sliding_window")

    anchor = max(b.widest_group_bytes(len(b.slots) if is_state(b) else num_groups(b)) for b in buckets)
    groups: list[KVCacheGroup] = []
    for b in buckets:
        n = num_groups(b)
        if anchor and is_state(b):
            n = max(n, cdiv(len(b.slots), max(anchor // b.slots[0].page, 1)))
        if n == 1:
            groups.append(_bucket_group(b.slots))
            continue
        pattern = list(zip(*b.by_page, strict=False))
        groups.extend(_bucket_group([sl for rep in pattern[i::n] for sl in rep]) for i in range(n))
    return groups


@dataclass(frozen=True)
class LayerTupleLayout:
    """vLLM ≤ 0.28's own DeepSeek-V4 layout (v1/core/kv_cache_utils.py: group_and_unify_kv_cache_specs,
    _get_kv_cache_groups_uniform_groups, _get_kv_cache_config_deepseek_v4, get_max_concurrency_for_kv_cache_config
    and _max_memory_usage_bytes_from_groups, checked in 0.23, 0.25 and 0.28; 0.29 packs pages instead).

    One group holds every MLA layer (compressed latents and indexer caches: a "layer tuple" is one layer of each
    of its page sizes); the sliding-window caches are bucketed by (block size, window), each page padded up to the
    nearest full-group page, and split into groups of `num_tuples` tuples (_approximate_gcd of the tuple counts,
    at least the full group's). A block then holds, for each page size, as many pages as the most any group has."""

    groups: tuple[KVCacheGroup, ...]  # the full MLA group first
    bytes_per_block: int  # Σ over page sizes of page × the most slots of it in one group
    tuple_bytes: int  # Σ of the full group's distinct pages (one layer tuple)
    num_tuples: int  # the most layer tuples in one group (get_num_layer_tuples: the commonest page's count)

    def _pages(self, tokens: int, in_flight_tokens: int) -> list[int]:
        return [g.blocks_per_request(tokens, in_flight_tokens, 0) for g in self.groups]

    def blocks_per_request(self, tokens: int, in_flight_tokens: int) -> int:
        """get_max_concurrency_for_kv_cache_config: Σ over groups of pages × the group's page bytes, in blocks
        of the full group's page bytes (rounded up)."""
        per_req = sum(p * sum(g.pages()) for p, g in zip(self._pages(tokens, in_flight_tokens), self.groups,
                                                          strict=True))
        return cdiv(per_req, sum(self.groups[0].pages()))

    def needed_bytes(self, tokens: int, in_flight_tokens: int) -> int:
        """_max_memory_usage_bytes_from_groups (all groups UniformTypeKVCacheSpecs): Σ over groups of
        num_tuples × the group's pages × one tuple's bytes."""
        return sum(self.num_tuples * p * self.tuple_bytes for p in self._pages(tokens, in_flight_tokens))


def _commonest_count(pages: Sequence[int]) -> int:
    return max(pages.count(p) for p in set(pages))


def layer_tuple_layout(slots: Sequence[_Slot]) -> LayerTupleLayout:
    """vLLM ≤ 0.28's DeepSeek-V4 groups (see LayerTupleLayout)."""
    full = [sl for sl in slots if sl.kind == "mla"]
    swa: dict[tuple[int, int | None], list[_Slot]] = {}
    for sl in slots:
        if sl.kind == "sliding_window":
            swa.setdefault((sl.block_size, sl.spec.sliding_window), []).append(sl)
    full_pages = sorted({sl.page for sl in full})
    counts = [_commonest_count([sl.page for sl in full])] + [_commonest_count([sl.page for sl in b])
                                                             for b in swa.values()]
    n_tuples = approximate_gcd(counts, counts[0])
    groups = [_bucket_group(full)]
    for bucket in swa.values():
        by_size: dict[int, list[_Slot]] = {}
        for sl in bucket:  # pad to the nearest larger page of the full group
            padded = min((p for p in full_pages if p >= sl.page), default=sl.page)
            by_size.setdefault(padded, []).append(replace(sl, page=padded))
        per_size = len(next(iter(by_size.values())))
        n = cdiv(per_size, n_tuples)
        tuples = list(zip(*by_size.values(), strict=False))
        groups.extend(_bucket_group([sl for t in tuples[i::n] for sl in t]) for i in range(n))
    slots_of: dict[int, int] = {}
    for g in groups:
        for page in set(g.pages()):
            slots_of[page] = max(slots_of.get(page, 0), g.pages().count(page))
    return LayerTupleLayout(tuple(groups), sum(p * k for p, k in slots_of.items()), sum(full_pages),
                            max(_commonest_count(list(g.pages())) for g in groups))


HMA_OFF_REFUSAL = "Failed to promote local KV cache specs to one unified type."


def _check_one_type(kinds: Iterable[str]) -> None:
    """Without the hybrid manager every layer must end as one spec type once sliding-window and chunked-local
    layers are promoted to full attention (kv_cache_planning.py:unify_hybrid_kv_cache_specs raises otherwise):
    Mamba/GDN state next to attention cannot be."""
    kinds = set(kinds)
    promoted = {"full" if k in ("sliding_window", "chunked_local") and "full" in kinds else k for k in kinds}
    if len(promoted) > 1:
        raise NotServed(HMA_OFF_REFUSAL, hint="the hybrid KV cache manager is off (--disable-hybrid-kv-cache-manager "
                                              "or a KV connector without HMA support); this model's "
                                              f"{' and '.join(sorted(promoted))} layers need it")


def build_groups(
    specs: Sequence[KVCacheSpec],
    block_size: int,
    *,
    mamba_page_padded_bytes: int | None = None,
    disable_hybrid_kv_cache_manager: bool = False,
    sliding_window_block_size: int | None = None,
    dsv4_layer_tuples: bool = False,
) -> GroupingResult:
    """Group every layer of every worker (kv_cache_planning.py:get_kv_cache_groups).

    With the hybrid manager disabled, sliding-window and chunked-local layers of a hybrid model are cached
    as full attention (unify_hybrid_kv_cache_specs). `sliding_window_block_size` is the kernel block of
    sliding-window layers when it differs from `block_size` (`_largest_kernel_block_within`: 32 on vLLM's
    CPU platform; CUDA keeps the primary block size). `dsv4_layer_tuples`: DeepSeek-V4 grouped as vLLM ≤ 0.28
    did (LayerTupleLayout), instead of 0.29's packed groups.
    """
    specs = sorted(specs, key=lambda s: s.layer)
    warnings: list[str] = []
    kinds = {s.kind for s in specs}
    hybrid_attention = len(kinds & {"sliding_window", "chunked_local"}) > 0 and len(kinds) > 1
    promote = disable_hybrid_kv_cache_manager and hybrid_attention
    if disable_hybrid_kv_cache_manager:
        _check_one_type(kinds)
    if promote:
        warnings.append(
            "Hybrid KV cache manager is disabled for this hybrid model: sliding-window and "
            "chunked-local layers are cached like full attention."
        )
    slots = _slots(specs, block_size, promote, mamba_page_padded_bytes, sliding_window_block_size)
    if not slots:
        return GroupingResult((), tuple(warnings), promote)
    uniform = _uniform_group(slots)
    if uniform is not None:
        return GroupingResult((uniform,), tuple(warnings), promote)
    if any(s.block_outermost for s in specs) and len({sl.page for sl in slots}) > 1:
        if dsv4_layer_tuples:  # vLLM ≤ 0.28 (`dsv4_layer_tuples`): its DeepSeek-V4-only layout
            tuples = layer_tuple_layout(slots)
            return GroupingResult(tuples.groups, tuple(warnings), promote, tuples)
        return GroupingResult(tuple(packed_groups(slots)), tuple(warnings), promote)
    unified, max_page = _unify_page_size(slots)
    buckets: dict[tuple[object, ...], list[_Slot]] = {}
    for sl in unified:
        buckets.setdefault(sl.key(), []).append(sl)
    groups = _split_buckets(buckets, _group_size(buckets), max_page, warnings)
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
