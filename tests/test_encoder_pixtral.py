"""Mistral-3's (Pixtral vision) encoder profile (kvplan/vllm/encoder_pixtral.py) and the release boundaries of what
v1/worker/gpu_model_runner.py:profile_run keeps (kvplan/vllm/encoder_profile.py:runner_kept), in exact bytes from
the figures read in vLLM's code (0.10.2, 0.11.0, 0.11.2, 0.13.0 … 0.33.0; the modules' docstrings)."""
from __future__ import annotations

import pytest

from kvplan.hardware.gpus import get_gpu
from kvplan.model.hub import load_local
from kvplan.model.spec import ModelSpec, VisionGeometry
from kvplan.vllm.defaults import VllmVersion
from kvplan.vllm.encoder_pixtral import pixtral_encoder_phase, pixtral_image
from kvplan.vllm.encoder_profile import qwen3_vl_encoder_phase
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.settings import ServeSettings
from tests.conftest import CONFIGS

CORPUS = CONFIGS.parent / "corpus" / "configs"
SMALL_32 = "mistralai--Mistral-Small-3.2-24B-Instruct-2506"
QWEN3_VL = "Qwen--Qwen3-VL-30B-A3B-Instruct"

# Mistral-Small-3.2: image_size 1540, patch 14, spatial_merge_size 2 → 55 × 55 embeddings of the 5,120-wide text
# hidden size; 110 × 110 patches of 3 × 14 × 14 values (float32 pixels: 3 × 1540 × 1540 × 4 B)
EMBEDS, TOKENS_011, PATCHES, WIDTH, VALUES = 3025, 3080, 12100, 5120, 588
OUTPUTS = 2 * EMBEDS * WIDTH * 2  # the two images' outputs, views of one projector output: 61,952,000 B
PIXELS = 2 * PATCHES * VALUES * 4  # 56,918,400 B
COPIES = 2 * 8192 * WIDTH * 2  # new_zeros((8,192, 5,120)) bf16 each: 167,772,160 B


def _model(name: str) -> ModelSpec:
    return load_local(str(CORPUS / name))


def _geometry(model: ModelSpec) -> VisionGeometry:
    geometry = next(t.geometry for t in model.towers if t.geometry is not None)
    assert geometry is not None
    return geometry


def _phase(version: tuple[int, int], *, v2: bool = False, batched: int = 8192, image_limit: int = 999):
    return pixtral_encoder_phase(_geometry(_model(SMALL_32)), VllmVersion(*version), model_runner_v2=v2, tp=1,
                                 max_num_batched_tokens=batched, max_num_seqs=256, max_model_len=16000,
                                 image_limit=image_limit, video_limit=999)


def test_the_dummy_image_is_vision_config_image_size() -> None:
    """get_image_size_with_most_features: 1,540 × 1,540; 55 tokens a side (patch 14 × merge 2); the placeholder
    adds a break token a row (the budget's tokens up to 0.12, get_mm_max_contiguous_tokens), 0.13+ counts 3,025."""
    g = _geometry(_model(SMALL_32))
    assert (g.kind, g.image_size, g.patch_size, g.spatial_merge_size, g.embed_width, g.patch_values) == (
        "pixtral", 1540, 14, 2, WIDTH, VALUES)
    old, new = pixtral_image(g, VllmVersion(0, 11)), pixtral_image(g, VllmVersion(0, 13))
    assert (old.budget_tokens, old.embeds, old.patches) == (TOKENS_011, EMBEDS, PATCHES)
    assert (new.budget_tokens, new.embeds, new.patches) == (EMBEDS, EMBEDS, PATCHES)


