"""`kvplan simulate prefix|serve`: vLLM's block pool and scheduler, step by step."""
from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

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
    SglangPipelineParallel,
    SglangTensorParallel,
    TensorParallelOpt,
)

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
    tp_size: SglangTensorParallel = None,  # SGLang's --tp / --tp-size: their value is tensor_parallel_size's
    pp_size: SglangPipelineParallel = None,
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
    from kvplan import api
    from kvplan.cli.common import progress, warn
    from kvplan.cli.console import out, print_json

    report = api.simulate_prefix(
        scenario.value, docs=docs, doc_tokens=doc_tokens, num_requests=num_requests, prefix_tokens=prefix_tokens,
        suffix_tokens=suffix_tokens, tenants=tenants, conversations=conversations, turns=turns,
        user_tokens=user_tokens, reply_tokens=reply_tokens, zipf_s=zipf_s, seed=seed, trace=trace,
        trace_block_size=trace_block_size, num_gpu_blocks=num_gpu_blocks, kv_tokens=kv_tokens, block_size=block_size,
        model=model, gpu=gpu, gpus_file=gpus_file, revision=revision, what_if_blocks=what_if_blocks or (),
        cpu_offload_tokens=cpu_offload_tokens, cpu_offload_bytes=cpu_offload_bytes,
        kv_bytes_per_token=kv_bytes_per_token, kv_offloading_size=kv_offloading_size,
        offload_chunk_tokens=offload_chunk_tokens, load_ms_per_ktok=load_ms_per_ktok,
        recompute_ms_per_ktok=recompute_ms_per_ktok, progress=progress(json_), on_warning=warn,
        tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
        gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens, kv_cache_dtype=kv_cache_dtype,
        enforce_eager=enforce_eager, kv_cache_memory_bytes=kv_cache_memory_bytes)
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("simulate-prefix", report))
    else:
        from kvplan.render.simulate import render_prefix

        out().print(render_prefix(report, report.deployment))


SERVE_NAME = "serve"
SERVE_HELP = "Continuous batching as vLLM V1 schedules it: TTFT, ITL, queueing, preemptions, KV usage."
SERVE_EPILOG = """Examples:

  kvplan simulate serve --num-gpu-blocks 20000 --request-rate 20 --num-requests 2000 --prompt-len uniform:512:4096

  kvplan simulate serve --kv-tokens 57000 --max-num-seqs 4 --num-requests 8 --prompt-len 15000 --output-len 1000

  kvplan simulate serve --model meta-llama/Llama-3.1-8B --gpu l4 --max-model-len 8k --num-requests 32 --output-len 1000
"""


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
    tp_size: SglangTensorParallel = None,  # SGLang's --tp / --tp-size: their value is tensor_parallel_size's
    pp_size: SglangPipelineParallel = None,
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
    from kvplan import api
    from kvplan.cli.common import progress, warn
    from kvplan.cli.console import out, print_json

    with _progress() as on_progress:
        report = api.simulate_serve(
            num_requests, request_rate=request_rate, arrival=arrival.value, prompt_len=prompt_len,
            output_len=output_len, shared_prefix_tokens=shared_prefix_tokens, seed=seed, trace=trace,
            trace_block_size=trace_block_size, trace_timestamp_unit=trace_timestamp_unit,
            num_gpu_blocks=num_gpu_blocks, kv_tokens=kv_tokens, block_size=block_size, model=model, gpu=gpu,
            gpus_file=gpus_file, revision=revision, max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len,
            enable_chunked_prefill=enable_chunked_prefill, enable_prefix_caching=enable_prefix_caching,
            step_ms=step_ms, ms_per_token=ms_per_token, ms_per_context_ktok=ms_per_context_ktok,
            bandwidth_efficiency=bandwidth_efficiency, compute_efficiency=compute_efficiency, ttft_slo=ttft_slo,
            tpot_slo=tpot_slo, progress=progress(json_), on_warning=warn, on_progress=on_progress,
            tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization, kv_cache_dtype=kv_cache_dtype,
            enforce_eager=enforce_eager, kv_cache_memory_bytes=kv_cache_memory_bytes)
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("simulate-serve", report))
    else:
        from kvplan.render.simulate import render_serve

        out().print(render_serve(report, report.deployment))


PROGRESS_FROM = 20_000  # requests: below this a serve simulation takes a few seconds at most


@contextmanager
def _progress() -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr for a long simulation (Rich's, removed when done), started by the simulation's
    first progress call when it has PROGRESS_FROM requests or more; none when stderr is not a terminal (CI logs,
    pipes). stdout is untouched."""
    from kvplan.cli.console import err

    console = err()
    if not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar: Progress | None = None

    def update(done: int, total: int) -> None:
        nonlocal bar
        if total < PROGRESS_FROM:
            return
        if bar is None:
            bar = Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TextColumn("requests"),
                           TimeElapsedColumn(), console=console, transient=True)
            bar.start()
            bar.add_task("serve", total=total)
        bar.update(bar.task_ids[0], completed=done)

    try:
        yield update
    finally:
        if bar is not None:
            bar.stop()


# (name, function, help, epilog) for each `kvplan simulate` subcommand.
COMMANDS: list[tuple[str, Callable[..., Any], str, str]] = [
    (PREFIX_NAME, prefix, PREFIX_HELP, PREFIX_EPILOG),
    (SERVE_NAME, serve, SERVE_HELP, SERVE_EPILOG),
]
