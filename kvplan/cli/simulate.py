"""`kvplan simulate prefix|serve`: vLLM's block pool and scheduler, step by step."""
from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli.options import (
    DEPLOYMENT_PANEL,
    EnforceEagerOpt,
    GpuMemoryUtilizationOpt,
    GpuOpt,
    GpusFileOpt,
    JsonFlag,
    KvCacheDtypeOpt,
    KvCacheMemoryBytesOpt,
    ModelOpt,
    PipelineParallelOpt,
    RevisionOpt,
    TensorParallelOpt,
)

if TYPE_CHECKING:
    from kvplan.hardware.gpus import GpuSpec
    from kvplan.model.spec import ModelSpec
    from kvplan.sim.scheduler import FixedCost, SchedulerConfig
    from kvplan.sim.sizing import FittedPool, RooflineStepCost
    from kvplan.vllm.settings import ServeSettings

POOL = "Pool size"
WORKLOAD = "Workload"
OFFLOAD = "CPU offload tier"
ENGINE = "Engine settings"
COST = "Step cost model"

BlockSize = Annotated[int | None, typer.Option(
    "--block-size", min=1, help="Tokens per KV block (default: fit's with --model, else vLLM's 16).",
    rich_help_panel=POOL, show_default=False)]
NumGpuBlocks = Annotated[int | None, typer.Option(
    "--num-gpu-blocks", min=2, help="vLLM's num_gpu_blocks, null block included (usable = N − 1).",
    rich_help_panel=POOL, show_default=False)]
KvTokens = Annotated[str | None, typer.Option(
    "--kv-tokens", help="Pool size in tokens, as vLLM logs it ('GPU KV cache size: N tokens'); ÷ block size.",
    rich_help_panel=POOL, show_default=False)]
Seed = Annotated[int, typer.Option("--seed", help="Random seed (runs are reproducible).", rich_help_panel=WORKLOAD)]
TraceOpt = Annotated[Path | None, typer.Option(
    "--trace", help="JSONL trace, one request per line: timestamp, token_ids or prompt_len (+ block_hashes), "
    "output_len, cache_salt, phase (Mooncake's input_length/output_length/hash_ids also read).",
    rich_help_panel=WORKLOAD, show_default=False)]
TraceBlockSize = Annotated[int | None, typer.Option(
    "--trace-block-size", help="Tokens per block of the trace's block_hashes (Mooncake: 512); default --block-size.",
    rich_help_panel=WORKLOAD, show_default=False)]


class Scenario(str, enum.Enum):
    """Prefix-cache workloads."""

    cyclic = "cyclic"
    shared_prefix = "shared-prefix"
    chat = "chat"
    zipf = "zipf"
    trace = "trace"


class Arrival(str, enum.Enum):
    """Arrival processes."""

    poisson = "poisson"
    fixed = "fixed"


PREFIX_NAME = "prefix"
PREFIX_HELP = "Prefix-cache hits per pass through vLLM's block pool (LRU, tail-first), a larger pool, a CPU tier."
PREFIX_EPILOG = """Examples:

  kvplan simulate prefix --scenario cyclic --docs 10 --doc-tokens 5033 --num-gpu-blocks 1345

  kvplan simulate prefix --model Qwen/Qwen2.5-1.5B --gpu l4 --kv-cache-memory-bytes 617021440 --max-model-len 8k

  kvplan simulate prefix --scenario chat --conversations 32 --turns 6 --num-gpu-blocks 4000 --json
"""


def _trace(path: Path, block_size: int, trace_block_size: int | None, unit_s: float = 1.0) -> list[Any]:
    from kvplan import files
    from kvplan.sim.workloads import parse_trace

    return parse_trace(files.read_lines(str(path), files.TRACE), block_size=block_size,
                       trace_block_size=trace_block_size, timestamp_unit_s=unit_s, source=str(path))


