"""Compare what a vLLM server reported at startup with kvplan's prediction, term by term, and find the
overrides that make kvplan reproduce the server (pure).

The memory budget has the same terms in vLLM's log and in kvplan's model (vllm-reference.md §1.1
step 6): requested = ceil(total × utilization); available KV = requested − weights − non-torch growth
− activation peak − CUDA-graph estimate; then blocks = available // bytes_per_block.

* `observed_terms` reads those terms from a StartupLog (deriving the ones a log states only in sum).
* `compare_terms` sets them against predicted numbers; `predicted_terms` takes those from a FitReport.
* `settings_from_log` turns the settings the log reveals into kvplan's ServeSettings.
* `calibrate` predicts the deployment with `capacity.plan_fit`, compares, computes the overrides
  (`--weights-memory`, `--activation-memory`, … , `--gpu-total-bytes`) that reproduce the log's available
  KV memory, and re-runs `plan_fit` with them to verify blocks and tokens.

The log prints sizes with two decimals of GiB (utils/mem_utils.py:format_gib), so a logged 51.38 GiB is
any value in [51.375, 51.385) GiB. Where the log also gives blocks or tokens, the value reproduced is the
one inside that interval that yields exactly the logged count (kvplan's bytes per block decide which).
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from kvplan.units import GiB, format_gib_vllm

if TYPE_CHECKING:
    from kvplan.hardware.gpus import GpuSpec
    from kvplan.model.spec import ModelSpec
    from kvplan.vllm.report import FitReport
    from kvplan.vllm.settings import ServeSettings
    from kvplan.vllm.startup_log import StartupLog

Unit = Literal["bytes", "blocks", "tokens", "ratio"]
Number: TypeAlias = "int | float"

# term → unit, in budget order.
TERMS: Final[Mapping[str, Unit]] = {
    "total_gpu_memory": "bytes",
    "requested_memory": "bytes",
    "weights": "bytes",
    "non_torch": "bytes",
    "activation_peak": "bytes",
    "cuda_graph": "bytes",
    "available_kv": "bytes",
    "num_gpu_blocks": "blocks",
    "kv_cache_tokens": "tokens",
    "max_concurrency": "ratio",
}

# The memory terms that can be overridden, with the `kvplan fit` flag and the ServeSettings field.
TERM_FLAGS: Final[Mapping[str, tuple[str, str]]] = {
    "weights": ("--weights-memory", "weights_bytes"),
    "non_torch": ("--non-torch-memory", "non_torch_bytes"),
    "activation_peak": ("--activation-memory", "activation_bytes"),
    "cuda_graph": ("--cuda-graph-memory", "cuda_graph_bytes"),
}
GPU_TOTAL_FLAG: Final = "--gpu-total-bytes"
_TERM_WORDS: Final[Mapping[str, str]] = {
    "weights": "weights", "non_torch": "non-torch", "activation_peak": "activation peak", "cuda_graph": "CUDA graphs",
}
# TERMS name → kvplan.vllm.memory.budget.MemoryTerm name.
_MEMORY_TERM_NAMES: Final[Mapping[str, str]] = {
    "weights": "weights", "non_torch": "non_torch", "activation_peak": "activation", "cuda_graph": "cuda_graphs",
}
# Which unknown term absorbs what the logged terms leave unexplained, most uncertain first: the
# activation peak (sampler and forward estimates), then non-torch growth, then the CUDA-graph estimate.
BALANCING_ORDER: Final = ("activation_peak", "non_torch", "cuda_graph", "weights")

# format_gib rounds to 0.01 GiB: a logged size is within half a hundredth of a GiB of the true one.
LOG_GIB_HUNDREDTHS = 100
# A logged term may absorb a residual only this large: the rounding of the six figures that enter it
# (total, weights, consumed, activation, CUDA graphs, available KV), 0.005 GiB each, plus margin.
LOG_ROUNDING_SLACK_BYTES = round(0.04 * GiB)
# The log prints max concurrency with two decimals (`{conc:.2f}x`, kv_cache_utils.py).
CONCURRENCY_DECIMALS = 2

# vLLM log rules (kvplan.vllm.startup_log rule names) that change how a figure is read.
_RULE_KV_OVERRIDE = "kv_bytes_override"  # the server ran with --kv-cache-memory-bytes
_RULE_V0_TOKENS = "v0_max_len_error"  # V0's "maximum number of tokens … in KV cache" = blocks × block size
_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)")


# --------------------------------------------------------------------------------------------------
# Result objects


@dataclass(frozen=True)
class TermComparison:
    """One budget term: what the server reported and what kvplan predicts (None where unknown).

    `source` says how the observed value was read (`log`, or the derivation when the log states it only
    in a sum); `difference` is predicted − observed and `difference_pct` that as % of the observed value.
    """

    term: str
    unit: Unit
    observed: Number | None
    predicted: Number | None
    source: str = ""
    difference: Number | None = field(init=False, default=None)
    difference_pct: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.observed is None or self.predicted is None:
            return
        diff = self.predicted - self.observed
        object.__setattr__(self, "difference", diff)
        if self.observed:
            object.__setattr__(self, "difference_pct", 100 * diff / abs(self.observed))


@dataclass(frozen=True)
class Override:
    """One `kvplan fit` flag that reproduces the server, with its value in bytes and where it comes from."""

    flag: str
    bytes: int
    source: str  # "log", a derivation ("consumed − weights"), or "fitted: …" for the balancing term

    @property
    def text(self) -> str:
        """The flag as typed on the command line (exact bytes, so that it reproduces to the byte)."""
        return f"{self.flag} {self.bytes}"


@dataclass(frozen=True)
class FigureCheck:
    """One logged figure against kvplan's value after the overrides."""

    term: str
    unit: Unit
    observed: Number
    reproduced: Number
    precision: str  # how they are compared: "exact", "0.01 GiB as logged", "2 decimals as logged"
    matches: bool


