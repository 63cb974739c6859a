"""SGLang 0.5.23's DeepSeek-V4 pools (paths relative to `sglang/srt/`).

`model_executor/pool_configurator.py:DSV4PoolConfigurator` sizes DeepSeek-V4's compressed attention as
`budget = full_tokens × bytes_per_full_token + fixed`, under SGLang's default environment (the FlashMLA backend,
`SGLANG_DSV4_KV_LAYOUT=v4`, fp32 compress state, no unified KV, HiSparse, encoder replay or online c128):

    paged(r)      = V4.page_bytes(page / r) / (page / r)         page_bytes = ceil(n × 584 / 576) × 576
    swa_token     = paged(0) × layers + ring4 / page × (2·2·head_dim + 2·2·index_head_dim) × 4 × c4_layers
    full_token    = swa_ratio × swa_token + c4_layers × (paged(4) + index_bytes) / 4 + c128_layers × paged(128) / 128
    fixed         = c128_layers × ceil((reqs + 1) × 128 + 128 + 1, 128) × 2·head_dim × 4      (the c128 state)
    full_tokens   = int((budget − fixed) / full_token) // page × page
    swa_tokens    = int(full_tokens × swa_ratio) // page × page       (refused at window + page ≥ swa_tokens)
    c4 = full // 4, c128 = full // 128, c4_state = swa // page × 8, c128_state = (reqs + 1) × 128

where index_bytes = index_head_dim + index_head_dim / 128 × 4, ring4 = 8 (16 with a draft), reqs =
max_running_requests per attention-DP worker (arg_groups/deepseek_v4_hook.py:apply_deepseek_v4_defaults sets
256 when it is not given) and swa_ratio = 0.1 (model_overrides/deepseek_v4.py, unless given). A layer of
compress ratio 0 (kvplan's 1: sliding window only) owns no compressed storage. Every figure is per GPU: the
latent has one head and the pools are not split by attention TP. The KV dtype does not enter: the V4 layout
stores the latent as fp8 nope + bf16 rope whatever --kv-cache-dtype says. SGLang prints no `KV Cache is
allocated` line for this pool; `log_lines` are what it prints instead.
With the EAGLE (MTP) draft (`Dsv4Part.draft_tokens`): rings 16 / 256, both per-token figures × (layers + 1) / layers
(DSV4PoolConfigurator.__init__, no encoder replay); the SWA ring's + draft tokens − 1 (get_swa_ring_size) enters
only the unified-KV pool, off by default. The draft worker's own pool lines are not reproduced.
Pure: numbers in, numbers out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.errors import InvalidParameter
from kvplan.model.spec import ModelSpec

ARCHITECTURE = "DeepseekV4ForCausalLM"  # configs/model_config.py:is_deepseek_v4
PAGE_SIZE = 256  # model_overrides/deepseek_v4.py:_deepseek_v4_overrides (CUDA / HIP), whatever --page-size says
ATTENTION_BACKEND = "dsv4"  # model_overrides/deepseek_v4.py:_deepseek_v4_overrides
DEFAULT_MAX_RUNNING_REQUESTS = 256  # arg_groups/deepseek_v4_hook.py:apply_deepseek_v4_defaults
DEFAULT_SWA_RATIO = 0.1  # model_overrides/deepseek_v4.py: swa_full_tokens_ratio when not given
# kernels/ops/attention/dsv4/kv_layout.py:KVLayout.V4: 448 fp8 nope + 64 bf16 rope + 7 ue8m0 scales + 1 pad
# (bytes_per_token 584), the page stride padded to the 576-byte TMA row (page_align).
V4_BYTES_PER_TOKEN = 584
V4_PAGE_ALIGN = 576
STATE_BYTES = 4  # environ.py: SGLANG_DSV4_COMPRESS_STATE_DTYPE float32 (pool_configurator.py, both states)
# mem_cache/deepseek_v4_memory_pool.py:get_compress_state_ring_size: without / with speculative decoding.
C4_RING = 8
C128_RING = 128
C4_RING_SPEC = 16
C128_RING_SPEC = 256
# arg_groups/deepseek_v4_hook.py:apply_deepseek_v4_defaults asserts the algorithm as given (before
# speculative_hook.py's NEXTN → EAGLE alias and upper-casing): NEXTN is refused for DeepSeek-V4.
SPEC_ALGORITHMS = ("EAGLE", "DSPARK")
KV_DTYPES = ("fp8_e4m3", "bfloat16")  # arg_groups/overrides.py:_deepseek_v4_kv_cache_dtype's assertion


@dataclass(frozen=True)
class Dsv4Part:
    """One GPU's DeepSeek-V4 pool geometry, as DSV4PoolConfigurator.__init__ reads it (PP 1)."""

    layers: int  # num_layers_total: every layer keeps its sliding window
    c4_layers: int  # stage_owner_layers[4]
    c128_layers: int  # stage_owner_layers[128]
    head_dim: int  # attn_head_dim = qk_nope_head_dim + qk_rope_head_dim (config head_dim)
    index_head_dim: int
    window: int  # kvc.sliding_window_size (config sliding_window)
    page_size: int = PAGE_SIZE
    swa_ratio: float = DEFAULT_SWA_RATIO
    draft_tokens: int = 0  # speculative_num_draft_tokens (0: no speculative decoding); the MTP draft is 1 layer

    def ring(self, ratio: int) -> int:
        """deepseek_v4_memory_pool.py:get_compress_state_ring_size (c4 / c128, offline c128): 8 / 128 rows, 16 / 256
        under speculative decoding."""
        if self.draft_tokens:
            return C4_RING_SPEC if ratio == 4 else C128_RING_SPEC
        return C4_RING if ratio == 4 else C128_RING

    @property
    def spec_inflation(self) -> float:
        """DSV4PoolConfigurator.__init__ (speculative, no encoder replay): per-token bytes × (target layers + 1
        draft layer) / target layers, reserving the draft worker's pool."""
        return (self.layers + 1) / self.layers if self.draft_tokens else 1.0

    @property
    def index_bytes(self) -> int:
        """deepseek_v4_memory_pool.py:get_dsv4_indexer_bytes_per_token (fp8 indexer): payload + a 4-byte scale
        per 128 values."""
        return self.index_head_dim + self.index_head_dim // 128 * 4

    def paged_bytes(self, ratio: int = 0) -> float:
        """DSV4PoolConfigurator._get_paged_kv_bytes_per_token: one slot of a V4-layout page of page / ratio slots
        (KVLayout.page_bytes pads the page to the 576-byte row)."""
        slots = self.page_size // ratio if ratio else self.page_size
        return math.ceil(slots * V4_BYTES_PER_TOKEN / V4_PAGE_ALIGN) * V4_PAGE_ALIGN / slots

    @property
    def bytes_per_swa_token(self) -> float:
        """DSV4PoolConfigurator._get_bytes_per_swa_token: the sliding-window slot on every layer plus the c4
        compress state (kv and score, overlap 2, core and indexer) priced per SWA slot."""
        state = (2 * 2 * self.head_dim + 2 * 2 * self.index_head_dim) * STATE_BYTES
        base = self.paged_bytes() * self.layers + self.ring(4) / self.page_size * state * self.c4_layers
        return base * self.spec_inflation if self.draft_tokens else base

    @property
    def compressed_bytes_per_full_token(self) -> float:
        """DSV4PoolConfigurator._compressed_bytes_per_full_token summed over the owner layers."""
        c4 = self.paged_bytes(4) / 4 + self.index_bytes / 4
        return c4 * self.c4_layers + self.paged_bytes(128) / 128 * self.c128_layers

    @property
    def bytes_per_full_token(self) -> float:
        """DSV4PoolConfigurator._get_bytes_per_full_token (ratio mode): swa_ratio × the SWA slot + compressed."""
        if not self.draft_tokens:
            return self.swa_ratio * self.bytes_per_swa_token + self.compressed_bytes_per_full_token
        # the configurator sums the uninflated SWA slot, then inflates the total (DSV4PoolConfigurator.__init__)
        swa = self.bytes_per_swa_token / self.spec_inflation
        return (self.swa_ratio * swa + self.compressed_bytes_per_full_token) * self.spec_inflation

    def c128_state_fixed_bytes(self, reqs: int) -> int:
        """DSV4PoolConfigurator._get_c128_state_fixed_bytes: (reqs + 1) slots × a 128-row ring, + ring + 1 rows,
        padded to 128, of 2 × head_dim fp32 values, on every c128 layer."""
        if not self.c128_layers:
            return 0
        ring = self.ring(128)
        rows = -(-((reqs + 1) * ring + ring + 1) // 128) * 128
        return rows * 2 * self.head_dim * STATE_BYTES * self.c128_layers


def check_speculative(algorithm: str, topk: int | None, draft_tokens: int) -> None:
    """arg_groups/deepseek_v4_hook.py:apply_deepseek_v4_defaults (the algorithm and top-k as given) and
    DSV4PoolConfigurator._assert_ring_serves_draft_tokens (get_compress_state_write_pad: ring − window + 2, the
    window 8 for c4 and 128 for c128). Raises InvalidParameter with SGLang's assertion text."""
    if algorithm not in SPEC_ALGORITHMS:
        raise InvalidParameter(f"AssertionError: Only EAGLE and DSPARK speculative algorithms are supported for "
                               f"{ARCHITECTURE}", hint="SGLang 0.5.23 asserts this before it aliases NEXTN to "
                               "EAGLE: give --speculative-algorithm EAGLE --speculative-eagle-topk 1")
    if algorithm == "EAGLE" and topk != 1:
        raise InvalidParameter(f"AssertionError: Only EAGLE speculative algorithm with topk == 1 is supported for "
                               f"{ARCHITECTURE}", hint="give --speculative-eagle-topk 1 (SGLang checks it as given)")
    if algorithm != "EAGLE":
        raise InvalidParameter("SGLang 0.5.23 rules: DSPARK on DeepSeek-V4 (encoder replay, paged draft layers) "
                               "is not modelled yet", hint="kvplan models DeepSeek-V4's EAGLE (MTP) draft")
    for ratio, window in ((4, 8), (128, 128)):
        ring = C4_RING_SPEC if ratio == 4 else C128_RING_SPEC
        pad = ring - window + 2
        if draft_tokens > pad:
            raise InvalidParameter(
                f"AssertionError: speculative_num_draft_tokens={draft_tokens} exceeds what the c{ratio} compress "
                f"state ring can keep resident (ring_size={ring} serves at most {pad} draft tokens). Lower the draft "
                "count, or grow the ring in get_compress_state_ring_size().")


def is_dsv4(spec: ModelSpec) -> bool:
    """configs/model_config.py:is_deepseek_v4 (the architecture kvplan reads as DeepSeek-V4)."""
    return spec.architectures[:1] == (ARCHITECTURE,) and spec.dsv4 is not None


def dsv4_part(spec: ModelSpec, *, swa_ratio: float | None = None) -> Dsv4Part:
    """The geometry of `spec` (a DeepSeek-V4 config; kvplan's ratio 1 is the config's 0: no compressed storage)."""
    d = spec.dsv4
    assert d is not None
    return Dsv4Part(layers=len(d.ratios), c4_layers=sum(1 for r in d.ratios if r == 4),
                    c128_layers=sum(1 for r in d.ratios if r == 128), head_dim=d.head_dim,
                    index_head_dim=d.index_head_dim, window=d.sliding_window,
                    swa_ratio=DEFAULT_SWA_RATIO if swa_ratio is None else swa_ratio)


def kv_dtype(given: str) -> str:
    """arg_groups/overrides.py:_deepseek_v4_kv_cache_dtype: auto is fp8_e4m3; only fp8_e4m3 and bfloat16 pass
    (`bf16` is not rewritten before it: refused). Raises InvalidParameter with SGLang's assertion text."""
    value = given.lower()
    value = "fp8_e4m3" if value == "auto" else value  # no bf16 alias before this assertion
    if value not in KV_DTYPES:
        raise InvalidParameter(f"AssertionError: {given} is not supported for {ARCHITECTURE}",
                               hint="SGLang's DeepSeek-V4 pool takes fp8_e4m3 (auto) or bfloat16")
    return value


@dataclass(frozen=True)
class Dsv4Sizes:
    """DSV4PoolConfigurator.calculate_pool_sizes and finalize_with_max_running_requests for one budget."""

    budget_bytes: int
    bytes_per_full_token: float
    bytes_per_swa_token: float
    requested_reqs: int  # requested_max_running_requests_per_worker (what the fixed bytes are sized for)
    c128_state_fixed_bytes: int
    full_tokens: int  # max_total_num_tokens
    swa_tokens: int
    c4_tokens: int
    c128_tokens: int
    c4_state_pool_size: int
    c128_state_pool_size: int
    max_running_requests: int
    profiled_tokens: int  # calculate_pool_sizes' full_token, before a --max-total-tokens cap

    @property
    def charged_bytes(self) -> float:
        """The budget the configurator's model charges: full_tokens × bytes_per_full_token + the fixed bytes."""
        return self.full_tokens * self.bytes_per_full_token + self.c128_state_fixed_bytes


def swa_too_small_text(swa_tokens: int, window: int, page: int) -> str:
    """MemoryPoolConfigurator.validate_swa_pool_size's ValueError."""
    return (f"SWA pool ({swa_tokens} tokens) cannot hold even one request: the prefill admission floor is "
            f"sliding_window_size ({window}) + page_size ({page}). Increase --swa-full-tokens-ratio or the "
            "total KV budget.")


NOT_ENOUGH_MEMORY = "Not enough memory. Please try to increase --mem-fraction-static."


def size_dsv4(part: Dsv4Part, budget_bytes: int, *, max_running: int | None, attn_dp_size: int = 1,
              max_total_tokens: int | None = None) -> Dsv4Sizes:
    """DSV4PoolConfigurator.calculate_pool_sizes (then KVCacheConfigurator._apply_token_constraints'
    --max-total-tokens cap through calculate_pool_sizes_from_max_tokens), resolve_max_num_reqs and
    finalize_with_max_running_requests. Raises InvalidParameter with SGLang's words when the SWA pool cannot hold
    one request (validate_swa_pool_size, checked first) or no token fits (MemoryPoolConfig.__post_init__)."""
    page = part.page_size
    requested = max(1, (DEFAULT_MAX_RUNNING_REQUESTS if max_running is None else max_running) // attn_dp_size)
    fixed = part.c128_state_fixed_bytes(requested)
    per_token = part.bytes_per_full_token
    profiled = int(max(budget_bytes - fixed, 0) / per_token) // page * page
    # the padding loop of calculate_pool_sizes covers ratio 1 / 2 layers only (none in DeepSeek-V4)
    full = profiled
    for tokens in (profiled, *((max_total_tokens // page * page,) if max_total_tokens is not None else ())):
        full = min(full, tokens)
        swa = int(full * part.swa_ratio) // page * page  # _compute_dsv4_sizes: _get_swa_tokens, then validate
        if part.window + page >= swa:
            raise InvalidParameter(swa_too_small_text(swa, part.window, page))
    if full <= 0:
        raise InvalidParameter(NOT_ENOUGH_MEMORY)
    reqs = min(requested, full // 2)  # kv_cache_configurator.py:resolve_max_num_reqs (given)
    return Dsv4Sizes(budget_bytes, per_token, part.bytes_per_swa_token, requested, fixed, full, swa, full // 4,
                     full // 128, swa // page * part.ring(4), (reqs + 1) * part.ring(128), reqs, profiled)


def _gb(n: float) -> str:
    return f"{n / (1 << 30):.2f} GB"


def log_lines(part: Dsv4Part, s: Dsv4Sizes) -> tuple[str, ...]:
    """What SGLang logs while sizing and building the pool: pool_configurator.py's `DSV4 SWA sizing` (ratio mode;
    the ratio is always declared, so `explicit`), `DSV4 memory calculation`, `DSV4 pool sizes`, then
    mem_cache/deepseek_v4_memory_pool.py:DeepSeekV4TokenToKVPool's `Initialize …` and `DSV4 SWA storage`."""
    page = part.page_size

    def sizing(full: int) -> tuple[str, str]:
        swa = int(full * part.swa_ratio) // page * page
        return (f"DSV4 SWA sizing: mode=ratio (explicit), swa_tokens={swa}, "
                f"swa_full_tokens_ratio={float(part.swa_ratio)}",
                f"DSV4 pool sizes: full={full}, swa={swa}, c4={full // 4}, c128={full // 128}, "
                f"c4_state={swa // page * part.ring(4)}, c128_state=0")

    first, first_sizes = sizing(s.profiled_tokens)
    capped = sizing(s.full_tokens) if s.full_tokens != s.profiled_tokens else ()  # calculate_pool_sizes_from_max_tokens
    return (
        first,
        f"DSV4 memory calculation: unified=False, unified_fp8=False, dspark_draft_bf16=False, "
        f"bytes_per_full_token={s.bytes_per_full_token:.2f}, available_bytes={_gb(s.budget_bytes)}, "
        f"c128_state_fixed={_gb(s.c128_state_fixed_bytes)}, c2_state_fixed=0.00 GB, swa_fixed=0.00 GB, "
        f"swa_ring_fixed=0.00 GB, c4_state_fixed=0.00 GB, full_token={s.profiled_tokens}",
        first_sizes, *capped,
        f"Initialize DeepSeekV4TokenToKVPool with max_num_reqs={s.max_running_requests} swa_size={s.swa_tokens} "
        f"c4_size={s.c4_tokens} c4_logical_size={s.c4_tokens} c128_size={s.c128_tokens} "
        f"c4_state_pool_size={s.c4_state_pool_size} c128_state_pool_size={s.c128_state_pool_size} "
        "unified=False unified_fp8=False",
        "DSV4 SWA storage: worker=target, storage=paged, paged_allocator=True",
    )