def _fit_pool(
    model: str | None, gpu: str | None, num_gpu_blocks: int | None, kv_tokens: str | None, given: dict[str, object],
    deployment_only: tuple[str, ...], *, quiet: bool,
) -> tuple[FittedPool, ModelSpec, GpuSpec, ServeSettings] | None:
    """`kvplan fit` at the flags in `given` (vLLM's names, read by fit's own helper), or None when the pool is
    given directly. The flags named in `deployment_only` mean nothing without --model/--gpu."""
    import os

    from kvplan.errors import InvalidParameter

    if (model is None) != (gpu is None):
        raise InvalidParameter("--model and --gpu go together: the pool is what `kvplan fit MODEL --gpu GPU` plans")
    if model is None or gpu is None:
        stray = [name for name in deployment_only if given.get(name) is not None]
        if stray:
            flag = "--" + stray[0].replace("_", "-")
            raise InvalidParameter(f"{flag} describes a deployment: it needs --model and --gpu")
        if num_gpu_blocks is None and kv_tokens is None:
            raise InvalidParameter("give the pool size as one of --num-gpu-blocks, --kv-tokens, or --model with --gpu",
                                   hint="vLLM logs it at start-up: 'GPU KV cache size: N tokens'")
        return None
    if num_gpu_blocks is not None or kv_tokens is not None:
        raise InvalidParameter("give the pool size as one of --num-gpu-blocks, --kv-tokens, or --model with --gpu, "
                               "not several")
    from kvplan.cli.common import load_model_with_weights
    from kvplan.hardware.gpus import get_gpu
    from kvplan.sim.sizing import fitted_pool
    from kvplan.vllm.environment import vllm_environment
    from kvplan.vllm.fit import plan_fit
    from kvplan.vllm.flags import settings_from_flags
    from kvplan.vllm.loading import with_stored_weights

    settings = settings_from_flags(given, None, None, None, None, None, None, None, None,
                                   env=vllm_environment(os.environ))
    gpus_file = given.get("gpus_file")
    chip = get_gpu(gpu, str(gpus_file) if gpus_file else None)
    revision = given.get("revision")
    spec, weights = load_model_with_weights(model, str(revision) if revision else None, quiet=quiet)
    settings = with_stored_weights(settings, weights)
    return fitted_pool(plan_fit(spec, chip, settings, advise=False)), spec, chip, settings


def _payload(report: Any, pool: FittedPool | None) -> dict[str, Any]:
    """The report's fields, then `deployment`: what `--model/--gpu` took from fit (null without)."""
    import dataclasses

    return {**{f.name: getattr(report, f.name) for f in dataclasses.fields(report)}, "deployment": pool}