@dataclass(frozen=True)
class Verification:
    """`plan_fit` re-run with the overrides: whether it reproduces the log, and its figures."""

    ok: bool  # every logged KV figure reproduced (and there was at least one to check)
    available_kv_bytes: int
    num_gpu_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    checks: tuple[FigureCheck, ...]


@dataclass(frozen=True)
class CalibrationReport:
    """`kvplan calibrate`'s result: what the log showed, kvplan's prediction for the same deployment term
    by term, the overrides that reproduce the server and the check that they do.

    Without a model or a GPU only `log` is filled and `missing` says what was needed.
    """

    source: str
    log: StartupLog
    comparison: tuple[TermComparison, ...] | None = None
    overrides: tuple[str, ...] = ()  # kvplan flags that reproduce the server, e.g. "--activation-memory 2044723"
    model: str | None = None  # what was planned: a Hub id or a path
    gpu: str | None = None  # catalog id of the GPU planned on
    settings: ServeSettings | None = None  # the settings planned with (log, then flags, then vLLM defaults)
    settings_from_log: tuple[str, ...] = ()  # ServeSettings fields taken from the log
    override_details: tuple[Override, ...] = ()
    command: str | None = None  # a `kvplan fit` command line that reproduces the server
    verified: Verification | None = None
    missing: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------------
# Observed terms


def _rules(log: StartupLog) -> set[str]:
    return {rule for line in log.lines for rule in line.rule.split(",")}


def is_v0_log(log: StartupLog) -> bool:
    """Whether the log comes from vLLM's V0 engine (vLLM ≤ 0.10): its engine line or a V0-only message."""
    return log.settings.engine_version == "V0" or any(rule.startswith("v0_") for rule in _rules(log))


