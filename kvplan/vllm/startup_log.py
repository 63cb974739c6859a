"""Read what a vLLM server said about its memory when it started: a pure parser of startup logs.

vLLM prints its memory budget while it starts (weights loaded, profiling, KV cache, CUDA graphs) and the
settings it runs with. This module turns those lines into one `StartupLog` so that kvplan's prediction
can be compared with the real server term by term. StartupLog groups the figures as the log reads: `settings`
(nested in vLLM's `model_config`, `cache_config`, `parallel_config`, `scheduler_config`, as ServeSettings is),
`memory` (the budget per worker), `capacity`, `failure`, `timings`, and the matched `lines`. Each rule below is a
regex whose groups name figures by their last name; `FIGURE_PATHS` routes each to its group. It understands:

* V1 (vLLM ≥ 0.8; texts in vllm-reference.md §1.2, §3.2, §3.3): `Model loading took X GiB memory and
  T seconds` (0.11: `took X GiB and T seconds`), `Available KV cache memory: X GiB`, `GPU KV cache size:
  N tokens, Maximum concurrency for L tokens per request: C x` (one line since 0.12, two lines before),
  the DEBUG profiling lines (`Initial free memory: …`, `Free memory after profiling: …`, `Memory profiling
  takes S seconds. Total non KV cache memory: …; torch peak memory increase: …; non-torch forward increase
  memory: …; weights memory: …`), `Free memory on device (f/t GiB) on startup. Desired GPU memory
  utilization is (u, r GiB). Actual usage is …` (the 0.10/0.11 and the 0.33 wordings), `CUDA graph pool
  memory: …`, `Graph capturing finished in S secs, took X GiB`, the `To serve at least one request …`
  error, `No available memory for the cache blocks`, the free-memory startup error, the engine-config
  line, `non-default args: {…}`, `Using max model len N`, `Setting kv cache block size to N …`, and custom
  all-reduce's "lacks GPU P2P capability" / "more than two PCIe-only GPUs" warnings (no NVLink: a matched rule,
  no figure).
* V0 (vLLM ≤ 0.10, `worker/worker.py`, `executor/executor_base.py`): `Loading model weights took X GB`,
  `Memory profiling results: total_gpu_memory=… initial_memory_usage=… peak_torch_memory=…
  non_torch_memory=… kv_cache_size=… gpu_memory_utilization=…`, `the current vLLM instance can use
  total_gpu_memory (X GiB) x gpu_memory_utilization (U) = Y GiB`, `model weights take …; non_torch_memory
  takes …; PyTorch activation peak memory takes …; the rest of the memory reserved for KV Cache is …`,
  the tabular variant of PR #10511, `# GPU blocks: N` / `# cuda blocks: N`, and the error `The model's max
  seq len (N) is larger than the maximum number of tokens that can be stored in KV cache (M)`.
* A `vllm serve MODEL --flag value …` command line echoed into the log.

V0 prints "GB" but computes with 2**30 (`worker.py`: `/ float(2**30)`), so every size here is GiB = 2**30
bytes, the unit vLLM's `format_gib` uses (vllm-reference.md §1.4). Sizes are stored as whole bytes.

When a figure appears several times (one line per tensor-parallel worker, or a log holding several
restarts) the last one wins; every matching line is kept in `StartupLog.lines` with its number.
"""
from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from kvplan.text import scrub
from kvplan.units import GiB
from kvplan.vllm.engine_args import ENGINE_ARGS

Failure = Literal["max_len_exceeds_kv", "no_kv_memory", "insufficient_free_memory", "cuda_oom"]
"""Why the server did not start, when the log says so:

* `max_len_exceeds_kv`: V1 `To serve at least one request with the model's max seq len …` or V0 `The
  model's max seq len (N) is larger than the maximum number of tokens that can be stored in KV cache`.
* `no_kv_memory`: `No available memory for the cache blocks` (the budget left nothing for KV).
* `insufficient_free_memory`: `Free memory on device … on startup is less than desired GPU memory
  utilization` (another process holds the GPU, or utilization × total exceeds what is free).
* `cuda_oom`: `CUDA out of memory` (`HIP out of memory` on ROCm; torch OutOfMemoryError while loading or
  profiling).
"""


@dataclass(frozen=True)
class LogLine:
    """One log line that told kvplan something: its 1-based number, the rule that matched, its text."""

    number: int
    rule: str
    text: str


# ---- The settings the server ran with, nested as vLLM's VllmConfig nests them (vllm/config/vllm.py) and as
# kvplan/vllm/configs.py:ServeSettings does: each field under the config and name that ServeSettings uses
# (tests/test_startup_log.py checks the two agree), None where the log does not show it.


@dataclass(frozen=True)
class LoggedModelConfig:
    """vllm/config/model.py:ModelConfig's fields a log shows (`model=`, `dtype=`, … of the engine-config line)."""

    model: str | None = None
    max_model_len: int | None = None
    dtype: str | None = None
    quantization: str | None = None
    enforce_eager: bool | None = None