def prefix(
    scenario: Annotated[Scenario, typer.Option("--scenario", help="Workload.", rich_help_panel=WORKLOAD)]
    = Scenario.cyclic,
    docs: Annotated[int, typer.Option("--docs", min=1, help="cyclic, zipf: number of documents.",
                                      rich_help_panel=WORKLOAD)] = 10,
    doc_tokens: Annotated[int, typer.Option("--doc-tokens", min=1, help="cyclic, zipf: tokens per document.",
                                            rich_help_panel=WORKLOAD)] = 5033,
    num_requests: Annotated[int, typer.Option("--num-requests", min=1, help="shared-prefix, zipf: requests.",
                                              rich_help_panel=WORKLOAD)] = 200,
    prefix_tokens: Annotated[int, typer.Option("--prefix-tokens", min=0,
                                               help="shared-prefix, chat: system-prompt tokens.",
                                               rich_help_panel=WORKLOAD)] = 1024,
    suffix_tokens: Annotated[int, typer.Option("--suffix-tokens", min=0,
                                               help="shared-prefix, zipf: unique tokens after the shared part.",
                                               rich_help_panel=WORKLOAD)] = 256,
    tenants: Annotated[int, typer.Option("--tenants", min=1,
                                         help="shared-prefix: tenants, each with its own cache_salt.",
                                         rich_help_panel=WORKLOAD)] = 1,
    conversations: Annotated[int, typer.Option("--conversations", min=1, help="chat: conversations (round-robin).",
                                               rich_help_panel=WORKLOAD)] = 16,
    turns: Annotated[int, typer.Option("--turns", min=1, help="chat: turns per conversation.",
                                       rich_help_panel=WORKLOAD)] = 5,
    user_tokens: Annotated[int, typer.Option("--user-tokens", min=1, help="chat: tokens per user message.",
                                             rich_help_panel=WORKLOAD)] = 256,
    reply_tokens: Annotated[int, typer.Option("--reply-tokens", min=1, help="chat: tokens per reply.",
                                              rich_help_panel=WORKLOAD)] = 256,
    zipf_s: Annotated[float, typer.Option("--zipf-s", min=0.0, help="zipf: exponent s (P(rank k) ∝ 1/k^s).",
                                          rich_help_panel=WORKLOAD)] = 1.0,
    seed: Seed = 0,
    trace: TraceOpt = None,
    trace_block_size: TraceBlockSize = None,
    num_gpu_blocks: NumGpuBlocks = None,
    kv_tokens: KvTokens = None,
    block_size: BlockSize = None,
    model: ModelOpt = None,
    gpu: GpuOpt = None,
    gpus_file: GpusFileOpt = None,
    revision: RevisionOpt = None,
    tensor_parallel_size: TensorParallelOpt = None,
    pipeline_parallel_size: PipelineParallelOpt = None,
    gpu_memory_utilization: GpuMemoryUtilizationOpt = None,
    max_model_len: Annotated[str | None, typer.Option(
        "--max-model-len", help="Context length per request: 8192, 8k or auto (default: model config).",
        rich_help_panel=DEPLOYMENT_PANEL, show_default=False)] = None,
    max_num_seqs: Annotated[int | None, typer.Option(
        "--max-num-seqs", help="vLLM's, for the memory budget (default: by GPU memory: 1024 or 256).",
        rich_help_panel=DEPLOYMENT_PANEL, show_default=False)] = None,
    max_num_batched_tokens: Annotated[str | None, typer.Option(
        "--max-num-batched-tokens", help="vLLM's, for the memory budget (default: by GPU).",
        rich_help_panel=DEPLOYMENT_PANEL, show_default=False)] = None,
    kv_cache_dtype: KvCacheDtypeOpt = None,
    kv_cache_memory_bytes: KvCacheMemoryBytesOpt = None,
    enforce_eager: EnforceEagerOpt = None,
    what_if_blocks: Annotated[list[int] | None, typer.Option(
        "--what-if-blocks", min=2, help="Replay with this pool size too (repeatable).", rich_help_panel=POOL,
        show_default=False)] = None,
    cpu_offload_tokens: Annotated[str | None, typer.Option(
        "--cpu-offload-tokens", help="CPU tier size in tokens (e.g. 64k).", rich_help_panel=OFFLOAD,
        show_default=False)] = None,
    cpu_offload_bytes: Annotated[str | None, typer.Option(
        "--cpu-offload-bytes", help="CPU tier size in bytes (e.g. 8GiB); needs --kv-bytes-per-token.",
        rich_help_panel=OFFLOAD, show_default=False)] = None,
    kv_bytes_per_token: Annotated[int | None, typer.Option(
        "--kv-bytes-per-token", min=1, help="KV bytes per token (see `kvplan size`), to turn bytes into tokens.",
        rich_help_panel=OFFLOAD, show_default=False)] = None,
    kv_offloading_size: Annotated[str | None, typer.Option(
        "--kv-offloading-size", help="vLLM's CPU tier: GiB of CPU memory for the OffloadingConnector (needs "
        "--model/--gpu; tokens and chunk from fit's plan).", rich_help_panel=OFFLOAD, show_default=False)] = None,
    offload_chunk_tokens: Annotated[int | None, typer.Option(
        "--offload-chunk-tokens", min=1, help="CPU tier granularity (default: LMCache's chunk_size 256; with "
        "--kv-offloading-size one GPU block).", rich_help_panel=OFFLOAD, show_default=False)] = None,
    load_ms_per_ktok: Annotated[float | None, typer.Option(
        "--load-ms-per-ktok", min=0.0, help="ms to load 1,000 tokens from CPU (default 1.75: the starting "
        "document's 8.5 ms for 4,864 tokens).", rich_help_panel=OFFLOAD, show_default=False)] = None,
    recompute_ms_per_ktok: Annotated[float | None, typer.Option(
        "--recompute-ms-per-ktok", min=0.0, help="ms to recompute 1,000 prompt tokens (default 115: the "
        "document's 560 ms for 4,864 tokens on Qwen2.5-1.5B).", rich_help_panel=OFFLOAD, show_default=False)] = None,
    json_: JsonFlag = False,
) -> None:
    """Serve a workload one request at a time through vLLM's block pool and count prefix-cache hits."""
    from kvplan.cli.console import out, print_json
    from kvplan.errors import InvalidParameter
    from kvplan.sim import prefix as core
    from kvplan.sim import workloads as wl
    from kvplan.sim.scheduler import DEFAULT_BLOCK_SIZE
    from kvplan.sim.sizing import check_request_lengths, num_gpu_blocks_from
    from kvplan.units import parse_bytes, parse_count

    given: dict[str, object] = {
        "tensor_parallel_size": tensor_parallel_size, "pipeline_parallel_size": pipeline_parallel_size,
        "gpu_memory_utilization": gpu_memory_utilization, "max_model_len": max_model_len,
        "max_num_seqs": max_num_seqs, "max_num_batched_tokens": max_num_batched_tokens,
        "kv_cache_dtype": kv_cache_dtype, "enforce_eager": enforce_eager,
        "kv_cache_memory_bytes": kv_cache_memory_bytes, "revision": revision, "gpus_file": gpus_file}
    fitted = _fit_pool(model, gpu, num_gpu_blocks, kv_tokens, {**given, "block_size": block_size}, tuple(given),
                       quiet=json_)
    pool = fitted[0] if fitted else None
    if pool is not None:
        blocks, block_size = pool.sim_num_gpu_blocks, pool.sim_block_size
        if kv_bytes_per_token is None:
            kv_bytes_per_token = pool.kv_bytes_per_token
    else:
        block_size = block_size or DEFAULT_BLOCK_SIZE
        tokens = None if kv_tokens is None else parse_count(kv_tokens, what="--kv-tokens")
        blocks = num_gpu_blocks_from(num_gpu_blocks=num_gpu_blocks, kv_tokens=tokens, block_size=block_size)
    if trace is not None:
        scenario = Scenario.trace
    if scenario is Scenario.cyclic:
        workload = wl.cyclic_documents(docs, doc_tokens, block_size)
    elif scenario is Scenario.shared_prefix:
        workload = wl.shared_prefix(num_requests, prefix_tokens, suffix_tokens, block_size, tenants)
    elif scenario is Scenario.chat:
        workload = wl.multi_turn_chat(conversations, turns, prefix_tokens, user_tokens, reply_tokens, block_size)
    elif scenario is Scenario.zipf:
        workload = wl.zipf_documents(docs, doc_tokens, num_requests, zipf_s, suffix_tokens, block_size, seed)
    else:
        if trace is None:
            raise InvalidParameter("--scenario trace needs --trace FILE")
        workload = wl.trace_prefix_workload(_trace(trace, block_size, trace_block_size))
    if pool is not None:
        check_request_lengths((r.num_prompt_tokens + r.num_output_tokens for r in workload.requests),
                              pool.max_model_len)

    if sum(x is not None for x in (cpu_offload_tokens, cpu_offload_bytes, kv_offloading_size)) > 1:
        raise InvalidParameter("give one of --cpu-offload-tokens, --cpu-offload-bytes, --kv-offloading-size")
    cpu_tokens = 0
    if kv_offloading_size is not None:
        if fitted is None:
            raise InvalidParameter("--kv-offloading-size needs --model and --gpu: the CPU tier's tokens follow "
                                   "the plan's bytes per block")
        from dataclasses import replace

        from kvplan.vllm.engine_args import kv_offloading_gib
        from kvplan.vllm.offload import deployment_tier

        tier = deployment_tier(fitted[1], replace(fitted[3], kv_offloading_size=kv_offloading_gib(kv_offloading_size)),
                               bytes_per_block=fitted[0].bytes_per_block, block_size=fitted[0].block_size)
        cpu_tokens = tier.tokens or 0
        if offload_chunk_tokens is None:
            offload_chunk_tokens = fitted[0].block_size  # the OffloadingConnector's chunk: one GPU block
    elif cpu_offload_tokens is not None:
        cpu_tokens = parse_count(cpu_offload_tokens, what="--cpu-offload-tokens")
    elif cpu_offload_bytes is not None:
        if kv_bytes_per_token is None:
            raise InvalidParameter("--cpu-offload-bytes needs --kv-bytes-per-token (see `kvplan size MODEL`)",
                                   hint="with --model it comes from fit, for models with one KV-cache group")
        cpu_tokens = parse_bytes(cpu_offload_bytes, what="--cpu-offload-bytes") // kv_bytes_per_token
    offload = core.OffloadSettings(
        cpu_tokens, core.LMCACHE_CHUNK_TOKENS if offload_chunk_tokens is None else offload_chunk_tokens,
        core.DEFAULT_LOAD_MS_PER_KTOK if load_ms_per_ktok is None else load_ms_per_ktok,
        core.DEFAULT_RECOMPUTE_MS_PER_KTOK if recompute_ms_per_ktok is None else recompute_ms_per_ktok)
    report = core.simulate_prefix(workload, num_gpu_blocks=blocks, block_size=block_size, offload=offload,
                                  what_if_blocks=tuple(what_if_blocks or ()))
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("simulate-prefix", _payload(report, pool)))
    else:
        from kvplan.render.simulate import render_prefix

        out().print(render_prefix(report, pool))