def _observed(log: StartupLog, *, graphs_subtracted: bool) -> dict[str, tuple[Number | None, str]]:
    """Each term with how it was read."""
    memory, capacity = log.memory, log.capacity
    weights = memory.model_weights_bytes
    found: dict[str, tuple[Number | None, str]] = {term: (None, "") for term in TERMS}

    def put(term: str, value: Number | None, how: str = "log") -> None:
        if value is not None and found[term][0] is None:
            found[term] = (value, how)

    put("total_gpu_memory", memory.total_gpu_memory_bytes)
    put("requested_memory", memory.requested_memory_bytes)
    put("weights", memory.weights_loaded_bytes, "log: load line")
    put("weights", memory.weights_profiled_bytes, "log: profiler line")
    put("non_torch", memory.non_torch_bytes)
    if memory.consumed_memory_bytes is not None and weights is not None:
        # 0.33 logs only "total consumed (weights + non-torch)": the non-torch growth is the rest.
        put("non_torch", memory.consumed_memory_bytes - weights, "consumed − weights")
    headroom = (None if memory.non_kv_cache_bytes is None or memory.consumed_memory_bytes is None
                else memory.non_kv_cache_bytes - memory.consumed_memory_bytes)  # 0.27+: non-KV = consumed + headroom
    if memory.activation_with_graphs_bytes is not None:
        # 0.27+: the logged peak activation holds the CUDA-graph estimate (gpu_worker.py:
        # determine_available_memory); the transient peak is non-KV − consumed, else the logged peak less
        # the estimate, else less the captured size (what the estimate approximates).
        put("activation_peak", headroom, "non-KV − consumed")
        if memory.cuda_graph_estimate_bytes is not None:
            put("activation_peak", memory.activation_with_graphs_bytes - memory.cuda_graph_estimate_bytes,
                "peak activation − graph estimate")
        put("activation_peak", memory.activation_with_graphs_bytes - (memory.cuda_graph_bytes or 0),
            "peak activation − graphs")
    put("activation_peak", memory.activation_peak_bytes)
    if memory.peak_torch_bytes is not None and weights is not None:
        put("activation_peak", memory.peak_torch_bytes - weights, "peak torch − weights")
    put("activation_peak", headroom, "non-KV − consumed")
    # The estimate is what vLLM subtracts before sizing KV (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1);
    # without it the captured size stands in, but only where graphs are subtracted at all (vLLM ≥ 0.20).
    put("cuda_graph", memory.cuda_graph_estimate_bytes, "log: estimate")
    if graphs_subtracted:
        put("cuda_graph", memory.cuda_graph_bytes, "log: captured size")
    put("available_kv", memory.available_kv_bytes)
    put("num_gpu_blocks", capacity.num_gpu_blocks)
    v0_tokens = _RULE_V0_TOKENS in _rules(log)
    put("kv_cache_tokens", capacity.kv_cache_tokens, "log: V0 blocks × block size" if v0_tokens else "log")
    put("max_concurrency", capacity.max_concurrency)
    return found


def observed_terms(log: StartupLog, *, graphs_subtracted: bool = True) -> dict[str, Number | None]:
    """The budget terms a startup log shows, by TERMS name (None where the log is silent).

    Terms logged only in sums are derived: non-torch = consumed − weights (0.33 logs), activation =
    peak torch − weights (V0) or non-KV − consumed. The CUDA-graph term is the profiler's estimate when
    logged (what vLLM subtracts before sizing KV), else the captured graph memory, unless
    `graphs_subtracted` is False (vLLM < 0.20 captured graphs after sizing the cache).
    """
    return {term: value for term, (value, _) in _observed(log, graphs_subtracted=graphs_subtracted).items()}


def compare_terms(
    log: StartupLog, predicted: Mapping[str, Number | None], *, graphs_subtracted: bool = True
) -> tuple[TermComparison, ...]:
    """Every term the log or the prediction knows, side by side, in budget order."""
    unknown = set(predicted) - set(TERMS)
    if unknown:
        raise ValueError(f"unknown budget terms: {sorted(unknown)}")  # a caller bug, not a user error
    seen = _observed(log, graphs_subtracted=graphs_subtracted)
    return tuple(
        TermComparison(term, unit, seen[term][0], predicted.get(term), seen[term][1])
        for term, unit in TERMS.items()
        if seen[term][0] is not None or predicted.get(term) is not None
    )


def predicted_terms(report: FitReport, *, v0_token_capacity: bool = False) -> dict[str, Number | None]:
    """kvplan's value of each TERMS entry for one planned deployment.

    `v0_token_capacity`: the log's token figure is V0's "maximum number of tokens that can be stored in
    KV cache", i.e. blocks × block size, not the V1 capacity int(blocks / blocks_per_request × max_model_len).
    """
    cache = report.cache
    tokens = cache.num_gpu_blocks * cache.block_size if v0_token_capacity else cache.kv_cache_tokens
    return {
        "total_gpu_memory": report.memory.cuda_total_bytes,
        "requested_memory": report.memory.requested_bytes,
        "weights": report.memory.weights_bytes,
        "non_torch": report.memory.non_torch_bytes,
        "activation_peak": report.memory.activation_bytes,
        "cuda_graph": report.memory.cuda_graph_bytes,
        "available_kv": report.memory.available_kv_bytes,
        "num_gpu_blocks": report.cache.num_gpu_blocks,
        "kv_cache_tokens": tokens,
        "max_concurrency": report.scheduler.max_concurrency,
    }


# --------------------------------------------------------------------------------------------------
# Settings


