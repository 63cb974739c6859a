"""Analytic parameter counts pinned against published figures, and quantized sizes."""
from __future__ import annotations

import pytest

from kvplan.model.weights import (
    count_parameters,
    quantized_bits_per_weight,
    stored_weights_bytes,
    weights_bytes_per_gpu,
)
from kvplan.vllm.defaults import VllmVersion
from kvplan.vllm.memory.weights import (
    MoeBackend,
    default_mxfp4_backend,
    load_adjustments,
    loaded_weights_bytes_per_gpu,
    mxfp4_expert_bytes,
    rope_cache_bytes,
)
from tests.conftest import CONFIGS, load_fixture

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
    assert stored_weights_bytes(model) == 2 * 8_030_261_248


def test_gptq_4bit_group_128_bits_per_weight() -> None:
    model = load_fixture("alpindale--c4ai-command-r-plus-GPTQ")
    assert quantized_bits_per_weight(model) == 4 + 20 / 128


def test_fp8_checkpoint_keeps_embeddings_and_lm_head_in_bf16() -> None:
    model = load_fixture("nvidia--Llama-3.1-70B-Instruct-FP8")
    p = count_parameters(model)
    assert stored_weights_bytes(model) == 2 * (p.embedding + p.lm_head + p.norms) + (p.attention + p.mlp)


