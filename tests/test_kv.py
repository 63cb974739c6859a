"""KV bytes per token: the starting document's numbers, hand derivations, and every fixture pinned.

Every fixture value below was checked against vLLM's own per-layer KVCacheSpec (tests/fixtures/oracle/,
made with vLLM's planner; see its README).
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.model.kv_cache import kv_cache_specs, recurrent_state_bytes, resolve_kv_cache_dtype
from kvplan.model.parallel import pp_layer_ranges
from kvplan.model.size import request_kv_bytes, size_report
from kvplan.units import GiB
from tests.conftest import ALL_FIXTURES, load_fixture

# fixture: (KV bytes/token at TP 1 with --kv-cache-dtype auto, recurrent state bytes/request, max_model_len)
EXPECTED = {
    "Qwen--Qwen2.5-1.5B": (28672, 0, 131072),
    "Qwen--Qwen2.5-72B": (327680, 0, 131072),
    "Qwen--Qwen2.5-7B": (57344, 0, 131072),
    "Qwen--Qwen3-30B-A3B": (98304, 0, 40960),
    "Qwen--Qwen3-30B-A3B-FP8": (98304, 0, 40960),
    "Qwen--Qwen3-8B": (147456, 0, 40960),
    "Qwen--Qwen3-Next-80B-A3B-Instruct": (24576, 39518208, 262144),
    "THUDM--chatglm3-6b": (28672, 0, 8192),
    "alpindale--c4ai-command-r-plus-GPTQ": (262144, 0, 131072),
    "deepseek-ai--DeepSeek-V2-Lite": (31104, 0, 163840),
    "deepseek-ai--DeepSeek-V3": (70272, 0, 163840),
    "facebook--opt-125m": (36864, 0, 2048),
    "google--gemma-3-4b-it": (139264, 0, 131072),
    "google--gemma-4-26B-A4B": (225280, 0, 262144),
    "ibm-granite--granite-4.0-h-small": (16384, 77322240, 131072),
    "meta-llama--Meta-Llama-3.1-405B": (516096, 0, 131072),
    "meta-llama--Meta-Llama-3.1-70B": (327680, 0, 131072),
    "meta-llama--Meta-Llama-3.1-8B": (131072, 0, 131072),
    "mistralai--Mistral-7B-v0.1": (131072, 0, 32768),
    "mistralai--Mixtral-8x7B-v0.1": (131072, 0, 32768),
    "nvidia--Llama-3.1-70B-Instruct-FP8": (163840, 0, 131072),
    "nvidia--Nemotron-H-56B-Base-8K": (40960, 912605184, 8192),
    "nvidia--Qwen3-235B-A22B-NVFP4": (96256, 0, 40960),
    "openai--gpt-oss-120b": (73728, 0, 131072),
    "openai--gpt-oss-20b": (49152, 0, 131072),
    "openai-community--gpt2": (36864, 0, 1024),
    "tiiuae--falcon-7b": (8192, 0, 2048),
    "unsloth--Llama-4-Scout-17B-16E-Instruct": (196608, 0, 10485760),
    "unsloth--gemma-2-9b": (344064, 0, 8192),
}


def test_every_fixture_is_pinned() -> None:
    assert sorted(EXPECTED) == ALL_FIXTURES


@pytest.mark.parametrize("folder", ALL_FIXTURES)
def test_fixture_kv_bytes_per_token_state_and_max_len(folder: str) -> None:
    model = load_fixture(folder)
    (specs,) = kv_cache_specs(model)
    assert (sum(s.bytes_per_token for s in specs), sum(s.state_bytes for s in specs), model.max_model_len) \
        == EXPECTED[folder]


def test_document_qwen25_1_5b_is_28672_bytes_and_4864_tokens_is_0_1299_gib() -> None:
    """Starting document §2: 2 × 28 layers × 2 KV heads × 128 × 2 bytes; LMCache's 4,864 tokens = 0.1299 GiB."""
    model = load_fixture("Qwen--Qwen2.5-1.5B")
    report = size_report(model)
    assert report.kv_bytes_per_token == 2 * 28 * 2 * 128 * 2 == 28_672
    (specs,) = kv_cache_specs(model)
    assert round(request_kv_bytes(specs, 4864) / GiB, 4) == 0.1299


def test_document_qwen25_7b_is_56_kib_and_392_kib_as_mha() -> None:
    report = size_report(load_fixture("Qwen--Qwen2.5-7B"))
    assert report.kv_bytes_per_token == 57_344 == 56 * 1024
    assert report.mha_bytes_per_token == 392 * 1024
    assert report.attention_class == "GQA"


@pytest.mark.parametrize("folder", ["Qwen--Qwen2.5-1.5B", "Qwen--Qwen2.5-7B", "deepseek-ai--DeepSeek-V3",
                                    "openai--gpt-oss-120b", "unsloth--gemma-2-9b"])
def test_fp8_kv_halves_every_attention_layer(folder: str) -> None:
    model = load_fixture(folder)
    assert size_report(model, kv_cache_dtype="fp8").kv_bytes_per_token * 2 == size_report(model).kv_bytes_per_token


def test_mla_latent_is_576_per_layer_and_whole_on_every_tp_rank() -> None:
    """MLAAttentionSpec: kv_lora_rank 512 + qk_rope 64, one head, no separate V; TP does not shrink it."""
    model = load_fixture("deepseek-ai--DeepSeek-V3")
    for tp in (1, 2, 8):
        (specs,) = kv_cache_specs(model, tp=tp)
        assert {(s.num_kv_heads, s.head_size, s.head_size_v) for s in specs} == {(1, 576, 0)}
        assert sum(s.bytes_per_token for s in specs) == 61 * 576 * 2 == 70_272
    assert size_report(model).attention_class == "MLA"


