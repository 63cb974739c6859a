"""Bad input to the SGLang commands (fit --engine sglang|both, size --engine sglang, a pasted launch_server line):
one `Error: …` line and exit 2, never an internal error, never a silently dropped word."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.errors import InvalidParameter, ParseError
from kvplan.sglang.command_line import parse_sglang_command
from kvplan.sglang.defaults import SglangDeployment, check_deployment

QWEN = str(Path(__file__).parent / "fixtures/configs/Qwen--Qwen2.5-7B")


def _kvplan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, check=False)


@pytest.mark.parametrize(("args", "message"), [
    (("fit", QWEN, "--gpu", "h100", "--engine", "sglang", "--tp", "0"), "--tp-size must be ≥ 1, got 0"),
    (("fit", QWEN, "--engine", "sglang", "--tp", "0"), "--tp-size must be ≥ 1, got 0"),
    # --tp is -tp (kvplan.cli.options): 0 is vLLM's refusal too, not a second TP
    (("fit", QWEN, "--gpu", "h100", "--engine", "both", "--tp", "0"), "--tensor-parallel-size must be ≥ 1, got 0"),
    (("fit", QWEN, "--gpu", "h100", "--engine", "sglang", "--context-length", "0"),
     "--context-length must be ≥ 1, got 0"),
    (("size", QWEN, "--engine", "sglang", "-tp", "0"), "--tensor-parallel-size must be ≥ 1, got 0"),
    (("size", QWEN, "--engine", "sglang", "-tp", "-1"), "--tensor-parallel-size must be ≥ 1, got -1"),
    (("fit", "--sglang-cmd", f"python -m sglang.launch_server --model-path {QWEN}", "--gpu", "h100", "--engine",
      "vllm"), "--sglang-cmd plans with SGLang's rules, not --engine vllm"),
    (("fit", "--sglang-cmd", f"vllm serve {QWEN}", "--gpu", "h100"), "this is a vllm command line"),
    (("fit", QWEN, "--engine", "sglang", "--sglang-weight-log", "Load weight end. type=Qwen2ForCausalLM, "
      "dtype=torch.bfloat16, avail mem=60.00 GB, mem usage=14.30 GB."),
     "--sglang-weight-log is measured on one GPU: the catalog sweep (no --gpu) cannot use it"),
    (("fit", QWEN, "--engine", "sglang", "--gpu-total-bytes", "80GiB"), "--gpu-total-bytes is measured on one GPU"),
    (("fit", QWEN, "--gpu", "h100", "--sglang-cmd", "python -m sglang.launch_server --model-path m "
      "--json-model-override-args '{\"num_hidden_layers\": 14'"),
     "--json-model-override-args: not valid JSON (Expecting ',' delimiter at character 24)"),
    (("fit", QWEN, "--sglang-cmd", "python -m sglang.launch_server --model-path m --json-model-override-args "
      "'{\"num_attention_heads\": 0}'"), "num_attention_heads"),
])
def test_sglang_bad_values_are_one_error_line_exit_2(args: tuple[str, ...], message: str) -> None:
    r = _kvplan(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0] and "internal error" not in r.stderr, r.stderr


@pytest.mark.parametrize(("field", "value", "flag"), [
    ("context_length", 0, "--context-length"), ("context_length", -1, "--context-length"),
    ("max_total_tokens", -100, "--max-total-tokens"), ("max_total_tokens", 0, "--max-total-tokens"),
    ("max_running_requests", -1, "--max-running-requests"), ("max_running_requests", 0, "--max-running-requests"),
])
def test_deployment_refuses_counts_below_one(field: str, value: int, flag: str) -> None:
    with pytest.raises(InvalidParameter, match=f"{flag} must be ≥ 1, got {value}"):
        check_deployment(SglangDeployment(**{field: value}))  # type: ignore[arg-type]


def test_sglang_serve_takes_its_positional_model() -> None:
    # sglang/cli/serve.py:_normalize_positional_model_path: `sglang serve M` is `--model-path M`
    cmd = parse_sglang_command("sglang serve Qwen/Qwen2.5-7B --tp 2")
    assert cmd.model == "Qwen/Qwen2.5-7B" and cmd.options == {"tp_size": "2"} and cmd.ignored == ()


@pytest.mark.parametrize(("line", "message"), [
    ("python -m sglang.launch_server Qwen/Qwen2.5-7B --tp 2", "unrecognized arguments: Qwen/Qwen2.5-7B"),
    ("python -m sglang.launch_server --model-path m --enable-dp-attention=maybe",
     "argument --enable-dp-attention: ignored explicit argument 'maybe'"),
    ("/opt/bin/vllm serve m --tp 2", "this is a vllm command line"),
])
def test_pasted_line_refuses_words_argparse_refuses(line: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_sglang_command(line)


def test_plan_with_sglang_tp_0_is_a_plan_error_not_an_internal_one(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"deployments:\n  - name: x\n    model: {QWEN}\n    gpu: h100\n    engine: sglang\n"
                    "    sglang: {tp: 0}\n    require: {starts: true}\n")
    r = _kvplan("check", str(plan))
    assert r.returncode == 2 and "deployments[0].sglang: --tp-size must be ≥ 1, got 0" in r.stderr, r.stderr


@pytest.mark.parametrize(("extra", "message"), [
    (("--max-num-seqs", "4"), "--max-num-seqs is a vLLM flag: --engine sglang takes SGLang's"),
    (("--max-num-batched-tokens", "512"), "--max-num-batched-tokens is a vLLM flag"),
    (("--gpu-memory-utilization", "0.5"), "--gpu-memory-utilization is a vLLM flag"),
    (("--vllm-cmd", f"vllm serve {QWEN} --speculative-config "
                    "'{\"method\": \"ngram\", \"num_speculative_tokens\": 3}'"),
     "--engine sglang: speculative decoding is not modelled for SGLang yet"),
])
def test_roofline_engine_sglang_refuses_what_it_would_replace(extra: tuple[str, ...], message: str) -> None:
    r = _kvplan("roofline", QWEN, "--gpu", "h100", "--engine", "sglang", "--batch", "1", *extra)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_roofline_engine_sglang_names_sglangs_cap() -> None:
    r = _kvplan("roofline", QWEN, "--gpu", "h100", "--engine", "sglang", "--context", "256", "--batch", "1")
    text = " ".join(r.stdout.split())
    assert r.returncode == 0, r.stderr
    # SGLang's pool at 256 tokens holds more requests than max_running_requests (3,736 on one H100)
    assert "SGLang runs at most 3,736 at once (max_running_requests)" in text and "vLLM runs" not in text
    doc = json.loads(_kvplan("roofline", QWEN, "--gpu", "h100", "--engine", "sglang", "--batch", "1",
                             "--json").stdout)
    assert doc["kind"] == "roofline" and doc["engine"] == "sglang" and doc["max_num_seqs"] == 3736


@pytest.mark.parametrize(("extra", "message"), [
    (("--max-model-len", "4096", "--context-length", "8192"),
     "SGLang's --context-length 8192 differs from vLLM's --max-model-len 4096"),
    (("--context-length", "4096"), "SGLang's --context-length 4096 differs from vLLM's default max_model_len"),
    (("--gpu-memory", "24GiB"), "--engine both plans a catalog GPU: --gpu-memory / --gpu-bandwidth"),
])
def test_engine_both_refuses_two_deployments_in_one(extra: tuple[str, ...], message: str) -> None:
    r = _kvplan("fit", QWEN, "--gpu", "h100", "--engine", "both", *extra)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_requests_at_rounds_the_context_up_to_whole_pages_and_caps_at_max_running() -> None:
    from kvplan.hardware.gpus import get_gpu
    from kvplan.model.hub import load_local
    from kvplan.sglang.fit import plan_sglang_fit, requests_at

    spec = load_local(QWEN)
    fit = plan_sglang_fit(spec, get_gpu("h100"), SglangDeployment(page_size=64), weights_bytes=15_231_233_024,
                          weights_range=(15_231_233_024, 15_231_233_024))
    tokens = fit.max_total_num_tokens
    assert requests_at(fit, 4096) == min(tokens // 4096, fit.max_running_requests)
    assert requests_at(fit, 4097) == tokens // (4096 + 64)  # 4,097 tokens take 65 pages of 64
    assert requests_at(fit, 1) == fit.max_running_requests  # one page each: the cap decides


@pytest.mark.parametrize(("body", "message"), [
    ("sglang: {tp: 2.5}", "deployments[0].sglang: --tp-size: invalid value 2.5 (a whole number)"),
    ("sglang: {tp: true}", "deployments[0].sglang: --tp-size: invalid value True (a whole number)"),
    ("sglang: {tp: 2, tp-size: 4}", "deployments[0].sglang.tp-size: --tp-size given twice (--tp and --tp-size)"),
    ("sglang: {model-path: /elsewhere}", "deployments[0].sglang.model-path: the model goes in the deployment's"),
    ('sglang_cmd: ""', "deployments[0].sglang_cmd: expected a non-empty string"),
    ("sglang: {pp-size: 2}\n    num_gpus: 1", "deployments[0].num_gpus: 1 GPUs are not a whole number of SGLang's 2"),
])
def test_plan_sglang_keys_read_as_sglangs_argparse_would(tmp_path: Path, body: str, message: str) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"deployments:\n  - name: x\n    model: {QWEN}\n    gpu: h100\n    engine: sglang\n"
                    f"    {body}\n    require: {{starts: true}}\n")
    r = _kvplan("check", str(plan))
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error:")]
    assert r.returncode == 2 and len(errors) == 1 and message in errors[0], r.stderr
    assert errors[0].count("plan.yaml:") == 1  # located once


@pytest.mark.parametrize("extra", [
    ("--quantization", "fp8"), ("--cpu-offload-gb", "4"), ("--kv-cache-memory-bytes", "20GiB"),
    ("--num-gpu-blocks-override", "1000"), ("--vllm-cmd", f"vllm serve {QWEN} --kv-cache-memory-bytes 20GiB"),
])
def test_engine_both_refuses_vllm_settings_sglangs_plan_does_not_take(extra: tuple[str, ...]) -> None:
    r = _kvplan("fit", QWEN, "--gpu", "h100", "--engine", "both", *extra)
    assert r.returncode == 2 and "--engine both compares one deployment: --" in r.stderr, r.stderr


def test_engine_both_takes_the_checkpoints_own_quantization() -> None:
    fp8 = str(Path(__file__).parent / "fixtures/configs/nvidia--Llama-3.1-70B-Instruct-FP8")
    r = _kvplan("fit", fp8, "--gpu", "h100", "--engine", "both", "-tp", "2", "-q", "modelopt", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["kind"] == "fit-compare", r.stderr


def test_engine_both_checks_sglangs_attention_dp_at_vllms_tp() -> None:
    # SGLang's --tp follows vLLM's -tp 2, so --dp 2 --enable-dp-attention is attention TP 1, not "tp 1 % 2"
    r = _kvplan("fit", QWEN, "--gpu", "h100", "--engine", "both", "-tp", "2", "--dp", "2", "--enable-dp-attention",
                "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["sglang"]["engine"] == "sglang"


def test_sweep_with_attention_dp_tries_the_tps_that_divide_it() -> None:
    # --dp 2 --enable-dp-attention without --tp: the sweep starts at TP 1 (refused by SGLang: 1 % 2) and goes on
    r = _kvplan("fit", QWEN, "--engine", "sglang", "--dp", "2", "--enable-dp-attention", "--json")
    assert r.returncode == 0, r.stderr
    h100 = next(row for row in json.loads(r.stdout)["rows"] if row["gpu"] == "h100-sxm")
    assert h100["tp"] == 2


def test_plan_num_gpus_sets_sglangs_tp_before_the_attention_dp_rule(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"deployments:\n  - name: x\n    model: {QWEN}\n    gpu: h100\n    engine: sglang\n"
                    "    num_gpus: 2\n    sglang: {dp: 2, enable-dp-attention: true}\n    require: {starts: true}\n")
    r = _kvplan("check", str(plan))
    assert r.returncode == 0, r.stderr
