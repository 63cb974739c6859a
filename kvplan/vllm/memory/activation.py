"""The activation peak of vLLM's profiling run: the dummy forward and the dummy sampler."""
from __future__ import annotations

from dataclasses import dataclass

from kvplan.model.spec import ModelSpec
from kvplan.model.weights import FP_BYTES, mlp_width, per_layer_inputs_bytes
from kvplan.units import GiB
from kvplan.vllm.defaults import LATEST, TOTAL_CONSUMED_SINCE, VllmVersion, version_band
from kvplan.vllm.memory.budget import MemoryTerm, with_range

# --- Activation peak of the profiling run ---------------------------------------------------------
# v1/worker/gpu/model_runner.py:profile_run: a dummy forward over max_num_batched_tokens tokens, then on
# the last PP rank `_dummy_sampler_run` over one logits row per dummy request
# (num_reqs = min(max_num_batched_tokens, max_num_seqs)), with full-vocabulary fp32 logits on every TP
# rank. The sampler's top-k/top-p path (sort values + int64 indices, softmax, cumulative sum, masks)
# holds about 9.6 fp32 copies of the logits at its peak: 38.4 bytes per logit, fitted on the llm-d H100
# logs (Llama-3.1-8B 38.4, Qwen3-0.6B 38.3, Qwen3-32B 38.4, gpt-oss-20b/120b 38.3, Llama-3.3-70B 38.6),
# vLLM 0.11 by the records (calibration half: Llama-3.1-8B 38.4, gpt-oss-20b 38.3). Their doc's January 2026 runs name
# the image vllm/vllm-openai:latest (llm-d-benchmark 4f4d449, "How to Replicate"): the sort path is 0.11.1+'s default,
# not 0.11.0's (defaults.flashinfer_sampler_by_default), so those runs were 0.11.1 or later.
SAMPLER_BYTES_PER_LOGIT = 38.4
# vLLM 0.8–0.10 (v1/sample/ops/topk_topp_sampler.py:TopKTopPSampler.__init__): on CUDA with FlashInfer
# importable and VLLM_USE_FLASHINFER_SAMPLER unset, `forward_cuda` → `flashinfer_sample` →
# flashinfer.sampling.top_k_top_p_sampling_from_logits (the dummy run sets both top_k = vocab − 1 and
# top_p = 0.9, v1/worker/gpu_model_runner.py:_dummy_sampler_run): the model-dtype logits (2 B), the fp32
# copy v1/sample/sampler.py:Sampler.forward makes (4 B, temperature applied in place), FlashInfer's
# top-k-masked logits (4 B) and their softmax (4 B) = 14 B per logit, no sort. The A100 0.10.1.1 logs
# (dennislee, calibration half) print "Using FlashInfer for top-p & top-k sampling." and their
# non-weight memory (0.57 GiB on one GPU for 256 rows × 152,064 vocab) leaves no room for 38.4.
SAMPLER_BYTES_PER_LOGIT_FLASHINFER = 14.0
SAMPLER_FLASHINFER_BEFORE = VllmVersion(0, 11)
# vLLM 0.17+ (v1/sample/ops/topk_topp_sampler.py:apply_top_k_top_p, PR #33538; also Model Runner V2's
# sampler, v1/worker/gpu/sample/states.py): from 8 rows on, top-k/top-p is a Triton kernel that masks the
# fp32 logits in place with one [SMs, vocab] buffer — no sort. 0.16.0 still sorts; 0.17.0 ships
# topk_topp_triton.py. The sort path was most of the 0.11 peak: PR #32558 measured the masking op alone at
# 1.25 GB (PyTorch) against 384 MB (Triton) for 256 × 131,072 logits, 37.3 → 11.5 B/logit. What remains at
# the peak is the penalties step of the dummy run (penalties 0.1, model_executor/layers/utils.py
# apply_penalties): the model-dtype logits (2 B) and their fp32 copy (4 B), the prompt mask (1 B), the output
# int64 bin counts (8 B) and mask (1 B), and a fp32 product (4 B) = 20 B per logit. An estimate from the
# source: no calibration log measures a 0.17+ sampler peak.
SAMPLER_BYTES_PER_LOGIT_TRITON = 20.0
SAMPLER_TRITON_SINCE = VllmVersion(0, 17)
# Its range: −10% as the other bands; +30% for what the count leaves out (allocator rounding, the sort
# workspace PR #33538 still falls back to below 8 rows, penalty temporaries counted once).
ACTIVATION_RANGE_TRITON = (-0.10, 0.30)
# Model Runner V2 (vllm/model_runner.py) builds its sampler after the weights are measured, on the last PP rank only
# (load_model: `if self.is_last_pp_rank and not self.is_pooling_model`; fit.py:_with_penalty_state), and its
# PenaltiesState keeps
# output_bin_counts (int32, [max_num_reqs, vocab]) and prompt_bin_mask (int32, [max_num_reqs, vocab / 32]) for
# good (v1/worker/gpu/sample/penalties.py, "can be very large, taking up GBs"): in vLLM's total_consumed
# (utils/mem_utils.py:memory_profiling, "consumed memory (weights + non-torch)") though neither weights nor
# the profiling peak. 4 + 4/32 B per slot. The 0.31 A100 log (ghlog-a100-80gb-llama31-8b-instruct-v0310)
# shows it: consumed 15.26 GiB = 15.00 weights + 0.13 non-torch + 0.13 for 256 slots × 128,256.
PENALTY_STATE_BYTES_PER_SLOT = 4 + 4 / 32
# The dummy run's hidden states (max_num_batched_tokens × hidden) stay allocated while the sampler runs.
RETAINED_HIDDEN_COPIES = 1


