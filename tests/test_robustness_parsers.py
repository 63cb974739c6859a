"""Every parser, fed random and mutated input, ends in a result or a `KvplanError` — nothing else.

Inputs start from the real fixtures (config.json files, vLLM startup logs, vLLM's own /metrics text)
and are mutated: keys deleted, values swapped for zero, negative, huge, NaN/Infinity, wrong types or
nesting, text cut or garbled. Plan YAML also gets alias bombs, self-merging anchors, tags and
non-mapping documents. A case that raises anything but a `KvplanError`, or that runs longer than
`HANG_SECONDS`, fails the test.

`TARGETS` is shared with `benchmarks/robustness.py`, which runs the same strategies with more
examples and prints a table.
"""
from __future__ import annotations

import contextlib
import copy
import json
import math
import random
import re
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kvplan.errors import KvplanError

FIXTURES = Path(__file__).parent / "fixtures"
HANG_SECONDS = 5.0  # a parser that takes this much CPU time on a few KB of input is hung
WALL_FACTOR = 6  # … or this many times as long on the wall clock (a case that waits instead of computing)
MEMORY_BYTES = 2**30  # … or that needs this much more memory
PROBLEM_CHARS = 400  # how much of an unexpected exception's text a failure shows

# ---------------------------------------------------------------------------------------------------
# Running one case


class Hang(BaseException):
    """Raised by the alarm inside a case that ran past HANG_SECONDS (BaseException: no
    `except Exception` in kvplan can swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise `Hang` in the running code after `seconds` of its CPU time, or WALL_FACTOR × `seconds` of wall
    time for a case that blocks instead of computing (main thread, POSIX); elsewhere no limit.

    CPU time (ITIMER_PROF) does not grow when other processes load the machine, so a loaded CI runner does
    not turn a slow-but-finite case into a "hang"; the wall-clock backstop still ends a case that waits.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum: int, frame: object) -> None:
        raise Hang

    previous = {sig: signal.signal(sig, on_alarm) for sig in (signal.SIGPROF, signal.SIGALRM)}
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, seconds * WALL_FACTOR)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _virtual_memory_bytes() -> int | None:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return None


@contextlib.contextmanager
def memory_limit(extra_bytes: int) -> Iterator[None]:
    """Cap the address space at its current size + `extra_bytes` (Linux), so a case that would eat all
    memory raises MemoryError instead of getting the whole test run killed."""
    try:
        import resource
    except ImportError:
        yield
        return
    used = _virtual_memory_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if used is None or soft != resource.RLIM_INFINITY:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (used + extra_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def describe_exception(exc: BaseException) -> str:
    """`TypeError: … (at config.py:123)`: the exception and the kvplan line that raised it."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/kvplan/" in f.filename.replace("\\", "/")] or frames
    where = f" (at {Path(ours[-1].filename).name}:{ours[-1].lineno})" if ours else ""
    text = f"{type(exc).__name__}: {exc}"
    if len(text) > PROBLEM_CHARS:
        text = text[:PROBLEM_CHARS] + "…"
    return text + where


def problem_of(run: Callable[[Any], object], case: Any) -> str | None:
    """None when `run(case)` returns or raises a KvplanError; else what went wrong."""
    try:
        with memory_limit(MEMORY_BYTES), time_limit(HANG_SECONDS):
            run(case)
    except KvplanError:
        return None
    except Hang:
        return f"hang: no answer within {HANG_SECONDS:g} s of CPU time"
    except Exception as exc:  # noqa: BLE001 - anything else is the bug this suite looks for
        return describe_exception(exc)
    return None


@dataclass(frozen=True)
class KnownBug:
    """A bug found by this suite in a module another helper owns, reported with `reproducer`."""

    module: str  # file name in the problem's "(at module:line)"
    exception: str
    reproducer: str

    def matches(self, problem: str) -> bool:
        return f"(at {self.module}:" in problem and f"{self.exception}:" in problem


# Reported, not yet fixed. The fuzz tests tolerate exactly these (so that they keep guarding everything
# else); each gets a pinned case marked xfail(strict=True, raises=AssertionError) that calls
# `check_known_bug_reproducer`: when the fix lands it passes, the strict xfail fails, and the entry and
# the marker are to be deleted. benchmarks/robustness.py counts them as bad. None is open now (the last
# ones, fixed: self-merging YAML anchors, /dev/zero as a vllm_config, trace values beyond float's range
# or nested 100,000 deep, huge trace block sizes and pools; their reproducers are in PINNED).
KNOWN_BUGS: tuple[KnownBug, ...] = ()


def known_bug(problem: str | None) -> KnownBug | None:
    """The reported bug this problem is, if any."""
    return next((b for b in KNOWN_BUGS if problem is not None and b.matches(problem)), None)


