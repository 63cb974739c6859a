"""Bugs the previous session noticed and left, each pinned: `check` plans a Hub model with the same stored weight
bytes as `fit` (one shared step, kvplan/vllm/loading.py:with_stored_weights and
kvplan/vllm/memory/weights.py:given_or_estimated_weights), the catalog sweep refuses one GPU's measured total,
the library refuses a wrongly typed argument the way the command would, and every stderr notice is spelt one
way (kvplan/cli/common.py:notice)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvplan
from kvplan.errors import InvalidParameter, KvplanError, UnknownGpu
from tests.conftest import CONFIGS, json_out, run_kvplan
from tests.hubserver import HubServer

QWEN_7B = str(CONFIGS / "Qwen--Qwen2.5-7B")
# The test Hub's Qwen2.5-1.5B has a safetensors header of the embedding and the final norm only:
# (151936 × 1536 + 1536) × 2 = 466,750,464 stored bytes, against 3,087,428,608 analytic (tests/conftest.py).
STORED = 466_750_464


def _env(hub: HubServer, tmp_path: Path) -> dict[str, str]:
    return {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1"}


def _plan(tmp_path: Path, body: str) -> str:
    path = tmp_path / "plan.yaml"
    path.write_text("deployments:\n" + body, encoding="utf-8")
    return str(path)


# --- check plans a Hub model as fit does ------------------------------------------------------------------------


def test_check_uses_the_hubs_stored_weight_bytes_as_fit_does(hub: HubServer, tmp_path: Path) -> None:
    env = _env(hub, tmp_path)
    plan = _plan(tmp_path, "  - name: q\n    model: Qwen/Qwen2.5-1.5B\n    gpu: h100\n"
                           "    vllm: {max-model-len: 8192}\n    require: {starts: true}\n")
    fit = json_out(run_kvplan(["fit", "Qwen/Qwen2.5-1.5B", "--gpu", "h100", "--max-model-len", "8192", "--json"],
                              env))
    check = run_kvplan(["check", plan, "--format", "json"], env)
    dep = json_out(check)["deployments"][0]
    # With the analytic 3,087,428,608 bytes `check` had 154,749 blocks; with the stored bytes, fit's 160,157
    # (160,462 before MRV2_UNSEEN_BYTES went from 0.40 to 0.53 GiB).
    assert (dep["num_gpu_blocks"], dep["kv_cache_tokens"]) == (fit["cache"]["num_gpu_blocks"],
                                                               fit["cache"]["kv_cache_tokens"])
    assert (dep["num_gpu_blocks"], dep["kv_cache_tokens"]) == (160_157, 2_562_512)
    assert "Warning: the Hub's safetensors metadata holds 0.43 GiB of weights" in check.stderr


def test_check_of_an_sglang_deployment_uses_the_stored_weight_bytes_as_fit_does(hub: HubServer,
                                                                                 tmp_path: Path) -> None:
    env = _env(hub, tmp_path)
    plan = _plan(tmp_path, "  - name: s\n    engine: sglang\n    model: Qwen/Qwen2.5-1.5B\n    gpu: h100\n"
                           "    sglang: {context-length: 8192}\n    require: {starts: true}\n")
    fit = json_out(run_kvplan(["fit", "Qwen/Qwen2.5-1.5B", "--gpu", "h100", "--engine", "sglang",
                               "--context-length", "8192", "--json"], env))
    dep = json_out(run_kvplan(["check", plan, "--format", "json"], env))["deployments"][0]
    assert dep["kv_cache_tokens"] == fit["max_total_num_tokens"] == 2_428_144


def test_measured_weights_in_a_plan_win_over_the_stored_bytes(hub: HubServer, tmp_path: Path) -> None:
    env = _env(hub, tmp_path)
    plan = _plan(tmp_path, "  - name: q\n    model: Qwen/Qwen2.5-1.5B\n    gpu: h100\n"
                           "    vllm: {max-model-len: 8192}\n    measured: {weights-memory: 3GiB}\n"
                           "    require: {starts: true}\n")
    fit = json_out(run_kvplan(["fit", "Qwen/Qwen2.5-1.5B", "--gpu", "h100", "--max-model-len", "8192",
                               "--weights-memory", "3GiB", "--json"], env))
    dep = json_out(run_kvplan(["check", plan, "--format", "json"], env))["deployments"][0]
    assert fit["memory"]["weights_bytes"] == 3 * 2**30
    assert dep["num_gpu_blocks"] == fit["cache"]["num_gpu_blocks"]


def test_the_shared_step_keeps_measured_weights_and_takes_stored_bytes_otherwise() -> None:
    from kvplan.model.hub import WeightsInfo
    from kvplan.vllm.loading import with_stored_weights
    from kvplan.vllm.settings import ServeSettings

    stored = WeightsInfo(bytes=STORED, parameters_by_dtype={"BF16": STORED // 2})
    assert with_stored_weights(ServeSettings(), stored).measured.weights_total_bytes == STORED
    assert with_stored_weights(ServeSettings(), None).measured.weights_total_bytes is None
    measured = ServeSettings.of(weights_bytes=3 * 2**30)
    assert with_stored_weights(measured, stored) is measured


# --- the catalog sweep has no one GPU for --gpu-total-bytes ---------------------------------------------------------


@pytest.mark.parametrize("flags, message", [
    (["--gpu-total-bytes", "70GiB"],
     "Error: --gpu-total-bytes is measured on one GPU: the catalog sweep (no --gpu) cannot use it "
     "(name that GPU with --gpu)\n"),
    (["--gpu-bandwidth", "1TB/s"],
     "Error: --gpu-bandwidth describes a custom GPU: give --gpu-memory with it (a catalog GPU keeps its datasheet "
     "bandwidth (kvplan gpus ID))\n"),
])
def test_the_vllm_sweep_refuses_one_gpus_flags_instead_of_ignoring_them(flags: list[str], message: str) -> None:
    proc = run_kvplan(["fit", QWEN_7B, *flags])
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", message)
    piped = run_kvplan(["fit", "--vllm-cmd", f"vllm serve {QWEN_7B}", *flags, "--json"])
    assert (piped.returncode, piped.stdout, piped.stderr) == (2, "", message)


def test_the_library_sweep_refuses_a_measured_total_too() -> None:
    with pytest.raises(InvalidParameter, match="--gpu-total-bytes is measured on one GPU"):
        kvplan.fit(QWEN_7B, gpu_total_bytes="70GiB")


def test_a_measured_total_with_a_gpu_still_plans() -> None:
    report = kvplan.fit(QWEN_7B, "h100", gpu_total_bytes="70GiB", max_model_len=32768)
    assert report.verdict.fits


# --- the library refuses a wrong type as the command refuses a bad word ---------------------------------------------


def test_a_number_for_the_gpu_is_read_as_the_command_reads_it() -> None:
    with pytest.raises(UnknownGpu) as lib:
        kvplan.fit(QWEN_7B, 123)  # type: ignore[arg-type]
    proc = run_kvplan(["fit", QWEN_7B, "--gpu", "123"])
    assert proc.returncode == 2
    assert proc.stderr == f"Error: {lib.value} ({lib.value.hint})\n"
    assert proc.stderr == "Error: unknown GPU '123' (run `kvplan gpus` for the list)\n"


@pytest.mark.parametrize("call, message", [
    (lambda: kvplan.fit(QWEN_7B, ["h100"]), "--gpu: expected text, got list ['h100']"),
    (lambda: kvplan.fit(QWEN_7B, "h100", num_gpus=[2]), "--num-gpus: expected text, got list [2]"),
    (lambda: kvplan.fit(QWEN_7B, "h100", gpu_memory={"a": 1}), "--gpu-memory: expected text, got dict {'a': 1}"),
    (lambda: kvplan.size(QWEN_7B, tp=True), "--tensor-parallel-size: expected a whole number, got True"),
    (lambda: kvplan.size(QWEN_7B, tp="x"),
     "--tensor-parallel-size: cannot read 'x' as a whole number (examples: 4096, 32k, 32K)"),
    (lambda: kvplan.size(QWEN_7B, kv_cache_dtype=8), "--kv-cache-dtype '8' is not one of auto, bfloat16"),
    (lambda: kvplan.check(object()), "PLAN: expected text, got object"),
])
def test_the_library_refuses_a_wrongly_typed_argument_with_a_kvplan_error(call: object, message: str) -> None:
    with pytest.raises(KvplanError) as exc:
        call()  # type: ignore[operator]
    assert str(exc.value).startswith(message)


def test_the_library_reads_digits_given_as_numbers_or_text_alike() -> None:
    assert kvplan.size(QWEN_7B, tp="2").tp == kvplan.size(QWEN_7B, tp=2).tp == 2  # type: ignore[arg-type]
    by_text = kvplan.fit(QWEN_7B, "h100", num_gpus="2")  # type: ignore[arg-type]
    by_int = kvplan.fit(QWEN_7B, "h100", num_gpus=2)
    assert json.dumps(by_text.cache.num_gpu_blocks) == json.dumps(by_int.cache.num_gpu_blocks)  # type: ignore[union-attr]


# --- every stderr notice is spelt one way ------------------------------------------------------------------------


@pytest.mark.parametrize("args, line", [
    (["roofline", QWEN_7B, "--gpu", "h100", "--context", "200000", "--json"],
     "Warning: --context 200,000 exceeds the model's max_model_len 131,072\n"),
    (["roofline", QWEN_7B, "--gpu", "h100", "--engine", "sglang", "--json"],
     "Note: KV capacity, running-request cap and prefill chunk by SGLang 0.5.23's rules; the speed model is the "
     "same (fitted on vLLM and other engines' runs)\n"),
    (["fit", "--vllm-cmd", f"vllm serve {QWEN_7B} --port 8000", "--gpu", "h100"],
     "Note: ignored vLLM flags that do not change the KV plan: --port 8000\n"),
    (["fit", "--engine", "sglang", "--gpu", "h100", "--sglang-cmd",
      f"python -m sglang.launch_server --model-path {QWEN_7B} --port 30000"],
     "Note: ignored SGLang flags that do not change the KV plan: --port 30000\n"),
])
def test_each_commands_notice_is_one_capitalised_stderr_line(args: list[str], line: str) -> None:
    proc = run_kvplan(args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == line


def test_no_command_spells_a_notice_of_its_own() -> None:
    """Every `Warning:` / `Note:` on stderr comes from kvplan/cli/common.py:notice; no other spelling
    (`warning:`, `note:`) is written in kvplan/cli/."""
    import re

    cli = Path(kvplan.__file__).parent / "cli"
    spelt = re.compile(r"""["'](?:[Ww]arning|[Nn]ote): """)
    found = [f"{p.name}:{n}" for p in sorted(cli.glob("*.py")) if p.name != "common.py"
             for n, text in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if spelt.search(text)]
    assert found == []
