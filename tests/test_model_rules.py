"""Issue 22's rules that unseen configs still hit, each pinned to vLLM 0.33's source (cited per test) and, where
the CUDA oracle could answer, to its goldens (tests/fixtures/oracle-cuda/, counted by benchmarks/coverage.py)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.errors import BadConfig
from kvplan.model.config import parse_config
from kvplan.model.families.text_config import _defaults_table
from kvplan.model.hub import load_local
from kvplan.model.size import size_report
from kvplan.vllm.architectures import serving_refusal, transformers_backend_refusal
from kvplan.vllm.backends import mm_prefix_backend
from kvplan.vllm.defaults import VllmVersion
from tests.conftest import CONFIGS, json_out, run_kvplan
from tests.hubserver import HubServer, Repo

CORPUS = CONFIGS.parent / "corpus" / "configs"
runner = CliRunner()


# --- 1. DeepSeek-V2 family with zero qk_nope_head_dim / qk_rope_head_dim: plain MHA -------------------------

def test_deepseek_ocr_language_model_is_planned_as_deepseek_attention() -> None:
    """DeepSeek-OCR's language_config (vLLM's DeepseekVLV2Config reads it as a DeepseekV2Config) has zero qk dims
    and kv_lora_rank null: DeepseekV2DecoderLayer builds DeepseekAttention, head_dim = 1280 // 10 = 128 with
    num_key_value_heads 10 (models/deepseek_v2.py), not MLA; v_head_dim 0 is not read."""
    spec = load_local(str(CORPUS / "deepseek-ai--DeepSeek-OCR"))
    assert spec.mla is None and spec.model_type == "deepseek_v2"
    assert {(layer.kind, layer.num_kv_heads, layer.head_size, layer.head_size_v) for layer in spec.layers} == {
        ("full", 10, 128, 128)}
    assert size_report(spec).kv_bytes_per_token == 12 * 10 * 128 * 2 * 2  # 61,440: 12 layers, K and V, bf16


def test_zero_qk_dims_override_the_latent_rank_as_vllm_does() -> None:
    """use_mha does not look at kv_lora_rank: DeepSeek-V2-Lite with zero qk dims is MHA (16 KV heads × 128)."""
    raw = json.loads((CONFIGS / "deepseek-ai--DeepSeek-V2-Lite" / "config.json").read_text())
    spec = parse_config({**raw, "qk_nope_head_dim": 0, "qk_rope_head_dim": 0})
    assert spec.mla is None and spec.num_kv_heads == 16 and spec.head_size == 2048 // 16
    assert parse_config(raw).mla is not None  # the real config stays MLA


# --- 2. Multimodal prefix LMs whose head size the composite backends refuse --------------------------------

@pytest.mark.parametrize(("arch", "heads", "backend", "block"), [
    ("blackwell", {256, 512}, "TRITON_FLASHINFER", 64),  # gemma-4 (triton_flashinfer.py head_sizes 256, 512)
    ("blackwell", {256}, "TRITON_FLASHINFER", 64),  # gemma-3-4b
    ("blackwell", {128}, "FLASH_ATTN", 16),  # FLASHINFER has no mm-prefix support; FA4 takes it on SM100
    ("hopper", {256}, "TRITON_FLASH_ATTN", 16),
    ("hopper", {128}, "TRITON_ATTN", 16),  # FA3 at head 128 on SM90: no mm-prefix (flash_attn.py)
    ("ampere", {128}, "TRITON_ATTN", 16),
])
def test_mm_prefix_backend_walks_vllms_priority_list(arch: str, heads: set[int], backend: str, block: int) -> None:
    b = mm_prefix_backend(arch, heads)
    assert (b.name, b.block_size) == (backend, block)


# --- 3. Text sub-configs that leave fields to their transformers class defaults -----------------------------

def test_class_defaults_are_generated_from_the_transformers_release_vllm_pins() -> None:
    table = _defaults_table()
    assert table["transformers"] == "5.19.0" and table["vllm"] == "0.33.0"  # vLLM 0.33: transformers>=5.16.1,<5.21
    assert table["generated_by"] == "scripts/text_config_defaults.py"
    # transformers 5.19 configuration_qwen2.py: Qwen2Config field defaults
    assert {k: table["defaults"]["qwen2"][k] for k in ("num_hidden_layers", "num_attention_heads",
                                                      "num_key_value_heads", "hidden_size")} == {
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_size": 4096}
    assert table["sub_config_model_types"]["qwen2_audio"] == {"text_config": "qwen2"}


def test_qwen2_audio_text_config_takes_qwen2config_defaults_and_says_so() -> None:
    """Qwen2-Audio-7B-Instruct's text_config names only a few keys (no num_hidden_layers, no num_attention_heads):
    vLLM reads it as a Qwen2Config, so 32 layers × 32 KV heads × 4096 // 32 apply (the CUDA oracle's plan: 2,560
    blocks of 16 tokens in 20 GiB = 20 GiB / (16 × 524,288 B))."""
    spec = load_local(str(CORPUS / "Qwen--Qwen2-Audio-7B-Instruct"))
    assert (spec.num_layers, spec.num_attention_heads, spec.num_kv_heads, spec.head_size) == (32, 32, 32, 128)
    assert size_report(spec).kv_bytes_per_token == 524_288
    assert any("num_hidden_layers=32" in n and "`qwen2` config class (transformers 5.19.0" in n
               for n in spec.config_notes)


def test_a_key_the_text_config_sets_is_never_replaced_by_a_default() -> None:
    spec = load_local(str(CORPUS / "mistral-community--pixtral-12b"))  # text_config: no num_attention_heads
    assert (spec.num_attention_heads, spec.num_kv_heads, spec.head_size, spec.num_layers) == (32, 8, 128, 40)


# --- 4. Transformers backend: a layer that does not dispatch through the attention interface ---------------

def test_transformers_backend_refusal_is_vllms_sentence() -> None:
    """models/transformers/base.py:_create_attention_instances, with text_config.layer_types when it has them."""
    assert transformers_backend_refusal(0, ["mamba", "attention"], "BambaForCausalLM", VllmVersion(0, 33)) == (
        "Layer 0 (mamba) does not dispatch through the Transformers attention interface and vLLM has no other way "
        "to handle it (vLLM 0.33 would serve BambaForCausalLM through its Transformers backend)")
    assert transformers_backend_refusal(3, None, "X", VllmVersion(0, 33)).startswith("Layer 3 does not dispatch")


def test_recurrent_gemma_is_refused_at_layer_0_not_sized() -> None:
    """RecurrentGemmaForCausalLM: no vLLM release serves it natively; the Transformers backend would, but its
    RG-LRU blocks (RecurrentGemmaConfig.block_types default recurrent, recurrent, attention) have no attention
    module. Built from a real Gemma-2 config given recurrent_gemma's model_type (no RecurrentGemma config.json is
    in the indexed sources)."""
    raw = json.loads((CORPUS / "unsloth--gemma-2-2b" / "config.json").read_text())
    raw = {**raw, "model_type": "recurrent_gemma", "architectures": ["RecurrentGemmaForCausalLM"]}
    with pytest.raises(BadConfig) as exc:
        parse_config(raw)
    assert exc.value.layer_without_attention == 0
    from kvplan.vllm.architectures import explain_bad_config

    assert str(explain_bad_config(exc.value, VllmVersion(0, 33))).startswith(
        "Layer 0 does not dispatch through the Transformers attention interface and vLLM has no other way")


def test_bamba_is_still_refused_at_its_first_mamba_layer() -> None:
    spec = load_local(str(CORPUS / "ibm-ai-platform--Bamba-9B"))
    assert str(serving_refusal(spec, VllmVersion(0, 33))).startswith("Layer 0 does not dispatch")


# --- 5. Configs vLLM reads from other files ------------------------------------------------------------------

def test_a_mistral_format_checkpoint_names_the_file_vllm_reads() -> None:
    """mistralai/Pixtral-12B-2409 has params.json and no config.json: vLLM 0.33 reads params.json
    (transformers_utils/config.py:get_config, config_format auto); kvplan says so and exits 2."""
    result = runner.invoke(app, ["size", str(CORPUS / "mistralai--Pixtral-12B-2409")])
    assert result.exit_code == 2
    assert "params.json (Mistral format) and no config.json: vLLM 0.33 reads params.json" in result.output


def test_params_json_beside_config_json_says_what_vllm_would_take_instead(tmp_path: Path) -> None:
    """Pixtral-12B-2409's params.json says 131,072 positions, its HF conversion (mistral-community/pixtral-12b)
    1,024,000: with consolidated*.safetensors beside them vLLM reads params.json (repo_utils.py:
    is_mistral_model_repo), so its max_model_len is not the one config.json gives."""
    shutil.copy(CORPUS / "mistral-community--pixtral-12b" / "config.json", tmp_path / "config.json")
    shutil.copy(CORPUS / "mistralai--Pixtral-12B-2409" / "params.json", tmp_path / "params.json")
    note = load_local(str(tmp_path)).config_notes[-1]
    assert note.startswith("params.json is here too: vLLM 0.33 reads it instead of config.json when "
                           "consolidated*.safetensors is beside it")
    assert "max_position_embeddings 131072 (kvplan's max_model_len: 1024000)" in note
    (tmp_path / "consolidated.safetensors").write_bytes(b"")
    assert load_local(str(tmp_path)).config_notes[-1].startswith("vLLM 0.33 reads params.json for this checkpoint, not "
                                                          "config.json")


def test_a_hub_repository_with_params_json_gets_the_note(hub: HubServer, hub_env: dict[str, str]) -> None:
    """On the Hub kvplan fetches params.json beside config.json (as it does hf_quant_config.json)."""
    hub.state.repos["mistralai/Pixtral-12B-both"] = Repo(files={
        "config.json": (CORPUS / "mistral-community--pixtral-12b" / "config.json").read_bytes(),
        "params.json": (CORPUS / "mistralai--Pixtral-12B-2409" / "params.json").read_bytes()})
    data = json_out(run_kvplan(["size", "mistralai/Pixtral-12B-both", "--json"], hub_env))
    assert any(n.startswith("params.json is here too: vLLM 0.33 reads it instead of config.json") and
               "max_position_embeddings 131072" in n for n in data["notes"])


@pytest.mark.parametrize(("case", "gpu"), [("google--gemma-3-4b-it__b200-hd128", "b200"),
                                           ("google--gemma-3-4b-it__h100-hd128", "h100-sxm")])
def test_the_mm_prefix_fall_through_names_vllms_backend(case: str, gpu: str) -> None:
    """vLLM 0.33's planner on gemma-3-4b-it with text_config.head_dim 128 (tests/fixtures/oracle-cuda): the
    backend's name, block size and blocks, as kvplan plans them."""
    from kvplan.hardware.gpus import get_gpu
    from kvplan.vllm.fit import plan_fit
    from kvplan.vllm.settings import ServeSettings

    g = json.loads((CONFIGS.parent / "oracle-cuda" / f"{case}.json").read_text())
    model = load_local(str(CONFIGS / "google--gemma-3-4b-it"), hf_overrides={"text_config": {"head_dim": 128}})
    r = plan_fit(model, get_gpu(gpu), ServeSettings.of(kv_cache_memory_bytes=g["inputs"]["kv_cache_memory_bytes"],
                                                    weights_bytes=0), advise=False)
    assert ([r.deployment.attention_backend], r.cache.block_size, r.cache.num_gpu_blocks, r.verdict.log_line) == (
        g["resolved"]["attn_backends"], g["resolved"]["block_size"], g["kv_cache"]["num_blocks"],
        g["kv_cache"]["log_line"])


def test_a_broken_params_json_fails_only_where_vllm_would_read_it(tmp_path: Path) -> None:
    shutil.copy(CORPUS / "mistral-community--pixtral-12b" / "config.json", tmp_path / "config.json")
    (tmp_path / "params.json").write_text("{not json")
    assert load_local(str(tmp_path)).num_layers == 40  # no consolidated weights: vLLM reads config.json
    (tmp_path / "consolidated.safetensors").write_bytes(b"")
    with pytest.raises(BadConfig, match="params.json is not valid JSON"):
        load_local(str(tmp_path))


def test_fit_says_which_defaults_it_planned_with() -> None:
    """`fit` shows the same note as `size`: the plan rests on Qwen2Config's defaults."""
    result = runner.invoke(app, ["fit", str(CORPUS / "Qwen--Qwen2-Audio-7B-Instruct"), "--gpu", "h100", "--json"])
    assert result.exit_code in (0, 1)
    notes = json.loads(result.output)["notes"]
    assert any(n.startswith("text_config leaves hidden_size=4096") for n in notes)
