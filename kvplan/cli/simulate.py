"""`kvplan simulate prefix|serve`: vLLM's block pool and scheduler, step by step."""
from __future__ import annotations

import enum
import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.cli.options import JsonFlag

POOL = "Pool size"
WORKLOAD = "Workload"
OFFLOAD = "CPU offload tier"
ENGINE = "Engine settings"
COST = "Step cost model"

BlockSize = Annotated[int, typer.Option("--block-size", min=1, help="Tokens per KV block (vLLM's default 16).",
                                        rich_help_panel=POOL)]
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

  kvplan simulate prefix --scenario cyclic --kv-tokens 21520 --cpu-offload-tokens 64k --what-if-blocks 2000

  kvplan simulate prefix --scenario chat --conversations 32 --turns 6 --num-gpu-blocks 4000 --json
"""


def _read(path: Path) -> str:
    from kvplan.errors import InvalidParameter

    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidParameter(f"cannot read {path}: {exc.strerror or exc}") from None


def _trace(path: Path, block_size: int, trace_block_size: int | None, unit_s: float = 1.0) -> list[Any]:
    from kvplan.sim.workloads import parse_trace

    return parse_trace(_read(path).splitlines(), block_size=block_size, trace_block_size=trace_block_size,
                       timestamp_unit_s=unit_s, source=str(path))


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
    block_size: BlockSize = 16,
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
    offload_chunk_tokens: Annotated[int, typer.Option(
        "--offload-chunk-tokens", min=1, help="CPU tier granularity (LMCache chunk_size).",
        rich_help_panel=OFFLOAD)] = 256,
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
    from kvplan.sim.sizing import num_gpu_blocks_from
    from kvplan.units import parse_bytes, parse_count

    blocks = num_gpu_blocks_from(num_gpu_blocks=num_gpu_blocks,
                                 kv_tokens=None if kv_tokens is None else parse_count(kv_tokens, what="--kv-tokens"),
                                 block_size=block_size)
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

    if cpu_offload_tokens is not None and cpu_offload_bytes is not None:
        raise InvalidParameter("give --cpu-offload-tokens or --cpu-offload-bytes, not both")
    cpu_tokens = 0
    if cpu_offload_tokens is not None:
        cpu_tokens = parse_count(cpu_offload_tokens, what="--cpu-offload-tokens")
    elif cpu_offload_bytes is not None:
        if kv_bytes_per_token is None:
            raise InvalidParameter("--cpu-offload-bytes needs --kv-bytes-per-token (see `kvplan size MODEL`)")
        cpu_tokens = parse_bytes(cpu_offload_bytes, what="--cpu-offload-bytes") // kv_bytes_per_token
    offload = core.OffloadSettings(
        cpu_tokens, offload_chunk_tokens,
        core.DEFAULT_LOAD_MS_PER_KTOK if load_ms_per_ktok is None else load_ms_per_ktok,
        core.DEFAULT_RECOMPUTE_MS_PER_KTOK if recompute_ms_per_ktok is None else recompute_ms_per_ktok)
    report = core.simulate_prefix(workload, num_gpu_blocks=blocks, block_size=block_size, offload=offload,
                                  what_if_blocks=tuple(what_if_blocks or ()))
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("simulate-prefix", report))
    else:
        from kvplan.render.simulate import render_prefix

        out().print(render_prefix(report))


SERVE_NAME = "serve"
SERVE_HELP = "Continuous batching as vLLM V1 schedules it: TTFT, ITL, queueing, preemptions, KV usage."
SERVE_EPILOG = """Examples:

  kvplan simulate serve --num-gpu-blocks 20000 --request-rate 20 --num-requests 2000 --prompt-len uniform:512:4096

  kvplan simulate serve --kv-tokens 57000 --max-num-seqs 4 --num-requests 8 --prompt-len 15000 --output-len 1000

  kvplan simulate serve --num-gpu-blocks 8000 --request-rate 10 --prompt-len 3000 --shared-prefix-tokens 2000 --json
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

    from kvplan.sim.workloads import parse_length_dist, parse_length_values

    dist = parse_length_dist(spec, what=what)
    if dist.kind == "empirical":
        dist = dataclasses.replace(dist, values=parse_length_values(_read(Path(dist.path)), source=dist.path))
    return dist


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
    block_size: BlockSize = 16,
    max_num_seqs: Annotated[int, typer.Option("--max-num-seqs", min=1, help="Most requests running at once.",
                                              rich_help_panel=ENGINE)] = 1024,
    max_num_batched_tokens: Annotated[int, typer.Option(
        "--max-num-batched-tokens", min=1, help="Token budget per step (defaults: vLLM's API server on H100/H200).",
        rich_help_panel=ENGINE)] = 8192,
    max_model_len: Annotated[int | None, typer.Option(
        "--max-model-len", min=1, help="Refuse requests longer than this.", rich_help_panel=ENGINE,
        show_default=False)] = None,
    enable_chunked_prefill: Annotated[bool, typer.Option(
        "--enable-chunked-prefill/--no-enable-chunked-prefill", help="Split long prompts over steps.",
        rich_help_panel=ENGINE)] = True,
    enable_prefix_caching: Annotated[bool, typer.Option(
        "--enable-prefix-caching/--no-enable-prefix-caching", help="Reuse cached prompt blocks.",
        rich_help_panel=ENGINE)] = True,
    step_ms: Annotated[float | None, typer.Option(
        "--step-ms", min=0.0, help="Fixed ms per step (default 4.79: Llama-3.1-8B BF16 weights read at H100 "
        "SXM's 3.35 TB/s).", rich_help_panel=COST, show_default=False)] = None,
    ms_per_token: Annotated[float | None, typer.Option(
        "--ms-per-token", min=0.0, help="ms per scheduled token (default 0.0162: 2 FLOPs × 8.03 B parameters "
        "at 989 TFLOPS).", rich_help_panel=COST, show_default=False)] = None,
    ms_per_context_ktok: Annotated[float | None, typer.Option(
        "--ms-per-context-ktok", min=0.0, help="ms per 1,000 tokens of KV attended (default 0.039: 128 KiB "
        "per token at 3.35 TB/s).", rich_help_panel=COST, show_default=False)] = None,
    ttft_slo: Annotated[str | None, typer.Option(
        "--ttft-slo", help="Goodput: time-to-first-token target (500ms, 0.5s; bare numbers are ms).",
        show_default=False)] = None,
    tpot_slo: Annotated[str | None, typer.Option(
        "--tpot-slo", help="Goodput: time-per-output-token target (50ms).", show_default=False)] = None,
    json_: JsonFlag = False,
) -> None:
    """Run requests through a simulation of vLLM V1's continuous-batching scheduler."""
    from kvplan.cli.console import out, print_json
    from kvplan.errors import InvalidParameter
    from kvplan.sim import workloads as wl
    from kvplan.sim.scheduler import FixedCost, SchedulerConfig, simulate_serve
    from kvplan.sim.sizing import num_gpu_blocks_from
    from kvplan.units import parse_count

    blocks = num_gpu_blocks_from(num_gpu_blocks=num_gpu_blocks,
                                 kv_tokens=None if kv_tokens is None else parse_count(kv_tokens, what="--kv-tokens"),
                                 block_size=block_size)
    try:
        rate = float(request_rate)
    except ValueError:
        raise InvalidParameter(f"--request-rate: cannot read {request_rate!r}", hint="a number or inf") from None
    units = {"s": 1.0, "ms": 1e-3}
    if trace_timestamp_unit not in units:
        raise InvalidParameter("--trace-timestamp-unit must be s or ms")
    outputs = _length(output_len, "--output-len")
    if trace is not None:
        records = _trace(trace, block_size, trace_block_size, units[trace_timestamp_unit])
        requests = wl.trace_serve_requests(records, outputs, seed)
    else:
        requests = wl.synthetic_serve_requests(
            num_requests, request_rate=rate, arrival=arrival.value, prompt_len=_length(prompt_len, "--prompt-len"),
            output_len=outputs, block_size=block_size, shared_prefix_tokens=shared_prefix_tokens, seed=seed)
    ref = FixedCost.reference()
    cost = FixedCost(ref.per_step_s if step_ms is None else step_ms / 1000,
                     ref.per_token_s if ms_per_token is None else ms_per_token / 1000,
                     ref.per_context_token_s if ms_per_context_ktok is None else ms_per_context_ktok / 1e6)
    config = SchedulerConfig(num_gpu_blocks=blocks, block_size=block_size, max_num_seqs=max_num_seqs,
                             max_num_batched_tokens=max_num_batched_tokens,
                             enable_chunked_prefill=enable_chunked_prefill,
                             enable_prefix_caching=enable_prefix_caching, max_model_len=max_model_len)
    report = simulate_serve(requests, config, cost, ttft_slo_s=_parse_seconds(ttft_slo, "--ttft-slo"),
                            tpot_slo_s=_parse_seconds(tpot_slo, "--tpot-slo"))
    if json_:
        from kvplan.render.json import dumps

        print_json(dumps("simulate-serve", report))
    else:
        from kvplan.render.simulate import render_serve

        out().print(render_serve(report))


# (name, function, help, epilog) for each `kvplan simulate` subcommand.
COMMANDS: list[tuple[str, Callable[..., Any], str, str]] = [
    (PREFIX_NAME, prefix, PREFIX_HELP, PREFIX_EPILOG),
    (SERVE_NAME, serve, SERVE_HELP, SERVE_EPILOG),
]