@dataclass(frozen=True)
class FuzzTarget:
    """One parser (with what consumes its result), the inputs to feed it, and CI's example count."""

    name: str
    strategy: st.SearchStrategy[Any]
    run: Callable[[Any], object]
    examples: int


def fuzz(target: FuzzTarget, max_examples: int, *, on_case: Callable[[Any, str | None], None] | None = None,
         fail: bool = True) -> None:
    """Run `target` on `max_examples` derandomized cases (the same ones on every run).

    `fail`: assert on the first bad case (tests, with shrinking); otherwise only report each case to
    `on_case` (the benchmark counts them).
    """
    phases = [Phase.explicit, Phase.generate, Phase.shrink] if fail else [Phase.generate]

    @settings(max_examples=max_examples, derandomize=True, database=None, deadline=None, phases=phases,
              print_blob=False, suppress_health_check=list(HealthCheck))
    @given(target.strategy)
    def check(case: Any) -> None:
        problem = problem_of(target.run, case)
        if on_case is not None:
            on_case(case, problem)
        if fail and known_bug(problem) is None:
            assert problem is None, f"{target.name}: {problem}\ninput: {_short_repr(case)}"

    check()


def _short_repr(value: Any, limit: int = 2000) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


# ---------------------------------------------------------------------------------------------------
# Building blocks: nasty values and mutations of nested JSON-like data

NAN, INF = math.nan, math.inf
NASTY_NUMBERS: tuple[Any, ...] = (
    0, -1, -2, 1, 2, 3, 7, 17, 2**31, 2**40 + 1, 2**63, -(2**63), 10**30, 10**400, 0.0, -0.0, 0.5, 1.5, 1e-300,
    1e30, -1e30, 1e308, NAN, INF, -INF, True, False,
)
NASTY_STRINGS: tuple[str, ...] = (
    "", " ", "abc", "4096", "1e30", "-1", "NaN", "Infinity", "auto", "bfloat16", "float8", "fp8", "\x00", "é",
    "full_attention", "sliding_attention", "mamba", "linear_attention", "mlp", "moe", "*", "M-*E", "yarn",
    "llama3", "gptq", "awq", "fp8", "compressed-tensors", "modelopt", "mxfp4", "bitsandbytes", "NVFP4", "FP8",
)

json_leaf: st.SearchStrategy[Any] = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(NASTY_NUMBERS), st.sampled_from(NASTY_STRINGS),
)


def json_values(keys: tuple[str, ...] = ()) -> st.SearchStrategy[Any]:
    """Any JSON-like value (NaN and Infinity included, as Python's json reads them), keys from `keys`."""
    key = st.sampled_from(keys) | st.text(max_size=8) if keys else st.text(max_size=8)
    return st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(key, inner, max_size=5),
                        max_leaves=12)


def nasty_values(keys: tuple[str, ...] = ()) -> st.SearchStrategy[Any]:
    """Mostly nasty scalars, lists of them, or small objects of known keys holding them."""
    scalar = st.sampled_from(NASTY_NUMBERS) | st.sampled_from(NASTY_STRINGS)
    key = st.sampled_from(keys) if keys else st.text(max_size=8)
    return st.one_of(scalar, scalar, st.lists(scalar, max_size=4), st.dictionaries(key, scalar, max_size=3),
                     json_values(keys))


# Mutations, weighted: most keep the structure and change one value, so parsing gets deep.
_OPS = ("nasty",) * 4 + ("add",) * 3 + ("scale",) * 2 + ("delete", "value", "wrap", "stringify", "resize")


