"""A first-time user's inputs to the engine surfaces (fit/size/roofline/check with --engine sglang|both, pasted
launch lines, plan files, gpus): each bad input is one `Error: …` line and exit 2, never silently dropped."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

QWEN = str(Path(__file__).parent / "fixtures/configs/Qwen--Qwen2.5-7B")


def _kvplan(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVPLAN_"))}
    env["COLUMNS"] = "80"  # a plain terminal's width: the tables must not cut a number
    return subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, check=False,
                          env=env)


def _one_error(r: subprocess.CompletedProcess[str], message: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0] and "internal error" not in r.stderr, r.stderr


@pytest.mark.parametrize(("extra", "message"), [
    (("-tp", "0"), "--tp-size must be ≥ 1, got 0"),
    (("-pp", "0"), "--pp-size must be ≥ 1, got 0"),
])
def test_engine_sglang_checks_vllms_tp_and_pp_spellings_as_sglang_does(extra: tuple[str, ...], message: str) -> None:
    # -tp / -pp are SGLang's --tp / --pp too (kvplan.cli.options): a 0 is SGLang's own refusal, not "a vLLM flag"
    _one_error(_kvplan("fit", QWEN, "--gpu", "h100", "--engine", "sglang", *extra), message)


@pytest.mark.parametrize(("extra", "flag"), [
    (("--num-gpus", "0"), "--num-gpus"),
    (("--max-num-seqs", "0"), "--max-num-seqs"),
    (("--gpu-memory-utilization", "0"), "--gpu-memory-utilization"),
    (("--no-enforce-eager",), "--enforce-eager"),
    (("--no-enable-prefix-caching",), "--enable-prefix-caching"),
])
def test_engine_sglang_refuses_a_vllm_flag_given_as_zero_or_no(extra: tuple[str, ...], flag: str) -> None:
    # A vLLM flag whose value is 0 / False used to pass the `v not in (None, False)` filter (0 == False): the
    # plan ran with exit 0 and the flag silently dropped.
    _one_error(_kvplan("fit", QWEN, "--gpu", "h100", "--engine", "sglang", *extra),
               f"{flag} is a vLLM flag: --engine sglang plans with SGLang's flags")


def test_engine_sglang_names_the_env_flag_as_the_user_typed_it() -> None:
    _one_error(_kvplan("fit", QWEN, "--gpu", "h100", "--engine", "sglang", "--env", "VLLM_USE_V2_MODEL_RUNNER=1"),
               "--env is a vLLM flag")


@pytest.mark.parametrize("gpu", [("--gpu", "h100"), ()])
def test_sglang_refuses_more_pipeline_stages_than_layers(gpu: tuple[str, ...]) -> None:
    # utils/common.py:make_layers asserts num_hidden_layers >= pp_size (Qwen2.5-7B: 28 layers). kvplan planned
    # PP 29 / 100 with empty stages (a zero-byte cell; the pool's range 957,181 … 965,732 beside 131,072 tokens)
    # and exit 0; the sweep (no --gpu) skipped every GPU for a head split and exited 1.
    r = _kvplan("fit", "--sglang-cmd", f"python -m sglang.launch_server --model-path {QWEN} --pp-size 29", *gpu)
    _one_error(r, "AssertionError: assert not pp_size or num_hidden_layers >= pp_size "
                  "(utils/common.py:make_layers; 28 layers, pp_size 29)")


def test_sglang_plans_as_many_pipeline_stages_as_layers() -> None:
    r = _kvplan("fit", "--sglang-cmd", f"python -m sglang.launch_server --model-path {QWEN} --pp-size 28",
                "--gpu", "h100", "--json")
    assert r.returncode == 0, r.stderr


def test_sglang_sweep_table_cuts_no_header_and_no_cell_at_80_columns() -> None:
    # Rich folded the mem_fraction_static header ("mem_fraction_s" / "tatic") and wrapped "15 at" / "131,072"
    r = _kvplan("fit", QWEN, "--engine", "sglang")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    header = next(line for line in lines if line.startswith("GPU "))
    assert header.split() == ["GPU", "TP", "mem_fraction_static", "pool", "tokens", "requests", "requests"]
    h200 = next(line for line in lines if line.startswith("h200 "))
    assert h200.split() == ["h200", "1", "0.903", "2,087,606", "4,096", "15", "at", "131,072"]


@pytest.mark.parametrize("command", [("fit", "--gpu", "h100", "--engine", "sglang"),
                                     ("roofline", "--gpu", "h100", "--engine", "sglang")])
def test_sglang_refuses_a_nan_context_length_in_config_json(tmp_path: Path, command: tuple[str, ...]) -> None:
    # Python's json (so transformers and SGLang) reads NaN; SGLang's get_context_length
    # (utils/hf_transformers/common.py) then fails on int(rope_scaling_factor * val): ValueError, no server.
    # kvplan raised the same ValueError as an internal error instead of one `Error: config.json: …` line.
    import json

    config = json.loads((Path(QWEN) / "config.json").read_text())
    config["max_position_embeddings"] = float("nan")
    (tmp_path / "config.json").write_text(json.dumps(config))
    _one_error(_kvplan(command[0], str(tmp_path), *command[1:]), "max_position_embeddings")


def test_sglang_sweep_refuses_a_model_sglang_cannot_load_once_with_exit_2() -> None:
    # Qwen2.5-Omni's Qwen2_5OmniModel has no SGLang class (resolve_transformers_arch): `--gpu h100` exits 2 with
    # SGLang's words, but the sweep skipped every catalog GPU with the same words and exited 1 ("no GPU
    # serves it"), where vLLM's sweep refuses an unsupported architecture once, exit 2.
    omni = str(Path(__file__).parent / "fixtures/corpus/configs/Qwen--Qwen2.5-Omni-3B")
    for gpu in (("--gpu", "h100"), ()):
        _one_error(_kvplan("fit", omni, "--engine", "sglang", *gpu),
                   "Cannot find model module. 'Qwen2_5OmniModel' is not a registered model")


GEMMA3 = str(Path(__file__).parent / "fixtures/configs/google--gemma-3-4b-it")


@pytest.mark.parametrize(("model", "extra", "flag"), [
    # vLLM planned max_model_len 8,192 beside SGLang's context_len 131,072 (SGLang's plan reads the config as is)
    (QWEN, ("--hf-overrides", '{"max_position_embeddings": 8192}'), "--hf-overrides"),
    # vLLM dropped Gemma-3's vision tower (KV budget 59.31 GiB, not 58.53) while SGLang's plan loads it
    (GEMMA3, ("--limit-mm-per-prompt", '{"image": 0}'), "--limit-mm-per-prompt / --language-model-only"),
    (GEMMA3, ("--language-model-only",), "--limit-mm-per-prompt / --language-model-only"),
    # LoRA adapter slots reserved in vLLM's budget only
    (QWEN, ("--enable-lora",), "--enable-lora"),
], ids=["hf-overrides", "image-0", "language-model-only", "enable-lora"])
def test_engine_both_refuses_vllm_settings_sglangs_plan_does_not_take(model: str, extra: tuple[str, ...],
                                                                      flag: str) -> None:
    _one_error(_kvplan("fit", model, "--gpu", "h100", "--engine", "both", *extra),
               f"--engine both compares one deployment: {flag}")


@pytest.mark.parametrize(("model", "extra"), [
    (GEMMA3, ("--limit-mm-per-prompt", '{"image": 2}')),  # the tower stays loaded in both
    (QWEN, ("--language-model-only",)),  # a text model: nothing to drop
    (QWEN, ("--no-enable-lora",)),
], ids=["image-2", "text-model-language-only", "no-enable-lora"])
def test_engine_both_takes_vllm_settings_that_leave_one_deployment(model: str, extra: tuple[str, ...]) -> None:
    r = _kvplan("fit", model, "--gpu", "h100", "--engine", "both", "--json", *extra)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("line", [f"python -m sglang.launch_server --model-path {QWEN} --tp 2",
                                  f"/opt/venv/bin/sglang serve {QWEN}"], ids=["launch_server", "sglang-serve"])
def test_vllm_cmd_refuses_an_sglang_line_as_sglang_cmd_refuses_a_vllm_one(line: str) -> None:
    # The vLLM reader took `--model-path M --tp 2` as unknown vLLM flags (a Note) and then asked for a model;
    # `sglang serve M` planned M by vLLM's rules with exit 0.
    from kvplan.errors import ParseError
    from kvplan.vllm.command_line import parse_vllm_command

    with pytest.raises(ParseError, match="--vllm-cmd: this is an SGLang command line, not vLLM's"):
        parse_vllm_command(line)
    _one_error(_kvplan("fit", "--gpu", "h100", "--vllm-cmd", line), "this is an SGLang command line")


@pytest.mark.parametrize(("cap", "low", "high"), [("100000", 100_000, 100_000), ("950000", 945_505, 950_000)])
def test_sglang_token_range_holds_the_capped_pool_it_is_printed_beside(cap: str, low: int, high: int) -> None:
    # --max-total-tokens caps max_total_num_tokens (server_args.max_total_tokens, the configurator's MIN), and
    # the range was the uncapped budget ÷ cell: "100,000  range 945,505 … 962,370" (H100, Qwen2.5-7B).
    import json

    r = _kvplan("fit", QWEN, "--gpu", "h100", "--engine", "sglang", "--max-total-tokens", cap, "--json")
    doc = json.loads(r.stdout)
    assert doc["max_total_num_tokens"] == min(int(cap), 956_600)
    assert doc["max_total_num_tokens_range"] == [low, high]
