"""vLLM and SGLang side by side for one deployment (`kvplan fit --engine both`): what each engine's own rules
give, and why they differ. Pure: two plans in, one comparison out (no formula of its own beyond ratios).

Per replica (one vLLM engine; one SGLang server, all its attention-DP workers):
* KV tokens: vLLM's kv_cache_tokens (blocks × block_size); SGLang's max_total_num_tokens × attention-DP workers;
* full-context requests at once: vLLM's max_concurrency at max_model_len; SGLang's pool ÷ context_len per worker;
* requests at once: vLLM's max_num_seqs (a flag, default by GPU); SGLang's max_running_requests per worker ×
  workers (derived from the pool: KVCacheConfigurator.resolve_max_num_reqs).
"""
from __future__ import annotations

from dataclasses import dataclass

from kvplan.sglang.fit import SglangFit
from kvplan.vllm.report import FitReport

GiB = 1 << 30


@dataclass(frozen=True)
class EngineSide:
    """One engine's answer for the deployment."""

    engine: str  # "vllm" or "sglang"
    version: str
    starts: bool
    startup: str
    kv_budget_bytes: int  # per GPU (the tightest rank)
    kv_bytes_per_token: float  # per GPU, as the engine sizes its pool
    kv_tokens: int  # per replica
    context: int  # vLLM's max_model_len / SGLang's context_len
    requests_at_context: float  # full-context requests the pool holds at once, per replica
    requests_at_once: int  # the running-request cap, per replica
    granularity: int  # tokens per block (vLLM) / page (SGLang)


@dataclass(frozen=True)
class EngineComparison:
    """`kvplan fit --engine both`."""

    model: str
    gpu: str
    gpu_name: str
    tp: int
    vllm: EngineSide
    sglang: EngineSide
    token_ratio: float | None  # SGLang's KV tokens ÷ vLLM's (None when either holds none)
    reasons: tuple[str, ...]


def _vllm_side(v: FitReport) -> EngineSide:
    cache, sched = v.cache, v.scheduler
    per_token = cache.bytes_per_block / cache.block_size if cache.block_size else 0.0
    return EngineSide("vllm", v.deployment.vllm_version, v.verdict.fits, v.verdict.startup, v.memory.available_kv_bytes,
                      per_token, cache.kv_cache_tokens, sched.max_model_len, sched.max_concurrency, sched.max_num_seqs,
                      cache.block_size)


def _sglang_side(s: SglangFit) -> EngineSide:
    cell = s.geometry.cell_size if s.geometry is not None else 0.0
    return EngineSide("sglang", s.sglang_version, s.fits, s.startup, s.budget.budget_bytes or 0, cell,
                      s.total_tokens, s.context_len, float(s.requests_at_context), s.total_running_requests,
                      s.defaults.page_size)


def _memory_reason(v: FitReport, s: SglangFit) -> str:
    """How each engine arrives at its KV bytes per GPU."""
    f, b, m = s.free_memory, s.budget, v.memory
    vllm = (f"vLLM keeps {m.available_kv_bytes / GiB:.2f} GiB for KV per GPU: gpu_memory_utilization "
            f"{m.gpu_memory_utilization:g} × {m.cuda_total_bytes / GiB:.2f} GiB − weights {m.weights_bytes / GiB:.2f}"
            f" − activations {m.activation_bytes / GiB:.2f} − CUDA graphs {m.cuda_graph_bytes / GiB:.2f} − non-torch "
            f"{m.non_torch_bytes / GiB:.2f} (each profiled or estimated at startup)")
    budget = "nothing" if b.budget_bytes is None else f"{b.budget_bytes / GiB:.2f} GiB"
    mamba = f" − Mamba state {b.mamba.state_bytes / GiB:.2f}" if b.mamba is not None and not b.mamba.refusal else ""
    sglang = (f"SGLang keeps {budget}: free after weights {f.avail_gib:.2f} − free before × (1 − "
              f"mem_fraction_static {s.defaults.mem_fraction_static:.4g}) = {b.slack_gib:.2f} GiB of slack{mamba} "
              "(graphs and activations must fit in the slack, a fixed heuristic)")
    return f"{vllm}; {sglang}."


def _reasons(v: FitReport, s: SglangFit, vs: EngineSide, ss: EngineSide) -> tuple[str, ...]:
    out = [_memory_reason(v, s)]
    if vs.kv_bytes_per_token and ss.kv_bytes_per_token and abs(vs.kv_bytes_per_token - ss.kv_bytes_per_token) > 0.5:
        swa = " (SGLang sizes sliding-window layers at swa_full_tokens_ratio × the full pool; vLLM by the window)" \
            if s.geometry is not None and s.geometry.swa is not None else ""
        if s.geometry is not None and s.geometry.dsv4 is not None:
            swa = (" (SGLang's DSV4PoolConfigurator prices the c4 / c128 KV and indexer per full token plus "
                   f"swa_full_tokens_ratio {s.geometry.dsv4.swa_ratio:g} × the sliding-window slot and its c4 state)")
        out.append(f"Bytes per token per GPU differ: vLLM {vs.kv_bytes_per_token:,.1f}, SGLang "
                   f"{ss.kv_bytes_per_token:,.1f}{swa}.")
    if vs.context != ss.context:
        out.append(f"Context: vLLM max_model_len {vs.context:,}, SGLang context_len {ss.context:,}.")
    source = ("comes from the pool (clamp(tokens ÷ context_len × 512, 2048, 4096), at most tokens ÷ 2)"
              if s.geometry is None or s.geometry.dsv4 is None else
              "is DeepSeek-V4's default 256 unless given (arg_groups/deepseek_v4_hook.py), at most tokens ÷ 2")
    out.append(f"Requests at once: vLLM's max_num_seqs {vs.requests_at_once:,} is a flag (its default), SGLang's "
               f"max_running_requests {s.max_running_requests:,} per worker {source}.")
    if vs.granularity != ss.granularity:
        out.append(f"Allocation unit: vLLM blocks of {vs.granularity} tokens, SGLang pages of {ss.granularity}.")
    if s.attn_dp_size > 1:
        out.append(f"SGLang's attention DP: {s.attn_dp_size} workers, each its own pool of "
                   f"{s.max_total_num_tokens:,} tokens.")
    return tuple(out)


def compare_engines(v: FitReport, s: SglangFit) -> EngineComparison:
    """vLLM's plan and SGLang's for the same deployment, side by side."""
    vs, ss = _vllm_side(v), _sglang_side(s)
    ratio = ss.kv_tokens / vs.kv_tokens if vs.kv_tokens and ss.kv_tokens else None
    return EngineComparison(s.model, s.gpu, s.gpu_name, s.tp, vs, ss, ratio, _reasons(v, s, vs, ss))
