"""SGLang 0.5.23's Mamba / linear-attention state cache (paths relative to `sglang/srt/`).

A hybrid model's recurrent layers keep one state per request slot; SGLang carves those slots out of the KV
budget before the token pool is sized (`mem_cache/kv_cache_configurator.py:KVCacheConfigurator.
_handle_max_mamba_cache`, called from `_profile_available_bytes`):

    per_req  = (Σ conv_shape × conv_bytes + Π ssm_shape × ssm_bytes) × mamba_layers
                                           (configs/mamba_utils.py:BaseLinearStateParams.mamba_cache_per_req)
    K        = int((rest × r / (1 + r) × 2**30 − per_req) // per_req)     r = mamba_full_memory_ratio (0.9)
    rest'    = rest − (K + 1) × per_req / 2**30                          (+1: each pool's padding slot)
    reqs     ≤ K // ratio        ratio = 3 + 2 with the extra_buffer radix strategy and overlap, else 3
                                 (KVCacheConfigurator._calculate_mamba_ratio, resolve_max_num_reqs)

Modelled: the families the corpus holds (Qwen3-Next / Qwen3.5 gated delta net, Nemotron-H and Granite-4.0-H
Mamba-2, LFM2 short convolution, Mamba-1 / Falcon-Mamba), no speculative decoding, no pipeline
parallelism, SGLang's default radix cache and state dtypes. Pure: numbers in, numbers out.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kvplan.errors import InvalidParameter
from kvplan.model.spec import ModelSpec

GiB = 1 << 30
MiB = 1 << 20
# arg_groups/fields/schedule.py: mamba_full_memory_ratio falls back to 0.9 (Inkling's override, 0.1, is not
# one of the modelled families).
MAMBA_FULL_MEMORY_RATIO = 0.9
# environ.py: SGLANG_MAMBA_CONV_DTYPE defaults to bfloat16; configs/mamba_utils.py:mamba2_state_dtype's SSM
# default is float32, replaced by the config's mamba_ssm_dtype for the families that pass their config.
CONV_BYTES = 2
SSM_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# mem_cache/kv_cache_configurator.py: MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO (SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK
# off) and mem_cache/allocation_sizing.py:get_mamba_tracking_slots (2 with the extra buffer and overlap).
BASE_RATIO = 3
EXTRA_BUFFER_SLOTS = 2

# arg_groups/overrides.py:_MAMBA_EXTRA_BUFFER_ARCHS: with the default linear-attention backend (triton) and the
# overlap scheduler on, _mamba_radix_cache_resolution picks `extra_buffer` for these; every other mambaish
# model gets `no_buffer` (or keeps `auto`, which has no extra buffer either).
MAMBA_EXTRA_BUFFER_ARCHITECTURES = frozenset({
    "KimiLinearForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM", "Qwen3NextForCausalLM", "Qwen4ExpForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM",
    "Glm5NextForConditionalGeneration", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
    "NemotronH_Omni_Reasoning_V3", "KimiK3ForConditionalGeneration", "InklingForConditionalGeneration",
    "InklingForConditionalGenerationMTP",
})


@dataclass(frozen=True)
class MambaState:
    """One request slot's recurrent state on one rank (configs/mamba_utils.py:Mamba2StateShape)."""

    family: str  # "gdn", "mamba2", "short_conv" or "mamba1"
    layers: int  # layers holding state (mamba2_cache_params.layers)
    conv_elements: int  # per layer: Π conv_shape
    ssm_elements: int  # per layer: Π temporal (ssm) shape
    ssm_bytes: int

    @property
    def per_req_bytes(self) -> int:
        """BaseLinearStateParams.mamba_cache_per_req."""
        return (self.conv_elements * CONV_BYTES + self.ssm_elements * self.ssm_bytes) * self.layers


def _divide(numerator: int, denominator: int, what: str) -> int:
    """distributed/utils.py:divide, which asserts an exact split."""
    if numerator % denominator:
        raise InvalidParameter(f"{numerator} is not divisible by {denominator}",
                               hint=f"SGLang splits the {what} evenly over the tensor-parallel ranks")
    return numerator // denominator


def _mamba2_shape(tp: int, *, intermediate: int, n_groups: int, heads: int, head_dim: int, state: int,
                  conv_kernel: int) -> tuple[int, int]:
    """Mamba2StateShape.create: groups not divisible by TP are widened to TP (extra_groups_for_head_shards);
    conv (conv_dim / tp, kernel − 1), ssm (heads / tp, head_dim, state)."""
    if n_groups % tp:
        n_groups = tp
    conv_dim = intermediate + 2 * n_groups * state
    conv = _divide(conv_dim, tp, "Mamba conv channels") * (conv_kernel - 1)
    return conv, _divide(heads, tp, "Mamba heads") * head_dim * state