# StartupLog.settings path → ServeSettings flat name (ServeSettings.of): the log nests them as ServeSettings does
# (tests/test_startup_log.py checks the paths agree), the sampler the server chose is the environment's switch.
_LOG_SETTINGS: Final[Mapping[str, str]] = {
    "parallel_config.tensor_parallel_size": "tensor_parallel_size",
    "parallel_config.pipeline_parallel_size": "pipeline_parallel_size",
    "cache_config.gpu_memory_utilization": "gpu_memory_utilization",
    "model_config.max_model_len": "max_model_len",
    "scheduler_config.max_num_seqs": "max_num_seqs",
    "scheduler_config.max_num_batched_tokens": "max_num_batched_tokens",
    "cache_config.kv_cache_dtype": "kv_cache_dtype",
    "cache_config.block_size": "block_size",
    "model_config.enforce_eager": "enforce_eager",
    "cache_config.enable_prefix_caching": "enable_prefix_caching",
    "flashinfer_sampler": "use_flashinfer_sampler",
}


def _rules_version(log: StartupLog, flag_version: str | None) -> tuple[str | None, str | None]:
    """The vLLM rules to plan with and a note: the log's release, clamped to the releases kvplan models."""
    from kvplan.vllm import defaults as vd

    logged = log.settings.vllm_version
    oldest = vd.parse_vllm_version_unchecked(vd.OLDEST_VLLM_VERSION)
    m = _VERSION_RE.match(logged or "")
    if m is None:
        if is_v0_log(log) and flag_version is None:
            return vd.OLDEST_VLLM_VERSION, (
                f"The log comes from vLLM's V0 engine (≤ {vd.OLDEST_VLLM_VERSION}): compared with kvplan's "
                f"oldest rules ({vd.OLDEST_VLLM_VERSION}), under which CUDA graphs are captured after sizing the "
                "cache as in V0."
            )
        if logged is not None:
            return flag_version, f"The log's vLLM version {logged!r} is not a release number: ignored."
        return flag_version, None
    version = vd.VllmVersion(int(m.group(1)), int(m.group(2)))
    if version <= vd.VllmVersion(0, 1):
        # A source build without its release tag: the banner says 0.0.0, or setuptools-scm's 0.1.devN+g<sha>
        # (real logs of both: tests/fixtures/startup-logs ghlog-2xsm89-mistral-small-4-…, sparkdocker-388-…).
        return flag_version, (f"The log's vLLM version {logged!r} is a source build's placeholder, not a "
                              "release: ignored (pass --vllm-version for its release's rules).")
    if version < oldest:
        return vd.OLDEST_VLLM_VERSION, (
            f"vLLM {logged} is older than the rules kvplan models: compared with its oldest "
            f"({vd.OLDEST_VLLM_VERSION}); V0's accounting differs in detail."
        )
    if version > vd.LATEST:
        return vd.LATEST_VLLM_VERSION, (
            f"vLLM {logged} is newer than the rules kvplan knows: compared with {vd.LATEST_VLLM_VERSION}."
        )
    return str(version), None


def settings_from_log(
    log: StartupLog, flags: ServeSettings, given: frozenset[str] = frozenset()
) -> tuple[ServeSettings, tuple[str, ...], tuple[str, ...]]:
    """The settings the server ran with: the log's where it shows them, else `flags` (fit's flags, whose
    explicitly given ServeSettings fields are `given`), else vLLM's defaults.

    Returns the settings, the fields taken from the log, and notes (flags the log overrules, versions).
    A max_model_len the server ran with is accepted above the model's own (VLLM_ALLOW_LONG_MAX_MODEL_LEN).
    """
    changes: dict[str, object] = {}
    notes: list[str] = []
    for path, name in _LOG_SETTINGS.items():
        value = attrgetter(path)(log.settings)
        if value is None:
            continue
        if name in given and flags.value(name) != value:
            notes.append(f"{_flag_name(name)} {flags.value(name)} is overruled by the log's {value}.")
        changes[name] = value
    version, note = _rules_version(log, flags.vllm_version)
    if note:
        notes.append(note)
    if version is not None and version != flags.vllm_version:
        if "vllm_version" in given and flags.vllm_version is not None and log.settings.vllm_version is not None:
            notes.append(f"--vllm-version {flags.vllm_version} is overruled by the log's {log.settings.vllm_version}.")
        changes["vllm_version"] = version
    if _RULE_KV_OVERRIDE in _rules(log) and log.memory.available_kv_bytes is not None:
        changes["kv_cache_memory_bytes"] = log.memory.available_kv_bytes
    from kvplan.vllm.configs import LEGACY_KEYS

    from_log = tuple(LEGACY_KEYS.get(name, name) for name in changes)  # as schema_version 1 names them
    if "max_model_len" in changes:  # the server accepted it, so vLLM's length check was passed or waived
        changes["allow_long_max_model_len"] = True
    return flags.updated(**changes), from_log, tuple(notes)


