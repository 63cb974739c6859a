"""Every command, fed random and hostile flag values, ends in a result or one clear error line.

Each case runs the real Typer app in-process (`typer.testing.CliRunner`) on local fixture models, with
the Hub unreachable (HF_HUB_OFFLINE=1). Allowed outcomes: exit 0 (and, with --json, a strict JSON
document on stdout), or exit 2 with stderr ending in one `Error: …` line that is not an "internal
error" (progress or notes printed before it are allowed; no other line mentions an error). Click's
usage errors (`-tp abc`, an unknown flag) are such a line too. `kvplan check` may also exit 1 (a
requirement failed). Never a traceback, never a hang.

`CLI_TARGETS` is shared with `benchmarks/robustness.py`.
"""
from __future__ import annotations

import atexit
import functools
import json
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import strategies as st

from tests.test_robustness_parsers import (
    BASE_PLAN,
    CONFIG_DIR,
    FuzzTarget,
    Hang,
    exposition_texts,
    fuzz,
    gpu_files,
    mutate,
    plan_texts,
    problem_of,
    startup_logs,
    time_limit,
    trace_lines,
    vllm_commands,
)

# A spread of architectures: dense GQA, MLA, sliding window, hybrid Mamba, linear attention, MoE, chunked.
MODELS = tuple(str(CONFIG_DIR / name) for name in (
    "Qwen--Qwen2.5-7B", "deepseek-ai--DeepSeek-V2-Lite", "google--gemma-3-4b-it", "nvidia--Nemotron-H-56B-Base-8K",
    "Qwen--Qwen3-Next-80B-A3B-Instruct", "openai--gpt-oss-20b", "unsloth--Llama-4-Scout-17B-16E-Instruct",
    "facebook--opt-125m", "nvidia--Qwen3-235B-A22B-NVFP4",
))
GPUS = ("h100", "l4", "a100-40gb", "mi300x", "NVIDIA H100 80GB HBM3", "h10", "", " ", "b200", "rtx4090")
# What people type by mistake, and what a fuzzer finds: sizes, counts, floats, junk.
VALUES = (
    "24GiB", "80GB", "3.35TB/s", "1e30", "1e309", "-1", "0", "1", "2", "3", "8", "16", "0.5", "0.9", "1.0", "1.5",
    "abc", "", " ", "nan", "inf", "-inf", "32k", "32K", "1.5k", "auto", "fp8", "fp8_e5m2", "bfloat16", "float32",
    "99999999999999999999", "9" * 400, "2**40", "1_000", "1,000", "0x10", "１２", "24 GiB", "-0", "+5", "1e-30",
    "4096", "131072", "1048576", "0.0001", "llm", "serve", "0.33", "0.10", "v0.9.2", "9.99", "1,2,4", "1,,2", "0,1",
    "uniform:1:8", "lognormal:64:0.5", "empirical:/nonexistent", "constant:0", "500ms", "0.5s", "-5ms", "1e400ms",
)
_value = st.sampled_from(VALUES) | st.text(max_size=8)
_count = st.sampled_from(("1", "2", "4", "8", "16", "64", "0", "-1", "abc", "1e3"))  # simulation sizes stay small

# ---------------------------------------------------------------------------------------------------
# A scratch folder for the files a case names (saved metrics, logs, traces, plans, GPU files)


@functools.cache
def workspace() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="kvplan-robustness-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def scratch(name: str) -> str:
    """The path of scratch file `name` (a case lists the text to write there in `CliCase.files`)."""
    return str(workspace() / name)


# ---------------------------------------------------------------------------------------------------
# Running one command line and judging the outcome


class CliProblem(Exception):
    """A command line that ended badly (the message says how)."""


ENV = {
    "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_DISABLE_TELEMETRY": "1",
    "KVPLAN_GPUS_FILE": None, "KVPLAN_DEBUG": None, "GITHUB_STEP_SUMMARY": None, "HF_TOKEN": None,
    "COLUMNS": "120", "NO_COLOR": "1",
}