def _slots(obj: Any) -> list[tuple[Any, Any]]:
    """Every (container, key-or-index) pair inside `obj`, depth first."""
    out: list[tuple[Any, Any]] = []
    stack = [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                out.append((node, k))
                stack.append(v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                out.append((node, i))
                stack.append(v)
    return out


def _containers(obj: Any) -> list[dict[str, Any]]:
    return [obj] * isinstance(obj, dict) + [c[k] for c, k in _slots(obj) if isinstance(c[k], dict)]


def mutate(draw: st.DrawFn, root: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Apply one random mutation somewhere inside `root["doc"]` (which may itself be replaced)."""
    slots = _slots(root)
    container, key = draw(st.sampled_from(slots))
    old = container[key]
    op = draw(st.sampled_from(_OPS))
    if op == "delete" and container is not root:
        del container[key]
    elif op == "nasty":
        container[key] = draw(st.sampled_from(NASTY_NUMBERS) | st.sampled_from(NASTY_STRINGS))
    elif op == "value":
        container[key] = draw(json_values(keys))
    elif op == "wrap":
        container[key] = draw(st.sampled_from(([old], {"x": old}, {"text_config": old}, [[old]])))
    elif op == "stringify":
        container[key] = old + draw(st.text(max_size=3)) if isinstance(old, str) else json.dumps(old, allow_nan=True)
    elif op == "scale" and isinstance(old, (int, float)) and not isinstance(old, bool):
        factor = draw(st.sampled_from((0, -1, 2, 1000, 10**20, 0.5, 1e300, NAN, INF)))
        container[key] = old * factor
    elif op == "add":
        target = draw(st.sampled_from(_containers(root["doc"]) or [root]))
        target[draw(st.sampled_from(keys) if keys else st.text(max_size=8))] = draw(nasty_values(keys))
    elif op == "resize" and isinstance(old, list):
        n = draw(st.integers(0, len(old) + 2))
        container[key] = (old * 2)[:n] if old else [draw(json_leaf) for _ in range(n)]


# ---------------------------------------------------------------------------------------------------
# config.json (kvplan.model.config.parse_config), then what `kvplan size` computes from the ModelSpec

CONFIG_DIR = FIXTURES / "configs"
CONFIGS: dict[str, dict[str, Any]] = {
    p.name: json.loads((p / "config.json").read_text()) for p in sorted(CONFIG_DIR.iterdir())
    if (p / "config.json").exists()
}
QUANT_CONFIGS: dict[str, dict[str, Any]] = {
    name: json.loads((CONFIG_DIR / name / "hf_quant_config.json").read_text()) for name in CONFIGS
    if (CONFIG_DIR / name / "hf_quant_config.json").exists()
}


def _all_keys(*docs: Any) -> tuple[str, ...]:
    keys: set[str] = set()
    for doc in docs:
        keys.update(str(k) for c, k in _slots(doc) if isinstance(c, dict))
    return tuple(sorted(keys))


# Keys kvplan reads that no fixture holds; mutations add them too.
EXTRA_CONFIG_KEYS = (
    "n_head_kv", "num_kv_heads", "multi_query_group_num", "num_attention_groups", "layers_block_type",
    "attn_type_list", "full_attention_interval", "sliding_window_pattern", "max_window_layers",
    "use_sliding_window", "num_kv_shared_layers", "moe_layers", "first_k_dense_replace", "decoder_sparse_step",
    "moe_layer_freq", "interleave_moe_layer_step", "mlp_only_layers", "num_global_key_value_heads",
    "global_head_dim", "attention_chunk_size", "no_rope_layers", "mamba_n_heads", "mamba_d_head",
    "mamba_d_state", "mamba_expand", "mamba_d_conv", "linear_num_value_heads", "kv_lora_rank",
    "quantization_config", "kv_cache_scheme", "config_groups", "rope_scaling", "factor", "rope_type",
    "model_max_length", "n_positions", "seq_length", "text_config", "torch_dtype", "dtype",
)
CONFIG_KEYS = tuple(sorted(set(_all_keys(*CONFIGS.values(), *QUANT_CONFIGS.values())) | set(EXTRA_CONFIG_KEYS)))


@st.composite
def config_cases(draw: st.DrawFn) -> tuple[str, Any, Any]:
    """(fixture name, mutated config.json, mutated hf_quant_config.json or None)."""
    name = draw(st.sampled_from(sorted(CONFIGS)))
    if draw(st.integers(0, 19)) == 0:  # now and then: not an object at all
        return name, draw(json_values(CONFIG_KEYS)), None
    root: dict[str, Any] = {"doc": copy.deepcopy(CONFIGS[name])}
    quant = copy.deepcopy(QUANT_CONFIGS.get(name))
    if quant is not None and draw(st.booleans()):
        qroot: dict[str, Any] = {"doc": quant}
        mutate(draw, qroot, CONFIG_KEYS)
        quant = qroot["doc"]
    for _ in range(draw(st.integers(1, 5))):
        mutate(draw, root, CONFIG_KEYS)
    return name, root["doc"], quant


def run_config(case: tuple[str, Any, Any]) -> None:
    """Parse the config and compute what `kvplan size` shows (KV bytes per token, weights)."""
    from kvplan.model.config import parse_config
    from kvplan.model.size import size_report

    name, config, quant = case
    spec = parse_config(config, name=name, quant_config=quant if isinstance(quant, dict) else None)
    size_report(spec)
    size_report(spec, tp=2, kv_cache_dtype="fp8")


# ---------------------------------------------------------------------------------------------------
# Prometheus text (kvplan.observe.metrics.parse_exposition), then the diagnosis of one or two scrapes

_finite = st.floats(min_value=0, max_value=1e6, allow_nan=False)


@st.composite
def engine_states(draw: st.DrawFn) -> Any:
    from tests.fixtures.metrics.exposition import EngineState

    obs = st.lists(st.floats(min_value=0, max_value=1e4), max_size=3)
    return EngineState(
        model_name=draw(st.sampled_from(("Qwen/Qwen2.5-7B", "m", "a\"b", "é"))),
        engine=draw(st.sampled_from(("0", "1", ""))),
        running=draw(_finite), waiting=draw(_finite), kv_usage=draw(st.floats(allow_nan=True)),
        preemptions=draw(_finite), prefix_queries=draw(_finite), prefix_hits=draw(_finite),
        ttft=draw(obs), itl=draw(obs), queue=draw(obs), e2e=draw(obs),
    )


_CREATED_RE = re.compile(r"^(\S*_created(?:\{[^}]*\})? )\S+$", re.MULTILINE)
_NUMBER_TOKENS = ("NaN", "+Inf", "-Inf", "-1", "0", "1e400", "-1e400", "abc", "", "1e-400", "99999999999999999999")


_NUMBER_RE = re.compile(r"\d[\d.,]*")


@st.composite
def text_mutations(draw: st.DrawFn, text: str, tokens: tuple[str, ...]) -> str:
    """Line-level mutations: delete, duplicate, swap, cut, garble; numbers replaced by nasty tokens."""
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(("number", "number", "number", "delete", "dup", "swap", "cut", "garble",
                                   "insert")))
        if op == "number":
            numbers = list(_NUMBER_RE.finditer(text))
            if numbers:
                m = numbers[draw(st.integers(0, len(numbers) - 1))]
                text = text[: m.start()] + draw(st.sampled_from(tokens)) + text[m.end():]
            continue
        lines = text.splitlines(keepends=True) or [""]
        i = draw(st.integers(0, len(lines) - 1))
        if op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif op == "garble":
            at = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:at] + draw(st.text(max_size=6)) + lines[i][at:]
        elif op == "insert":
            lines.insert(i, draw(st.text(max_size=30)) + "\n")
        text = "".join(lines)
    if draw(st.integers(0, 9)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text


@st.composite
def exposition_texts(draw: st.DrawFn) -> str:
    from tests.fixtures.metrics.exposition import exposition

    if draw(st.integers(0, 9)) == 0:
        return draw(st.text(max_size=200))
    base = exposition(*draw(st.lists(engine_states(), min_size=1, max_size=2)))
    # `*_created` samples hold the wall-clock time: pin it, or the same draws would give other text.
    base = _CREATED_RE.sub(r"\g<1>1.7e9", base)
    if draw(st.integers(0, 3)) == 0:  # a quarter stay whole: the diagnosis sees every figure
        return base
    return draw(text_mutations(base, _NUMBER_TOKENS))


def run_metrics(case: tuple[str, str | None]) -> None:
    """Parse one scrape (and an earlier one) and diagnose it, as `kvplan diagnose --interval` does."""
    from kvplan.observe.diagnose import diagnose
    from kvplan.observe.metrics import MetricsSnapshot, parse_exposition

    now_text, before_text = case
    now = parse_exposition(now_text)
    before: MetricsSnapshot | None = None
    if before_text is not None:
        try:
            before = parse_exposition(before_text)
        except KvplanError:
            before = None
    diagnose(now, before, 10.0 if before is not None else None)


metrics_cases = st.tuples(exposition_texts(), st.none() | exposition_texts())

# ---------------------------------------------------------------------------------------------------
# vLLM startup logs (kvplan.vllm.startup_log.parse_startup_log)

LOGS: list[str] = [
    r["log_excerpt"] for r in yaml.safe_load((FIXTURES / "data" / "vllm-startup-logs.yaml").read_text())["records"]
    if r.get("log_excerpt")
]
_LOG_TOKENS = ("9" * 400, "9" * 5000, "1" + "0" * 30, "-0", "nan", "inf", "1e5", "-1", "0", "1,,,", ",", "0.", ".5",
               "99999999999999999999.9999", "'", "\"", "{", "}", "=", "vllm serve", "--max-model-len", "GiB", "x")


@st.composite
def startup_logs(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.text(max_size=300))
    base = "\n".join(draw(st.lists(st.sampled_from(LOGS), min_size=1, max_size=3)))
    return draw(text_mutations(base, _LOG_TOKENS))


def run_startup_log(text: str) -> None:
    """Parse the log and take the memory terms calibration compares."""
    from kvplan.observe.calibration import observed_terms
    from kvplan.vllm.startup_log import parse_startup_log

    log = parse_startup_log(text)
    observed_terms(log)
    _ = log.memory.model_weights_bytes


# ---------------------------------------------------------------------------------------------------
# JSONL traces (kvplan.sim.workloads.parse_trace)

TRACE_KEYS = ("timestamp", "prompt_len", "input_length", "output_len", "output_length", "token_ids", "block_hashes",
              "hash_ids", "cache_salt", "phase", "prompt_tokens", "num_tokens", "max_tokens")
_trace_value = st.one_of(
    json_leaf, st.lists(st.integers(min_value=-5, max_value=2**64), max_size=40),
    st.lists(st.text(max_size=3) | st.integers(), max_size=10), json_values(),
)
_good_record = st.fixed_dictionaries(
    {"timestamp": st.floats(0, 1e6), "input_length": st.integers(1, 5000), "output_length": st.integers(1, 500)},
    optional={"hash_ids": st.lists(st.integers(0, 50), max_size=8)},
)


_plausible_value = st.one_of(
    st.integers(-2, 10**6), st.floats(0, 1e7), st.lists(st.integers(0, 2**64), max_size=20),
    st.lists(st.integers(0, 50), max_size=20), st.text(max_size=5), st.sampled_from(NASTY_NUMBERS),
)


@st.composite
def trace_lines(draw: st.DrawFn) -> str:
    """One JSONL line: mostly a good Mooncake-style record with a field or two changed; now and then junk."""
    kind = draw(st.integers(0, 19))
    if kind == 0:
        return draw(st.text(max_size=60))
    rec: Any = draw(_good_record)
    for _ in range(draw(st.integers(0, 2))):
        rec[draw(st.sampled_from(TRACE_KEYS))] = draw(_plausible_value if kind > 3 else _trace_value)
    if kind == 1:
        rec = draw(json_values(TRACE_KEYS))
    line = json.dumps(rec, allow_nan=True)
    if kind == 2:
        line = line[: draw(st.integers(0, len(line)))]
    return line


trace_cases = st.tuples(
    st.lists(trace_lines(), min_size=1, max_size=5),
    st.sampled_from((1, 16, 32)),  # --block-size (the CLI refuses < 1)
    st.sampled_from((None, 16, 32, 64, 0, -16, 7, 2**40)),  # --trace-block-size
    st.sampled_from((1.0, 0.001)),  # --trace-timestamp-unit s or ms
)


def run_trace(case: tuple[list[str], int, int | None, float]) -> None:
    """Read the trace, then turn it into the prefix and serve workloads the simulators replay."""
    from kvplan.sim.workloads import LengthDist, parse_trace, trace_prefix_workload, trace_serve_requests

    lines, block_size, trace_block_size, unit = case
    records = parse_trace(lines, block_size=block_size, trace_block_size=trace_block_size, timestamp_unit_s=unit)
    trace_prefix_workload(records)
    trace_serve_requests(records, LengthDist("constant", 16))


def run_length_values(text: str) -> None:
    from kvplan.sim.workloads import parse_length_values

    parse_length_values(text)


length_value_texts = st.one_of(
    st.text(max_size=40),
    st.lists(st.sampled_from(NASTY_NUMBERS) | st.integers(), max_size=6).map(lambda v: json.dumps(v, allow_nan=True)),
    st.lists(st.sampled_from(("1", "-1", "0", "1e400", "2.5", "x", ",", "9" * 5000)), max_size=5).map(" ".join),
)

# ---------------------------------------------------------------------------------------------------
# Plan YAML (kvplan.ci.plan)

BASE_PLAN: dict[str, Any] = {
    "version": 1,
    "deployments": [
        {
            "name": "chat",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "gpu": "h100",
            "num_gpus": 1,
            "vllm": {"max-model-len": 32768, "gpu-memory-utilization": 0.9, "kv-cache-dtype": "auto"},
            "vllm_cmd": "vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 32768 -tp 1 --enable-prefix-caching",
            "vllm_version": "0.33",
            "measured": {"weights-memory": "14.3GiB"},
            "workload": {"num_requests": 200, "request_rate": 4, "prompt_len": 2048, "output_len": 256},
            "require": {
                "starts": True,
                "min_concurrency": {"value": 8, "context": 32768},
                "no_preemption": {"concurrency": 8, "context": 4096},
                "min_kv_tokens": 100000,
                "min_decode_throughput": {"value": 1000, "batch": 32},
                "max_itl_ms": {"value": 50, "batch": 32},
                "max_p99_ttft_ms": {"value": 2000},
                "min_headroom_pct": 10,
            },
        },
    ],
}
PLAN_KEYS = _all_keys(BASE_PLAN)


def alias_bomb(levels: int, width: int) -> str:
    """The "billion laughs": each level lists the previous one `width` times (width**levels leaves)."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    lines.append(f"deployments: *l{levels - 1}")
    return "\n".join(lines) + "\n"


SPECIAL_PLANS = (
    alias_bomb(9, 9), alias_bomb(20, 2), alias_bomb(3, 200),
    "a: &a [*a]\ndeployments: *a\n",  # self-referencing alias
    "a: &a {<<: *a}\ndeployments: []\n",  # a mapping that merges itself
    "x-d: &d {b: 1, <<: [*d, *d]}\ndeployments: [*d]\n",
    "x-d: &d {gpu: h100}\ndeployments:\n  - <<: [*d, *d, *d]\n    name: a\n",
    "deployments:\n  - <<: 5\n",
    "deployments:\n  - !!python/object/apply:os.system [echo pwned]\n",
    "!!python/object:builtins.dict {}\n",
    "deployments: !!binary aGVsbG8=\n",
    "deployments:\n  - name: 2020-01-01\n",
    "deployments: !custom {a: 1}\n",
    "? [a, b]\n: 1\n",
    "yes: 1\n", "--- a\n--- b\n", "---\n...\n", "%YAML 1.1\n---\n[]\n", "\t- x", "[" * 5000 + "]" * 5000,
    "{" * 100 + "}" * 100, "deployments:\n" + "  - name: x\n" * 3, "\ufeffdeployments: []\n", "\x00", "",
    "deployments:\n  - {name: a, gpu: h100, require: {starts: true}, model: ../../../../etc/passwd}\n",
    "deployments:\n  - {name: a, gpu: h100, require: {starts: true}, model: m, vllm_config: /dev/zero}\n",
    "deployments:\n  - {name: a, gpu: h100, require: {starts: true}, model: m, vllm_config: .}\n",
    "deployments:\n  - {name: a, gpu: h100, require: {starts: true}, model: m, gpus_file: [1]}\n",
)


@st.composite
def plan_texts(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(("mutated", "mutated", "mutated", "special", "any", "text")))
    if kind == "special":
        return draw(st.sampled_from(SPECIAL_PLANS))
    if kind == "any":
        return yaml.safe_dump(draw(json_values(PLAN_KEYS)), allow_unicode=True)
    if kind == "text":
        return draw(st.text(max_size=200))
    root: dict[str, Any] = {"doc": copy.deepcopy(BASE_PLAN)}
    for _ in range(draw(st.integers(0, 2))):
        mutate(draw, root, PLAN_KEYS)
    text = yaml.safe_dump(root["doc"], allow_unicode=True, sort_keys=False)
    if draw(st.integers(0, 2)):  # mostly well-formed YAML, so validation gets deep
        return text
    return draw(text_mutations(text, ("&a", "*a", "<<:", "!!str", "!x", ":", "- ", "{", "[", "'", "nan", ".inf")))


def run_plan(text: str) -> None:
    """Compose and validate the plan, as `kvplan check` does before loading any model."""
    import tempfile

    from kvplan.ci.plan import parse_plan, parse_yaml

    with tempfile.TemporaryDirectory() as base_dir:  # relative paths in the plan point inside it
        parse_plan(parse_yaml(text, "plan.yaml"), base_dir=Path(base_dir))


# ---------------------------------------------------------------------------------------------------
# GPU catalog YAML (kvplan.hardware.gpus.load_catalog with a user file)

BASE_GPU = {
    "id": "my-gpu", "name": "My GPU", "vendor": "nvidia", "cuda_total_bytes": 25_386_352_640,
    "memory_bandwidth_bytes_per_s": "1TB/s", "flops": {"bf16": "165TFLOPS", "fp8": 330e12},
    "compute_capability": "8.9", "aliases": ["mine"], "device_names": ["NVIDIA My GPU"],
    "sources": {"cuda_total_bytes": "measured"},
}
BASE_OVERRIDE = {"id": "h100-sxm", "cuda_total_bytes": 85_000_000_000}
GPU_KEYS = _all_keys(BASE_GPU, BASE_OVERRIDE) + ("nvml_total_bytes", "memory_gb", "interconnect_bytes_per_s")


def _bomb_in(key: str) -> str:
    """A GPU entry whose `key` lists an 8-level alias bomb (9**8 leaves once expanded)."""
    levels = ["&a [a,a,a,a,a,a,a,a,a]"] + [f"&{chr(98 + i)} [{','.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(7)]
    return f"gpus:\n- id: x\n  name: X\n  cuda_total_bytes: 1000\n  {key}: [{', '.join(levels)}]\n"


SPECIAL_GPU_FILES = (
    alias_bomb(9, 9).replace("deployments", "gpus"), _bomb_in("vendor"), _bomb_in("aliases"), _bomb_in("flops"),
    "[" * 5000 + "]" * 5000, "gpus: !!binary aGVsbG8=\n", "gpus:\n  - !!python/name:os.system\n", "gpus: *x\n",
    "gpus:\n- {id: x, memory_gb: 2020-01-01}\n", "gpus:\n- {id: x, flops: {bf16: .nan}}\n", "- id: 5\n", "",
    "gpus: &g [*g]\n",
)


@st.composite
def gpu_files(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(("mutated", "mutated", "mutated", "special", "any", "text")))
    if kind == "special":
        return draw(st.sampled_from(SPECIAL_GPU_FILES))
    if kind == "any":
        return yaml.safe_dump(draw(json_values(GPU_KEYS)), allow_unicode=True)
    if kind == "text":
        return draw(st.text(max_size=200))
    root: dict[str, Any] = {"doc": {"gpus": [copy.deepcopy(BASE_GPU), copy.deepcopy(BASE_OVERRIDE)]}}
    for _ in range(draw(st.integers(0, 2))):
        mutate(draw, root, GPU_KEYS)
    text = yaml.safe_dump(root["doc"], allow_unicode=True, sort_keys=False)
    if draw(st.integers(0, 2)):
        return text
    return draw(text_mutations(text, ("&a", "*a", "!!str", ".nan", ".inf", "-1", "1e400", "0x10", "[", "{")))


def run_gpu_file(text: str) -> None:
    """Load the catalog with this user file, then look a GPU up in it (as --gpus-file does)."""
    import tempfile

    from kvplan.hardware.gpus import find_gpu, load_catalog

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "gpus.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        catalog = load_catalog(path)
    for name in ("my-gpu", "h100", "mine"):
        with contextlib.suppress(KvplanError):
            gpu = find_gpu(name, catalog)
            gpu.resolve_flops("bf16")


# ---------------------------------------------------------------------------------------------------
# Pasted `vllm serve …` lines (kvplan.vllm.command_line.parse_vllm_command)

_CMD_WORDS = (
    "vllm", "serve", "python", "python3", "-m", "vllm.entrypoints.openai.api_server", "Qwen/Qwen2.5-7B", "./m",
    "--model", "-tp", "-pp", "-dp", "-q", "--tensor-parallel-size", "--max-model-len", "--max_model_len",
    "--gpu-memory-utilization", "--kv-cache-dtype", "--block-size", "--kv-cache-memory-bytes", "--kv-cache-memory",
    "--enforce-eager", "--no-enforce-eager", "--enable-prefix-caching=false", "--trust-remote-code", "--port",
    "--max-num-seqs", "--revision", "--performance-mode", "--hf-token", "-", "--", "=", "--=", "CUDA_VISIBLE_DEVICES=0",
    "8000", "32k", "1e30", "-1", "abc", "nan", "'", "\"", "\\", "\\\n", "\n", "é", "--x=", "--enable-",
)


@st.composite
def vllm_commands(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.text(max_size=80))
    words = draw(st.lists(st.sampled_from(_CMD_WORDS) | st.text(max_size=6), max_size=14))
    return " ".join(words)


def run_vllm_cmd(text: str) -> None:
    from kvplan.vllm.command_line import parse_vllm_command

    parse_vllm_command(text)


# ---------------------------------------------------------------------------------------------------
# Sizes and counts from flags (kvplan.units)

size_texts = st.one_of(
    st.text(max_size=16),
    st.sampled_from(("24GiB", "80GB", "3.35TB/s", "512M", "1e30", "-1", "abc", "", " ", "nan", "inf", "1e309",
                     "0", "0.5", "32k", "32K", "1.5k", "9" * 5000, "1" + "0" * 400, "2**40", "1_000", "0x10",
                     "１２", "24 GiB", "24GiB/s", "GiB", ".", "1e-400", "1.5e3M")),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from((10**400, -(10**400), 2**60, 2**60 + 1)),
    st.booleans(),
)


def run_units(value: Any) -> None:
    from kvplan.units import parse_bytes, parse_count

    parse_bytes(value)
    if not isinstance(value, float):
        parse_count(value)


# ---------------------------------------------------------------------------------------------------
# The registry (shared with benchmarks/robustness.py)

TARGETS: tuple[FuzzTarget, ...] = (
    FuzzTarget("config.json", config_cases(), run_config, 200),
    FuzzTarget("prometheus text", metrics_cases, run_metrics, 80),
    FuzzTarget("startup log", startup_logs(), run_startup_log, 120),
    FuzzTarget("JSONL trace", trace_cases, run_trace, 120),
    FuzzTarget("length values", length_value_texts, run_length_values, 60),
    FuzzTarget("plan YAML", plan_texts(), run_plan, 120),
    FuzzTarget("GPU file YAML", gpu_files(), run_gpu_file, 60),
    FuzzTarget("vllm serve line", vllm_commands(), run_vllm_cmd, 150),
    FuzzTarget("sizes and counts", size_texts, run_units, 200),
)


@pytest.mark.parametrize("target", TARGETS, ids=[t.name.replace(" ", "-") for t in TARGETS])
def test_parser_ends_in_a_result_or_a_kvplan_error(target: FuzzTarget) -> None:
    fuzz(target, target.examples)


# ---------------------------------------------------------------------------------------------------
# Pinned cases: each broke once (or would break a naive parser); they stay fixed.

PINNED: tuple[tuple[str, Callable[[Any], object], Any], ...] = (
    ("rope factor Infinity", run_config, ("x", {**CONFIGS["Qwen--Qwen2.5-7B"], "rope_scaling": {"type": "dynamic",
                                                                                            "factor": INF}}, None)),
    ("max_window_layers a string", run_config,
     ("x", {**CONFIGS["Qwen--Qwen2.5-7B"], "use_sliding_window": True, "max_window_layers": "x"}, None)),
    ("gptq bits 10**400", run_config,
     ("x", {**CONFIGS["Qwen--Qwen2.5-7B"], "quantization_config": {"quant_method": "gptq", "bits": 10**400}}, None)),
    ("gptq group_size a string", run_config,
     ("x", {**CONFIGS["Qwen--Qwen2.5-7B"], "quantization_config": {"quant_method": "gptq", "group_size": "x"}}, None)),
    ("moe_layers strings", run_config, ("x", {**CONFIGS["Qwen--Qwen3-30B-A3B"], "moe_layers": ["a"]}, None)),
    ("KV GiB of 400 digits", run_startup_log, "Available KV cache memory: " + "9" * 400 + " GiB"),
    ("token count of 5000 digits", run_startup_log, "GPU KV cache size: " + "9" * 5000 + " tokens"),
    ("GPU file nested 5000 deep", run_gpu_file, "[" * 5000 + "]" * 5000),
    ("GPU file alias bomb in a message", run_gpu_file, SPECIAL_GPU_FILES[1]),
    ("plan alias bomb", run_plan, alias_bomb(9, 9)),
    ("a size of 10**400 bytes", run_units, 10**400),
    ("plan self-merging anchor", run_plan, "a: &a {<<: *a}\ndeployments: []\n"),
    ("plan vllm_config /dev/zero", run_plan,
     "deployments:\n  - {name: a, gpu: h100, require: {starts: true}, model: m, vllm_config: /dev/zero}\n"),
    ("trace prompt_len Infinity", run_trace, (['{"prompt_len": Infinity}'], 16, None, 1.0)),
    ("trace timestamp 10**400", run_trace, (['{"prompt_len": 5, "timestamp": 1' + "0" * 400 + "}"], 16, None, 1.0)),
    ("trace nested 100000 deep", run_trace, (["[" * 100_000 + "]" * 100_000], 16, None, 1.0)),
    ("trace block size 2**40", run_trace, (['{"input_length": 1, "hash_ids": [0]}'], 1, 2**40, 1.0)),
    ("length values 1e400", run_length_values, "[1e400]"),
    ("length values nested 100000 deep", run_length_values, "[" * 100_000 + "]" * 100_000),
    ("trace block size 2**40 without prompt_len", run_trace, (['{"hash_ids": [0, 1]}'], 16, 2**40, 1.0)),
    ("GPU flops 10**400", run_gpu_file, "gpus:\n- {id: h100-sxm, flops: {bf16: 1" + "0" * 400 + "}}\n"),
)


@pytest.mark.parametrize(("run", "case"), [(r, c) for _, r, c in PINNED], ids=[n for n, _, _ in PINNED])
def test_pinned_input_ends_in_a_result_or_a_kvplan_error(run: Callable[[Any], object], case: Any) -> None:
    assert problem_of(run, case) is None, problem_of(run, case)


def check_known_bug_reproducer(run: Callable[[Any], object], case: Any) -> None:
    """Fail with AssertionError while the reported bug is there; with another error for any other problem."""
    problem = problem_of(run, case)
    if problem is not None and known_bug(problem) is None:
        raise RuntimeError(f"not the reported problem: {problem}")
    assert problem is None, problem


def test_the_harness_reports_a_foreign_exception_and_a_hang() -> None:
    """The checks above can fail: a TypeError or a hang is a problem, a KvplanError is not."""
    from kvplan.errors import BadConfig

    def raises(exc: BaseException) -> Callable[[Any], object]:
        def run(_: Any) -> object:
            raise exc
        return run

    assert problem_of(raises(BadConfig("x")), None) is None
    assert (problem_of(raises(TypeError("boom")), None) or "").startswith("TypeError: boom")
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        def spin(_: Any) -> object:
            while True:
                random.random()
        import tests.test_robustness_parsers as me

        old, me.HANG_SECONDS = me.HANG_SECONDS, 0.05
        try:
            assert (problem_of(spin, None) or "").startswith("hang")
        finally:
            me.HANG_SECONDS = old
