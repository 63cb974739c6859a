"""`kvplan fit` through the real CLI (CliRunner): output, --json schema, --vllm-cmd, errors."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app

CONFIGS = Path(__file__).parent / "fixtures" / "configs"
QWEN_1_5B = str(CONFIGS / "Qwen--Qwen2.5-1.5B")
QWEN_7B = str(CONFIGS / "Qwen--Qwen2.5-7B")
GIB = 2**30

REQUIRED_JSON_PATHS = {
    "deployment.gpu", "deployment.tp", "deployment.pp", "memory.gpu_memory_utilization", "memory.requested_bytes",
    "memory.weights_bytes", "memory.activation_bytes", "memory.non_torch_bytes", "memory.cuda_graph_bytes",
    "memory.available_kv_bytes", "cache.block_size", "cache.bytes_per_block", "cache.num_gpu_blocks",
    "cache.kv_cache_tokens", "scheduler.max_model_len", "scheduler.max_concurrency", "verdict.fits",
    "verdict.estimated_max_model_len", "verdict.preemption",
}


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def run_json(runner: CliRunner, args: list[str]) -> dict:  # type: ignore[type-arg]
    result = runner.invoke(app, ["fit", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_json_holds_the_budget_and_the_plan(runner: CliRunner) -> None:
    data = run_json(runner, [QWEN_1_5B, "--gpu-memory", "80GiB", "--max-model-len", "32k"])
    assert REQUIRED_JSON_PATHS <= {f"{part}.{key}" for part, value in data.items() if isinstance(value, dict)
                                   for key in value}
    mem, cache = data["memory"], data["cache"]
    assert data["kind"] == "fit" and data["scheduler"]["max_model_len"] == 32000
    assert mem["requested_bytes"] == math.ceil(80 * GIB * 0.92)
    assert mem["available_kv_bytes"] == (mem["requested_bytes"] - mem["weights_bytes"] - mem["activation_bytes"]
                                         - mem["non_torch_bytes"] - mem["cuda_graph_bytes"])
    assert cache["bytes_per_block"] == 458_752
    assert cache["num_gpu_blocks"] == mem["available_kv_bytes"] // 458_752
    assert data["verdict"]["fits"] is True and data["verdict"]["preemption"]["concurrency"] == 1024
    assert {t["name"] for t in mem["terms"]} == {"weights", "activation", "cuda_graphs", "non_torch"}


def test_kv_cache_memory_bytes_reproduces_the_starting_document(runner: CliRunner) -> None:
    data = run_json(runner, [QWEN_1_5B, "--gpu-memory", "8GiB", "--max-model-len", "8192", "--max-num-seqs", "4",
                             "--kv-cache-memory-bytes", str(1345 * 458_752)])
    assert (data["cache"]["num_gpu_blocks"], data["cache"]["kv_cache_tokens"]) == (1345, 21_520)
    assert data["verdict"]["log_line"] == ("GPU KV cache size: 21,520 tokens, Maximum concurrency for 8,192 tokens per "
                                "request: 2.63x")


def test_human_output_shows_waterfall_log_line_and_verdict(runner: CliRunner) -> None:
    result = runner.invoke(app, ["fit", QWEN_1_5B, "--gpu-memory", "80GiB", "--max-model-len", "32768",
                                 "--kv-cache-memory-bytes", "60GiB"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "GPU KV cache size: 2,246,944 tokens, Maximum concurrency for 32,768 tokens per request: 68.57x" in out
    for text in ("Memory per GPU", "requested", "− weights", "= KV cache (--kv-cache-memory-bytes)", "█",
                 "✓ vLLM starts", "Preemption:"):
        assert text in out


def test_refusal_prints_vllms_error_and_advice_with_exit_1(runner: CliRunner) -> None:
    result = runner.invoke(app, ["fit", QWEN_7B, "--gpu-memory", "24GiB", "--max-model-len", "131072",
                                 "--gpu-memory-utilization", "0.9"], env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output  # a capacity verdict, as `kvplan check` gives
    assert "✗ vLLM does not start" in result.stdout
    assert "To serve at least one request with the model's max seq len (131072)" in result.stdout
    assert "What fixes it" in result.stdout and "--max-model-len" in result.stdout


def test_vllm_cmd_is_read_and_unknown_flags_noted_on_stderr(runner: CliRunner) -> None:
    cmd = f"vllm serve {QWEN_7B} --max-model-len 16384 -tp 2 --port 8000 --kv-cache-dtype fp8"
    result = runner.invoke(app, ["fit", "--vllm-cmd", cmd, "--gpu-memory", "80GiB"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "ignored vLLM flags that do not change the KV plan: --port 8000" in result.stderr
    data = run_json(runner, ["--vllm-cmd", cmd, "--gpu-memory", "80GiB"])
    assert (data["deployment"]["tp"], data["scheduler"]["max_model_len"], data["cache"]["kv_cache_dtype"]) == (
        2, 16384, "fp8")
    assert data["cache"]["bytes_per_block"] == 28 * 16 * 2 * 256 * 1  # 2 KV heads per rank, fp8


def test_vllm_cmd_separates_harmless_unmodelled_and_unknown_flags(runner: CliRunner) -> None:
    """Only flags that truly leave memory alone are 'ignored'; one that changes it but is not modelled is a
    warning with the reason; a flag kvplan does not know is said to be unknown, not harmless."""
    cmd = f"vllm serve {QWEN_7B} --port 8000 --swap-space 4 --frobnicate 3"
    result = runner.invoke(app, ["fit", "--vllm-cmd", cmd, "--gpu-memory", "80GiB"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    err = " ".join(result.stderr.split())
    assert "ignored vLLM flags that do not change the KV plan: --port 8000" in err
    assert "vLLM flags kvplan does not know, ignored (they may change memory): --frobnicate 3" in err
    assert "Warning: not modelled: --swap-space 4: vLLM 0.33 has no --swap-space" in err


def test_explicit_flags_win_over_the_pasted_command(runner: CliRunner) -> None:
    data = run_json(runner, ["--vllm-cmd", f"vllm serve {QWEN_7B} --max-model-len 16384", "--max-model-len", "8192",
                             "--gpu-memory", "80GiB"])
    assert data["scheduler"]["max_model_len"] == 8192


def test_num_gpus_sets_tensor_parallelism(runner: CliRunner) -> None:
    data = run_json(runner, [QWEN_7B, "--gpu-memory", "24GiB", "--num-gpus", "4", "--max-model-len", "8192"])
    assert (data["deployment"]["tp"], data["deployment"]["num_gpus"]) == (4, 4)


def test_catalog_gpu_and_measured_overrides(runner: CliRunner) -> None:
    data = run_json(runner, [QWEN_1_5B, "--gpu", "h100", "--max-model-len", "8192", "--weights-memory", "3GiB",
                             "--activation-memory", "1GiB", "--non-torch-memory", "0", "--cuda-graph-memory", "0"])
    assert data["deployment"]["gpu"] == "h100-sxm" and data["cache"]["block_size"] == 16
    assert data["memory"]["available_kv_bytes"] == data["memory"]["requested_bytes"] - 4 * GIB


def test_sweep_without_gpu_lists_options(runner: CliRunner) -> None:
    result = runner.invoke(app, ["fit", QWEN_7B, "--max-model-len", "32768", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["kind"] == "fit-sweep" and data["rows"]
    counts = [row["num_gpus"] for row in data["rows"]]
    assert counts == sorted(counts) and counts[0] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--gpu-memory-utilization", "1.2"], "--gpu-memory-utilization must be in (0, 1]"),
     (["-tp", "3"], "does not divide the 28 attention heads"),
     (["--max-model-len", "1000000"], "greater than the derived max_model_len"),
     (["--max-model-len", "-5"], "--max-model-len"),
     (["--gpu", "h1000"], "unknown GPU"),
     (["--kv-cache-memory-bytes", "lots"], "--kv-cache-memory-bytes"),
     (["--usage", "batch"], "--usage must be serve or llm"),
     (["--vllm-version", "0.5"], "V1 engine")],
)
def test_bad_input_is_one_error_line_and_exit_2(runner: CliRunner, args: list[str], message: str) -> None:
    extra = [] if "--gpu" in args else ["--gpu-memory", "80GiB"]
    result = runner.invoke(app, ["fit", QWEN_7B, *extra, *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("Error: ") and message in result.stderr
    assert result.stdout == ""


def test_missing_model_is_an_error(runner: CliRunner) -> None:
    result = runner.invoke(app, ["fit", "--gpu-memory", "80GiB"])
    assert result.exit_code == 2 and "a model is needed" in result.stderr


def test_long_max_model_len_needs_1_or_true_as_vllm_reads_it(runner: CliRunner) -> None:
    """envs.py: VLLM_ALLOW_LONG_MAX_MODEL_LEN is on for "1" or "true" only ("0" kept it on before)."""
    result = runner.invoke(app, ["fit", QWEN_1_5B, "--gpu-memory", "80GiB", "--max-model-len", "262144", "--json"],
                           env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "0"})
    assert result.exit_code == 2 and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in result.stderr


@pytest.mark.parametrize(("env", "runner_name", "in_flight"), [
    ({"VLLM_USE_V2_MODEL_RUNNER": "0"}, "V1", 2 * 8192), ({}, "V2", 3 * 8192)])
def test_vllms_model_runner_variable_decides_the_runner(runner: CliRunner, env: dict[str, str], runner_name: str,
                                                        in_flight: int) -> None:
    result = runner.invoke(app, ["fit", QWEN_1_5B, "--gpu", "h100", "--pipeline-parallel-size", "2", "--json"],
                           env=env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["deployment"]["model_runner"], data["scheduler"]["in_flight_tokens"]) == (runner_name, in_flight)


def test_vllms_graph_estimate_variable_0_subtracts_no_graphs(runner: CliRunner) -> None:
    result = runner.invoke(app, ["fit", QWEN_1_5B, "--gpu", "h100", "--json"],
                           env={"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0"})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["memory"]["cuda_graph_bytes"] == 0
    bad = runner.invoke(app, ["fit", QWEN_1_5B, "--gpu", "h100"], env={"VLLM_USE_V2_MODEL_RUNNER": "yes"})
    assert bad.exit_code == 2 and "VLLM_USE_V2_MODEL_RUNNER='yes': vLLM reads it as an integer" in bad.stderr


def test_long_max_model_len_allowed_with_vllms_environment_variable(runner: CliRunner) -> None:
    result = runner.invoke(app, ["fit", QWEN_1_5B, "--gpu-memory", "80GiB", "--max-model-len", "262144", "--json"],
                           env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["scheduler"]["max_model_len"] == 262_144


def test_a_pasted_commands_vllm_variables_count_and_other_assignments_are_dropped(runner: CliRunner) -> None:
    cmd = (f"HF_TOKEN=hf_secret VLLM_USE_V2_MODEL_RUNNER=0 vllm serve {QWEN_1_5B} --pipeline-parallel-size 2 "
           "--max-model-len 4096")
    result = runner.invoke(app, ["fit", "--gpu", "h100", "--vllm-cmd", cmd, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["deployment"]["model_runner"], data["settings_sources"]["model_runner"]) == (
        "V1", "VLLM_USE_V2_MODEL_RUNNER=0")
    assert "hf_secret" not in result.stdout + result.stderr