SERVE_NAME = "serve"
SERVE_HELP = "Continuous batching as vLLM V1 schedules it: TTFT, ITL, queueing, preemptions, KV usage."
SERVE_EPILOG = """Examples:

  kvplan simulate serve --num-gpu-blocks 20000 --request-rate 20 --num-requests 2000 --prompt-len uniform:512:4096

  kvplan simulate serve --kv-tokens 57000 --max-num-seqs 4 --num-requests 8 --prompt-len 15000 --output-len 1000

  kvplan simulate serve --model meta-llama/Llama-3.1-8B --gpu l4 --max-model-len 8k --num-requests 32 --output-len 1000
"""


def _parse_seconds(text: str | None, what: str) -> float | None:
    """`500ms`, `0.5s` or a bare number of milliseconds (as `vllm bench serve --goodput ttft:500`)."""
    from kvplan.errors import InvalidParameter

    if text is None:
        return None
    t = text.strip().lower()
    try:
        if t.endswith("ms"):
            v = float(t[:-2]) / 1000
        elif t.endswith("s"):
            v = float(t[:-1])
        else:
            v = float(t) / 1000
    except ValueError:
        raise InvalidParameter(f"{what}: cannot read {text!r}", hint="examples: 500ms, 0.5s, 500 (ms)") from None
    if not v > 0 or not math.isfinite(v):
        raise InvalidParameter(f"{what} must be > 0, got {text!r}")
    return v