@dataclass(frozen=True)
class LoggedCacheConfig:
    """vllm/config/cache.py:CacheConfig's fields a log shows."""

    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str | None = None  # CacheConfig.cache_dtype in vLLM 0.33; the flag's and ServeSettings' name
    block_size: int | None = None
    enable_prefix_caching: bool | None = None


@dataclass(frozen=True)
class LoggedParallelConfig:
    """vllm/config/parallel.py:ParallelConfig's fields a log shows."""

    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None


@dataclass(frozen=True)
class LoggedSchedulerConfig:
    """vllm/config/scheduler.py:SchedulerConfig's fields a log shows."""

    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None


@dataclass(frozen=True)
class LoggedSettings:
    """The settings the server ran with: its release and engine, vLLM's configs, and the sampler it chose."""

    vllm_version: str | None = None
    engine_version: str | None = None  # "V0" or "V1", from the engine-config line
    model_config: LoggedModelConfig = dataclasses.field(default_factory=LoggedModelConfig)
    cache_config: LoggedCacheConfig = dataclasses.field(default_factory=LoggedCacheConfig)
    parallel_config: LoggedParallelConfig = dataclasses.field(default_factory=LoggedParallelConfig)
    scheduler_config: LoggedSchedulerConfig = dataclasses.field(default_factory=LoggedSchedulerConfig)
    # v1/sample/ops/topk_topp_sampler.py: "Using FlashInfer for top-p & top-k sampling." (True) or
    # "FlashInfer is not available. Falling back to the PyTorch-native implementation …" (False)
    flashinfer_sampler: bool | None = None


@dataclass(frozen=True)
class MemoryBudget:
    """The memory budget of one GPU worker as vLLM's profiler logs it (v1/worker/gpu_worker.py:
    determine_available_memory; V0 worker.py:determine_num_available_blocks), in bytes."""

    total_gpu_memory_bytes: int | None = None  # cudaMemGetInfo total (vllm-reference.md §9)
    free_at_init_bytes: int | None = None
    requested_memory_bytes: int | None = None  # ceil(total × gpu_memory_utilization)
    weights_loaded_bytes: int | None = None  # "Model loading took" / "Loading model weights took"
    weights_profiled_bytes: int | None = None  # "model weights take" / "weights memory:" / "for weight"
    consumed_memory_bytes: int | None = None  # free_init − free_after_profile (weights + non-torch)
    non_torch_bytes: int | None = None
    activation_peak_bytes: int | None = None  # torch peak above what stays allocated
    # vLLM 0.27+ "… GiB for consumed memory (weights + non-torch), X GiB for peak activation": X is the
    # transient peak plus the CUDA-graph estimate it subtracts (v1/worker/gpu_worker.py:
    # determine_available_memory, peak_activation_memory = transient_peak_headroom + cudagraph estimate).
    activation_with_graphs_bytes: int | None = None
    peak_torch_bytes: int | None = None  # V0 peak_torch_memory (weights included)
    non_kv_cache_bytes: int | None = None  # "Total non KV cache memory"
    free_after_profile_bytes: int | None = None
    cuda_graph_bytes: int | None = None  # actual CUDA-graph memory
    cuda_graph_estimate_bytes: int | None = None  # profiler's estimate, subtracted before sizing KV
    available_kv_bytes: int | None = None
    kv_cache_memory_fit_bytes: int | None = None  # vLLM's `--kv-cache-memory=` to fit requested memory
    kv_cache_memory_full_bytes: int | None = None  # … to fully use the GPU

    @property
    def model_weights_bytes(self) -> int | None:
        """Weight memory: the load line (4 decimals) when present, else the profiler's figure (2)."""
        loaded = self.weights_loaded_bytes
        return loaded if loaded is not None else self.weights_profiled_bytes


@dataclass(frozen=True)
class KVCapacity:
    """What the KV cache holds, per model replica: `GPU KV cache size: N tokens`, `Maximum concurrency for L
    tokens per request: C x` (v1/core/kv_cache_utils.py), V0's `# GPU blocks: N`."""

    num_gpu_blocks: int | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    concurrency_max_model_len: int | None = None  # the L in "Maximum concurrency for L tokens"


@dataclass(frozen=True)
class StartupFailure:
    """Why the server did not start (`reason`, None when the log shows no failure), and the figures of vLLM's
    max-len error (v1/core/kv_cache_utils.py:check_enough_kv_cache_memory)."""

    reason: Failure | None = None
    kv_needed_bytes: int | None = None
    kv_error_available_bytes: int | None = None  # "the available KV cache memory (X GiB)" of that error
    estimated_max_model_len: int | None = None


@dataclass(frozen=True)
class Timings:
    """How long the startup steps took, in seconds."""

    model_load_seconds: float | None = None
    profile_seconds: float | None = None
    graph_capture_seconds: float | None = None
    init_engine_seconds: float | None = None