def _per_rank(width: int, tp: int) -> int:
    return -(-width // tp)


def forward_activation_bytes(model: ModelSpec, *, tp: int, num_tokens: int,
                             moe_point_bytes: int | None = None, moe_tp: int | None = None) -> int:
    """Peak live intermediates of one forward over `num_tokens` tokens on one TP rank.

    The largest of: the dense MLP (gate/up output 2·I plus the activated I), the fused-MoE workspaces
    (top_k × (2·I_e + I_e + hidden), vllm/model_executor/layers/fused_moe/fused_moe.py intermediate
    caches) plus any shared expert, and the attention projections (q + 2·kv heads). `moe_point_bytes`: what
    another MoE kernel holds in place of the Triton caches (memory/flashinfer_moe.py:
    flashinfer_cutlass_moe_point_bytes), the shared expert still added. `moe_tp`: the ranks each routed expert's
    width is split over (ProfileRun.moe_tp; fused_moe/config.py:FusedMoEParallelConfig.make gives the MoE tp_size 1
    under --enable-expert-parallel: whole experts per rank, as the 0.11.2 Qwen3-VL-235B TP 8 EP log's Triton config
    lookup "E=16,N=1536" shows); None: `tp`. (fused_experts_impl, read in 0.11.0 and 0.11.2, lets cache1 and cache3
    share one `cache13` of max(N, K): the sum here is above it, a pessimism kept as the pre-0.17 estimate.)
    """
    e = FP_BYTES.get(model.dtype, 2)
    peaks = [num_tokens * 3 * _per_rank(model.intermediate_size, tp) * e]
    if model.moe is not None:
        m = model.moe
        shared = num_tokens * 3 * _per_rank(m.shared_intermediate_size, tp) * e
        if moe_point_bytes is None:
            width = _per_rank(m.expert_intermediate_size, tp if moe_tp is None else moe_tp)
            moe = num_tokens * m.experts_per_token * (3 * width + model.hidden_size) * e
        else:
            moe = moe_point_bytes
        peaks.append(moe + shared)
    heads = _per_rank(model.num_attention_heads, tp) + 2 * max(1, model.num_kv_heads // tp)
    peaks.append(num_tokens * heads * model.head_size * e)
    return max(peaks)


# Which path samples (v1/sample/ops/topk_topp_sampler.py:TopKTopPSampler.__init__, read in the wheels): up to
# 0.11.0 FlashInfer whenever it is importable and VLLM_USE_FLASHINFER_SAMPLER is not 0, from 0.11.1 (PR #26859) only
# with VLLM_USE_FLASHINFER_SAMPLER=1. The 0.11 band keeps the sort path (llm-d's five H100 logs, 0.11.1 or later);
# `flashinfer_default` True is 0.11.0 named with its patch (defaults.flashinfer_sampler_by_default: the llm-d
# Mistral-Small-3.2 log on vllm/vllm-openai:v0.11.0, peak 2.12 GiB, below the sort path's 4.7). `flashinfer` True /
# False overrides both (the variable, or a log that says "FlashInfer is not available. Falling back to the
# PyTorch-native implementation").


def sampler_bytes_per_logit(version: VllmVersion = LATEST, flashinfer: bool | None = None, *,
                            flashinfer_default: bool | None = None) -> float:
    """Peak bytes per logit of the dummy sampler run as `version` runs it (`flashinfer`: the path forced by
    VLLM_USE_FLASHINFER_SAMPLER or a missing FlashInfer; None: the version's default).

    0.8–0.10, and 0.11.0 (`flashinfer_default` True: defaults.flashinfer_sampler_by_default): FlashInfer's top-k/top-p
    path (SAMPLER_BYTES_PER_LOGIT_FLASHINFER, 14 B). 0.11–0.16: the V1 runner's sort-based sampler as measured on the
    vLLM 0.11 logs (SAMPLER_BYTES_PER_LOGIT, 38.4 B).
    0.17+: the in-place Triton top-k/top-p kernel (SAMPLER_BYTES_PER_LOGIT_TRITON, 20 B, from the source).
    Model Runner V2 (v1/worker/gpu/model_runner.py:_dummy_sampler_run) samples its dummy requests with their
    default state (greedy, no processing) up to 0.32 — 0.33 adds a second pass with
    SamplingParams.for_sampler_warmup (penalties, top-k/top-p, min-p, logprobs) after freeing the first — and
    its sampler (v1/worker/gpu/sample/) works in place. These figures serve where the runner is not given or the
    release predates PROFILE_RULES; estimate_activation follows the ported rule otherwise (0.17+ V1: 14 B plus the
    Triton buffer, the 20 B "penalties" figure not being what the dummy run does: no_penalties=True).
    """
    native = SAMPLER_BYTES_PER_LOGIT if version < SAMPLER_TRITON_SINCE else SAMPLER_BYTES_PER_LOGIT_TRITON
    if flashinfer is not None:
        return SAMPLER_BYTES_PER_LOGIT_FLASHINFER if flashinfer else native
    if flashinfer_default or version < SAMPLER_FLASHINFER_BEFORE:
        return SAMPLER_BYTES_PER_LOGIT_FLASHINFER
    return native


def penalty_state_bytes(model: ModelSpec, *, max_num_seqs: int, version: VllmVersion = LATEST,
                        model_runner_v2: bool = True) -> int:
    """Model Runner V2's persistent penalty state (PENALTY_STATE_BYTES_PER_SLOT per request slot × vocab) as
    vLLM's profiler counts it: 0 on the V1 runner, and before 0.27 (TOTAL_CONSUMED_SINCE), whose profiler
    did not see it."""
    if not model_runner_v2 or version < TOTAL_CONSUMED_SINCE:
        return 0
    return int(max_num_seqs * model.vocab_size * PENALTY_STATE_BYTES_PER_SLOT)


def sampler_activation_bytes(model: ModelSpec, *, num_reqs: int, version: VllmVersion = LATEST,
                             flashinfer: bool | None = None, flashinfer_default: bool | None = None) -> int:
    """Peak of the dummy sampler run: `num_reqs × vocab × sampler_bytes_per_logit(version, flashinfer, ...)`."""
    per_logit = sampler_bytes_per_logit(version, flashinfer, flashinfer_default=flashinfer_default)
    return int(num_reqs * model.vocab_size * per_logit)


# Range of the activation term: its residual (log − kvplan) on the calibration half, relative to the
# estimate. Direct ("peak activation" / "torch peak memory increase" lines): Llama-3.1-8B +0.0%,
# gpt-oss-20b −0.4% (llm-d, 0.11). Implied by the non-weight remainder of the 0.10.1.1 A100 logs: within
# what the non-torch range already covers. The low/high fractions below are those residuals widened to
# the logs' 2-decimal rounding and to the spread the older sampler figures show (38.3–38.6 B/logit).
ACTIVATION_RANGE = (-0.10, 0.10)


@dataclass(frozen=True)
class ProfileRun:
    """The dummy run vLLM's profile_run makes on one worker (v1/worker/gpu_model_runner.py:profile_run and
    v1/worker/gpu/model_runner.py:profile_run): `max_num_batched_tokens` tokens through the forward and
    min(tokens, `max_num_seqs`) logits rows through the sampler, on a TP group of `tp` whose fused-MoE workspace is
    split over `moe_tp` ranks (None: `tp`; v1_forward_phase_bytes); `first_stage`: the PP stage holding the
    embedding; `with_sampler`: the last PP stage ("Only run sampler/pooler on last PP rank"); `moe_point_bytes`:
    what an MoE layer holds at its call where vLLM runs FlashInfer's CUTLASS kernel instead of Triton (its
    workspace and vLLM's (M, hidden) buffer: memory/flashinfer_moe.py:flashinfer_cutlass_moe_point_bytes), None:
    Triton's."""

    max_num_batched_tokens: int
    max_num_seqs: int
    tp: int = 1
    moe_tp: int | None = None
    first_stage: bool = True
    with_sampler: bool = True
    moe_point_bytes: int | None = None


def estimate_activation(model: ModelSpec, run: ProfileRun, *, version: VllmVersion = LATEST,
                        flashinfer_sampler: bool | None = None, model_runner_v2: bool | None = None,
                        flashinfer_default: bool | None = None) -> MemoryTerm:
    """Torch peak above what stays allocated after vLLM's profiling run (`transient_peak_headroom`).

    Follows v1/worker/gpu_model_runner.py:profile_run (the V1 runner) and v1/worker/gpu/model_runner.py:profile_run
    (Model Runner V2): peak = max(forward intermediates over max_num_batched_tokens tokens
    (forward_activation_bytes), sampler over min(max_num_batched_tokens, max_num_seqs) logits rows
    (sampler_bytes_per_logit: by version; `flashinfer_default` True: a patch release whose default is FlashInfer's
    path, defaults.flashinfer_sampler_by_default)) + the retained hidden states. Model Runner V2's persistent penalty
    state is not a peak: fit counts it with the consumed memory (penalty_state_bytes). Assumes the dummy forward's peak
    is one layer's widest intermediate (torch frees each layer's before the next) and the sampler on the last
    PP rank; a multimodal encoder's profile is added by fit (vllm/multimodal.py:gemma4_encoder_profile).
    `run.with_sampler=False` is a PP stage before the last: profile_run runs `_dummy_sampler_run` only on the last PP
    rank (v1/worker/gpu/model_runner.py and v1/worker/gpu_model_runner.py, "Only run sampler/pooler on last
    PP rank"), so its peak is the forward's. Range: ACTIVATION_RANGE.

    A runner (`model_runner_v2` True / False) on a release PROFILE_RULES covers, with the sampler path left to vLLM:
    that release's profile run as ported from vLLM's code (ported_profile_rule; v1_profile_peak_bytes /
    v1_forward_phase_bytes), checked against 0.33's own run (tests/fixtures/oracle-profile); `run.first_stage=False`
    for a PP stage after the first; `run.moe_tp`: the fused-MoE workspace's split (v1_forward_phase_bytes).
    `run.moe_point_bytes`: the MoE layer's hold where vLLM runs FlashInfer's CUTLASS kernel, not Triton (in place
    of the Triton caches: forward_activation_bytes; on the ported rules: v1_forward_phase_bytes).
    """
    rule = ported_profile_rule(version, model_runner_v2=model_runner_v2)
    if rule is not None and flashinfer_sampler is None:
        return _ported_activation(model, rule, run)
    tp, max_num_batched_tokens, max_num_seqs = run.tp, run.max_num_batched_tokens, run.max_num_seqs
    moe_point_bytes = run.moe_point_bytes
    if not run.with_sampler:
        return _forward_only_activation(model, tp=tp, max_num_batched_tokens=max_num_batched_tokens,
                                        moe_point_bytes=moe_point_bytes, moe_tp=run.moe_tp)
    num_reqs = min(max_num_batched_tokens, max_num_seqs)
    e = FP_BYTES.get(model.dtype, 2)
    forward = forward_activation_bytes(model, tp=tp, num_tokens=max_num_batched_tokens,
                                       moe_point_bytes=moe_point_bytes, moe_tp=run.moe_tp)
    sampler = sampler_activation_bytes(model, num_reqs=num_reqs, version=version, flashinfer=flashinfer_sampler,
                                       flashinfer_default=flashinfer_default)
    hidden = RETAINED_HIDDEN_COPIES * max_num_batched_tokens * model.hidden_size * e
    peak = max(forward, sampler) + hidden
    per_logit = sampler_bytes_per_logit(version, flashinfer_sampler, flashinfer_default=flashinfer_default)
    by_patch = flashinfer_sampler is None and bool(flashinfer_default)
    path = {SAMPLER_BYTES_PER_LOGIT_FLASHINFER: ", FlashInfer top-k/top-p" + (", the patch release's default"
                                                                             if by_patch else ""),
            SAMPLER_BYTES_PER_LOGIT_TRITON: ", Triton top-k/top-p"}.get(per_logit, "")
    which = (
        f"sampler over {num_reqs:,} rows × {model.vocab_size:,} vocab × {per_logit:g} B "
        f"(vLLM {version_band(version)}{path})"
        if sampler >= forward
        else f"forward intermediates over {max_num_batched_tokens:,} tokens"
    )
    term = MemoryTerm("activation", peak, "estimate",
                      f"profiling-run peak: {which}, plus {max_num_batched_tokens:,} retained hidden states")
    triton_peak = per_logit == SAMPLER_BYTES_PER_LOGIT_TRITON and sampler >= forward
    lo, hi = ACTIVATION_RANGE_TRITON if triton_peak else ACTIVATION_RANGE
    high = int(peak * (1 + hi))
    if per_logit == SAMPLER_BYTES_PER_LOGIT_FLASHINFER and flashinfer_sampler is None:
        # FlashInfer importable is an assumption (a pip install without it falls back to the PyTorch-native
        # path, "FlashInfer is not available. Falling back ..."): that path's peak is the high end. The
        # calibration record vllm-23278 (H100, Aug 2025 build) implies it: 7.45 GiB of non-weight memory.
        native = max(forward, sampler_activation_bytes(model, num_reqs=num_reqs, version=version,
                                                       flashinfer=False)) + hidden
        high = max(high, int(native * (1 + hi)))
    return with_range(term, int(peak * (1 + lo)), high)


def _forward_only_activation(model: ModelSpec, *, tp: int, max_num_batched_tokens: int,
                             moe_point_bytes: int | None = None, moe_tp: int | None = None) -> MemoryTerm:
    """A PP stage without the sampler: the dummy forward's widest intermediate plus the retained hidden states."""
    e = FP_BYTES.get(model.dtype, 2)
    forward = forward_activation_bytes(model, tp=tp, num_tokens=max_num_batched_tokens,
                                       moe_point_bytes=moe_point_bytes, moe_tp=moe_tp)
    peak = forward + RETAINED_HIDDEN_COPIES * max_num_batched_tokens * model.hidden_size * e
    term = MemoryTerm("activation", peak, "estimate",
                      f"profiling-run peak: forward intermediates over {max_num_batched_tokens:,} tokens, plus "
                      f"{max_num_batched_tokens:,} retained hidden states (no sampler: not the last PP stage)")
    lo, hi = ACTIVATION_RANGE
    return with_range(term, int(peak * (1 + lo)), int(peak * (1 + hi)))


# --- vLLM 0.33's V1-runner profile run, ported from its code ----------------------------------------------------
# Checked against vLLM 0.33's own profile run on meta tensors (tests/fixtures/oracle-profile, made by
# tools/cuda_oracle/profile_goldens.py over the vllm-cuda-oracle kit's profile_probe.py). The V1 runner is what 0.33
# builds when Model Runner V2 is off (vllm/model_runner.py: VLLM_USE_V2_MODEL_RUNNER=0 or an unsupported feature).
#
# Sampler (v1/worker/gpu_model_runner.py:_dummy_sampler_run, 0.33): rand_like(hidden rows) → compute_logits (model-dtype
# logits, [rows, vocab], gathered over TP) → the V1 Sampler twice with temperature 0.5, top_k = vocab − 1, top_p 0.9 and
# no_penalties=True (no penalty step in 0.33). The first pass (TopKTopPSampler.forward_cuda → FlashInfer) frees its
# temporaries; the second, with a per-request generator, runs forward_native: v1/sample/sampler.py:Sampler.forward's
# fp32 copy (4 B), topk_topp_triton.py:apply_top_k_top_p_triton in place with its cached [min(next_pow2(rows), SMs),
# vocab] fp32 buffer (_TRITON_BUFFER_CACHE), softmax to fp32 probs (4 B) and random_sample's exponential noise q
# (empty_like probs, 4 B): 2 + 4 + 4 + 4 = 14 B per logit at the peak, with the model-dtype logits alive.
V1_SAMPLER_FP32_COPIES_033 = 3  # logits.to(float32), softmax(probs), exponential noise q
# The SM count the Triton buffer is capped at (platforms/cuda.py:num_compute_units). H100 SXM: 132; the probe's fake
# device reports 132 for every GPU (A100: 108, B200: 148 on the real cards: ≤ 16 rows × vocab × 4 B apart).
DEFAULT_NUM_SMS = 132
# The first (FlashInfer) pass leaves FlashInfer's cached 1 MiB row-states buffer behind (flashinfer/sampling.py,
# flashinfer-python 0.7.2 as vLLM 0.33 ships it: top_k_renorm_probs / top_k_mask_logits, `buffer_bytes = 1024 * 1024`,
# kept by _get_cache_buf), alive at the second pass's peak.
FLASHINFER_ROW_STATES_BYTES = 1024 * 1024


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def v1_sampler_phase_bytes(model: ModelSpec, *, num_reqs: int, num_sms: int = DEFAULT_NUM_SMS) -> int:
    """What vLLM 0.33's V1 `_dummy_sampler_run` adds at its peak over `num_reqs` rows (see the block above): the
    model-dtype logits, three fp32 copies of them, the Triton top-k/top-p buffer, the random hidden states and
    FlashInfer's cached row-states buffer."""
    e = FP_BYTES.get(model.dtype, 2)
    logits = num_reqs * model.vocab_size
    triton_buffer = min(_next_pow2(num_reqs), num_sms) * model.vocab_size * 4
    return (logits * (e + 4 * V1_SAMPLER_FP32_COPIES_033) + triton_buffer + num_reqs * model.hidden_size * e
            + FLASHINFER_ROW_STATES_BYTES)


# Model Runner V2 (v1/worker/gpu/model_runner.py:_dummy_sampler_run, vLLM 0.33): compute_logits on the hidden rows as
# they are (no rand_like), a default pass (no logits processing), then every request set to
# SamplingParams.for_sampler_warmup (penalties, logit bias, bad words, top-k 50, top-p 0.9, min-p, logprobs 5):
# v1/worker/gpu/sample/sampler.py:Sampler.apply_sampling_params's fp32 copy (4 B; penalties, bias, temperature and
# min-p in place), then _sample_random's fused FlashInfer path (flashinfer_sample → top_k_mask_logits, 4 B, and its
# softmax, 4 B): 2 + 4 + 4 + 4 = 14 B per logit with the model-dtype logits, plus FlashInfer's cached 1 MiB buffer.
# Its persistent request and sampling state is built before the profile (not in this peak; penalty_state_bytes).
MRV2_SAMPLER_FP32_COPIES_033 = 3


def mrv2_sampler_phase_bytes(model: ModelSpec, *, num_reqs: int) -> int:
    """What Model Runner V2's `_dummy_sampler_run` adds at its peak on vLLM 0.33 (see the block above)."""
    e = FP_BYTES.get(model.dtype, 2)
    return num_reqs * model.vocab_size * (e + 4 * MRV2_SAMPLER_FP32_COPIES_033) + FLASHINFER_ROW_STATES_BYTES


# Model Runner V2 on vLLM 0.22–0.32 (v1/worker/gpu/model_runner.py:_dummy_sampler_run, read in 0.22, 0.23, 0.24,
# 0.26, 0.27.1, 0.28, 0.29, 0.31 and 0.32): only the default pass. InputBatch.make_dummy maps every row to a request
# slot with SamplingStates' initial values (v1/worker/gpu/sample/states.py: temperature 0, top_k = vocab, top_p 1), so
# Sampler._requires_logits_processing is False (no fp32 copy), get_top_k_top_p returns None, None, and gumbel_sample
# (sample/gumbel.py) reads the model-dtype logits with two [rows, cdiv(vocab, 1024)] buffers (int64 argmax, fp32 max).
GUMBEL_BLOCK = 1024


def mrv2_default_sampler_phase_bytes(model: ModelSpec, *, num_reqs: int) -> int:
    """What Model Runner V2's `_dummy_sampler_run` adds at its peak on vLLM 0.22–0.32 (see the block above): the
    model-dtype logits and gumbel_sample's per-block argmax (int64) and max (fp32)."""
    e = FP_BYTES.get(model.dtype, 2)
    blocks = -(-model.vocab_size // GUMBEL_BLOCK)
    return num_reqs * model.vocab_size * e + num_reqs * blocks * (8 + 4)


def triton_moe_workspace_bytes(model: ModelSpec, *, tp: int, num_tokens: int) -> int:
    """The fused-MoE workspace vLLM 0.33 keeps for good once the profile run has grown it (v1/worker/workspace.py
    WorkspaceManager; model_executor/layers/fused_moe/modular_kernel.py:_allocate_buffers takes workspace13 and
    workspace2 in one get_simultaneous call). TritonExperts.workspace_shapes (fused_moe/experts/triton_moe.py):
    workspace1 = M × top_k × max(N / 2, K), workspace2 = M × top_k × max(N, K), with N = 2 × the expert width per TP
    rank (gate and up) and K = hidden, in the activation dtype. The BF16 Triton path only: other experts (FP8 block,
    Marlin, DeepGEMM, FlashInfer/TRT-LLM) size theirs differently. 0 for a dense model."""
    if model.moe is None:
        return 0
    e = FP_BYTES.get(model.dtype, 2)
    width = _per_rank(model.moe.expert_intermediate_size, tp)
    # gated experts (SiLU/GELU-and-mul): N = 2 × width and the activation halves it (adjust_N_for_activation);
    # ungated ones (Nemotron-H's relu²): N = width, kept whole.
    n, act_out = (2 * width, width) if model.gated_mlp else (width, width)
    k = model.hidden_size
    per_token = model.moe.experts_per_token * (max(act_out, k) + max(n, k))
    return num_tokens * per_token * e


# Hidden-sized buffers alive through a decoder layer of vLLM 0.33's profile forward (llama.py / qwen2.py: the model's
# layer loop and its decoder layer, read with the probe's allocation sites): the residual stream (the embedding
# output, updated in place by fused_add_rms_norm: kernels/vllm_c.py, inplace=True), the previous layer's output still
# held by the model loop's `hidden_states` while the next layer runs, and the layer's attention output (the MLP's
# input). A multimodal model's forward starts from the runner's persistent inputs_embeds buffer (allocated before the
# profile, so not in its peak): one fewer.
FORWARD_BASE_HIDDEN = 3
# Families whose vLLM MLP.forward rebinds `x` to the SiluAndMul output, so gate_up is freed before down_proj runs
# (llama.py:LlamaMLP.forward and mistral.py:MistralMLP.forward: `x, _ = self.gate_up_proj(x); x = self.act_fn(x)`):
# Family.mlp_rebinds_gate_up (kvplan/model/architectures/). Every other dense MLP keeps `gate_up` alive through
# down_proj (qwen2.py:Qwen2MLP.forward, which qwen3.py and qwen3_vl.py reuse; deepseek_v2.py, gemma*.py, granite.py,
# commandr.py, ...: `gate_up, _ = ...; x = act(gate_up)`): the default, and the pessimistic side.


# W8A8 FP8 linears with block scales quantize each linear's input per token group of 128
# (model_executor/layers/quantization/utils/fp8_utils.py:per_token_group_quant_fp8: an fp8 copy, 1 B per element,
# and fp32 scales, one per group): at the MLP peak, down_proj's input (I/tp wide) alongside gate_up and the
# activation. Hopper and Blackwell (CUTLASS / DeepGEMM block FP8, SM ≥ 9.0); an A100 runs FP8 weight-only (Marlin).
FP8_GROUP = 128


def _fp8_input_copy_bytes(width: int, num_tokens: int) -> int:
    """per_token_group_quant_fp8's outputs for a [num_tokens, width] input: the fp8 copy and its fp32 scales."""
    return num_tokens * width + num_tokens * -(-width // FP8_GROUP) * 4


def _dense_mlp_point(model: ModelSpec, *, tp: int, num_tokens: int, base: int) -> int:
    """Elements alive at a dense MLP's peak: gate_up (2·I/tp), the SiluAndMul output (I/tp) and, when gate_up
    survives down_proj, the down_proj output with its out-of-place all-reduce copy (TP > 1:
    distributed/parallel_state.py GroupCoordinator.all_reduce returns a new tensor). An ungated MLP: up and its
    activation, with the down_proj output."""
    i = _per_rank(_widest_mlp(model), tp)
    h = model.hidden_size
    down = h * (2 if tp > 1 else 1)
    if not model.gated_mlp:  # up (I/tp) and its activation (I/tp, a new tensor: starcoder2.py's c_fc → act → c_proj)
        return num_tokens * (2 * i + base * h + down)
    with_down = 3 * i + base * h + down
    if model.family.mlp_rebinds_gate_up:
        return num_tokens * max(3 * i + base * h, i + base * h + down)
    return num_tokens * with_down


def _attention_point(model: ModelSpec, *, tp: int, num_tokens: int, base: int) -> int:
    """Elements alive at the attention op: the projections (q + k + v, or MLA's q, latent and kv_b output), the
    attention output, the o_proj output and, with TP > 1, its all-reduce copy, on the base hidden buffers."""
    heads = _per_rank(model.num_attention_heads, tp)
    if model.mla is not None:  # deepseek_v2.py:DeepseekV2MLAAttention on the MLA backend's forward (no metadata)
        d = model.mla
        proj = heads * (d.qk_nope_head_dim + d.qk_rope_head_dim) + (d.kv_lora_rank + d.qk_rope_head_dim)
        proj += heads * (d.qk_nope_head_dim + d.v_head_dim) + heads * d.v_head_dim
    else:
        q = heads * model.head_size
        proj = q + 2 * max(1, model.num_kv_heads // tp) * model.head_size + q
    h = model.hidden_size
    return num_tokens * (proj + base * h + h * (2 if tp > 1 else 1))


# DeepSeek-V4's profile forward (vLLM 0.22–0.23 models/deepseek_v4/, read in 0.23.0; the same layer code in 0.33):
# the hidden state is hc_mult residual streams, (tokens, hc_mult, hidden) in the model dtype. Alive at the widest point
# of a CSA (ratio 4) layer's attention, in host allocation order (nvidia/model.py, attention.py, indexer):
#   * two residual streams — the model loop's `residual` (DeepseekV4Model.forward holds it while the layer runs) and
#     the layer's new one (kernels/mhc/tilelang.py:mhc_fused_post_pre_tilelang, empty_like(residual)) — and two
#     hidden-wide tensors (the previous layer's output, the layer input `layer_input_cur`);
#   * DeepseekV4Attention.forward's o_padded (tokens, P, head_dim), P = get_padded_num_q_heads (flashmla.py: 64 up to
#     64 local heads, else 128), and the profile path's F.pad of q to the same shape (_fused_qnorm_rope_kv_insert
#     without metadata);
#   * fused_wqa_wkv's output and fused_q_kv_rmsnorm's two outputs (empty_like qr, kv): 2 × (q_lora + head_dim);
#   * the compressor's fp32 kv score (tokens, 2·coff·head_dim) and the indexer's (tokens, 2·2·index_head_dim);
#   * inside the indexer (its wq_b_and_q_quant): q (tokens, index heads × index_head_dim) in the model dtype and its
#     fp8 copy.
# The fused-MoE workspace (WorkspaceManager, triton_moe_workspace_bytes) stays alive from the first MoE layer; the
# FlashMLA gather workspace of the profile path (flashmla.py: (4, N + window + tokens, head_dim) bf16) comes from the
# same WorkspaceManager buffer and is smaller. An estimate from the source: the meta-tensor probe does not build
# DeepSeek-V4 (it needs DeepGEMM), so no oracle checks it.
DSV4_RESIDUAL_STREAMS = 2
DSV4_HIDDEN_TENSORS = 2


def dsv4_forward_phase_bytes(model: ModelSpec, *, tp: int, num_tokens: int, moe_tp: int | None = None) -> int:
    """Peak of DeepSeek-V4's profile forward over `num_tokens` tokens on one TP rank (the block above)."""
    d4 = model.dsv4
    assert d4 is not None
    e = FP_BYTES.get(model.dtype, 2)
    h = model.hidden_size
    local = _per_rank(model.num_attention_heads, tp)
    padded = 64 if local <= 64 else 128
    csa = any(layer.compress_ratio == 4 for layer in model.layers)
    coff = 2 if csa else 1
    per_token = (DSV4_RESIDUAL_STREAMS * d4.hc_mult * h + DSV4_HIDDEN_TENSORS * h) * e
    per_token += 2 * padded * d4.head_dim * e + 2 * (d4.q_lora_rank + d4.head_dim) * e
    per_token += 2 * coff * d4.head_dim * 4
    if csa:
        per_token += 2 * 2 * d4.index_head_dim * 4 + d4.index_n_heads * d4.index_head_dim * (e + 1)
    workspace = triton_moe_workspace_bytes(model, tp=tp if moe_tp is None else moe_tp, num_tokens=num_tokens)
    return num_tokens * per_token + workspace


def v1_forward_phase_bytes(model: ModelSpec, *, tp: int, num_tokens: int, fp8_activations: bool = False,
                           first_stage: bool = True, moe_tp: int | None = None,
                           moe_point_bytes: int | None = None) -> int:
    """Peak of vLLM 0.33's profile forward over `num_tokens` tokens on one TP rank: the larger of the dense MLP point
    (_dense_mlp_point) and the attention point (_attention_point), the latter with the fused-MoE workspace alive
    (triton_moe_workspace_bytes) once an MoE layer has run. The workspace is taken at the first MoE layer's call:
    the dense layers before it (DeepSeek's first_k_dense) run without it. `fp8_activations`: W8A8 block-FP8 linears
    (a block-FP8 checkpoint on SM ≥ 9.0), whose down_proj input is quantized at the MLP peak (_fp8_input_copy_bytes).
    `first_stage=False`: a PP stage after the first, whose residual stream arrives in the runner's persistent
    intermediate tensors (allocated before the profile): one hidden buffer fewer, as for a multimodal model.
    Per-layer inputs (Gemma-3n, Gemma-4 E2B/E4B): the projected [tokens, layers, hidden_size_per_layer_input]
    tensor every layer reads lives through the whole forward (gemma4.py:Gemma4Model.project_per_layer_inputs).
    `moe_tp`: the ranks each expert's width is split over (fused_moe/config.py:FusedMoEParallelConfig.make: TP × DP,
    or 1 with --enable-expert-parallel, "each device owns a set of experts fully"); None: `tp`. DeepSeek-V4:
    dsv4_forward_phase_bytes. `moe_point_bytes`: FlashInfer's CUTLASS MoE (ProfileRun.moe_point_bytes): its
    retained buffer is vLLM's (M, hidden) one, and the MoE call itself (the base hidden buffers, FlashInfer's
    transient workspace and that buffer) is one more candidate for the peak."""
    if model.dsv4 is not None:
        return dsv4_forward_phase_bytes(model, tp=tp, num_tokens=num_tokens, moe_tp=moe_tp)
    e = FP_BYTES.get(model.dtype, 2)
    from_buffer = bool(model.mm_modalities or model.towers) or not first_stage
    base = FORWARD_BASE_HIDDEN - (1 if from_buffer else 0)
    attention = _attention_point(model, tp=tp, num_tokens=num_tokens, base=base) * e
    dense = _dense_mlp_point(model, tp=tp, num_tokens=num_tokens, base=base) * e if _has_dense_mlp(model) else 0
    if dense and fp8_activations:
        dense += _fp8_input_copy_bytes(_per_rank(_widest_mlp(model), tp), num_tokens)
    workspace = _retained_moe_workspace(model, tp=tp if moe_tp is None else moe_tp, num_tokens=num_tokens,
                                        flashinfer=moe_point_bytes is not None)
    ple = per_layer_inputs_bytes(model, num_tokens)
    if model.moe is None:
        return max(dense, attention) + ple
    moe_call = 0 if moe_point_bytes is None else num_tokens * base * model.hidden_size * e + moe_point_bytes
    return max(dense, attention + workspace, moe_call) + ple


def _widest_mlp(model: ModelSpec) -> int:
    """The widest dense MLP of the model's layers (kvplan.model.weights.mlp_width: Gemma-4-E2B's double-wide
    KV-shared layers, 2 × intermediate_size; the golden google--gemma-4-E2B-it__h100-tp1_seqs_64 holds its
    (8192, 24576) gate_up)."""
    return max((mlp_width(model, layer) for layer in model.layers), default=model.intermediate_size)


def _retained_moe_workspace(model: ModelSpec, *, tp: int, num_tokens: int, flashinfer: bool) -> int:
    """The fused-MoE workspace the WorkspaceManager keeps after the first MoE layer: Triton's
    (triton_moe_workspace_bytes), or FlashInferExperts.workspace_shapes' one (M, hidden) buffer in the activation
    dtype (fused_moe/experts/flashinfer_cutlass_moe.py, 0.33; flashinfer_cutlass_moe.py before)."""
    if model.moe is None:
        return 0
    if flashinfer:
        return num_tokens * model.hidden_size * FP_BYTES.get(model.dtype, 2)
    return triton_moe_workspace_bytes(model, tp=tp, num_tokens=num_tokens)


def _has_dense_mlp(model: ModelSpec) -> bool:
    """A layer with a dense MLP of `intermediate_size` (every layer of a dense model; DeepSeek's first_k_dense)."""
    if model.moe is None:
        return True
    return any(not layer.moe for layer in model.layers) and model.intermediate_size > 0


def v1_profile_peak_bytes(model: ModelSpec, run: ProfileRun, *, num_sms: int = DEFAULT_NUM_SMS,
                          fp8_activations: bool = False, model_runner_v2: bool = False,
                          mrv2_warmup_pass: bool = True) -> int:
    """vLLM 0.33 V1 runner's "peak activation": the larger of the forward's peak (v1_forward_phase_bytes) and the
    sampler's (v1_sampler_phase_bytes over min(tokens, max_num_seqs) rows) on top of what the forward leaves alive —
    the hidden states, their logits rows (hidden_states[logit_indices]) and the MoE workspace. The last PP stage of
    several: `run.first_stage=False`. `model_runner_v2`: Model Runner V2's sampler (mrv2_sampler_phase_bytes) on the
    same forward (the model code is the runner-independent part); `mrv2_warmup_pass=False`: its default pass only
    (mrv2_default_sampler_phase_bytes, vLLM 0.22–0.32). `run.moe_tp`: as v1_forward_phase_bytes. The sampler's
    peak is always counted (`run.with_sampler` is not read: a stage before the last is v1_forward_phase_bytes')."""
    tp, max_num_batched_tokens, moe_tp = run.tp, run.max_num_batched_tokens, run.moe_tp
    e = FP_BYTES.get(model.dtype, 2)
    rows = min(max_num_batched_tokens, run.max_num_seqs)
    forward = v1_forward_phase_bytes(model, tp=tp, num_tokens=max_num_batched_tokens, fp8_activations=fp8_activations,
                                     first_stage=run.first_stage, moe_tp=moe_tp, moe_point_bytes=run.moe_point_bytes)
    retained = ((max_num_batched_tokens + rows) * model.hidden_size * e
                + _retained_moe_workspace(model, tp=tp if moe_tp is None else moe_tp,
                                          num_tokens=max_num_batched_tokens,
                                          flashinfer=run.moe_point_bytes is not None))
    if model_runner_v2:
        sampler = (mrv2_sampler_phase_bytes(model, num_reqs=rows) if mrv2_warmup_pass
                   else mrv2_default_sampler_phase_bytes(model, num_reqs=rows))
    else:
        sampler = v1_sampler_phase_bytes(model, num_reqs=rows, num_sms=num_sms)
    return max(forward, retained + sampler)


# Model Runner V2's profile run holds more than its ported code does: log − kvplan's ported terms (activation,
# non-torch, penalty state, graphs) on the calibration half's two MRV2 records is +0.99 GiB on
# saiyam-2xrtxpro6000-qwen3-32b-pp2-util0426 (vLLM 0.27.1, Qwen3-32B PP 2, stage 0: rest 3.02 GiB against 2.02; its
# stage builds no Sampler, so no penalty state, fit.py:_with_penalty_state — read with the penalty state it was
# +0.40, the figure this constant had) and +0.06 on enginrect-rtx4090-qwen2.5-0.5b-instruct-llm-util092-v0271 (0.27.1,
# one RTX 4090, whose "consumed memory" and "peak activation" lines each sit within 0.03 GiB of kvplan's persistent
# and transient terms). Not named (persistent buffers MRV2 builds lazily in its first execute_model, kernel scratch,
# Inductor) and not one size on the two: their mean, as INTEGRATED_HOST_GROWTH_BYTES (non_torch.py) takes its two
# logs', an estimate whose range runs from 0 to twice it (1.06 GiB, the PP 2 record's 0.99 inside). The validation
# half spreads as wide (benchmarks/accuracy.py): +1.64 on Qwen3-32B TP 1 (0.27.1), −0.46 at TP 2 on the same box.
MRV2_UNSEEN_BYTES = int(0.53 * GiB)


@dataclass(frozen=True)
class ProfileRule:
    """Which ported profile run a release's runner has: `sampler` names the dummy sampler's peak function, `source`
    the file and function it was read in."""

    since: VllmVersion
    until: VllmVersion | None  # exclusive; None: to the newest release read (0.33)
    model_runner_v2: bool
    sampler: str  # "v1" (v1_sampler_phase_bytes), "mrv2_default", "mrv2_warmup" (mrv2_*_sampler_phase_bytes)
    source: str


# The profile-run rule by release and runner, read in the wheels (pip download --no-deps vllm==X: 0.17.0, 0.19.0,
# 0.22.0, 0.23.0, 0.24.0, 0.26.0, 0.27.1, 0.28.0, 0.29.0, 0.31.0, 0.32.0, 0.33.0). The forward (v1_forward_phase_bytes)
# is the model's code on either runner; the fused-MoE workspace is WorkspaceManager's from 0.17 on
# (v1/worker/workspace.py; TritonExperts.workspace_shapes the same M × top_k × max(N/2, K) and M × top_k × max(N, K)
# in 0.17 and 0.27.1).
# Releases before 0.17 keep the fitted per-logit figures (sampler_bytes_per_logit: 0.11's sort path).
PROFILE_RULES: tuple[ProfileRule, ...] = (
    ProfileRule(VllmVersion(0, 17), None, False, "v1",
                "v1/worker/gpu_model_runner.py:_dummy_sampler_run — no_penalties=True in every release read; 0.17–0.21 "
                "one pass, TopKTopPSampler.forward_native (FlashInfer only with VLLM_USE_FLASHINFER_SAMPLER=1), 0.22+ "
                "a forward_cuda pass then forward_native with a generator; v1/sample/ops/topk_topp_triton.py:"
                "apply_top_k_top_p_triton's [min(next_pow2(rows), SMs), vocab] buffer from 0.17"),
    ProfileRule(VllmVersion(0, 22), VllmVersion(0, 33), True, "mrv2_default",
                "v1/worker/gpu/model_runner.py:_dummy_sampler_run — the default pass only (sample/states.py defaults: "
                "greedy, no logits processing; sample/gumbel.py:gumbel_sample)"),
    ProfileRule(VllmVersion(0, 33), None, True, "mrv2_warmup",
                "v1/worker/gpu/model_runner.py:_dummy_sampler_run — a default pass, then SamplingParams."
                "for_sampler_warmup (sample/sampler.py:Sampler.apply_sampling_params, FlashInfer top-k/top-p)"),
)


def ported_profile_rule(version: VllmVersion, *, model_runner_v2: bool | None) -> ProfileRule | None:
    """The PROFILE_RULES entry for `version` on this runner (None: the runner is not given, or the release predates
    the port)."""
    if model_runner_v2 is None:
        return None
    for rule in PROFILE_RULES:
        if (rule.model_runner_v2 == model_runner_v2 and rule.since <= version
                and (rule.until is None or version < rule.until)):
            return rule
    return None


def _ported_activation(model: ModelSpec, rule: ProfileRule, run: ProfileRun) -> MemoryTerm:
    """The profile peak as `rule`'s release runs it (v1_profile_peak_bytes; a PP stage before the last: the forward's,
    v1_forward_phase_bytes). Range ACTIVATION_RANGE: what the meta-tensor run cannot see (kernel-internal scratch,
    the real SM count, Inductor's fusion around the custom ops)."""
    runner = "Model Runner V2" if rule.model_runner_v2 else "V1 runner"
    band = f"vLLM {rule.since}+" if rule.until is None else f"vLLM {rule.since}–{rule.until}"
    max_num_batched_tokens = run.max_num_batched_tokens
    if run.with_sampler:
        peak = v1_profile_peak_bytes(model, run, model_runner_v2=rule.model_runner_v2,
                                     mrv2_warmup_pass=rule.sampler == "mrv2_warmup")
        rows = min(max_num_batched_tokens, run.max_num_seqs)
        how = {"v1": "14 B + Triton buffer", "mrv2_default": "default pass: the model-dtype logits",
               "mrv2_warmup": "warmup pass: 14 B"}[rule.sampler]
        what = (f"{band} {runner}'s profile run: forward over {max_num_batched_tokens:,} tokens, sampler over "
                f"{rows:,} rows × {model.vocab_size:,} vocab ({how})")
    else:
        peak = v1_forward_phase_bytes(model, tp=run.tp, num_tokens=max_num_batched_tokens,
                                      first_stage=run.first_stage, moe_tp=run.moe_tp,
                                      moe_point_bytes=run.moe_point_bytes)
        what = (f"{band} {runner}'s profile forward over {max_num_batched_tokens:,} tokens "
                "(no sampler: not the last PP stage)")
    lo, hi = ACTIVATION_RANGE
    if model.dsv4 is not None:  # counted from the source, unchecked by the probe: the estimate's wider range
        lo, hi = ACTIVATION_RANGE_TRITON
        what += (f"; DeepSeek-V4's forward counted from vLLM 0.23's model code (hc_mult residual streams, padded "
                 f"attention buffers), an estimate {lo:+.0%} … {hi:+.0%}")
    low, high = int(peak * (1 + lo)), int(peak * (1 + hi))
    if rule.model_runner_v2:
        unseen = MRV2_UNSEEN_BYTES
        peak, high = peak + unseen, high + 2 * unseen
        what += (f", plus {unseen / GiB:.2f} GiB Model Runner V2 allocates that the meta-tensor run does not see "
                 f"(the mean of two calibration logs, estimate +0 … +{2 * unseen / GiB:.2f} GiB)")
    return with_range(MemoryTerm("activation", peak, "estimate", what), low, high)