def _length(spec: str, what: str) -> Any:
    import dataclasses

    from kvplan import files
    from kvplan.sim.workloads import parse_length_dist, parse_length_values

    dist = parse_length_dist(spec, what=what)
    if dist.kind == "empirical":
        values = parse_length_values(files.read_lines(dist.path, files.LENGTHS), source=dist.path)
        dist = dataclasses.replace(dist, values=values)
    return dist


# The serve scheduler steps every request through prefill and decode: ~150 µs and ~1.6 KB per request
# (200,000 requests: 30 s, 330 MB). A million stay within minutes and 2 GB; `simulate prefix` (no
# timing) runs to wl.MAX_REQUESTS.
MAX_SERVE_REQUESTS = 1_000_000


def _check_serve_requests(n: int, what: str) -> None:
    from kvplan.errors import InvalidParameter

    if n > MAX_SERVE_REQUESTS:
        raise InvalidParameter(
            f"{what}: {n:,} is more than kvplan's serve simulation runs (at most {MAX_SERVE_REQUESTS:,}, a few "
            "minutes)", hint="simulate fewer requests (the queue's behaviour settles long before), or use "
            "`kvplan simulate prefix` for cache hits alone")


def serve(
    num_requests: Annotated[int, typer.Option("--num-requests", min=1, help="Requests to generate.",
                                              rich_help_panel=WORKLOAD)] = 1000,
    request_rate: Annotated[str, typer.Option(
        "--request-rate", help="Requests per second, or inf to send all at once (vllm bench serve's default).",
        rich_help_panel=WORKLOAD)] = "inf",
    arrival: Annotated[Arrival, typer.Option("--arrival", help="Gaps between arrivals: exponential or fixed.",
                                             rich_help_panel=WORKLOAD)] = Arrival.poisson,
    prompt_len: Annotated[str, typer.Option(
        "--prompt-len", help="2048, uniform:512:4096, lognormal:MEDIAN:SIGMA or empirical:FILE.",
        rich_help_panel=WORKLOAD)] = "1024",
    output_len: Annotated[str, typer.Option(
        "--output-len", help="Same forms; also fills output lengths a trace lacks.", rich_help_panel=WORKLOAD)] = "256",
    shared_prefix_tokens: Annotated[int, typer.Option(
        "--shared-prefix-tokens", min=0, help="Leading prompt tokens every request shares (a system prompt).",
        rich_help_panel=WORKLOAD)] = 0,
    seed: Seed = 0,
    trace: TraceOpt = None,
    trace_block_size: TraceBlockSize = None,
    trace_timestamp_unit: Annotated[str, typer.Option(
        "--trace-timestamp-unit", help="s or ms (Mooncake traces use ms).", rich_help_panel=WORKLOAD)] = "s",
    num_gpu_blocks: NumGpuBlocks = None,
    kv_tokens: KvTokens = None,
    block_size: BlockSize = None,
    model: ModelOpt = None,
    gpu: GpuOpt = None,
    gpus_file: GpusFileOpt = None,
    revision: RevisionOpt = None,
    tensor_parallel_size: TensorParallelOpt = None,
    pipeline_parallel_size: PipelineParallelOpt = None,
    gpu_memory_utilization: GpuMemoryUtilizationOpt = None,
    kv_cache_dtype: KvCacheDtypeOpt = None,
    kv_cache_memory_bytes: KvCacheMemoryBytesOpt = None,
    enforce_eager: EnforceEagerOpt = None,
    max_num_seqs: Annotated[int | None, typer.Option(
        "--max-num-seqs", min=1, help="Most requests running at once (default: fit's with --model, by GPU memory; "
        "else 1024).", rich_help_panel=ENGINE, show_default=False)] = None,
    max_num_batched_tokens: Annotated[str | None, typer.Option(
        "--max-num-batched-tokens", help="Token budget per step (default: fit's with --model, by GPU; else 8192, "
        "vLLM's API server on H100/H200).", rich_help_panel=ENGINE, show_default=False)] = None,
    max_model_len: Annotated[str | None, typer.Option(
        "--max-model-len", help="Refuse requests longer than this (with --model: vLLM's flag, default the model "
        "config's; 32k and auto accepted).", rich_help_panel=ENGINE, show_default=False)] = None,
    enable_chunked_prefill: Annotated[bool, typer.Option(
        "--enable-chunked-prefill/--no-enable-chunked-prefill", help="Split long prompts over steps.",
        rich_help_panel=ENGINE)] = True,
    enable_prefix_caching: Annotated[bool, typer.Option(
        "--enable-prefix-caching/--no-enable-prefix-caching", help="Reuse cached prompt blocks.",
        rich_help_panel=ENGINE)] = True,
    step_ms: Annotated[float | None, typer.Option(
        "--step-ms", min=0.0, help="Fixed cost: ms per step (default 4.79: Llama-3.1-8B BF16 weights read at "
        "H100 SXM's 3.35 TB/s). Without it and the next two, --model runs are timed by their roofline.",
        rich_help_panel=COST, show_default=False)] = None,
    ms_per_token: Annotated[float | None, typer.Option(
        "--ms-per-token", min=0.0, help="Fixed cost: ms per scheduled token (default 0.0162: 2 FLOPs × 8.03 B "
        "parameters at 989 TFLOPS).", rich_help_panel=COST, show_default=False)] = None,
    ms_per_context_ktok: Annotated[float | None, typer.Option(
        "--ms-per-context-ktok", min=0.0, help="Fixed cost: ms per 1,000 tokens of KV attended (default 0.039: "
        "128 KiB per token at 3.35 TB/s).", rich_help_panel=COST, show_default=False)] = None,
    bandwidth_efficiency: Annotated[float | None, typer.Option(
        "--bandwidth-efficiency", help="Roofline: share of rated HBM bandwidth reached (default 0.70, as "
        "`kvplan roofline`).", rich_help_panel=COST, show_default=False)] = None,
    compute_efficiency: Annotated[float | None, typer.Option(
        "--compute-efficiency", help="Roofline: share of dense peak FLOP/s reached (default 0.76).",
        rich_help_panel=COST, show_default=False)] = None,
    ttft_slo: Annotated[str | None, typer.Option(
        "--ttft-slo", help="Goodput: time-to-first-token target (500ms, 0.5s; bare numbers are ms).",
        show_default=False)] = None,
    tpot_slo: Annotated[str | None, typer.Option(
        "--tpot-slo", help="Goodput: time-per-output-token target (50ms).", show_default=False)] = None,
    json_: JsonFlag = False,
) -> None:
    """Run requests through a simulation of vLLM V1's continuous-batching scheduler."""
    from dataclasses import replace

    from kvplan.cli.console import out, print_json
    from kvplan.errors import InvalidParameter
    from kvplan.sim import workloads as wl
    from kvplan.sim.scheduler import SchedulerConfig, simulate_serve
    from kvplan.sim.sizing import ROOFLINE_COST_MODEL

    fixed = (step_ms, ms_per_token, ms_per_context_ktok)
    deployment: dict[str, object] = {
        "tensor_parallel_size": tensor_parallel_size, "pipeline_parallel_size": pipeline_parallel_size,
        "gpu_memory_utilization": gpu_memory_utilization, "kv_cache_dtype": kv_cache_dtype,
        "enforce_eager": enforce_eager, "kv_cache_memory_bytes": kv_cache_memory_bytes, "revision": revision,
        "gpus_file": gpus_file, "bandwidth_efficiency": bandwidth_efficiency, "compute_efficiency": compute_efficiency}
    engine = {"max_model_len": max_model_len, "max_num_seqs": max_num_seqs, "block_size": block_size,
              "max_num_batched_tokens": max_num_batched_tokens, "enable_prefix_caching": enable_prefix_caching}
    if trace is None:
        _check_serve_requests(num_requests, "--num-requests")
    fitted = _fit_pool(model, gpu, num_gpu_blocks, kv_tokens, {**deployment, **engine}, tuple(deployment),
                       quiet=json_)
    pool = fitted[0] if fitted else None
    if pool is not None:
        config = SchedulerConfig(
            num_gpu_blocks=pool.sim_num_gpu_blocks, block_size=pool.sim_block_size, max_num_seqs=pool.max_num_seqs,
            max_num_batched_tokens=pool.max_num_batched_tokens, enable_chunked_prefill=enable_chunked_prefill,
            enable_prefix_caching=enable_prefix_caching, max_model_len=pool.max_model_len)
    else:
        config = _config(num_gpu_blocks, kv_tokens, block_size, max_num_seqs, max_num_batched_tokens, max_model_len,
                         enable_chunked_prefill, enable_prefix_caching)
    try:
        rate = float(request_rate)
    except ValueError:
        raise InvalidParameter(f"--request-rate: cannot read {request_rate!r}", hint="a number or inf") from None
    units = {"s": 1.0, "ms": 1e-3}
    if trace_timestamp_unit not in units:
        raise InvalidParameter("--trace-timestamp-unit must be s or ms")
    outputs = _length(output_len, "--output-len")
    if trace is not None:
        records = _trace(trace, config.block_size, trace_block_size, units[trace_timestamp_unit])
        _check_serve_requests(len(records), f"{trace}: the trace's requests")
        requests = wl.trace_serve_requests(records, outputs, seed)
    else:
        requests = wl.synthetic_serve_requests(
            num_requests, request_rate=rate, arrival=arrival.value, prompt_len=_length(prompt_len, "--prompt-len"),
            output_len=outputs, block_size=config.block_size, shared_prefix_tokens=shared_prefix_tokens, seed=seed)
    roofline: RooflineStepCost | None = None
    if fitted is not None and all(v is None for v in fixed):
        pool, spec, chip, settings = fitted
        roofline = _roofline(spec, chip, settings, bandwidth_efficiency, compute_efficiency)
        pool = replace(pool, compute_dtype=roofline.roofline.roof.flops_dtype,
                       notes=(*pool.notes, *_cost_notes(settings)))
    elif bandwidth_efficiency is not None or compute_efficiency is not None:
        raise InvalidParameter("--bandwidth-efficiency and --compute-efficiency tune the roofline, which "
                               "--step-ms, --ms-per-token and --ms-per-context-ktok replace")
    ttft_s, tpot_s = _parse_seconds(ttft_slo, "--ttft-slo"), _parse_seconds(tpot_slo, "--tpot-slo")
    with _progress(len(requests)) as progress:
        report = simulate_serve(requests, config, roofline or _fixed_cost(*fixed), ttft_slo_s=ttft_s,
                                tpot_slo_s=tpot_s, progress=progress)
    if roofline is not None:
        report = replace(report, cost_model=ROOFLINE_COST_MODEL, cost_model_params=roofline.figures())
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("simulate-serve", _payload(report, pool)))
    else:
        from kvplan.render.simulate import render_serve

        out().print(render_serve(report, pool))


