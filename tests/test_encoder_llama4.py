"""Llama-4's encoder profile (kvplan/vllm/encoder_llama4.py): the 16:1 dummy image (17 chunks), the budget and item
count, what the profile run keeps and the tower's forward peak, against vLLM 0.33's own profile run
(tests/fixtures/oracle-profile/cases/RedHatAI--Llama-4-Scout-*-enc.json: the encoder phase ran; the FP8 MoE forward
after it is an oracle failure)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.vllm.defaults import VllmVersion
from kvplan.vllm.encoder_llama4 import MAX_TILES, Llama4Vision, llama4_encoder_phase, max_image

FIXTURES = Path(__file__).parent / "fixtures"
SCOUT = "RedHatAI--Llama-4-Scout-17B-16E-Instruct-FP8-dynamic"
CASES = sorted(p.stem for p in (FIXTURES / "oracle-profile" / "cases").glob(f"{SCOUT}__*-enc.json"))
BLOCK = 512


def _vision() -> Llama4Vision:
    c = json.loads((FIXTURES / "corpus" / "configs" / SCOUT / "config.json").read_text())
    v = c["vision_config"]
    return Llama4Vision(v["hidden_size"], v["intermediate_size"], v["num_attention_heads"], v["image_size"],
                        v["patch_size"], v["pixel_shuffle_ratio"], c["text_config"]["hidden_size"], v["num_channels"])


def _golden(case: str) -> dict:
    return json.loads((FIXTURES / "oracle-profile" / "cases" / f"{case}.json").read_text())


V033 = VllmVersion(0, 33)


def _phase(golden: dict, runner_v2: bool = False, version: VllmVersion = V033):  # type: ignore[no-untyped-def]
    phase = llama4_encoder_phase(_vision(), version, model_runner_v2=runner_v2, tp=golden["tp"],
                                 max_num_batched_tokens=golden["tokens"], max_num_seqs=golden["max_num_seqs"],
                                 max_model_len=golden["max_model_len"], image_limit=999)
    assert phase is not None
    return phase


def test_the_dummy_is_16_tiles_and_the_global_one() -> None:
    """5,376 × 336 at 16 tiles: 17 chunks of 144 embeddings (24² patches over the 2 × 2 pixel shuffle), 577 tokens
    each in the encoder."""
    g = _vision()
    item = max_image(g)
    assert (MAX_TILES, item.patches, item.embeds, g.tokens_per_chunk) == (16, 17, 2448, 577)


def test_two_goldens_from_vllm_033() -> None:
    assert CASES == [f"{SCOUT}__h100-tp1-enc", f"{SCOUT}__h100-tp4-enc"]


@pytest.mark.parametrize("case", CASES)
def test_items_budget_and_shapes_equal_vllm_033(case: str) -> None:
    """3 images on 8,192 batched tokens, the 8,192-token budget, 51 chunks of pixels, 3 outputs of 2,448 × 5,120."""
    golden = _golden(case)
    enc, phase = golden["phases"]["encoder"], _phase(golden)
    assert (phase.item.modality, phase.items, phase.budget) == (enc["modality"], enc["items"],
                                                                enc["encoder_budget_tokens"])
    assert enc["max_tokens_per_item"] == {"image": phase.item.budget_tokens}
    assert enc["inputs"]["pixel_values"] == [[phase.items * phase.item.patches, 3, 336, 336], "bfloat16"]
    assert enc["output_shapes"] == [[phase.item.embeds, 5120]] * phase.items


@pytest.mark.parametrize("case", CASES)
def test_kept_and_tower_peak_equal_vllm_033(case: str) -> None:
    """What stays after the encoder (the outputs, to the byte; the V1 runner also keeps the model-dtype pixels the
    probe drops) and the tower's peak with the pixels within 4 blocks (TP 1: the attention's rotary; TP 4: the MLP
    with fc2's all-reduce copy)."""
    golden = _golden(case)
    enc, phase = golden["phases"]["encoder"], _phase(golden)
    pixels = phase.items * phase.item.patches * 3 * 336 * 336 * 2
    assert phase.retained_bytes == enc["live_after_bytes"] + pixels
    assert 0 <= enc["peak_bytes"] - phase.forward_peak_bytes <= 4 * BLOCK


def test_model_runner_v2_keeps_the_outputs_only() -> None:
    golden = _golden(CASES[0])
    assert _phase(golden, runner_v2=True).retained_bytes == golden["phases"]["encoder"]["live_after_bytes"]
    assert _phase(golden, runner_v2=True, version=VllmVersion(0, 24)).items == 0


def test_images_limited_to_0_profile_nothing() -> None:
    assert llama4_encoder_phase(_vision(), model_runner_v2=False, tp=1, max_num_batched_tokens=8192,
                                max_num_seqs=1024, max_model_len=8192, image_limit=0) is None


def test_data_mode_runs_a_quarter_of_the_chunks_through_the_whole_tower() -> None:
    """--mm-encoder-tp-mode data at TP 4 (vLLM 0.33's own run, ..._mm_encoder_tp_modedata.json): the 51 chunks are
    padded to 52 (F.pad: a (52, 3, 336, 336) bf16 copy, in the golden's largest tensors) and 13 go through the
    unsharded tower (qkv (13, 577, 4,224)); 407,734,784 bytes with the pixels, within 3 blocks of the golden; the
    projector's outputs stay as in the weights mode (75,202,560 bytes)."""
    golden = _golden(f"{SCOUT}__h100-tp4-enc_engine-arg_mm_encoder_tp_modedata")
    enc = golden["phases"]["encoder"]
    phase = llama4_encoder_phase(_vision(), V033, model_runner_v2=False, tp=4, max_num_batched_tokens=golden["tokens"],
                                 max_num_seqs=golden["max_num_seqs"], max_model_len=golden["max_model_len"],
                                 image_limit=999, data_parallel=True)
    assert phase is not None
    pixels = 51 * 3 * 336 * 336 * 2
    assert phase.forward_peak_bytes == pixels + 52 * 3 * 336 * 336 * 2 + 13 * 577 * 2 * 16 * 1408 == 407_734_784
    assert 0 <= enc["peak_bytes"] - phase.forward_peak_bytes <= 4 * BLOCK
    assert phase.retained_bytes == enc["live_after_bytes"] + pixels