@dataclass(frozen=True)
class StartupLog:
    """Everything a vLLM startup log revealed, grouped as vLLM's log reads: the settings the server ran with,
    the memory budget per worker, the KV capacity, a failed start, timings; the matched lines. Each figure is
    None when the log does not show it.

    Sizes are bytes (GiB = 2**30, as vLLM prints them, so they carry the log's 2-decimal rounding).
    Memory figures are per GPU worker; token and block counts are per model replica.
    """

    settings: LoggedSettings = dataclasses.field(default_factory=LoggedSettings)
    memory: MemoryBudget = dataclasses.field(default_factory=MemoryBudget)
    capacity: KVCapacity = dataclasses.field(default_factory=KVCapacity)
    failure: StartupFailure = dataclasses.field(default_factory=StartupFailure)
    timings: Timings = dataclasses.field(default_factory=Timings)
    lines: tuple[LogLine, ...] = ()

    @property
    def found(self) -> bool:
        """Whether any line of the log was recognised."""
        return bool(self.lines)


def _group_type(f: dataclasses.Field[Any]) -> type | None:
    """The nested group a field holds (its default_factory is a dataclass), else None for a figure."""
    factory = f.default_factory
    return factory if isinstance(factory, type) and dataclasses.is_dataclass(factory) else None