def _flag_name(name: str) -> str:
    """The vLLM flag that sets a ServeSettings flat name (`tensor_parallel_size` → --tensor-parallel-size)."""
    from kvplan.vllm.engine_args import SETTING_ARGS

    return next((a.flag for a in SETTING_ARGS if a.field == name), "--" + name.replace("_", "-"))


def fit_environment(settings: ServeSettings) -> tuple[str, ...]:
    """vLLM environment assignments that give these settings (before `kvplan fit`, as before `vllm serve`)."""
    from kvplan.vllm.environment import USE_FLASHINFER_SAMPLER

    if settings.env.use_flashinfer_sampler is None:
        return ()
    return (f"{USE_FLASHINFER_SAMPLER}={int(settings.env.use_flashinfer_sampler)}",)


def fit_flags(settings: ServeSettings) -> tuple[str, ...]:
    """The `kvplan fit` flags (vLLM's names, from kvplan/vllm/engine_args.py) that give these settings, then
    kvplan's own (--vllm-version, --usage); vLLM's defaults are left out."""
    from kvplan.vllm.engine_args import suggested_flags
    from kvplan.vllm.settings import ServeSettings

    default = ServeSettings()
    ours = [f"--vllm-version {settings.vllm_version}"] if settings.vllm_version is not None else []
    if settings.usage != default.usage:
        ours.append(f"--usage {settings.usage}")
    return (*suggested_flags(settings, default), *ours)


# --------------------------------------------------------------------------------------------------
# The KV memory to reproduce


def _logged_hundredths(value: int) -> int | None:
    """The log's figure in hundredths of a GiB when `value` is a two-decimal GiB figure, else None
    (an exact byte count, e.g. 0.10's "Current kv cache memory in use is N bytes")."""
    hundredths = round(value * LOG_GIB_HUNDREDTHS / GiB)
    return hundredths if abs(value - hundredths * GiB / LOG_GIB_HUNDREDTHS) < 1 else None


def _implied_blocks(log: StartupLog, report: FitReport, v0_tokens: bool) -> int | None:
    """The log's block count, or the one its token count implies under kvplan's layout."""
    if log.capacity.num_gpu_blocks is not None:
        return log.capacity.num_gpu_blocks
    tokens = log.capacity.kv_cache_tokens
    if tokens is None or report.cache.blocks_per_request <= 0 or report.cache.block_size <= 0:
        return None
    if v0_tokens:
        return tokens // report.cache.block_size if tokens % report.cache.block_size == 0 else None
    # v1/core/kv_cache_utils.py: tokens = int(num_blocks / blocks_per_request × max_model_len)
    guess = tokens * report.cache.blocks_per_request // report.scheduler.max_model_len
    for blocks in range(max(0, guess - 2), guess + 3):
        if int(blocks / report.cache.blocks_per_request * report.scheduler.max_model_len) == tokens:
            return blocks
    return None