def test_weights_split_evenly_over_tp() -> None:
    model = load_fixture("meta-llama--Meta-Llama-3.1-70B")
    total = stored_weights_bytes(model)
    assert weights_bytes_per_gpu(model, tp=4) == -(-total // 4)
    assert weights_bytes_per_gpu(model, tp=1, pp=2) < total


# --- Loaded bytes: what vLLM's "Model loading took" measures --------------------------------------------
GIB = 2**30


def test_mxfp4_checkpoint_keeps_expert_biases_in_bf16() -> None:
    """gpt-oss-120b: 36 layers × 128 experts × (3·2880² FP4 values + 1/32 scale bytes) + bf16 rest."""
    model = load_fixture("openai--gpt-oss-120b")
    p = count_parameters(model)
    biases = 36 * 128 * (2 * 2880 + 2880)
    blocks = 36 * 128 * 3 * 2880 * 2880
    assert p.routed_experts == blocks + biases
    assert stored_weights_bytes(model) == 2 * (p.total - blocks) + blocks // 2 + blocks // 32


@pytest.mark.parametrize(("backend", "expected"), [
    (None, 5760 * 1440 + 2880 * 1440 + (5760 + 2880) * 90 + (5760 + 2880) * 2),
    # Triton on Hopper: values re-laid out in place; unswizzled scales kept next to the swizzled copy
    # (rows padded to 256); biases converted to fp32.
    ("triton", 5760 * 1440 + 2880 * 1440 + (5760 + 2880) * 90 + (5888 + 3072) * 90 + (5760 + 2880) * 4),
    # Marlin: intermediate padded to 128 (2944), hidden to 256 (3072).
    ("marlin", 5888 * 1536 + 3072 * 1472 + 5888 * 96 + 3072 * 92 + (5888 + 3072) * 2),
    # FlashInfer TRT-LLM (SM100): both padded to 256 (3072), fp32 biases.
    ("flashinfer_trtllm", 6144 * 1536 + 3072 * 1536 + 6144 * 96 + 3072 * 96 + (6144 + 3072) * 4),
])
def test_mxfp4_expert_bytes_per_backend_for_gpt_oss_shapes(backend: MoeBackend | None, expected: int) -> None:
    assert mxfp4_expert_bytes(2880, 2880, backend) == expected


def test_mxfp4_padding_applies_to_the_per_rank_width() -> None:
    """TP=2: I/tp = 1440 → Triton pads to 1472 (64), Marlin to 1536 (128)."""
    assert mxfp4_expert_bytes(2880, 1440, "triton") == (
        2944 * 1440 + 2880 * 736  # values
        + 2944 * 90 + 2880 * 46  # unswizzled scales
        + 3072 * 90 + 3072 * 46  # swizzled copy, rows padded to 256
        + (2944 + 2880) * 4)  # fp32 biases
    assert mxfp4_expert_bytes(2880, 1440, "marlin") == (
        2 * 1536 * 1536 + 3072 * 768 + 2 * 1536 * 96 + 3072 * 48 + (2 * 1536 + 3072) * 2)


@pytest.mark.parametrize(("arch", "version", "expected"), [
    ("hopper", VllmVersion(0, 10), "marlin"),  # triton_kernels not installed with vLLM ≤ 0.11.0
    ("hopper", VllmVersion(0, 11), "marlin"),
    ("hopper", VllmVersion(0, 12), "triton"),
    ("hopper", None, "triton"),
    ("blackwell", None, "flashinfer_trtllm"),
    ("blackwell-rtx", None, "marlin"),
    ("ampere", None, "marlin"),
    ("cdna3", None, None),
    (None, None, None),
])
def test_default_mxfp4_backend(arch: str | None, version: VllmVersion | None, expected: str | None) -> None:
    assert default_mxfp4_backend(arch, version) == expected


@pytest.mark.parametrize(("folder", "expected"), [
    ("meta-llama--Meta-Llama-3.1-8B", 131072 * 128 * 2),  # llama3 rope: max_position_embeddings rows
    ("openai--gpt-oss-120b", 4096 * 32 * 64 * 4),  # YaRN: original × factor rows, fp32 (gpt_oss.py)
    ("deepseek-ai--DeepSeek-V3", 4096 * 40 * 64 * 2),  # MLA: qk_rope_head_dim columns
    ("google--gemma-3-4b-it", (131072 * 8 + 131072) * 256 * 2),  # linear ×8 global + unscaled local
    ("Qwen--Qwen3-Next-80B-A3B-Instruct", 262144 * 64 * 2),  # partial_rotary_factor 0.25 of 256
    ("openai-community--gpt2", 0),  # learned positions
])
def test_rope_cache_bytes(folder: str, expected: int) -> None:
    assert rope_cache_bytes(load_fixture(folder)) == expected


@pytest.mark.parametrize(("folder", "version", "expected"), [
    # rotary_embedding/mrope.py:MRotaryEmbedding caches 4 × max_position_embeddings rows (128,000 × 4 × 128 × 2 B):
    # with it Qwen2.5-VL-7B's logged "Model loading took 15.67 GiB" (vLLM 0.23, startup-logs record
    # wcs-a100-qwen2.5-vl-7b-instruct-util022-v0230-failed) is 0.10 GiB above kvplan's weights, not 0.19
    ("Qwen--Qwen2.5-VL-7B-Instruct", VllmVersion(0, 23), 128000 * 4 * 128 * 2),
    ("Qwen--Qwen2.5-VL-7B-Instruct", VllmVersion(0, 33), 128000 * 4 * 128 * 2),
    # Qwen3-VL: 262,144 × 4 rows through 0.31; from 0.32 qwen3_vl.py:mrope_positions_factor passes 1 (no pruning)
    ("Qwen--Qwen3-VL-30B-A3B-Instruct", VllmVersion(0, 31), 262144 * 4 * 128 * 2),
    ("Qwen--Qwen3-VL-30B-A3B-Instruct", VllmVersion(0, 32), 262144 * 128 * 2),
    # Qwen3.5: the partial_rotary_factor 0.25 that only rope_parameters holds (64 of 256 dims), × 4 through 0.31
    ("Qwen--Qwen3.5-0.8B", VllmVersion(0, 31), 262144 * 4 * 64 * 2),
    ("Qwen--Qwen3.5-0.8B", VllmVersion(0, 32), 262144 * 64 * 2),
    # GLM-4.5V keeps the factor 4 in 0.33 (65,536 positions, partial 0.5 of 128)
    ("zai-org--GLM-4.5V", VllmVersion(0, 33), 65536 * 4 * 64 * 2),
])
def test_multimodal_rope_caches_four_times_the_positions(folder: str, version: VllmVersion, expected: int) -> None:
    from kvplan.model.hub import load_local

    model = load_local(str(CONFIGS.parent / "corpus" / "configs" / folder))
    assert rope_cache_bytes(model, version) == expected


def test_loaded_gpt_oss_120b_on_hopper_adds_the_kernel_layout_and_the_rope_cache() -> None:
    model = load_fixture("openai--gpt-oss-120b")
    stored = weights_bytes_per_gpu(model)
    rope = 4096 * 32 * 64 * 4
    for backend in ("triton", "marlin"):
        delta = 36 * 128 * (mxfp4_expert_bytes(2880, 2880, backend) - mxfp4_expert_bytes(2880, 2880, None))
        assert loaded_weights_bytes_per_gpu(model, arch="hopper", moe_backend=backend) == stored + delta + rope
    assert loaded_weights_bytes_per_gpu(model, arch="hopper", version=VllmVersion(0, 11)) == \
        loaded_weights_bytes_per_gpu(model, arch="hopper", moe_backend="marlin")
    # Unknown GPU: the checkpoint layout, plus the GPU-independent rope cache.
    assert loaded_weights_bytes_per_gpu(model) == stored + rope


def test_gptq_on_marlin_drops_qzeros_and_keeps_act_order_g_idx() -> None:
    """Command R+ GPTQ (sym, desc_act, 4-bit, g128), per layer: q/k/v fused N=14336, o N=12288 (K=12288),
    gate_up N=67584 (K=12288), down N=12288 (K=33792); 64 layers."""
    model = load_fixture("alpindale--c4ai-command-r-plus-GPTQ")
    zeros = 64 * (14336 * 96 + 12288 * 96 + 67584 * 96 + 12288 * 264) * 4 // 8
    g_idx = 64 * (3 * 12288 + 33792) * 8
    by_name = {a.name: a.total_bytes for a in load_adjustments(model, arch="hopper")}
    assert by_name["GPTQ on Marlin: qzeros dropped, act-order g_idx kept"] == g_idx - zeros
    # Before SM80 vLLM runs the plain GPTQ kernel, which keeps the checkpoint as stored.
    assert all("GPTQ" not in a.name for a in load_adjustments(model, arch="turing"))


def test_fp8_block_scales_are_fp32_per_128x128_block() -> None:
    """Qwen3-30B-A3B-FP8, per layer: qkv 5120×2048 (40×16 blocks), o 2048×4096 (16×32), 128 experts of
    gate_up 1536×2048 (12×16) and down 2048×768 (16×6); 48 layers."""
    model = load_fixture("Qwen--Qwen3-30B-A3B-FP8")
    by_name = {a.name: a.total_bytes for a in load_adjustments(model)}
    assert by_name["FP8 128×128-block scales"] == 48 * (640 + 512 + 128 * (192 + 96)) * 4


def test_vocab_padding_to_64_rows_split_over_tp() -> None:
    """GPT-2: 50,257 → 50,304 rows (47 padding rows × 768 × 2 B); tied LM head: counted once."""
    model = load_fixture("openai-community--gpt2")
    pad = next(a for a in load_adjustments(model) if a.name.startswith("vocabulary"))
    assert (pad.first_stage_bytes, pad.last_stage_bytes) == (47 * 768 * 2, 0)
    pad2 = next(a for a in load_adjustments(model, tp=2) if a.name.startswith("vocabulary"))
    assert pad2.first_stage_bytes == 24 * 768 * 2


def test_loaded_bytes_with_pipeline_parallel_take_the_busiest_stage() -> None:
    model = load_fixture("openai--gpt-oss-120b")
    one = loaded_weights_bytes_per_gpu(model, arch="hopper")
    two = loaded_weights_bytes_per_gpu(model, arch="hopper", pp=2)
    rope = rope_cache_bytes(model)
    assert weights_bytes_per_gpu(model, pp=2) + rope < two < one
    assert two >= (one - rope) // 2 + rope


def test_a_pipeline_stage_holds_its_own_layers_parameters() -> None:
    """DeepSeek-V2-Lite at PP 2 (vllm/distributed/utils.py:get_pp_indices: layers 0-13, 14-26): stage 0 holds the
    embedding, the dense layer 0 (first_k_dense_replace = 1, 81 M parameters) and 13 MoE layers (585 M each),
    14.70 GiB in BF16 (7.35 per TP 2 rank, counted by hand in vllm#20665's record note); stage 1 13 MoE layers and
    the LM head, 14.55 GiB. An even split of the 27 layers gave 15.16 / 14.10."""
    from kvplan.model.weights import stage_stored_bytes

    model = load_fixture("deepseek-ai--DeepSeek-V2-Lite")
    assert [round(b / 2**30, 2) for b in stage_stored_bytes(model, 2, None)] == [14.70, 14.55]