def test_gqa_heads_split_over_tp_and_replicate_beyond_kv_heads() -> None:
    """ModelConfig.get_num_kv_heads: max(1, kv // tp); Qwen2.5-1.5B has 2 KV heads."""
    model = load_fixture("Qwen--Qwen2.5-1.5B")
    per_tp = {tp: size_report(model, tp=tp).kv_bytes_per_token for tp in (1, 2, 4)}
    assert per_tp == {1: 28_672, 2: 14_336, 4: 14_336}


def test_tp_that_does_not_divide_heads_is_rejected() -> None:
    from kvplan.errors import InvalidParameter

    with pytest.raises(InvalidParameter, match="does not divide the 28 attention heads"):
        kv_cache_specs(load_fixture("Qwen--Qwen2.5-7B"), tp=3)


def test_pp_split_follows_get_pp_indices() -> None:
    """distributed/utils.py:get_pp_indices: remainder goes to the stages before the last, backwards."""
    assert [len(r) for r in pp_layer_ranges(28, 2)] == [14, 14]
    assert [len(r) for r in pp_layer_ranges(61, 4)] == [15, 15, 16, 15]
    assert [len(r) for r in pp_layer_ranges(62, 4)] == [15, 16, 16, 15]
    model = load_fixture("deepseek-ai--DeepSeek-V3")
    stages = kv_cache_specs(model, pp=4)
    assert [len(s) for s in stages] == [15, 15, 16, 15]
    assert size_report(model, pp=4).kv_bytes_per_token == 16 * 1152


def test_gemma4_global_layers_have_their_own_heads_and_head_size() -> None:
    """25 sliding layers × 8 heads × 256 + 5 global layers × 2 heads × 512, K and V, bf16."""
    (specs,) = kv_cache_specs(load_fixture("google--gemma-4-26B-A4B"))
    assert sum(s.bytes_per_token for s in specs) == 25 * 8 * 256 * 2 * 2 + 5 * 2 * 512 * 2 * 2 == 225_280


def test_gated_delta_net_state_matches_reference_example_e() -> None:
    """vllm-reference §10(e): conv 8192 × 3 × 2 + ssm 32 × 128 × 128 × 2 = 1,097,728 B per layer; TP 2 halves it."""
    model = load_fixture("Qwen--Qwen3-Next-80B-A3B-Instruct")
    state = next(layer.state for layer in model.layers if layer.state)
    assert state is not None
    assert recurrent_state_bytes(state, 1) == 8192 * 3 * 2 + 32 * 128 * 128 * 2 == 1_097_728
    assert recurrent_state_bytes(state, 2) == 548_864


def test_nemotron_h_keeps_its_ssm_state_in_float32() -> None:
    """54 Mamba2 layers × (conv 3 × 20,480 × 2 B + ssm 256 × 64 × 256 × 4 B) = 912.6 MB per request."""
    (specs,) = kv_cache_specs(load_fixture("nvidia--Nemotron-H-56B-Base-8K"))
    per_layer = 3 * (16384 + 2 * 8 * 256) * 2 + 256 * 64 * 256 * 4
    assert sum(s.state_bytes for s in specs) == 54 * per_layer


def test_sliding_window_request_bytes_are_capped_at_the_window() -> None:
    (specs,) = kv_cache_specs(load_fixture("openai--gpt-oss-120b"))
    # 18 full layers hold every token; 18 sliding layers at most 128 tokens.
    assert request_kv_bytes(specs, 100_000) == 100_000 * 18 * 2048 + 128 * 18 * 2048


def test_auto_kv_dtype_follows_the_checkpoint_kv_scheme() -> None:
    assert resolve_kv_cache_dtype(load_fixture("nvidia--Llama-3.1-70B-Instruct-FP8")) == "fp8"
    assert resolve_kv_cache_dtype(load_fixture("deepseek-ai--DeepSeek-V3")) == "bfloat16"  # FP8 weights only
    assert resolve_kv_cache_dtype(load_fixture("THUDM--chatglm3-6b")) == "float16"


def test_unknown_kv_dtype_suggests_the_close_one() -> None:
    from kvplan.errors import InvalidParameter

    with pytest.raises(InvalidParameter) as info:
        resolve_kv_cache_dtype(load_fixture("Qwen--Qwen2.5-7B"), "fp9")
    assert info.value.hint == "did you mean fp8?"


def test_kv_bytes_sum_of_tp_shards_is_the_whole() -> None:
    model = load_fixture("meta-llama--Meta-Llama-3.1-70B")
    for tp in (1, 2, 4, 8):
        assert size_report(model, tp=tp).kv_bytes_per_token * tp == 327_680


def test_mha_equivalent_of_mla_uses_per_head_k_and_v() -> None:
    model = load_fixture("deepseek-ai--DeepSeek-V3")
    assert size_report(model).mha_bytes_per_token == 61 * 128 * (192 + 128) * 2


def test_kv_shared_and_mlp_only_layers_keep_no_cache() -> None:
    model = load_fixture("nvidia--Nemotron-H-56B-Base-8K")
    (specs,) = kv_cache_specs(model)
    assert len(specs) == 54 + 10  # 54 '-' MLP layers have no spec
    shared = replace(model, layers=tuple(replace(lyr, kind="kv_shared") if lyr.index >= 100 else lyr
                                         for lyr in model.layers))
    (specs,) = kv_cache_specs(shared)
    assert all(s.layer < 100 for s in specs)