def kv_target(
    available: int, blocks: int | None, bytes_per_block: int
) -> tuple[int, str | None]:
    """The available KV memory to reproduce: the logged value, moved within its rounding interval
    (±0.005 GiB) when that is needed to give the logged block count; with a note when it cannot be."""
    if blocks is None or bytes_per_block <= 0:
        return available, None
    block_lo = blocks * bytes_per_block if blocks > 0 else None  # 0 blocks: anything below one block
    block_hi = (blocks + 1) * bytes_per_block - 1
    hundredths = _logged_hundredths(available)
    if hundredths is None:
        lo = hi = available
    else:  # format_gib's interval: [h − ½, h + ½] hundredths of a GiB
        lo = -((-(2 * hundredths - 1) * GiB) // (2 * LOG_GIB_HUNDREDTHS))
        hi = ((2 * hundredths + 1) * GiB) // (2 * LOG_GIB_HUNDREDTHS)
    lo = max(lo, block_lo) if block_lo is not None else lo
    hi = min(hi, block_hi)
    if lo > hi:
        return available, (
            f"The log's {blocks:,} blocks need {_range(block_lo, block_hi)} of KV memory at kvplan's "
            f"{bytes_per_block:,} bytes per block, which the logged {format_gib_vllm(available)} GiB does not "
            "allow: the server's KV layout differs from kvplan's (block size, KV dtype, layers per GPU)."
        )
    return min(max(available, lo), hi), None


def _range(lo: int | None, hi: int) -> str:
    if lo is None:
        return f"under {hi + 1:,} bytes"
    return f"{lo:,}–{hi:,} bytes"


# --------------------------------------------------------------------------------------------------
# Overrides


@dataclass(frozen=True)
class BudgetFit:
    """The memory terms after calibration: each term's bytes, how the pinned ones are known, and what is
    left unexplained."""

    values: dict[str, int]
    sources: dict[str, str]
    unexplained: int  # bytes no term could absorb (0 when the budget closes)


def balance_budget(
    requested: int,
    target: int,
    terms: Mapping[str, int],
    known: Mapping[str, str],
    candidates: Sequence[str],
) -> BudgetFit:
    """Terms whose sum is `requested − target` exactly.

    `terms` holds every subtracted term (known or estimated); `known` the ones measured, with how. The
    residual goes to the first of `candidates` that is not known (floored at 0, the rest to the next);
    a known term absorbs only what the log's rounding can explain (LOG_ROUNDING_SLACK_BYTES).
    """
    values = dict(terms)
    sources = dict(known)
    residual = requested - target - sum(values.values())
    unknown = [t for t in candidates if t not in known]
    for term in unknown:
        if residual == 0:
            break
        new = values[term] + residual
        values[term] = max(0, new)
        residual = min(0, new)
        sources[term] = "fitted: what the logged figures leave"
    if residual and abs(residual) <= LOG_ROUNDING_SLACK_BYTES:
        for term in (t for t in candidates if t in known):
            new = values[term] + residual
            if new >= 0:
                values[term] = new
                sources[term] = f"{known[term]}, ± the log's rounding"
                residual = 0
                break
    return BudgetFit(values, sources, residual)


def _overridden_terms(report: FitReport) -> dict[str, str]:
    """Terms the user already pinned with fit's flags (they count as measured)."""
    by_name = {t.name: t for t in report.memory.terms}
    return {term: f"flag {TERM_FLAGS[term][0]}" for term, name in _MEMORY_TERM_NAMES.items()
            if name in by_name and by_name[name].source == "user"}


def _verify(log: StartupLog, after: FitReport, target: int, v0_tokens: bool, blocks: int | None) -> Verification:
    checks: list[FigureCheck] = []
    capacity = log.capacity
    observed = log.memory.available_kv_bytes
    if observed is not None:
        if _logged_hundredths(observed) is None:
            checks.append(FigureCheck("available_kv", "bytes", observed, after.memory.available_kv_bytes, "exact",
                                      observed == after.memory.available_kv_bytes))
        else:
            checks.append(FigureCheck("available_kv", "bytes", observed, after.memory.available_kv_bytes,
                                      "0.01 GiB as logged",
                                      format_gib_vllm(observed) == format_gib_vllm(after.memory.available_kv_bytes)))
    cache, concurrency = after.cache, after.scheduler.max_concurrency
    if capacity.num_gpu_blocks is not None:
        checks.append(FigureCheck("num_gpu_blocks", "blocks", capacity.num_gpu_blocks, cache.num_gpu_blocks, "exact",
                                  capacity.num_gpu_blocks == cache.num_gpu_blocks))
    elif blocks is not None:
        checks.append(FigureCheck("num_gpu_blocks", "blocks", blocks, cache.num_gpu_blocks,
                                  "exact (from the logged tokens)", blocks == cache.num_gpu_blocks))
    if capacity.kv_cache_tokens is not None:
        tokens = cache.num_gpu_blocks * cache.block_size if v0_tokens else cache.kv_cache_tokens
        checks.append(FigureCheck("kv_cache_tokens", "tokens", capacity.kv_cache_tokens, tokens, "exact",
                                  capacity.kv_cache_tokens == tokens))
    if capacity.max_concurrency is not None:
        checks.append(FigureCheck("max_concurrency", "ratio", capacity.max_concurrency, concurrency,
                                  "2 decimals as logged",
                                  round(concurrency, CONCURRENCY_DECIMALS) == capacity.max_concurrency))
    ok = bool(checks) and all(c.matches for c in checks) and after.memory.available_kv_bytes == target
    return Verification(ok, after.memory.available_kv_bytes, cache.num_gpu_blocks,
                        cache.kv_cache_tokens if not v0_tokens else cache.num_gpu_blocks * cache.block_size,
                        concurrency, tuple(checks))


def _measured(seen: Mapping[str, tuple[Number | None, str]], predicted: FitReport,
              graphs_subtracted: bool) -> tuple[dict[str, int], dict[str, str]]:
    """Every subtracted term (measured where the log or a flag gives it, else kvplan's estimate) and how
    the measured ones are known."""
    known = _overridden_terms(predicted)
    values = {"weights": predicted.memory.weights_bytes, "non_torch": predicted.memory.non_torch_bytes,
              "activation_peak": predicted.memory.activation_bytes, "cuda_graph": predicted.memory.cuda_graph_bytes}
    for term in TERM_FLAGS:
        value, how = seen[term]
        if value is None or term in known or (term == "cuda_graph" and not graphs_subtracted):
            continue
        known[term] = how
        values[term] = int(value)
    return values, known


def _target(log: StartupLog, predicted: FitReport, blocks: int | None) -> tuple[int | None, str | None]:
    """The available KV memory to reproduce (None if the log gives no KV figure), with a note."""
    if log.memory.available_kv_bytes is not None:
        return kv_target(log.memory.available_kv_bytes, blocks, predicted.cache.bytes_per_block)
    if blocks is not None and predicted.cache.bytes_per_block > 0:
        return blocks * predicted.cache.bytes_per_block, (
            "The log gives no available KV memory: the smallest that holds its blocks is reproduced.")
    return None, "The log gives no KV memory, blocks or tokens to reproduce: only measured terms are pinned."


def _logged_link(log: StartupLog, gpu: GpuSpec) -> tuple[GpuSpec, tuple[str, ...], tuple[str, ...]]:
    """The GPU linked over PCIe where the log's custom all-reduce warning says no NVLink joins the GPUs
    (startup_log.NO_NVLINK_RULE) and neither the user nor the catalog says so already; the `kvplan fit` flag and a
    note for it."""
    from kvplan.vllm.startup_log import NO_NVLINK_RULE

    if NO_NVLINK_RULE not in _rules(log) or gpu.link is not None or gpu.pcie_only:
        return gpu, (), ()
    line = next(x for x in log.lines if NO_NVLINK_RULE in x.rule.split(","))
    return (gpu.with_link("pcie", f"log line {line.number}: custom all-reduce is disabled"), ("--gpu-link", "pcie"),
            (f"Log line {line.number} says custom all-reduce is disabled for want of P2P or NVLink: planned with "
             "--gpu-link pcie (no NVLink between the GPUs).",))


def _logged_chip(log: StartupLog, gpu: GpuSpec) -> tuple[GpuSpec, list[Override], list[str]]:
    """The GPU with the log's CUDA total when it gives one (and that override), else the catalog's, with a note."""
    if log.memory.total_gpu_memory_bytes is not None:
        chip = gpu.with_cuda_total(log.memory.total_gpu_memory_bytes, "log: startup total")
        return chip, [Override(GPU_TOTAL_FLAG, log.memory.total_gpu_memory_bytes, "log")], []
    if log.memory.requested_memory_bytes is not None:
        return gpu, [], ["The log gives the requested memory but not the GPU total: the catalog's total is kept, "
                         "and any difference goes into the fitted term."]
    return gpu, [], []


def _check_log_terms(pinned: dict[str, int]) -> None:
    """A term read or derived from the log that no server can have (a negative size: e.g. "consumed − weights"
    below zero) is the log's inconsistency, said as such — not blamed on the flag it would become."""
    from kvplan.errors import ParseError

    term_of = {name: term for term, (_, name) in TERM_FLAGS.items()}
    for name, value in pinned.items():
        if value < 0:
            raise ParseError(f"the startup log's figures give a negative {_TERM_WORDS[term_of[name]]} term "
                             f"({value / GiB:.2f} GiB): the log is inconsistent (lines from more than one run?)")


def _fit_budget(
    log: StartupLog, settings: ServeSettings, predicted: FitReport, chip: GpuSpec, graphs_subtracted: bool,
    v0_tokens: bool,
) -> tuple[int | None, int | None, BudgetFit, list[str]]:
    """The KV memory to reproduce, the implied block count, the balanced budget of terms, and notes."""
    from kvplan.vllm.defaults import requested_memory

    values, known = _measured(_observed(log, graphs_subtracted=graphs_subtracted), predicted, graphs_subtracted)
    blocks = _implied_blocks(log, predicted, v0_tokens)
    if settings.cache_config.kv_cache_memory_bytes is not None:
        note = "The server ran with --kv-cache-memory-bytes: its KV memory does not depend on the budget."
        return settings.cache_config.kv_cache_memory_bytes, blocks, BudgetFit(values, known, 0), [note]
    target, target_note = _target(log, predicted, blocks)
    notes = [target_note] if target_note else []
    budget = BudgetFit(values, known, 0)
    if target is not None:
        candidates = [t for t in BALANCING_ORDER if graphs_subtracted or t != "cuda_graph"]
        requested = requested_memory(chip.cuda_total_bytes, predicted.memory.gpu_memory_utilization)
        budget = balance_budget(requested, target, values, known, candidates)
    if budget.unexplained:
        notes.append(
            f"The logged figures leave {budget.unexplained / GiB:+.2f} GiB that no unmeasured term can absorb: "
            "the server's budget does not follow kvplan's model with these settings (check "
            "gpu_memory_utilization and the GPU)."
        )
    return target, blocks, budget, notes


def _budget_overrides(budget: BudgetFit, graphs_subtracted: bool) -> tuple[list[Override], list[str]]:
    """The override of every pinned term, and a note on the estimates that stay when a term was fitted."""
    details = [Override(flag, budget.values[term], budget.sources[term])
               for term, (flag, _) in TERM_FLAGS.items() if term in budget.sources]
    fitted = [flag for term, (flag, _) in TERM_FLAGS.items() if budget.sources.get(term, "").startswith("fitted")]
    estimated = [f"{_TERM_WORDS[term]} {budget.values[term] / GiB:.2f} GiB" for term in TERM_FLAGS
                 if term not in budget.sources and (graphs_subtracted or term != "cuda_graph")]
    if fitted and estimated:
        return details, [f"Not in the log, so kvplan's estimates stay: {', '.join(estimated)}; an error in them "
                         f"lands in {' and '.join(fitted)}."]
    return details, []


def calibrate(
    log: StartupLog,
    model: ModelSpec,
    gpu: GpuSpec,
    flags: ServeSettings,
    *,
    source: str,
    model_source: str,
    given: frozenset[str] = frozenset(),
    gpu_flags: tuple[str, ...] | None = None,
) -> CalibrationReport:
    """Predict the logged deployment with kvplan, compare term by term, find the overrides that reproduce
    the log's available KV memory and check them by planning again.

    `flags` are fit's flags (the user's); the log's settings take precedence (`settings_from_log`).
    `gpu` is the GPU as the user named it (its catalog total: the comparison shows how far it is from the
    log's). `gpu_flags` says how to name it to `kvplan fit` (default `--gpu ID`).
    """
    from kvplan.vllm.fit import plan_fit

    settings, from_log, setting_notes = settings_from_log(log, flags, given)
    gpu, link_flags, link_notes = _logged_link(log, gpu)
    predicted = plan_fit(model, gpu, settings, advise=False)
    graphs = next(t for t in predicted.memory.terms if t.name == "cuda_graphs")
    graphs_subtracted = graphs.source not in ("not subtracted", "none")
    v0_tokens = _RULE_V0_TOKENS in _rules(log)
    comparison = compare_terms(log, predicted_terms(predicted, v0_token_capacity=v0_tokens),
                               graphs_subtracted=graphs_subtracted)
    chip, details, chip_notes = _logged_chip(log, gpu)
    target, blocks, budget, budget_notes = _fit_budget(log, settings, predicted, chip, graphs_subtracted, v0_tokens)
    term_details, term_notes = _budget_overrides(budget, graphs_subtracted)
    details += term_details
    # Verify: plan again with the overrides.
    pinned = {TERM_FLAGS[term][1]: budget.values[term] for term in TERM_FLAGS if term in budget.sources}
    _check_log_terms(pinned)
    after = plan_fit(model, chip, settings.updated(**pinned), advise=False)
    overrides = tuple(o.text for o in details)
    gflags = (*(gpu_flags if gpu_flags is not None else ("--gpu", gpu.id)), *link_flags)
    return CalibrationReport(
        source=source,
        log=log,
        comparison=comparison,
        overrides=overrides,
        model=model_source,
        gpu=gpu.id,
        settings=settings,
        settings_from_log=from_log,
        override_details=tuple(details),
        command=" ".join([*fit_environment(settings), "kvplan fit", shlex.quote(model_source), *gflags,
                          *fit_flags(settings), *overrides]),
        verified=_verify(log, after, target, v0_tokens, blocks) if target is not None else None,
        notes=(*setting_notes, *link_notes, *chip_notes, *budget_notes, *term_notes),
    )


def figures_only(
    log: StartupLog, *, source: str, missing: Sequence[str], notes: Sequence[str] = ()
) -> CalibrationReport:
    """The report when kvplan cannot predict: the log's figures, and what would be needed."""
    return CalibrationReport(source=source, log=log, missing=tuple(missing), notes=tuple(notes))