def _paths(cls: type, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every figure of a group, as the attribute path to it (`("memory", "available_kv_bytes")`)."""
    for f in dataclasses.fields(cls):
        sub = _group_type(f)
        if sub is None:
            yield (*prefix, f.name)
        else:
            yield from _paths(sub, (*prefix, f.name))


# Each figure's path in StartupLog, by its name. The rules below name a figure by its last part (each is unique:
# `_leaf_paths` checks), and the parse routes it to its group.
def _leaf_paths() -> dict[str, tuple[str, ...]]:
    paths: dict[str, tuple[str, ...]] = {}
    for path in _paths(StartupLog):
        if path[-1] in paths:
            raise AssertionError(f"StartupLog figure name {path[-1]!r} is not unique")
        paths[path[-1]] = path
    return paths


FIGURE_PATHS: Final[Mapping[str, tuple[str, ...]]] = _leaf_paths()
# schema_version 1 of `calibrate --json` had every figure flat under `log`; the one whose name changed:
_SCHEMA_1_NAMES: Final[Mapping[str, str]] = {"reason": "failure"}
SCHEMA_1_KEYS: Final[tuple[tuple[str, str], ...]] = tuple(
    (_SCHEMA_1_NAMES.get(name, name), ".".join(path)) for name, path in FIGURE_PATHS.items() if name != "lines")
"""(schema_version 1 key under `log`, its schema_version 2 path under `log`), in the object's order."""


def _build(cls: type, values: Mapping[str, Any]) -> Any:
    """A group (StartupLog or one of its parts) from figures named by their last part; absent ones are None."""
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        sub = _group_type(f)
        if sub is not None:
            kwargs[f.name] = _build(sub, values)
        elif f.name in values:
            kwargs[f.name] = values[f.name]
    return cls(**kwargs)


# --------------------------------------------------------------------------------------------------
# Conversions from the matched text.


def _gib(text: str) -> int:
    """`"58.73"` GiB (vLLM's format_gib output, or V0's "GB" which is GiB) → bytes."""
    return round(float(text) * GiB)


def _int(text: str) -> int:
    """`"184,832"` → 184832 (vLLM prints token counts with thousands separators)."""
    return int(text.replace(",", ""))


def _bool(text: str) -> bool:
    return text.strip().strip("'\"").lower() in ("true", "1", "yes")


def _text(text: str) -> str:
    return text.strip().strip("'\"")


def _dtype(text: str) -> str:
    """`torch.bfloat16` → `bfloat16`."""
    return _text(text).removeprefix("torch.")


# The converter for each field a rule can set (by the regex's group name).
_CONVERT: Final[Mapping[str, Callable[[str], Any]]] = {
    **{name: _gib for name in FIGURE_PATHS if name.endswith("_bytes")},
    "vllm_version": _text, "engine_version": _text, "model": _text, "kv_cache_dtype": _text,
    "quantization": _text, "dtype": _dtype,
    "max_model_len": _int, "tensor_parallel_size": _int, "pipeline_parallel_size": _int, "block_size": _int,
    "max_num_seqs": _int, "max_num_batched_tokens": _int, "num_gpu_blocks": _int, "kv_cache_tokens": _int,
    "concurrency_max_model_len": _int, "estimated_max_model_len": _int,
    "gpu_memory_utilization": float, "max_concurrency": float, "model_load_seconds": float,
    "profile_seconds": float, "graph_capture_seconds": float, "init_engine_seconds": float,
    "enforce_eager": _bool, "enable_prefix_caching": _bool,
}


@dataclass(frozen=True)
class _Rule:
    """A named regex whose named groups are StartupLog figures, each by its last name (`FIGURE_PATHS` routes it
    to its group); `fixed` sets figures when it matches.

    `keys`: literal texts of which every match contains at least one (lower-case, and looked for in the
    lower-cased line, when the regex ignores case). They are the prefilter: the regex runs only on a
    line holding a key."""

    name: str
    keys: tuple[str, ...]
    pattern: re.Pattern[str]
    fixed: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    raw_bytes: frozenset[str] = frozenset()  # groups holding a plain byte count, not GiB

    @property
    def ignore_case(self) -> bool:
        return bool(self.pattern.flags & re.IGNORECASE)


def _r(name: str, keys: str | tuple[str, ...], pattern: str, *, flags: int = 0, raw_bytes: Iterable[str] = (),
       **fixed: Any) -> _Rule:
    keys = (keys,) if isinstance(keys, str) else keys
    if flags & re.IGNORECASE:
        keys = tuple(k.lower() for k in keys)
    return _Rule(name, keys, re.compile(pattern, flags), fixed, frozenset(raw_bytes))


NO_NVLINK_RULE: Final = "custom_allreduce_no_nvlink"
_N = r"-?\d+(?:\.\d+)?"  # a decimal as vLLM prints it (negative when the budget is overdrawn)
_INT = r"\d[\d,]*"  # an integer, maybe with thousands separators
# Before a pattern that starts with a number: only try where a number starts. Without it each digit of a
# long run starts a new attempt that scans to the run's end: quadratic time (20,000 digits: half a minute).
_START = r"(?<![\d.-])"

_RULES: Final[tuple[_Rule, ...]] = (
    # ---- versions and settings
    _r("api_server_version", "vLLM API server version", r"vLLM API server version v?(?P<vllm_version>\S+)"),
    # entrypoints/utils.py:log_version_and_model (0.19+): "vLLM server version X, serving model M", or the
    # logo, whose second line ends "▀▄▀ █  version X".
    _r("server_version", ("vLLM server version", "▀▄▀ █"),
       r"(?:vLLM server version|▀▄▀ █\s+version) v?(?P<vllm_version>\d+\.\d+[^\s,]*)"),
    _r("engine_config", "LLM engine",
       r"Initializing an? (?:(?P<engine_version>V\d) )?LLM engine"
       r" \(v(?P<vllm_version>[^)\s]+)\) with config:"),
    _r("max_model_len", "Using max model len", rf"Using max model len (?P<max_model_len>{_INT})"),
    _r("block_size", "block size to", r"Setting (?:kv cache|attention) block size to (?P<block_size>\d+)"),
    # config/scheduler.py (V1; V0 config.py): "Chunked prefill is enabled with max_num_batched_tokens=N." A 0.11
    # API server prints it twice, first for a default SchedulerConfig (2048) and then for the resolved one: the
    # last line wins, as for every rule (tests/fixtures/startup-logs/raw/joshi-4xh100-minimax-m2-fp8-tp4-v0112.log).
    _r("chunked_prefill", "Chunked prefill is enabled with max_num_batched_tokens=",
       rf"Chunked prefill is enabled with max_num_batched_tokens=(?P<max_num_batched_tokens>{_INT})"),
    # config/vllm.py (0.19+): "Enforce eager set, disabling torch.compile and CUDAGraphs." — a log without the
    # engine-config line (a log tail) still says the server ran eager.
    _r("enforce_eager_set", "Enforce eager set", r"Enforce eager set, disabling torch\.compile and CUDAGraphs",
       enforce_eager=True),
    _r("num_gpu_blocks_override", "num_gpu_blocks_override=",
       r"Overriding num_gpu_blocks=\d+ with num_gpu_blocks_override=(?P<num_gpu_blocks>\d+)"),
    # ---- V0 worker.py, executor_base.py
    _r("v0_weights", "Loading model weights took", rf"Loading model weights took (?P<weights_loaded_bytes>{_N}) GB"),
    _r("v0_total", "total_gpu_memory", rf"total_gpu_memory[=\s(]+(?P<total_gpu_memory_bytes>{_N})\s*GiB"),
    _r("v0_util", "gpu_memory_utilization", rf"gpu_memory_utilization[=\s(]+(?P<gpu_memory_utilization>{_N})\b"),
    _r("v0_requested", "the current vLLM instance can use",
       rf"the current vLLM instance can use\s+(?:[^=]{{0,200}}=\s*)?(?P<requested_memory_bytes>{_N})\s*GiB"),
    _r("v0_weights_profiled", "model weights take", rf"model weights take\s+(?P<weights_profiled_bytes>{_N})\s*GiB"),
    _r("v0_non_torch", "non_torch_memory", rf"non_torch_memory(?:\s+takes)?[=\s]+(?P<non_torch_bytes>{_N})\s*GiB"),
    _r("v0_activation", "PyTorch activation peak memory",
       rf"PyTorch activation peak memory(?:\s+takes)?\s+(?P<activation_peak_bytes>{_N})\s*GiB"),
    _r("v0_peak_torch", "peak_torch_memory=", rf"peak_torch_memory=(?P<peak_torch_bytes>{_N})\s*GiB"),
    _r("v0_kv", ("kv_cache_size=", "reserved for KV Cache is", "available_kv_cache_memory"),
       r"(?:kv_cache_size=|the rest of the memory reserved for KV Cache is\s+|available_kv_cache_memory\s+)"
       rf"(?P<available_kv_bytes>{_N})\s*GiB"),
    _r("v0_blocks", "blocks: ", r"(?:^|[^\w])(?:GPU|CUDA) blocks: (?P<num_gpu_blocks>\d+)", flags=re.IGNORECASE),
    _r("v0_max_len_error", "can be stored in KV cache (",
       r"max seq len \((?P<max_model_len>\d+)\) is larger than the maximum number of tokens that"
       r" can be stored in KV cache \((?P<kv_cache_tokens>\d+)\)",
       reason="max_len_exceeds_kv"),
    # ---- V1 gpu_worker.py, model runners, kv_cache_utils.py, kv_cache_planning.py
    _r("model_loading", "Model loading took",
       rf"Model loading took:? (?P<weights_loaded_bytes>{_N}) (?:GiB|GB)(?: memory)? and"
       rf" (?P<model_load_seconds>{_N}) seconds"),
    _r("available_kv", "Available KV cache memory", rf"Available KV cache memory:? (?P<available_kv_bytes>{_N}) GiB"),
    _r("kv_cache_size", "KV cache size", rf"KV cache size:? (?P<kv_cache_tokens>{_INT}) tokens"),
    # v1/metrics/loggers.py (0.9-0.11): "vllm cache_config_info with initialization after num_gpu_blocks is: N", the
    # replica's block count after the ranks are unified to the smallest (a TP 8 log prints eight different "GPU KV
    # cache size" lines before it: tests/fixtures/startup-logs/raw/l40sx8-qwen3-235b-a22b-2507-fp8-tp8-ep-v0102.log).
    _r("num_gpu_blocks_logger", "num_gpu_blocks is: ",
       r"cache_config_info with initialization after num_gpu_blocks is: (?P<num_gpu_blocks>\d+)"),
    _r("max_concurrency", "Maximum concurrency for ",
       rf"Maximum concurrency for (?P<concurrency_max_model_len>{_INT}) tokens per request:?"
       rf" (?P<max_concurrency>{_N})x"),
    _r("initial_free", "Initial free memory", rf"Initial free memory:? (?P<free_at_init_bytes>{_N}) ?GiB"),
    _r("requested_debug", "Requested memory: ",
       rf"Requested memory: (?P<gpu_memory_utilization>{_N}) \(util\),"
       rf" (?P<requested_memory_bytes>{_N}) ?GiB"),
    _r("kv_bytes_override", "as specified by kv_cache_memory_bytes",
       rf"reserved (?P<available_kv_bytes>{_N}) GiB memory for KV Cache"
       r" as specified by kv_cache_memory_bytes"),
    _r("free_after_profile", "Free memory after profiling: ",
       rf"Free memory after profiling: (?P<free_after_profile_bytes>{_N}) ?GiB"),
    _r("profile_time", "Memory profiling takes ", rf"Memory profiling takes (?P<profile_seconds>{_N}) seconds"),
    _r("non_kv", "Total non KV cache memory: ", rf"Total non KV cache memory: (?P<non_kv_cache_bytes>{_N}) ?GiB"),
    _r("torch_peak_increase", "torch peak memory increase: ",
       rf"torch peak memory increase: (?P<activation_peak_bytes>{_N}) ?GiB"),
    _r("non_torch_increase", "non-torch forward increase memory: ",
       rf"non-torch forward increase memory: (?P<non_torch_bytes>{_N}) ?GiB"),
    _r("total_consumed", "total consumed (from mem_get_info): ",
       rf"total consumed \(from mem_get_info\): (?P<consumed_memory_bytes>{_N}) ?GiB"),
    _r("weights_memory", "weights memory: ", rf"weights memory: (?P<weights_profiled_bytes>{_N}) ?GiB"),
    _r("free_on_device", "Free memory on device",
       rf"Free memory on device(?: [^\s(]{{1,64}})?\s*[:(]?\s*(?P<free_at_init_bytes>{_N})/"
       rf"(?P<total_gpu_memory_bytes>{_N}) GiB"),
    _r("flashinfer_sampler", "Using FlashInfer for top-p & top-k sampling",
       r"Using FlashInfer for top-p & top-k sampling", flashinfer_sampler=True),
    _r("native_sampler", ("FlashInfer is not available", "FlashInfer is available, but it is not enabled"),
       r"topk_topp_sampler\S*\s+FlashInfer is (?:not available|available, but it is not enabled)"
       r"|FlashInfer is (?:not available|available, but it is not enabled)\. Falling back to the PyTorch-native",
       flashinfer_sampler=False),
    # distributed/device_communicators/custom_all_reduce.py:CustomAllreduce.__init__ (read in 0.10.1.1, 0.23.0 and
    # 0.27.1): custom all-reduce off because the GPUs have no peer access, or more than two are PCIe-only. Either
    # way no NVLink joins them (NVLink implies peer access): no figure, the rule's name is what calibrate reads.
    _r(NO_NVLINK_RULE, ("your platform lacks GPU", "more than two PCIe-only GPUs"),  # "GPU" ends a wrapped line
       r"Custom allreduce is disabled because (?:your platform lacks GPU\b|it's not supported on more than two "
       r"PCIe-only GPUs)"),
    _r("desired_util", "desired gpu memory utilization ",
       rf"desired GPU memory utilization (?:is )?\((?P<gpu_memory_utilization>{_N}),"
       rf" (?P<requested_memory_bytes>{_N}) GiB\)",
       flags=re.IGNORECASE),
    _r("free_memory_error", "on startup is less than desired GPU memory utilization",
       r"on startup is less than desired GPU memory utilization",
       reason="insufficient_free_memory"),
    _r("usage_weight", "GiB for weight", rf"{_START}(?P<weights_profiled_bytes>{_N}) GiB for weight\b"),
    _r("usage_consumed", "GiB for consumed memory",
       rf"{_START}(?P<consumed_memory_bytes>{_N}) GiB for consumed memory"),
    _r("usage_activation", "GiB for peak activation",
       rf"GiB for weight, (?P<activation_peak_bytes>{_N}) GiB for peak activation"),
    _r("usage_activation_graphs", "GiB for peak activation",
       rf"GiB for consumed memory \(weights \+ non-torch\), (?P<activation_with_graphs_bytes>{_N}) GiB for peak"
       r" activation"),
    _r("usage_non_torch", "GiB for non-torch memory", rf"{_START}(?P<non_torch_bytes>{_N}) GiB for non-torch memory"),
    _r("usage_cuda_graph", "GiB for CUDAGraph memory", rf"{_START}(?P<cuda_graph_bytes>{_N}) GiB for CUDAGraph memory"),
    _r("kv_memory_fit", "--kv-cache-memory=",
       r"--kv-cache-memory=(?P<kv_cache_memory_fit_bytes>\d+)`?(?: \([^)]*\))? to fit into requested",
       raw_bytes=("kv_cache_memory_fit_bytes",)),
    _r("kv_memory_full", "--kv-cache-memory=",
       r"--kv-cache-memory=(?P<kv_cache_memory_full_bytes>\d+)`?(?: \([^)]*\))? to fully utilize",
       raw_bytes=("kv_cache_memory_full_bytes",)),
    _r("kv_in_use_gib", "Current kv cache memory in use is ",
       rf"Current kv cache memory in use is (?P<available_kv_bytes>{_N}) GiB"),
    _r("kv_in_use_bytes", "Current kv cache memory in use is ",
       r"Current kv cache memory in use is (?P<available_kv_bytes>\d+) bytes",
       raw_bytes=("available_kv_bytes",)),
    _r("cuda_graph_pool", "CUDA graph pool memory: ",
       rf"CUDA graph pool memory: (?P<cuda_graph_bytes>{_N}) GiB \(actual\),"
       rf" (?P<cuda_graph_estimate_bytes>{_N}) GiB \(estimated\)"),
    _r("graph_capture", "Graph capturing finished in ",
       rf"Graph capturing finished in (?P<graph_capture_seconds>{_N}) secs?,"
       rf" took (?P<cuda_graph_bytes>{_N}) GiB"),
    _r("cuda_graph_util", "current --gpu-memory-utilization=",
       rf"current --gpu-memory-utilization=(?P<gpu_memory_utilization>{_N}) is equivalent"),
    _r("init_engine", "init engine (profile, create kv cache, warmup model) took ",
       rf"init engine \(profile, create kv cache, warmup model\) took (?P<init_engine_seconds>{_N})"),
    _r("max_len_error", "KV cache is needed",
       rf"max seq len \((?P<max_model_len>\d+)\),? \((?P<kv_needed_bytes>{_N}) GiB KV cache is needed,"
       rf" which is larger than the available KV cache memory \((?P<kv_error_available_bytes>{_N}) GiB\)",
       reason="max_len_exceeds_kv"),
    _r("estimated_max_len", "estimated maximum model length is ",
       r"estimated maximum model length is (?P<estimated_max_model_len>\d+)"),
    _r("no_kv_memory", "No available memory for the cache blocks",
       r"No available memory for the cache blocks", reason="no_kv_memory"),
    # torch on ROCm words its OutOfMemoryError "HIP out of memory"
    _r("cuda_oom", " out of memory", r"(?:CUDA|HIP) out of memory", reason="cuda_oom"),
)

# Settings read from `key=value` pairs of the engine-config line, `'key': value` pairs of
# `non-default args: {…}`, and `--flag value` of an echoed command line.
_SETTING_KEYS: Final[Mapping[str, str]] = {
    "model": "model", "max_model_len": "max_model_len", "max_seq_len": "max_model_len",
    "tensor_parallel_size": "tensor_parallel_size", "pipeline_parallel_size": "pipeline_parallel_size",
    "gpu_memory_utilization": "gpu_memory_utilization", "kv_cache_dtype": "kv_cache_dtype",
    "block_size": "block_size", "dtype": "dtype", "quantization": "quantization",
    "enforce_eager": "enforce_eager", "enable_prefix_caching": "enable_prefix_caching",
    "max_num_seqs": "max_num_seqs", "max_num_batched_tokens": "max_num_batched_tokens",
}
# Their short and second spellings and which are switches: from the table of engine arguments (engine_args.py).
_FLAG_ALIASES: Final[Mapping[str, str]] = {
    alias.lstrip("-").replace("-", "_"): arg.name
    for arg in ENGINE_ARGS if arg.name in _SETTING_KEYS for alias in arg.aliases
}
_BOOL_FLAGS: Final[frozenset[str]] = frozenset(
    arg.name for arg in ENGINE_ARGS if arg.name in _SETTING_KEYS and not arg.takes_value)
# The engine line only: "Initializing a V1 LLM engine (v…) with config: …" (a write-up that wraps it leaves a
# "… with config: model=…" line of its own, tests/fixtures/startup-logs/raw/joshi-4xh100-minimax-m2.5-…).
_ENGINE_CONFIG_RE = re.compile(r"LLM engine\b.*? with config: (?P<rest>.*)$")
_CONFIG_PAIR_RE = re.compile(r"(?<![\w.\"'])(?P<key>\w+)=(?P<value>'(?:[^'\\]|\\.)*'|[^,]*)")
_NON_DEFAULT_RE = re.compile(r"non-default args: \{(?P<rest>.*)\}")
_DICT_PAIR_RE = re.compile(r"'(?P<key>\w+)': (?P<value>'(?:[^'\\]|\\.)*'|[^,}]*)")
_COMMAND_RE = re.compile(r"(?:\bvllm serve|vllm\.entrypoints\.openai\.api_server)(?P<rest>(?:\s.*)?)$")
_MODEL_ARG_RE = re.compile(r"^[\w.~/-]+$")  # a repo id or a path, not prose that mentions `vllm serve`
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
_ENGINE_CONFIG_KEYS: Final = ("LLM engine", "with config: ")  # both, for _ENGINE_CONFIG_RE
_NON_DEFAULT_KEY: Final = "non-default args: {"
_COMMAND_KEYS: Final = ("vllm serve", "vllm.entrypoints.openai.api_server")


def _prefilter(rules: Iterable[_Rule]) -> re.Pattern[str]:
    """One regex that finds any case-sensitive rule's key (or a settings line's key) in a line; with
    `_CASELESS_KEYS` looked for in the lower-cased line, a line that holds neither is skipped before the
    ~50 regexes run. A log is mostly request lines that hold none, so the parse costs one scan of each
    line (benchmarks/large_inputs.py, a 500 MB log: 189 s without the prefilter). A `(?i:…)` branch
    would make the whole alternation twice as slow, hence the two halves. The keys are folded into a
    trie (`_trie`): at each position of the line one branch per next character is tried, not one per key."""
    keys = [key for rule in rules if not rule.ignore_case for key in rule.keys]
    return re.compile(_trie([*keys, _ENGINE_CONFIG_KEYS[0], _NON_DEFAULT_KEY, *_COMMAND_KEYS]))


def _trie(keys: Iterable[str]) -> str:
    """A regex that matches where any of `keys` starts, its alternatives factored by common prefixes."""
    groups: dict[str, list[str]] = {}
    for key in keys:
        if not key:
            return ""  # a key ends here: the text so far is enough
        groups.setdefault(key[0], []).append(key[1:])
    parts = [re.escape(first) + _trie(rest) for first, rest in sorted(groups.items())]
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


_PREFILTER: Final = _prefilter(_RULES)
_CASELESS_KEYS: Final = tuple(dict.fromkeys(key for rule in _RULES if rule.ignore_case for key in rule.keys))


def _setting(fields: dict[str, Any], key: str, value: str) -> bool:
    """Record a setting from its vLLM name; `None` values (e.g. `quantization=None`) are not recorded."""
    field = _SETTING_KEYS.get(key)
    if field is None or _text(value) in ("None", ""):
        return False
    try:
        fields[field] = _CONVERT.get(field, _text)(value)
    except (ValueError, OverflowError):
        return False
    return True


def _settings_from_pairs(fields: dict[str, Any], pairs: Iterable[re.Match[str]]) -> bool:
    seen: set[str] = set()
    found = False
    for m in pairs:
        key = m["key"]
        if key not in seen:  # nested dicts come later in the line; the top-level key comes first
            seen.add(key)
            found |= _setting(fields, key, m["value"])
    return found


def _settings_from_command(fields: dict[str, Any], rest: str) -> bool:
    try:
        argv = shlex.split(rest)
    except ValueError:
        argv = rest.split()
    found = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            if i == 0 and _MODEL_ARG_RE.match(arg):
                found |= _setting(fields, "model", arg)
            i += 1
            continue
        name, eq, value = arg.lstrip("-").partition("=")
        key = _FLAG_ALIASES.get(name.replace("-", "_"), name.replace("-", "_"))
        if key.startswith("no_") and key[3:] in _BOOL_FLAGS:
            found |= _setting(fields, key[3:], "False")
        elif key in _BOOL_FLAGS:
            found |= _setting(fields, key, "True")
        elif eq:
            found |= _setting(fields, key, value)
        elif i + 1 < len(argv):
            found |= _setting(fields, key, argv[i + 1])
            i += 1
        i += 1
    return found


def _apply(rule: _Rule, m: re.Match[str], fields: dict[str, Any]) -> None:
    for group, text in m.groupdict().items():
        if text is None:
            continue
        try:
            fields[group] = int(text) if group in rule.raw_bytes else _CONVERT[group](text)
        except (ValueError, OverflowError):
            continue  # thousands of digits, or more GiB than a float holds: no real log prints that
    fields.update(rule.fixed)


# A terminal capture cuts vLLM's one-line `non-default args: {…}` at its width, mid-word (dennislee22's
# committed A100 logs wrap at 129 columns: "… 'model': 'Qwe" / "n2-7B-Instruct', …"): the dict's lines are
# joined back until its braces close, at most _WRAP_LIMIT lines. Other lines are read as they are.
_WRAP_LIMIT: Final = 64
_DICT_OPEN: Final = "non-default args: {"


def _unwrapped(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """The lines with their numbers; a `non-default args: {` line whose braces do not close is joined
    (without a separator: the cut falls mid-word) with the lines after it until they do."""
    start, text, depth, parts = 0, "", 0, 0
    for number, raw in enumerate(lines, start=1):
        raw = raw.rstrip("\r\n")
        if depth:
            text, parts = text + raw, parts + 1
            depth = max(0, depth + raw.count("{") - raw.count("}"))
            if depth == 0 or parts >= _WRAP_LIMIT:
                depth = 0
                yield start, text
            continue
        if _DICT_OPEN in raw:
            tail = raw.split(_DICT_OPEN, 1)[1]
            if (depth := max(0, 1 + tail.count("{") - tail.count("}"))) > 0:
                start, text, parts = number, raw, 1
                continue
        yield number, raw
    if depth:
        yield start, text


def parse_startup_log(text: str | Iterable[str]) -> StartupLog:
    """Parse a vLLM startup log (V0 or V1, any prefix before the message) into a `StartupLog`.

    Lines that say nothing about memory or settings are ignored; an unrelated file gives a StartupLog
    whose `found` is False. Pure: no I/O. `text` is the whole log or its lines (streamed from a file).
    """
    fields: dict[str, Any] = {}
    lines: list[LogLine] = []
    prefilter = _PREFILTER.search
    for number, raw in _unwrapped(text.splitlines() if isinstance(text, str) else text):
        # Logs pasted into Markdown keep vLLM's text between `**` and backticks; colours are ANSI codes.
        line = _ANSI_RE.sub("", raw) if "\x1b" in raw else raw
        if "**" in line:
            line = line.replace("**", "")
        lower = line.lower()
        if prefilter(line) is None and not any(key in lower for key in _CASELESS_KEYS):
            continue  # no rule's key: no rule can match (see _Rule.keys)
        matched: list[str] = []
        for rule in _RULES:
            if not any(key in (lower if rule.ignore_case else line) for key in rule.keys):
                continue
            if (m := rule.pattern.search(line)) is not None:
                _apply(rule, m, fields)
                matched.append(rule.name)
        if all(key in line for key in _ENGINE_CONFIG_KEYS) and (m := _ENGINE_CONFIG_RE.search(line)):
            _settings_from_pairs(fields, _CONFIG_PAIR_RE.finditer(m["rest"]))
        if _NON_DEFAULT_KEY in line and (m := _NON_DEFAULT_RE.search(line)) and _settings_from_pairs(
                fields, _DICT_PAIR_RE.finditer(m["rest"])):
            matched.append("non_default_args")
        if (any(key in line for key in _COMMAND_KEYS) and (m := _COMMAND_RE.search(line))
                and _settings_from_command(fields, m["rest"])):
            matched.append("command_line")
        if matched:
            lines.append(LogLine(number, ",".join(dict.fromkeys(matched)), scrub(raw.strip())))
    # The "Maximum concurrency for L tokens" line prints max_model_len (kv_cache_utils.py and V0
    # executor_base.py both format model_config.max_model_len), so it reveals the setting too.
    if fields.get("max_model_len") is None and fields.get("concurrency_max_model_len") is not None:
        fields["max_model_len"] = fields["concurrency_max_model_len"]
    result: StartupLog = _build(StartupLog, {**fields, "lines": tuple(lines)})
    return result
