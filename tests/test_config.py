"""config.json dialects and the errors for configs kvplan does not understand."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from kvplan.errors import BadConfig
from kvplan.model.config import parse_config
from tests.conftest import CONFIGS, load_fixture


def _raw(folder: str) -> dict:  # type: ignore[type-arg]
    return json.loads((CONFIGS / folder / "config.json").read_text())


def kinds(folder: str) -> dict[str, int]:
    return dict(Counter(layer.kind for layer in load_fixture(folder).layers))


@pytest.mark.parametrize(("folder", "expected"), [
    ("mistralai--Mistral-7B-v0.1", {"sliding_window": 32}),  # model-wide window
    ("Qwen--Qwen2.5-7B", {"full": 28}),  # use_sliding_window=false disables its window
    ("unsloth--gemma-2-9b", {"sliding_window": 21, "full": 21}),  # layer_types
    ("google--gemma-3-4b-it", {"sliding_window": 29, "full": 5}),  # pattern 6 default, text_config
    ("openai--gpt-oss-20b", {"sliding_window": 12, "full": 12}),
    ("unsloth--Llama-4-Scout-17B-16E-Instruct", {"chunked_local": 36, "full": 12}),  # no_rope_layers
    ("Qwen--Qwen3-Next-80B-A3B-Instruct", {"mamba": 36, "full": 12}),  # full_attention_interval 4
    ("ibm-granite--granite-4.0-h-small", {"mamba": 36, "full": 4}),  # layer_types mamba/attention
    ("nvidia--Nemotron-H-56B-Base-8K", {"mamba": 54, "mlp_only": 54, "full": 10}),  # hybrid_override_pattern
    ("deepseek-ai--DeepSeek-V3", {"mla": 61}),
])
def test_layer_kinds_per_dialect(folder: str, expected: dict[str, int]) -> None:
    assert kinds(folder) == expected


def test_gpt2_keys_n_head_n_layer_n_embd() -> None:
    m = load_fixture("openai-community--gpt2")
    assert (m.num_layers, m.hidden_size, m.num_attention_heads, m.head_size, m.max_model_len) == (12, 768, 12, 64, 1024)


def test_falcon_multi_query_has_one_kv_head() -> None:
    m = load_fixture("tiiuae--falcon-7b")
    assert (m.num_kv_heads, m.head_size) == (1, 64)


def test_chatglm_multi_query_group_num_and_seq_length() -> None:
    m = load_fixture("THUDM--chatglm3-6b")
    assert (m.num_layers, m.num_kv_heads, m.head_size, m.max_model_len, m.dtype) == (28, 2, 128, 8192, "float16")


def test_gemma3_multimodal_uses_text_config_and_transformers_defaults() -> None:
    m = load_fixture("google--gemma-3-4b-it")
    assert (m.num_attention_heads, m.num_kv_heads, m.head_size, m.max_model_len) == (8, 4, 256, 131072)
    assert {layer.sliding_window for layer in m.layers if layer.kind == "sliding_window"} == {1024}


def test_llama31_rope_llama3_does_not_multiply_max_len() -> None:
    assert load_fixture("meta-llama--Meta-Llama-3.1-8B").max_model_len == 131072


def test_linear_rope_factor_multiplies_max_len() -> None:
    raw = _raw("meta-llama--Meta-Llama-3.1-8B")
    raw.update(max_position_embeddings=4096, rope_scaling={"rope_type": "linear", "factor": 4.0})
    assert parse_config(raw).max_model_len == 16384


def test_no_length_key_defaults_to_2048() -> None:
    raw = _raw("meta-llama--Meta-Llama-3.1-8B")
    del raw["max_position_embeddings"]
    assert parse_config(raw).max_model_len == 2048


def test_float32_config_is_served_as_bfloat16() -> None:
    raw = _raw("openai-community--gpt2")
    assert raw.get("torch_dtype") in (None, "float32")
    assert parse_config(raw).dtype == "bfloat16"


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda c: c.pop("num_hidden_layers"), "no num_hidden_layers"),
    (lambda c: c.update(num_attention_heads="32"), "num_attention_heads must be a positive integer"),
    (lambda c: c.update(num_key_value_heads=0), "num_key_value_heads must be a positive integer"),
    (lambda c: c.update(hidden_size=-4096), "hidden_size must be a positive integer"),
    (lambda c: c.update(num_key_value_heads=7), "not a multiple of the KV heads"),
    (lambda c: c.update(layer_types=["full_attention"] * 31 + ["banana"]), "layer type 'banana'"),
    (lambda c: c.update(layer_types=["full_attention"] * 3),
     r"`num_hidden_layers` \(32\) must be equal to the number of `layer_types` \(3\)"),
    (lambda c: c.update(torch_dtype="float8"), "unknown torch_dtype"),
    (lambda c: c.update(text_config=[1, 2]), "text_config must be an object"),
])
def test_malformed_config_is_a_clear_bad_config(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    raw = _raw("meta-llama--Meta-Llama-3.1-8B")
    mutate(raw)
    with pytest.raises(BadConfig, match=message):
        parse_config(raw)


def test_recurrent_layers_without_dimensions_are_not_guessed() -> None:
    raw = _raw("meta-llama--Meta-Llama-3.1-8B")
    raw["layer_types"] = ["linear_attention"] * 31 + ["full_attention"]
    with pytest.raises(BadConfig, match="recurrent layers .* not understood"):
        parse_config(raw)


def test_config_must_be_an_object() -> None:
    with pytest.raises(BadConfig):
        parse_config([1, 2, 3])  # type: ignore[arg-type]


def test_unknown_quantization_leaves_the_kv_geometry_and_says_why_weights_are_unknown() -> None:
    """A field only the weight estimate needs never stops the KV read (issue: weights-only fields)."""
    raw = _raw("meta-llama--Meta-Llama-3.1-8B")
    raw["quantization_config"] = {"quant_method": "mystery"}
    spec = parse_config(raw)
    assert spec.weights_unknown == "config.json: quantization method 'mystery' is not understood by kvplan"
    assert spec.num_kv_heads == 8 and spec.head_size == 128 and spec.num_layers == 32


def test_corpus_configs_are_all_sized_or_refused_with_a_reason() -> None:
    """The 202-config corpus (tests/fixtures/corpus): every config is sized, except those vLLM cannot load."""
    from kvplan.model.hub import load_local
    from kvplan.model.size import size_report

    corpus = CONFIGS.parent / "corpus" / "configs"
    refused = {}
    sized = 0
    for d in sorted(corpus.iterdir()):
        try:
            size_report(load_local(str(d)))
            sized += 1
        except BadConfig as exc:
            refused[d.name] = str(exc)
    assert sized >= 188  # DeepSeek-V4 Flash, Pro, their Base and an MLX 4-bit copy sized since issue 22
    # mamba_ssm's native Mamba-2 configs (no model_type, no architectures), RWKV (no vLLM model class) and
    # EXAONE-4.5-FP8 (65 layer_types for 64 layers: transformers' validate_layer_type refuses it, so does vLLM).
    assert set(refused) == {"state-spaces--mamba2-1.3b", "state-spaces--mamba2-130m", "state-spaces--mamba2-2.7b",
                            "state-spaces--mamba2attn-2.7b", "RWKV--rwkv-4-169m-pile",
                            "LGAI-EXAONE--EXAONE-4.5-33B-FP8",
                            # a speculators-format EAGLE-3 draft: read as --speculative-config's draft, not served alone
                            "nm-testing--EAGLE3-LLaMA3.1-Instruct-8B-converted",
                            # Mistral format only (params.json): vLLM reads it, kvplan names it (issue 22)
                            "mistralai--Pixtral-12B-2409"}


@pytest.mark.parametrize(("folder", "bytes_per_token", "state_bytes"), [
    # LFM2-8B-A1B: 6 full-attention layers × 8 KV heads × 64 × 2 (K, V) × 2 bytes; 18 short-conv layers, each a
    # (conv_L_cache − 1) × conv_dim bf16 state = 2 × 2048 × 2 (mamba_utils.py:short_conv_state_shape).
    ("LiquidAI--LFM2-8B-A1B", 6 * 8 * 64 * 2 * 2, 18 * 2 * 2048 * 2),
    # DeepSeek-V3.2: 61 layers × (MLA latent 576 × 2 bytes + DSA indexer 128 + 128 / 128 × 4 = 132 uint8).
    ("deepseek-ai--DeepSeek-V3.2", 61 * (576 * 2 + 132), 0),
    # mamba-130m: no attention; 24 Mamba-1 layers, conv (4 − 1) × 1536 + SSM 1536 × 16, bf16.
    ("state-spaces--mamba-130m-hf", 0, 24 * (3 * 1536 + 1536 * 16) * 2),
    # Llama-3.3-Nemotron-Super-49B: 49 of 80 layers have attention, 8 KV heads (64 heads / n_heads_in_group 8).
    ("nvidia--Llama-3_3-Nemotron-Super-49B-v1", 49 * 8 * 128 * 2 * 2, 0),
    # Bamba-9B: attention only at attn_layer_indices [9, 18, 27].
    ("ibm-ai-platform--Bamba-9B", 3 * 8 * 128 * 2 * 2, None),
])
def test_new_layer_kinds_are_sized_per_vllm(folder: str, bytes_per_token: int, state_bytes: int | None) -> None:
    from kvplan.model.hub import load_local
    from kvplan.model.size import size_report

    r = size_report(load_local(str(CONFIGS.parent / "corpus" / "configs" / folder)))
    assert r.kv_bytes_per_token == bytes_per_token
    if state_bytes is not None:
        assert r.state_bytes_per_request == state_bytes


def test_weights_unknown_keeps_size_answering_and_says_why() -> None:
    from kvplan.model.hub import load_local
    from kvplan.model.size import size_report

    r = size_report(load_local(str(CONFIGS.parent / "corpus" / "configs" / "nvidia--Llama-3_3-Nemotron-Super-49B-v1")))
    assert r.weights_bytes is None and r.num_parameters is None
    assert r.weights_source == ("unknown: per-layer MLP widths (block_configs) are not counted by kvplan's analytic "
                                "estimate")