def _ssm_bytes(declared: object) -> int:
    """mamba2_state_dtype(config): the config's mamba_ssm_dtype when it is one of SGLang's three, else float32."""
    return SSM_DTYPE_BYTES.get(str(declared), 4) if declared is not None else 4


def mamba_state(spec: ModelSpec, *, attn_tp: int, tp: int, ssm_dtype: str | None = None) -> MambaState | None:
    """The state SGLang keeps per request slot (None: not a modelled family). GDN, Nemotron-H, Granite and LFM2
    shard over attention TP; Mamba-1 over the full TP group (configs/mamba.py:_mamba1_cache_params).
    `ssm_dtype` (--mamba-ssm-dtype) wins over the config's and the default for every family:
    arg_groups/serving_hook.py:handle_environment_variables sets SGLANG_MAMBA_SSM_DTYPE from it, which
    configs/mamba_utils.py:mamba2_state_dtype reads last (also for mamba2_state_dtype(None), the default)."""
    state = _mamba_state(spec, attn_tp=attn_tp, tp=tp)
    if state is None or ssm_dtype is None:
        return state
    return dataclasses.replace(state, ssm_bytes=SSM_DTYPE_BYTES[ssm_dtype])


def _mamba_state(spec: ModelSpec, *, attn_tp: int, tp: int) -> MambaState | None:
    layers = [x for x in spec.layers if x.kind == "mamba" and x.state is not None]
    if not layers or layers[0].state is None:
        return None
    # The config class SGLang builds for the text config's model_type picks the rule (kvplan.model.architectures:
    # Family.sglang_state_model_types, read into SglangFacts.state_rule).
    s, facts = layers[0].state, spec.facts.sglang
    rule = facts.state_rule
    n = len(layers)
    if rule == "gdn" and s.variant == "gdn":  # configs/qwen3_next.py:mamba2_cache_params
        conv, ssm = _mamba2_shape(attn_tp, intermediate=s.head_v_dim * s.num_v_heads, n_groups=s.num_k_heads,
                                  heads=s.num_v_heads, head_dim=s.head_v_dim, state=s.head_k_dim,
                                  conv_kernel=s.conv_kernel)
        return MambaState("gdn", n, conv, ssm, _ssm_bytes(facts.mamba_ssm_dtype))
    if rule == "nemotron_h" and s.variant == "mamba2":  # configs/nemotron_h.py:mamba2_cache_params
        conv, ssm = _mamba2_shape(attn_tp, intermediate=s.num_heads * s.head_dim, n_groups=s.n_groups,
                                  heads=s.num_heads, head_dim=s.head_dim, state=s.state_size,
                                  conv_kernel=s.conv_kernel)
        return MambaState("mamba2", n, conv, ssm, _ssm_bytes(facts.mamba_ssm_dtype))
    if rule == "granite" and s.variant == "mamba2":
        # configs/granitemoehybrid.py:mamba2_cache_params (mamba_expand × hidden; no dtype from the config).
        conv, ssm = _mamba2_shape(attn_tp, intermediate=s.intermediate_size, n_groups=s.n_groups,
                                  heads=s.num_heads, head_dim=s.head_dim, state=s.state_size,
                                  conv_kernel=s.conv_kernel)
        return MambaState("mamba2", n, conv, ssm, 4)
    if rule == "short_conv" and s.variant == "short_conv":
        # configs/lfm2.py:mamba2_cache_params: a conv state of hidden_size channels, no SSM state.
        conv, _ = _mamba2_shape(attn_tp, intermediate=spec.hidden_size, n_groups=1, heads=attn_tp,
                                head_dim=spec.hidden_size, state=0, conv_kernel=s.conv_kernel)
        return MambaState("short_conv", n, conv, 0, 4)
    if rule == "mamba1" and s.variant == "mamba1":
        # Mamba2StateShape.create_full_rank: conv (d_inner / tp, kernel − 1), ssm (d_inner / tp, 1, d_state).
        inner = _divide(s.intermediate_size, tp, "Mamba-1 channels")
        return MambaState("mamba1", n, inner * (s.conv_kernel - 1), inner * s.state_size, 4)
    return None


def mamba_ratio(architecture: str) -> int:
    """KVCacheConfigurator._calculate_mamba_ratio under SGLang's defaults (radix cache on, overlap scheduler on,
    triton linear-attention backend): 3 state slots per running request, 5 with the extra buffer."""
    return BASE_RATIO + (EXTRA_BUFFER_SLOTS if architecture in MAMBA_EXTRA_BUFFER_ARCHITECTURES else 0)


