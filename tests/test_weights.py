"""Analytic parameter counts pinned against published figures, and quantized sizes."""
from __future__ import annotations

import pytest

from kvplan.weights import count_parameters, quantized_bits_per_weight, weights_bytes, weights_bytes_per_gpu
from tests.conftest import load_fixture

PUBLISHED = {  # the model cards' / safetensors metadata's total parameter counts
    "meta-llama--Meta-Llama-3.1-8B": 8_030_261_248,
    "Qwen--Qwen2.5-7B": 7_615_616_512,
    "mistralai--Mistral-7B-v0.1": 7_241_732_096,
    "mistralai--Mixtral-8x7B-v0.1": 46_702_792_704,
    "openai-community--gpt2": 124_439_808,
    "facebook--opt-125m": 125_239_296,
    "tiiuae--falcon-7b": 7_217_189_760,
    "Qwen--Qwen2.5-1.5B": 1_543_714_304,
}


@pytest.mark.parametrize("folder", sorted(PUBLISHED))
def test_analytic_count_equals_published_count(folder: str) -> None:
    assert count_parameters(load_fixture(folder)).total == PUBLISHED[folder]


@pytest.mark.parametrize(("folder", "billions", "active"), [
    ("deepseek-ai--DeepSeek-V3", 671.0, 37.6),
    ("openai--gpt-oss-120b", 116.8, 5.7),
    ("openai--gpt-oss-20b", 20.9, 4.2),
    ("Qwen--Qwen3-30B-A3B", 30.5, 3.4),
    ("unsloth--Llama-4-Scout-17B-16E-Instruct", 107.8, 17.2),  # text part of the 109B model, 17B active
    ("nvidia--Nemotron-H-56B-Base-8K", 56.3, 56.3),
    ("alpindale--c4ai-command-r-plus-GPTQ", 103.8, 103.8),
])
def test_large_and_moe_counts_match_model_cards(folder: str, billions: float, active: float) -> None:
    p = count_parameters(load_fixture(folder))
    assert round(p.total / 1e9, 1) == billions
    assert round(p.active / 1e9, 1) == active


def test_mixtral_active_parameters_are_two_of_eight_experts() -> None:
    p = count_parameters(load_fixture("mistralai--Mixtral-8x7B-v0.1"))
    assert p.params_per_expert == 3 * 4096 * 14336
    assert p.moe_layers == 32
    assert p.active == p.total - 6 * 32 * p.params_per_expert == 12_879_925_248


def test_bf16_weights_are_two_bytes_per_parameter() -> None:
    model = load_fixture("meta-llama--Meta-Llama-3.1-8B")
    assert weights_bytes(model) == 2 * 8_030_261_248


def test_gptq_4bit_group_128_bits_per_weight() -> None:
    model = load_fixture("alpindale--c4ai-command-r-plus-GPTQ")
    assert quantized_bits_per_weight(model) == 4 + 20 / 128


def test_fp8_checkpoint_keeps_embeddings_and_lm_head_in_bf16() -> None:
    model = load_fixture("nvidia--Llama-3.1-70B-Instruct-FP8")
    p = count_parameters(model)
    assert weights_bytes(model) == 2 * (p.embedding + p.lm_head + p.norms) + (p.attention + p.mlp)


def test_weights_split_evenly_over_tp() -> None:
    model = load_fixture("meta-llama--Meta-Llama-3.1-70B")
    total = weights_bytes(model)
    assert weights_bytes_per_gpu(model, tp=4) == -(-total // 4)
    assert weights_bytes_per_gpu(model, tp=1, pp=2) < total
