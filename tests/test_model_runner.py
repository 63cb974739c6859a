"""Which model runner vLLM picks (config/vllm.py:VllmConfig.use_v2_model_runner), pinned release by release
as the 0.21.0–0.33.0 wheels decide it, and what the choice changes in `fit`."""
from __future__ import annotations

import pytest

from kvplan.hardware.gpus import get_gpu
from kvplan.vllm.defaults import parse_vllm_version
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.model_runner import model_runner
from kvplan.vllm.settings import ServeSettings
from tests.conftest import load_fixture


@pytest.mark.parametrize(("folder", "version", "v2"), [
    # 0.22: Qwen3ForCausalLM only; 0.23: Llama, Mistral and Qwen3, neither MoE nor quantized
    ("meta-llama--Meta-Llama-3.1-8B", "0.21", False), ("meta-llama--Meta-Llama-3.1-8B", "0.22", False),
    ("Qwen--Qwen3-8B", "0.22", True), ("meta-llama--Meta-Llama-3.1-8B", "0.23", True),
    ("nvidia--Llama-3.1-70B-Instruct-FP8", "0.23", False), ("nvidia--Llama-3.1-70B-Instruct-FP8", "0.24", True),
    # DeepseekV2ForCausalLM is listed from 0.24; a MoE off the list stays on V1 until 0.29
    ("deepseek-ai--DeepSeek-V2-Lite", "0.23", False), ("deepseek-ai--DeepSeek-V2-Lite", "0.24", True),
    ("Qwen--Qwen3-30B-A3B", "0.25", False), ("Qwen--Qwen3-30B-A3B", "0.29", True),
    # 0.25: every non-MoE generate model, but not a hybrid
    ("Qwen--Qwen2.5-7B", "0.24", False), ("Qwen--Qwen2.5-7B", "0.25", True),
    ("ibm-granite--granite-4.0-h-small", "0.28", False), ("ibm-granite--granite-4.0-h-small", "0.29", True),
])
def test_the_default_runner_by_release_and_model(folder: str, version: str, v2: bool) -> None:
    model = load_fixture(folder)
    runner = model_runner(model, parse_vllm_version(version), quantized=model.quant is not None)
    assert runner.v2 is v2, runner.reason


@pytest.mark.parametrize(("method", "pp", "version", "v2"), [
    ("draft_model", 1, "0.30", False), ("draft_model", 1, "0.31", True),  # 0.30 blocklists it, 0.31 runs it
    ("eagle3", 2, "0.29", False), ("eagle3", 2, "0.30", True), ("eagle3", 1, "0.29", True), ("mtp", 1, "0.25", True),
])
def test_speculative_methods_v2_does_not_run_keep_the_v1_runner(method: str, pp: int, version: str, v2: bool) -> None:
    model = load_fixture("Qwen--Qwen3-8B")
    runner = model_runner(model, parse_vllm_version(version), quantized=False, speculative_method=method, pp=pp)
    assert runner.v2 is v2, runner.reason


def test_the_runner_decides_batches_in_flight_and_the_penalty_state() -> None:
    """Llama-3.1-8B on an H100 at serve defaults (1,024 seqs, 8,192 batched tokens), PP 2: Model Runner V2
    keeps pp + 1 batches in flight from 0.23 (V1: pp), and its penalty state (1,024 × 128,256 × 4.125 B)
    joins the non-torch term once vLLM's profiler sees it (0.27, total_consumed)."""
    model = load_fixture("meta-llama--Meta-Llama-3.1-8B")
    gpu = get_gpu("h100")

    def fit(version: str, pp: int = 1):  # type: ignore[no-untyped-def]
        return plan_fit(model, gpu, ServeSettings.of(vllm_version=version, pp=pp, max_model_len=8192), advise=False)

    assert (fit("0.22", 2).deployment.model_runner, fit("0.22", 2).scheduler.in_flight_tokens) == ("V1", 2 * 8192)
    assert (fit("0.23", 2).deployment.model_runner, fit("0.23", 2).scheduler.in_flight_tokens) == ("V2", 3 * 8192)
    penalties = int(1024 * 128_256 * 4.125)
    assert fit("0.27").memory.non_torch_bytes - fit("0.26").memory.non_torch_bytes == penalties
    assert "Model Runner V2 is the default for LlamaForCausalLM" in fit("0.25").settings_sources["model_runner"]


def test_a_config_without_architectures_still_gets_a_runner_and_a_reason() -> None:
    from dataclasses import replace

    model = replace(load_fixture("Qwen--Qwen2.5-7B"), architectures=())
    runner = model_runner(model, parse_vllm_version("0.25"), quantized=False)
    assert runner.v2 and runner.reason.endswith("the default for qwen2")