@dataclass(frozen=True)
class MambaCache:
    """What _handle_max_mamba_cache sizes: the state slots and the budget they leave for the KV pool."""

    max_mamba_cache_size: int
    per_req_bytes: int
    state_bytes: int  # (K + 1) slots
    rest_gib: float  # the budget left for the token pool, GiB
    ratio: int  # state slots per running request
    log_line: str
    refusal: str | None = None  # SGLang's RuntimeError when no slot fits (K ≤ 0)


def not_enough_state_text(size: int, rest_gib: float, per_req: int) -> str:
    """The RuntimeError _handle_max_mamba_cache raises when no slot fits, verbatim."""
    return (f"Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
            f"max_mamba_cache_size={size} (total_rest_memory={rest_gib:.2f} GB, mamba_cache_per_req="
            f"{per_req / MiB:.2f} MB). Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, "
            "(3) reduce --speculative-num-draft-tokens, or (4) use GPUs with more memory.")


@dataclass(frozen=True)
class SpecReserve:
    """What an EAGLE/NEXTN (or NGRAM) run makes _handle_max_mamba_cache reserve: the per-step intermediate state
    of `draft_tokens` (--speculative-num-draft-tokens as resolved) for up to `max_running` requests (the resolved
    --max-running-requests, 48 unless given)."""

    draft_tokens: int
    max_running: int


def carve_mamba_cache(rest_gib: float, state: MambaState, *, ratio: int,
                      full_memory_ratio: float = MAMBA_FULL_MEMORY_RATIO, max_mamba_cache_size: int | None = None,
                      attn_dp_size: int = 1, spec: SpecReserve | None = None) -> MambaCache:
    """_handle_max_mamba_cache, radix cache on, no ReplaySSM, in SGLang's float order: a given
    --max-mamba-cache-size split over the attention-DP workers (`// attn_dp_size`, "mamba_pool.per_dp_shard"),
    else the ratio-based branch; K ≤ 0 carries SGLang's refusal. With speculative decoding (`spec`) the ratio
    branch solves K = int((budget − per × (1 + D)) // (per × (1 + D / ratio))) ("mamba_pool.memory_budget_spec")
    and both branches take the intermediate state per × (min(max(1, reqs // dp), K // ratio) + 1) × D off the
    rest first."""
    per = state.per_req_bytes
    capped = None
    if max_mamba_cache_size is not None:
        size = max_mamba_cache_size // attn_dp_size
        if spec is not None:
            capped = min(max(1, spec.max_running // attn_dp_size), size // ratio)
    else:
        mamba_budget_bytes = rest_gib * full_memory_ratio / (1 + full_memory_ratio) * (1 << 30)
        if spec is not None:
            d = spec.draft_tokens
            size = int((mamba_budget_bytes - per * (1 + d) - 0) // (per * (1 + d / ratio) + 0))
            capped = min(max(1, spec.max_running // attn_dp_size), size // ratio)
        else:
            size = int((mamba_budget_bytes - 0 - per) // per)
    if spec is not None and capped is not None:
        rest_gib = rest_gib - (per * (capped + 1) * spec.draft_tokens) / (1 << 30)
    if size <= 0:
        return MambaCache(size, per, 0, rest_gib, ratio, "", not_enough_state_text(size, rest_gib, per))
    state_bytes = (size + 1) * per
    conv = (size + 1) * state.layers * state.conv_elements * CONV_BYTES
    ssm = (size + 1) * state.layers * state.ssm_elements * state.ssm_bytes
    # mem_cache/memory_pool.py:MambaPool.__init__ (GB = 2**30; the trailing space is SGLang's). With speculative
    # decoding its line adds the intermediate SSM and conv-window caches, not reproduced (empty).
    log = "" if spec is not None else (
        f"Mamba Cache is allocated. max_mamba_cache_size: {size}, conv_state size: {conv / GiB:.2f}GB, "
        f"ssm_state size: {ssm / GiB:.2f}GB ")
    return MambaCache(size, per, state_bytes, rest_gib - state_bytes / (1 << 30), ratio, log)


def state_cap_text(size: int, ratio: int, reqs: int) -> str:
    """The RuntimeError resolve_max_num_reqs raises when the state slots serve no request, verbatim."""
    return (f"Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
            f"max_mamba_cache_size={size}, mamba_ratio={ratio}, resulting max_num_reqs={reqs}. Try: (1) reduce "
            "--max-running-requests, (2) increase --mem-fraction-static, or (3) use GPUs with more memory.")