def test_011_keeps_two_widened_copies_the_outputs_and_the_pixels() -> None:
    """The llm-d H100 row's deployment (0.11.0, 8,192 batched tokens, max_model_len 16,000): 8,192 // 3,080 = 2
    images, each scattered into (8,192, 5,120) bf16; the loop's last `output` keeps the projector's whole output,
    batched_dummy_mm_inputs the float32 pixels: 286,642,560 B."""
    phase = _phase((0, 11))
    assert phase is not None
    assert (phase.budget, phase.items) == (8192, 2)
    assert phase.retained_bytes == phase.retained_low_bytes == phase.retained_high_bytes == COPIES + OUTPUTS + PIXELS
    assert phase.retained_bytes == 286_642_560


@pytest.mark.parametrize(("version", "v2", "expected"), [
    ((0, 10), False, OUTPUTS + PIXELS),  # 0.10.2: encoder_cache["tmp"] holds the outputs, no budget-sized copy
    ((0, 13), False, OUTPUTS + PIXELS),  # 0.13+: encoder_cache[f"tmp_{i}"], the outputs as they are
    ((0, 31), False, OUTPUTS + PIXELS),
    ((0, 32), False, OUTPUTS + PIXELS // 4),  # mistral3.py: supports_mm_device_do_normalize, uint8 pixels
    ((0, 24), True, 0),  # Model Runner V2 0.24: no encoder profile
    ((0, 27), True, OUTPUTS),  # profile_encoder_cache: the outputs only
])
def test_kept_by_release(version: tuple[int, int], v2: bool, expected: int) -> None:
    phase = _phase(version, v2=v2)
    assert phase is not None
    assert phase.retained_bytes == expected
    assert phase.items == (0 if expected == 0 else 2)  # 8,192 // 3,025 = 2 from 0.13 too


def test_image_limit_zero_profiles_nothing() -> None:
    assert _phase((0, 11), image_limit=0) is None


def test_qwen3_vl_010_has_no_budget_copy() -> None:
    """vLLM 0.10.2 caches the outputs as they are; the budget-sized copy is 0.11–0.12's (BUDGET_COPY_SINCE). Qwen3-VL's
    image (4,096 × 4,096: 65,536 patches, 16,384 embeddings) at 32,768 batched tokens: 2 items, each widened to
    (32,768, 8,192) bf16 on 0.11 only."""
    g = _geometry(_model(QWEN3_VL))
    kwargs = dict(model_runner_v2=False, tp=1, max_num_batched_tokens=32768, max_num_seqs=256, max_model_len=65536,
                  image_limit=999, video_limit=0)
    v010 = qwen3_vl_encoder_phase(g, VllmVersion(0, 10), **kwargs)  # type: ignore[arg-type]
    v011 = qwen3_vl_encoder_phase(g, VllmVersion(0, 11), **kwargs)  # type: ignore[arg-type]
    assert v010 is not None and v011 is not None
    outputs, pixels = 2 * 16384 * 8192 * 2, 2 * 65536 * 1536 * 4
    assert (v010.items, v010.item.embeds, v010.budget) == (2, 16384, 32768)
    assert v010.retained_bytes == outputs + pixels
    assert v011.retained_bytes == 2 * 32768 * 8192 * 2 + outputs + pixels


def test_fit_adds_the_011_encoder_memory_to_the_activation() -> None:
    """fit's activation term on the llm-d row's settings: the language model's peak plus the 286,642,560 B the
    0.11.0 encoder profile leaves (the tower's estimated peak is below that sum)."""
    model = _model(SMALL_32)
    s = ServeSettings.of(max_model_len=16000, gpu_memory_utilization=0.95, block_size=128, vllm_version="0.11.0")
    with_enc = plan_fit(model, get_gpu("h100"), s, advise=False)
    without = plan_fit(model, get_gpu("h100"), s.updated(limit_mm_per_prompt=(), language_model_only=True),
                       advise=False)
    act = {t.name: t for t in with_enc.memory.terms}["activation"]
    base = {t.name: t for t in without.memory.terms}["activation"]
    assert act.bytes - base.bytes == COPIES + OUTPUTS + PIXELS
    assert "8,192-row copies" in act.assumption