@dataclass(frozen=True)
class CliCase:
    """A command line, what it reads on stdin, and the exit codes it may end with."""

    argv: tuple[str, ...]
    stdin: str | None = None
    exits: tuple[int, ...] = (0, 2)
    files: tuple[tuple[str, str], ...] = ()  # (scratch name, text) written before the run


def cli_problem(case: CliCase, exit_code: int, stdout: str, stderr: str) -> str | None:
    """None when the outcome is one of the allowed ones; else what is wrong with it."""
    if "Traceback" in stdout + stderr:
        return "a traceback was printed"
    # 1 is a capacity verdict of `fit` (vLLM would not start, no GPU serves it) and `check`.
    allowed = case.exits + ((1,) if case.argv[:1] in (("fit",), ("check",)) and 1 not in case.exits else ())
    if exit_code not in allowed:
        return f"exit {exit_code} (allowed: {allowed}); stderr: {stderr[-300:]!r}"
    if "internal error" in stderr:
        return stderr.strip().splitlines()[-1][:400]
    if exit_code == 2:
        lines = stderr.rstrip("\n").split("\n")  # terminal lines (str.splitlines also splits at \x1c-\x1e, …)
        if not lines or not lines[-1].startswith("Error: ") or sum("Error" in line for line in lines) != 1:
            # Progress and notes may come first ("Scraping twice…"); the error is one line, the last.
            return f"stderr does not end in one `Error: …` line: {stderr[-400:]!r}"
    elif exit_code == 0 and "--json" in case.argv:
        try:
            json.loads(stdout, parse_constant=_no_constant)
        except ValueError as exc:
            return f"--json printed no strict JSON document: {exc}"
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def run_cli(case: CliCase) -> None:
    """Run the command line in-process; raise CliProblem when it ends badly."""
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    for name, text in case.files:
        Path(scratch(name)).write_text(text, encoding="utf-8", errors="surrogatepass")
    result = CliRunner().invoke(app, list(case.argv), input=case.stdin, env=ENV, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    problem = cli_problem(case, result.exit_code, result.stdout, result.stderr)
    if problem is not None:
        where = _internal_error_location(case) if "internal error" in problem else ""
        raise CliProblem(f"{problem}{where}\n  kvplan {' '.join(map(repr, case.argv))}")


def _internal_error_location(case: CliCase) -> str:
    """` (at file.py:line)` of the kvplan line that raised, from a rerun with KVPLAN_DEBUG=1's traceback."""
    from typer.testing import CliRunner

    from kvplan.cli.app import app

    result = CliRunner().invoke(app, list(case.argv), input=case.stdin, env={**ENV, "KVPLAN_DEBUG": "1"})
    frames = re.findall(r'File "([^"]*[/\\]kvplan[/\\][^"]*)", line (\d+)', result.stderr)
    return f" (at {Path(frames[-1][0]).name}:{frames[-1][1]})" if frames else ""


def _flags(draw: st.DrawFn, flags: Sequence[str], value: st.SearchStrategy[str] = _value,
           bools: Sequence[str] = ()) -> list[str]:
    """A few of `flags` with drawn values (as `--flag=value` or `--flag value`), and some of `bools`."""
    argv: list[str] = []
    for flag in draw(st.lists(st.sampled_from(flags), max_size=4, unique=True)):
        v = draw(value)
        argv += [f"{flag}={v}"] if flag.startswith("--") and draw(st.booleans()) else [flag, v]
    if bools:
        argv += draw(st.lists(st.sampled_from(bools), max_size=2, unique=True))
    return argv


# ---------------------------------------------------------------------------------------------------
# Command lines, per command

SIZE_FLAGS = ("-tp", "-pp", "--kv-cache-dtype", "--revision")
FIT_FLAGS = (
    "--num-gpus", "-tp", "-pp", "--gpu-memory-utilization", "--max-model-len", "--max-num-seqs",
    "--max-num-batched-tokens", "--kv-cache-dtype", "--block-size", "--kv-cache-memory-bytes", "--gpu-memory",
    "--gpu-bandwidth", "--gpu-total-bytes", "--usage", "--vllm-version", "--weights-memory", "--activation-memory",
    "--non-torch-memory", "--cuda-graph-memory", "--context", "--concurrency",
)
FIT_BOOLS = ("--enforce-eager", "--no-enforce-eager", "--enable-prefix-caching", "--no-enable-prefix-caching")
ROOFLINE_FLAGS = (
    "-tp", "--kv-cache-dtype", "--context", "--batch", "--prompt", "--max-num-batched-tokens", "--max-num-seqs",
    "--gpu-memory-utilization", "--max-concurrency", "--bandwidth-efficiency", "--compute-efficiency",
)
DIAGNOSE_FLAGS = ("--timeout", "--kv-high", "--hit-rate-low", "--min-prefix-queries", "--queue-p95-high",
                  "--max-num-seqs", "--interval")
PREFIX_FLAGS = ("--docs", "--doc-tokens", "--num-requests", "--prefix-tokens", "--suffix-tokens", "--tenants",
                "--conversations", "--turns", "--user-tokens", "--reply-tokens", "--zipf-s", "--seed",
                "--trace-block-size", "--what-if-blocks", "--offload-chunk-tokens", "--kv-bytes-per-token")
PREFIX_VALUE_FLAGS = ("--kv-tokens", "--cpu-offload-tokens", "--cpu-offload-bytes", "--load-ms-per-ktok",
                      "--recompute-ms-per-ktok")
SERVE_FLAGS = ("--request-rate", "--arrival", "--prompt-len", "--output-len", "--trace-timestamp-unit",
               "--step-ms", "--ms-per-token", "--ms-per-context-ktok", "--ttft-slo", "--tpot-slo", "--kv-tokens")
SERVE_COUNT_FLAGS = ("--shared-prefix-tokens", "--seed", "--trace-block-size", "--block-size", "--max-num-seqs",
                     "--max-num-batched-tokens", "--max-model-len", "--num-gpu-blocks")


@st.composite
def size_lines(draw: st.DrawFn) -> CliCase:
    return CliCase(("size", draw(st.sampled_from(MODELS)), *_flags(draw, SIZE_FLAGS), "--json"))


@st.composite
def fit_lines(draw: st.DrawFn) -> CliCase:
    argv = ["fit", draw(st.sampled_from(MODELS))]
    if draw(st.integers(0, 4)):  # mostly one GPU; sometimes the sweep over the catalog
        argv += ["--gpu", draw(st.sampled_from(GPUS))]
    argv += _flags(draw, FIT_FLAGS, bools=FIT_BOOLS)
    if draw(st.integers(0, 5)) == 0:
        model = draw(st.sampled_from(MODELS))
        argv = ["fit", "--gpu", "h100", "--vllm-cmd", draw(vllm_commands()).replace("./m", model)]
    return CliCase((*argv, *draw(st.sampled_from(((), ("--json",), ("--json",))))))


@st.composite
def roofline_lines(draw: st.DrawFn) -> CliCase:
    argv = ("roofline", draw(st.sampled_from(MODELS)), "--gpu", draw(st.sampled_from(GPUS)),
            *_flags(draw, ROOFLINE_FLAGS))
    return CliCase((*argv, *draw(st.sampled_from(((), ("--json",))))))


@st.composite
def gpus_lines(draw: st.DrawFn) -> CliCase:
    argv = ["gpus", *draw(st.lists(st.sampled_from(GPUS) | st.text(max_size=8), max_size=1))]
    files: tuple[tuple[str, str], ...] = ()
    if draw(st.booleans()):
        files = (("gpus.yaml", draw(gpu_files())),)
        argv += ["--gpus-file", scratch("gpus.yaml")]
    return CliCase((*argv, *draw(st.sampled_from(((), ("--json",))))), files=files)


@st.composite
def diagnose_lines(draw: st.DrawFn) -> CliCase:
    source = draw(st.sampled_from(("file", "file", "file", "url")))
    files: tuple[tuple[str, str], ...] = ()
    if source == "file":
        files = (("metrics.txt", draw(exposition_texts())),)
        target = scratch("metrics.txt")
    else:  # malformed or refused, never a real host (no network in tests)
        target = draw(st.sampled_from(("http://", "http://[::1", "http://127.0.0.1:1/metrics", "ftp://x/metrics",
                                       "http://127.0.0.1:99999/metrics", "http://:80", "https://127.0.0.1:1",
                                       "http://127.0.0.1:abc/", "/nonexistent/m.txt", str(workspace()))))
    return CliCase(("diagnose", target, *_flags(draw, DIAGNOSE_FLAGS), *draw(st.sampled_from(((), ("--json",))))),
                   files=files)


@st.composite
def calibrate_lines(draw: st.DrawFn) -> CliCase:
    log = draw(startup_logs())
    if draw(st.booleans()):
        return CliCase(("calibrate", "-", *draw(st.sampled_from(((), ("--json",))))), stdin=log)
    return CliCase(("calibrate", scratch("vllm.log"), *draw(st.sampled_from(((), ("--json",))))),
                   files=(("vllm.log", log),))


@st.composite
def prefix_lines(draw: st.DrawFn) -> CliCase:
    scenario = draw(st.sampled_from(("cyclic", "shared-prefix", "chat", "zipf", "trace", "bogus")))
    argv = ["simulate", "prefix", "--scenario", scenario]
    argv += draw(st.sampled_from((["--num-gpu-blocks", "256"], ["--kv-tokens", "4096"], [])))
    files: tuple[tuple[str, str], ...] = ()
    if scenario == "trace" or draw(st.integers(0, 4)) == 0:
        files = (("trace.jsonl", "\n".join(draw(st.lists(trace_lines(), max_size=5)))),)
        argv += ["--trace", scratch("trace.jsonl")]
    argv += _flags(draw, PREFIX_FLAGS, _count) + _flags(draw, PREFIX_VALUE_FLAGS)
    return CliCase((*argv, *draw(st.sampled_from(((), ("--json",))))), files=files)


@st.composite
def serve_lines(draw: st.DrawFn) -> CliCase:
    argv = ["simulate", "serve", "--num-requests", draw(st.sampled_from(("1", "5", "20")))]
    argv += draw(st.sampled_from((["--num-gpu-blocks", "512"], ["--kv-tokens", "8192"], [])))
    files: tuple[tuple[str, str], ...] = ()
    if draw(st.integers(0, 4)) == 0:
        files = (("trace.jsonl", "\n".join(draw(st.lists(trace_lines(), max_size=5)))),)
        argv += ["--trace", scratch("trace.jsonl")]
    argv += _flags(draw, SERVE_FLAGS) + _flags(draw, SERVE_COUNT_FLAGS, _count)
    argv += draw(st.lists(st.sampled_from(("--no-enable-chunked-prefill", "--no-enable-prefix-caching")),
                          max_size=1))
    return CliCase((*argv, *draw(st.sampled_from(((), ("--json",))))), files=files)


def _check_plan(draw: st.DrawFn) -> str:
    """A plan for `kvplan check`: mostly the base plan on a local fixture model, mutated; else any plan."""
    if draw(st.integers(0, 2)) == 0:
        return draw(plan_texts())
    root: dict[str, Any] = {"doc": json.loads(json.dumps(BASE_PLAN))}
    dep = root["doc"]["deployments"][0]
    dep["model"] = draw(st.sampled_from(MODELS))
    dep["vllm_cmd"] = "vllm serve " + dep["model"] + " --max-model-len 32768"
    for _ in range(draw(st.integers(0, 3))):
        mutate(draw, root, ("value", "context", "batch", "concurrency", "gpu", "num_gpus", "max-model-len"))
    return yaml.safe_dump(root["doc"], sort_keys=False)


@st.composite
def check_lines(draw: st.DrawFn) -> CliCase:
    plan = scratch("plan.yaml")
    argv = ["check", plan, "--offline", "--format", draw(st.sampled_from(("table", "json", "junit", "github", "x")))]
    output = draw(st.sampled_from((None, None, "report.out", "missing/report.out", ".")))
    if output is not None:
        argv += ["--output", str(workspace() / output)]
    return CliCase(tuple(argv), exits=(0, 1, 2), files=(("plan.yaml", _check_plan(draw)),))


CLI_TARGETS: tuple[FuzzTarget, ...] = (
    FuzzTarget("kvplan size", size_lines(), run_cli, 30),
    FuzzTarget("kvplan fit", fit_lines(), run_cli, 60),
    FuzzTarget("kvplan roofline", roofline_lines(), run_cli, 30),
    FuzzTarget("kvplan gpus", gpus_lines(), run_cli, 25),
    FuzzTarget("kvplan diagnose", diagnose_lines(), run_cli, 30),
    FuzzTarget("kvplan calibrate", calibrate_lines(), run_cli, 30),
    FuzzTarget("kvplan simulate prefix", prefix_lines(), run_cli, 40),
    FuzzTarget("kvplan simulate serve", serve_lines(), run_cli, 40),
    FuzzTarget("kvplan check", check_lines(), run_cli, 30),
)


@pytest.mark.parametrize("target", CLI_TARGETS, ids=[t.name.removeprefix("kvplan ").replace(" ", "-")
                                                     for t in CLI_TARGETS])
def test_command_ends_in_a_result_or_one_error_line(target: FuzzTarget) -> None:
    fuzz(target, target.examples)


# ---------------------------------------------------------------------------------------------------
# The flag values the issue names, on every flag that takes a size or a count: one case each.

NAMED_VALUES = ("24GiB", "1e30", "-1", "abc")
NAMED_FLAGS = (
    ("fit", "--gpu-memory-utilization"), ("fit", "--max-model-len"), ("fit", "-tp"), ("fit", "--num-gpus"),
    ("fit", "--kv-cache-memory-bytes"), ("fit", "--gpu-memory"), ("fit", "--block-size"), ("fit", "--max-num-seqs"),
    ("fit", "--max-num-batched-tokens"), ("fit", "--gpu-total-bytes"), ("fit", "--weights-memory"),
    ("fit", "--context"), ("fit", "--concurrency"), ("fit", "--gpu-bandwidth"), ("size", "-tp"), ("size", "-pp"),
    ("roofline", "--context"), ("roofline", "--batch"), ("roofline", "--gpu-memory-utilization"),
)


@pytest.mark.parametrize("value", NAMED_VALUES)
@pytest.mark.parametrize(("command", "flag"), NAMED_FLAGS)
def test_named_flag_values_end_in_a_result_or_one_error_line(command: str, flag: str, value: str) -> None:
    argv = [command, MODELS[0], flag, value]
    if command in ("fit", "roofline") and flag != "--gpu-memory":
        argv += ["--gpu", "h100"]
    assert problem_of(run_cli, CliCase(tuple(argv))) is None, problem_of(run_cli, CliCase(tuple(argv)))


def test_the_judge_refuses_tracebacks_internal_errors_and_stray_lines() -> None:
    """cli_problem can fail: each bad outcome below is named, each good one passes."""
    case = CliCase(("size", "x", "--json"))
    assert cli_problem(case, 0, '{"a": 1}', "") is None
    assert cli_problem(case, 2, "", "Error: no such file or folder: x\n") is None
    assert cli_problem(case, 2, "", "Usage: kvplan size [OPTIONS]\n╭─ Error ─╮\n") is not None  # Typer's block
    usage_error = "Error: Invalid value for '-tp': 'abc' is not a valid int. (see 'kvplan size -h')\n"
    assert cli_problem(case, 2, "", usage_error) is None
    assert cli_problem(case, 1, "", "Error: x\n") is not None
    assert cli_problem(case, 2, "", "Error: internal error: TypeError: x (this is a kvplan bug; …)\n") is not None
    assert cli_problem(case, 2, "", "Scraping twice…\nError: x\n") is None
    assert cli_problem(case, 2, "", "Error: x\nwarning: y\n") is not None
    assert cli_problem(case, 2, "", "Error: x\nError: y\n") is not None
    assert cli_problem(case, 2, "", "Traceback (most recent call last):\n") is not None
    assert cli_problem(case, 0, '{"a": NaN}', "") is not None
    assert problem_of(lambda _: (_ for _ in ()).throw(Hang()), None) is not None  # a hang is a problem
    with time_limit(5):
        pass


# ---------------------------------------------------------------------------------------------------
# Pinned command lines: each broke once; they stay fixed.

_PLAN_HUGE_MEASURE = (f"deployments:\n  - {{name: a, model: {MODELS[0]}, gpu: h100, require: {{starts: true}},\n"
                      f"     measured: {{weights-memory: 1{'0' * 400}}}}}\n")
PINNED_CLI: tuple[tuple[str, CliCase], ...] = (
    ("fit --gpu-total-bytes 1", CliCase(("fit", MODELS[0], "--gpu", "h100", "--gpu-total-bytes", "1"))),
    ("roofline --context 1e17", CliCase(("roofline", MODELS[0], "--gpu", "h100", "--context", "1e17"))),
    ("diagnose http://[::1", CliCase(("diagnose", "http://[::1/metrics"))),
    ("diagnose --timeout nan", CliCase(("diagnose", "http://127.0.0.1:1/metrics", "--timeout", "nan"))),
    ("diagnose --timeout 1e300", CliCase(("diagnose", "http://127.0.0.1:1/metrics", "--timeout", "1e300"))),
    ("check measured 10**400 bytes", CliCase(("check", scratch("plan.yaml"), "--offline"), exits=(0, 1, 2),
                                             files=(("plan.yaml", _PLAN_HUGE_MEASURE),))),
    ("simulate serve --num-gpu-blocks 1e11", CliCase(("simulate", "serve", "--num-requests", "5",
                                                      "--num-gpu-blocks", "100000000000"))),
    ("simulate serve --kv-tokens 1e17", CliCase(("simulate", "serve", "--num-requests", "5", "--kv-tokens", "1e17"))),
    ("simulate prefix --what-if-blocks 1e11", CliCase(("simulate", "prefix", "--scenario", "cyclic",
                                                       "--num-gpu-blocks", "512", "--what-if-blocks", "100000000000"))),
    ("simulate prefix --zipf-s 1e308", CliCase(("simulate", "prefix", "--scenario", "zipf", "--zipf-s", "1e308",
                                                "--num-gpu-blocks", "512"))),
    ("check a self-merging plan", CliCase(("check", scratch("plan.yaml"), "--offline"), exits=(0, 1, 2),
                                          files=(("plan.yaml", "x-d: &d {b: 1, <<: [*d, *d]}\ndeployments: [*d]\n"),))),
    ("simulate serve --block-size 1e11", CliCase(("simulate", "serve", "--num-requests", "5", "--num-gpu-blocks",
                                                  "512", "--block-size", "100000000000"))),
    ("simulate serve --shared-prefix-tokens 1e11", CliCase(("simulate", "serve", "--num-requests", "5",
                                                            "--num-gpu-blocks", "512", "--shared-prefix-tokens",
                                                            "100000000000"))),
    ("simulate prefix --doc-tokens 1e11", CliCase(("simulate", "prefix", "--num-gpu-blocks", "512", "--doc-tokens",
                                                   "100000000000"))),
    ("simulate serve --prompt-len lognormal:1e300:1e300", CliCase(("simulate", "serve", "--num-requests", "5",
                                                                   "--num-gpu-blocks", "512", "--prompt-len",
                                                                   "lognormal:1e300:1e300"))),
    ("fit -tp abc", CliCase(("fit", MODELS[0], "--gpu", "h100", "-tp", "abc"))),
    ("an unknown command", CliCase(("nosuch",))),
    ("fit ~nosuchuser (no such home folder)", CliCase(("fit", "~nosuchuser", "--gpu", "h100"))),
)


@pytest.mark.parametrize("case", [c for _, c in PINNED_CLI], ids=[n for n, _ in PINNED_CLI])
def test_pinned_command_line_ends_in_a_result_or_one_error_line(case: CliCase) -> None:
    assert problem_of(run_cli, case) is None, problem_of(run_cli, case)
