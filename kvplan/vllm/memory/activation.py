"""The activation peak of vLLM's profiling run: the dummy forward and the dummy sampler."""
from __future__ import annotations

from kvplan.model.spec import ModelSpec
from kvplan.vllm.memory.budget import MemoryTerm

# --- Activation peak of the profiling run ---------------------------------------------------------
# v1/worker/gpu/model_runner.py:profile_run: a dummy forward over max_num_batched_tokens tokens, then on
# the last PP rank `_dummy_sampler_run` over one logits row per dummy request
# (num_reqs = min(max_num_batched_tokens, max_num_seqs)), with full-vocabulary fp32 logits on every TP
# rank. The sampler's top-k/top-p path (sort values + int64 indices, softmax, cumulative sum, masks)
# holds about 9.6 fp32 copies of the logits at its peak: 38.4 bytes per logit, fitted on the llm-d H100
# logs (Llama-3.1-8B 38.4, Qwen3-0.6B 38.3, Qwen3-32B 38.4, gpt-oss-20b/120b 38.3, Llama-3.3-70B 38.6).
SAMPLER_BYTES_PER_LOGIT = 38.4
# The dummy run's hidden states (max_num_batched_tokens × hidden) stay allocated while the sampler runs.
RETAINED_HIDDEN_COPIES = 1

_ACT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def _per_rank(width: int, tp: int) -> int:
    return -(-width // tp)


def forward_activation_bytes(model: ModelSpec, *, tp: int, num_tokens: int) -> int:
    """Peak live intermediates of one forward over `num_tokens` tokens on one TP rank.

    The largest of: the dense MLP (gate/up output 2·I plus the activated I), the fused-MoE workspaces
    (top_k × (2·I_e + I_e + hidden), vllm/model_executor/layers/fused_moe/fused_moe.py intermediate
    caches) plus any shared expert, and the attention projections (q + 2·kv heads).
    """
    e = _ACT_BYTES.get(model.dtype, 2)
    peaks = [num_tokens * 3 * _per_rank(model.intermediate_size, tp) * e]
    if model.moe is not None:
        m = model.moe
        moe = num_tokens * m.experts_per_token * (3 * _per_rank(m.expert_intermediate_size, tp) + model.hidden_size)
        moe += num_tokens * 3 * _per_rank(m.shared_intermediate_size, tp)
        peaks.append(moe * e)
    heads = _per_rank(model.num_attention_heads, tp) + 2 * max(1, model.num_kv_heads // tp)
    peaks.append(num_tokens * heads * model.head_size * e)
    return max(peaks)


def sampler_activation_bytes(model: ModelSpec, *, num_reqs: int) -> int:
    """Peak of the dummy sampler run: `num_reqs × vocab × SAMPLER_BYTES_PER_LOGIT` (see the constant)."""
    return int(num_reqs * model.vocab_size * SAMPLER_BYTES_PER_LOGIT)


def estimate_activation(model: ModelSpec, *, tp: int, max_num_batched_tokens: int, max_num_seqs: int) -> MemoryTerm:
    """Torch peak above what stays allocated after vLLM's profiling run (`transient_peak_headroom`).

    peak = max(forward intermediates over max_num_batched_tokens tokens, sampler over
    min(max_num_batched_tokens, max_num_seqs) logits rows) + the retained hidden states.
    """
    num_reqs = min(max_num_batched_tokens, max_num_seqs)
    e = _ACT_BYTES.get(model.dtype, 2)
    forward = forward_activation_bytes(model, tp=tp, num_tokens=max_num_batched_tokens)
    sampler = sampler_activation_bytes(model, num_reqs=num_reqs)
    hidden = RETAINED_HIDDEN_COPIES * max_num_batched_tokens * model.hidden_size * e
    total = max(forward, sampler) + hidden
    which = (
        f"sampler over {num_reqs:,} rows × {model.vocab_size:,} vocab × {SAMPLER_BYTES_PER_LOGIT} B"
        if sampler >= forward
        else f"forward intermediates over {max_num_batched_tokens:,} tokens"
    )
    return MemoryTerm(
        "activation",
        total,
        "estimate",
        f"profiling-run peak: {which}, plus {max_num_batched_tokens:,} retained hidden states",
    )