PROGRESS_FROM = 20_000  # requests: below this a serve simulation takes a few seconds at most


@contextmanager
def _progress(total: int) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr for a long simulation (Rich's, removed when done); none when stderr is not
    a terminal (CI logs, pipes) or the run is short. stdout is untouched."""
    from kvplan.cli.console import err

    console = err()
    if total < PROGRESS_FROM or not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TextColumn("requests"),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("serve", total=total)
        yield lambda done, _: bar.update(task, completed=done)


def _config(num_gpu_blocks: int | None, kv_tokens: str | None, block_size: int | None, max_num_seqs: int | None,
            max_num_batched_tokens: str | None, max_model_len: str | None, chunked: bool,
            caching: bool) -> SchedulerConfig:
    """The scheduler settings when the pool is given directly (vLLM's H100-class defaults otherwise)."""
    from kvplan.sim import scheduler as sch
    from kvplan.sim.sizing import num_gpu_blocks_from
    from kvplan.units import parse_count

    bs = block_size or sch.DEFAULT_BLOCK_SIZE
    blocks = num_gpu_blocks_from(num_gpu_blocks=num_gpu_blocks, block_size=bs,
                                 kv_tokens=None if kv_tokens is None else parse_count(kv_tokens, what="--kv-tokens"))
    mnbt = (sch.DEFAULT_MAX_NUM_BATCHED_TOKENS if max_num_batched_tokens is None
            else parse_count(max_num_batched_tokens, what="--max-num-batched-tokens", minimum=1))
    return sch.SchedulerConfig(
        num_gpu_blocks=blocks, block_size=bs, max_num_seqs=max_num_seqs or sch.DEFAULT_MAX_NUM_SEQS,
        max_num_batched_tokens=mnbt, enable_chunked_prefill=chunked, enable_prefix_caching=caching,
        max_model_len=None if max_model_len is None else parse_count(max_model_len, what="--max-model-len", minimum=1))


def _fixed_cost(step_ms: float | None, ms_per_token: float | None, ms_per_context_ktok: float | None) -> FixedCost:
    """FixedCost from the flags, each defaulting to the Llama-3.1-8B-on-H100 reference. Click's min=0.0 lets NaN
    and ∞ through (NaN < 0 is false): either would reach the clock as NaN (an IndexError, a NaN cast to int)."""
    import math

    from kvplan.errors import InvalidParameter
    from kvplan.sim.scheduler import FixedCost

    for flag, value in (("--step-ms", step_ms), ("--ms-per-token", ms_per_token),
                        ("--ms-per-context-ktok", ms_per_context_ktok)):
        if value is not None and not math.isfinite(value):
            raise InvalidParameter(f"{flag} must be a finite number of milliseconds ≥ 0, got {value}")
    ref = FixedCost.reference()
    return FixedCost(ref.per_step_s if step_ms is None else step_ms / 1000,
                     ref.per_token_s if ms_per_token is None else ms_per_token / 1000,
                     ref.per_context_token_s if ms_per_context_ktok is None else ms_per_context_ktok / 1e6)


def _roofline(spec: ModelSpec, chip: GpuSpec, settings: ServeSettings, bandwidth_efficiency: float | None,
              compute_efficiency: float | None) -> RooflineStepCost:
    """The model's roofline on this GPU at the deployment's TP and KV dtype, as `kvplan roofline` builds it."""
    from kvplan.hardware import roofline as rl
    from kvplan.sim.sizing import RooflineStepCost

    costs, roof = rl.deployment_roofline(
        spec, chip, tp=settings.tp, kv_cache_dtype=settings.kv_cache_dtype, weights_bytes=settings.weights_total_bytes,
        bandwidth_efficiency=bandwidth_efficiency, compute_efficiency=compute_efficiency)
    return RooflineStepCost(rl.RooflineCost(costs, roof))


def _cost_notes(settings: ServeSettings) -> tuple[str, ...]:
    if settings.pp > 1:
        return ("Pipeline parallelism: each step is timed as the whole model at this TP (the stages run one after "
                "another; no overlap of micro-batches).",)
    return ()


# (name, function, help, epilog) for each `kvplan simulate` subcommand.
COMMANDS: list[tuple[str, Callable[..., Any], str, str]] = [
    (PREFIX_NAME, prefix, PREFIX_HELP, PREFIX_EPILOG),
    (SERVE_NAME, serve, SERVE_HELP, SERVE_EPILOG),
]
