"""Weights of today's checkpoints, pinned on vLLM 0.33's model code (model_executor/models/*.py)."""
from __future__ import annotations

from dataclasses import replace

from kvplan.model.hub import load_local
from kvplan.model.weights import count_parameters
from tests.conftest import CONFIGS

CORPUS = CONFIGS.parent / "corpus" / "configs"
GIB = 2**30


def test_gemma_e_models_count_their_per_layer_embeddings() -> None:
    """gemma4.py:Gemma4Model.__init__: embed_tokens_per_layer = VocabParallelEmbedding(
    vocab_size_per_layer_input, hidden_size_per_layer_input × num_hidden_layers), plus the projection
    hidden → that width, and per layer a gate and a projection back. E2B: 262,144 × 256 × 35 × 2 B =
    4.375 GiB of per-layer embeddings; E4B: × 42 layers = 5.25 GiB (issue 12: "about 4.4 and 5.3 GiB")."""
    for name, layers, hidden in (("google--gemma-4-E2B", 35, 1536), ("google--gemma-4-E4B", 42, 2560)):
        model = load_local(str(CORPUS / name))
        with_ple = count_parameters(model)
        plain = count_parameters(replace(model, facts=model.facts._replace(per_layer_input_size=0)))
        ple_table = 262_144 * 256 * layers
        extra = ple_table + hidden * 256 * layers + 256 + layers * (2 * hidden * 256 + hidden)
        assert with_ple.total - plain.total == extra
        assert round(ple_table * 2 / GIB, 3) == {35: 4.375, 42: 5.25}[layers]
    # A model without per-layer inputs (hidden_size_per_layer_input 0 or absent) is unchanged.
    dense = load_local(str(CORPUS / "google--gemma-4-31B"))
    assert not dense.facts.per_layer_input_size


def test_compressed_tensors_int4_counts_its_group_scales() -> None:
    """compressed_tensors_wNa16.py:create_weights: weight_packed (4 bits) plus weight_scale, one bf16 per
    group of 32 (GroupQuantScaleParameter, params_dtype); symmetric, so no weight_zero_point. Kimi-K2.5's
    routed experts: 4 + 16/32 = 4.5 bits a weight, 12.5% above the 4 bits counted before (issue 12: its
    weights came out 14–16% low)."""
    from kvplan.model.weights import quantized_bits_per_weight
    from kvplan.vllm.memory.weights import estimate_weights

    kimi = load_local(str(CORPUS / "moonshotai--Kimi-K2.5"))
    assert kimi.quant is not None and (kimi.quant.method, kimi.quant.weight_bits, kimi.quant.group_size) == (
        "compressed-tensors", 4.0, 32)
    assert quantized_bits_per_weight(kimi) == 4.5
    per_gpu = estimate_weights(kimi, tp=8, pp=1, arch="hopper").bytes / GIB
    # 60.2 GiB with 4-bit experts, 67.6 with their scales; 70.0 once the ignore list keeps attention, the shared
    # experts and the dense layer in BF16 and the replicated MLA down-projection and router are counted
    # (tests/test_weights_replicated.py pins each term).
    assert 69.9 < per_gpu < 70.1
