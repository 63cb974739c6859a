"""Which architectures vLLM serves, by version (kvplan/vllm/architectures.json from each release's registry.py)."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.vllm.architectures import is_served, not_served_reason, served_runs
from kvplan.vllm.defaults import VllmVersion
from tests.conftest import CONFIGS

CORPUS = CONFIGS.parent / "corpus" / "configs"
runner = CliRunner()


def test_registry_spans_match_the_releases() -> None:
    # BambaForCausalLM was in every registry from 0.8 to 0.23 and is in 0.33's _PREVIOUSLY_SUPPORTED_MODELS.
    assert served_runs("BambaForCausalLM") == [("0.8", "0.23")]
    assert served_runs("Qwen3NextForCausalLM") == [("0.10", "0.33")]
    assert is_served("GptOssForCausalLM", VllmVersion(0, 10)) and not is_served("GptOssForCausalLM", VllmVersion(0, 9))


def test_a_removed_architecture_gets_vllms_own_words() -> None:
    assert not_served_reason(["BambaForCausalLM"], VllmVersion(0, 33)) == (
        "Model architecture BambaForCausalLM was supported in vLLM until v0.23.0, and is not supported anymore "
        "(vLLM 0.33; served by vLLM 0.8–0.23)")
    assert not_served_reason(["BambaForCausalLM"], VllmVersion(0, 23)) is None


def test_fit_refuses_an_architecture_the_chosen_vllm_does_not_serve() -> None:
    # vLLM 0.33 tries its Transformers backend for BambaForCausalLM, whose Mamba layers cannot use it
    # (the CUDA oracle's own refusal: tests/fixtures/oracle-cuda/ibm-ai-platform--Bamba-9B__h100.json).
    result = runner.invoke(app, ["fit", str(CORPUS / "ibm-ai-platform--Bamba-9B"), "--gpu", "h100"])
    assert result.exit_code == 2
    assert "does not dispatch through the Transformers attention interface" in result.output
    ok = runner.invoke(app, ["fit", str(CORPUS / "ibm-ai-platform--Bamba-9B"), "--gpu", "h100",
                             "--vllm-version", "0.23", "--max-model-len", "4096"])
    assert ok.exit_code in (0, 1), ok.output


def test_size_still_answers_for_an_unserved_architecture_and_says_so() -> None:
    result = runner.invoke(app, ["size", str(CORPUS / "ibm-ai-platform--Bamba-9B"), "--json"])
    assert result.exit_code == 0
    notes = json.loads(result.stdout)["notes"]  # the reason fit stops with (vLLM 0.33's Transformers backend)
    assert any("does not dispatch through the Transformers attention interface" in n for n in notes)


def test_an_unreadable_config_of_an_unserved_architecture_fails_with_vllms_reason() -> None:
    result = runner.invoke(app, ["size", str(CORPUS / "RWKV--rwkv-4-169m-pile")])
    assert result.exit_code == 2
    assert "Model architectures ['RwkvForCausalLM'] are not supported for now (vLLM 0.33" in result.output


def test_a_text_config_vllm_cannot_name_a_class_for_is_refused_with_vllms_words() -> None:
    # Mistral3ForConditionalGeneration builds its language model from text_config (model_type mistral4,
    # no architectures): vLLM 0.33 stops with "No model architectures are specified"
    # (tests/fixtures/oracle-cuda/mistralai--Mistral-Small-4-119B-2603__h100.json).
    result = runner.invoke(app, ["fit", str(CORPUS / "mistralai--Mistral-Small-4-119B-2603"), "--gpu", "h100"])
    assert result.exit_code == 2
    assert "No model architectures are specified" in result.output and "`mistral4`" in result.output
    # Mistral-Small-3.2's text_config (model_type mistral) is named by transformers: served.
    ok = runner.invoke(app, ["fit", str(CORPUS / "mistralai--Mistral-Small-3.2-24B-Instruct-2506"), "--gpu", "h100",
                             "--max-model-len", "16000"])
    assert ok.exit_code in (0, 1), ok.output


def test_size_gives_mistral_small_4_its_mla_latent_as_vllm_serves_it() -> None:
    # kaito#2132 (vLLM, --config-format mistral): "To serve at least one request with the model's max seq len
    # (1048576), 22.5 GiB KV cache is needed": 36 layers x (kv_lora_rank 256 + rope 64) x 2 B = 23,040 B/token.
    result = runner.invoke(app, ["size", str(CORPUS / "mistralai--Mistral-Small-4-119B-2603"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kv_bytes_per_token"] == 23040
