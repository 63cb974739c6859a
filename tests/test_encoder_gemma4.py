"""Gemma-4's vision-encoder profile peak (kvplan/vllm/encoder_gemma4.py), against hand computation from vLLM's
gemma4_mm.py:_encoder_chunk (0.22.0 = 0.27.0 = 0.33.0) and transformers' Gemma4VisionPatchEmbedder (≤ 5.9.0:
F.one_hot; ≥ 5.10.1: F.embedding). The probe (profile_probe.py, vLLM 0.33 with transformers 5.19) cannot give a
golden: its transformers has no one-hot, and its masking_utils calls Tensor.item() on meta tensors."""
from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.hardware.gpus import get_gpu
from kvplan.model.hub import load_local
from kvplan.vllm.defaults import VllmVersion
from kvplan.vllm.encoder_gemma4 import encoder_chunk, gemma4_encoder_peak
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.settings import ServeSettings

CONFIGS = Path(__file__).parent / "fixtures" / "corpus" / "configs"
H100_TOTAL = 85_029_615_043  # kvplan's H100 SXM CUDA total (hardware/gpus)
FRAME_PATCHES = 70 * 3 ** 2  # _VIDEO_MAX_SOFT_TOKENS × pooling_kernel_size²
FRAME_COST = FRAME_PATCHES * 4 * 10240 * 8  # _encoder_chunk's cost: 206,438,400 bytes a frame
# the 26B-A4B checkpoint's vision_config: hidden_size 1152, patch_size 16, pooling_kernel_size 3,
# position_embedding_size 10240 (tests/fixtures/corpus/configs/google--gemma-4-26B-A4B-it/config.json)
_TOWER = load_local(str(CONFIGS / "google--gemma-4-26B-A4B-it")).towers[0]
assert _TOWER.gemma4_vision is not None
VISION = _TOWER.gemma4_vision


def test_chunk_is_a_tenth_of_the_card_over_vllms_cost() -> None:
    """min(free // 2, total // 10) // (patches · 4 · 10,240 · 8): 8,502,961,504 // 206,438,400 = 41 frames;
    an image (280 soft tokens, 2,520 patches) costs 4× as much: 10."""
    assert FRAME_COST == 206_438_400
    assert encoder_chunk(FRAME_PATCHES, 30 * 2**30, H100_TOTAL, 10240) == 41
    assert encoder_chunk(280 * 9, 30 * 2**30, H100_TOTAL, 10240) == 10


def test_chunk_halves_the_free_memory_when_that_is_smaller() -> None:
    """4e9 free: 2e9 // 206,438,400 = 9 frames; nothing free still encodes one."""
    assert encoder_chunk(FRAME_PATCHES, 4_000_000_000, H100_TOTAL, 10240) == 9
    assert encoder_chunk(FRAME_PATCHES, 0, H100_TOTAL, 10240) == 1


def test_022_three_videos_one_hot_of_41_frames() -> None:
    """vLLM 0.22 (built with transformers 5.9.0, one-hot): 3 videos × 32 frames, 41 per call; the int64 one-hot
    and its bf16 cast: 41 · 630 · 2 · 10,240 · (8 + 2) bytes; vLLM's own cost (the high end) 16 per element; held:
    96 frames' float32 pixels (3 · 16² · 4) and 1,152-wide bf16 hidden states."""
    p = gemma4_encoder_peak(VllmVersion(0, 22), modality="video", items=3, embeds_per_item=32 * 70,
                            total_bytes=H100_TOTAL, weights_bytes=51_774_583_392, vision=VISION)
    assert p is not None
    assert (p.items, p.patches, p.chunk) == (96, 630, 41)
    assert p.one_hot_bytes == 41 * 630 * 2 * 10240 * 10 == 5_289_984_000
    assert p.one_hot_high_bytes == 41 * 630 * 2 * 10240 * 16 == 8_463_974_400
    assert p.held_bytes == 96 * 630 * (3 * 256 * 4 + 1152 * 2) == 325_140_480


def test_019_encodes_one_frame_per_tower_call() -> None:
    """0.19–0.21 call the tower per item: one frame's one-hot, 630 · 2 · 10,240 · 10 = 129,024,000 bytes."""
    p = gemma4_encoder_peak(VllmVersion(0, 19), modality="video", items=1, embeds_per_item=32 * 70,
                            total_bytes=H100_TOTAL, weights_bytes=0, vision=VISION)
    assert p is not None and p.chunk == 1 and p.one_hot_bytes == 129_024_000


@pytest.mark.parametrize(("minor", "point", "high"), [(27, 0, 8_463_974_400), (28, 0, 8_463_974_400), (29, 0, 0),
                                                      (33, 0, 0)])
def test_one_hot_by_the_transformers_each_release_allows(minor: int, point: int, high: int) -> None:
    """0.23–0.28 allow transformers < 5.10.1 (high end only); 0.29 requires ≥ 5.10.4, 0.32+ ≥ 5.16.1 (none)."""
    p = gemma4_encoder_peak(VllmVersion(0, minor), modality="video", items=3, embeds_per_item=32 * 70,
                            total_bytes=H100_TOTAL, weights_bytes=51_774_583_392, vision=VISION)
    assert p is not None and (p.one_hot_bytes, p.one_hot_high_bytes) == (point, high)


def test_audio_has_no_one_hot() -> None:
    assert gemma4_encoder_peak(VllmVersion(0, 22), modality="audio", items=5, embeds_per_item=750,
                               total_bytes=H100_TOTAL, weights_bytes=0, vision=VISION) is None


def _activation(version: str, gpu: str = "h100", **kw: object) -> tuple[int, int, int, str]:
    model = load_local(str(CONFIGS / "google--gemma-4-26B-A4B-it"))
    s = ServeSettings.of(max_model_len=32768, vllm_version=version, **kw)  # type: ignore[arg-type]
    act = {t.name: t for t in plan_fit(model, get_gpu(gpu), s, advise=False).memory.terms}["activation"]
    return act.bytes, act.low_bytes, act.high_bytes, act.assumption


def test_fit_022_h100_activation_is_the_encoder_phase() -> None:
    """Gemma-4-26B-A4B on H100 at 0.22: the encoder phase (5,289,984,000 + 325,140,480) outweighs the language
    model's dummy run and sampler, and the assumption says why."""
    best, _, high, note = _activation("0.22")
    assert best == 5_289_984_000 + 325_140_480
    assert high == 8_463_974_400 + 325_140_480
    assert "41 per tower call" in note and "one-hot" in note


def test_fit_033_and_019_unchanged() -> None:
    """0.33 (transformers ≥ 5.16.1) has no one-hot; 0.19's one frame per call stays below the dummy run."""
    for version in ("0.33", "0.19"):
        assert "one-hot" not in _activation(version)[3]


def test_fit_022_images_when_video_is_limited_to_0() -> None:
    """Videos at 0: the 280-token image is profiled, 8,192 // 280 = 29 of them, 2,520 patches each, 10 per call
    (8,502,961,504 // 825,753,600): 10 · 2,520 · 2 · 10,240 · 10 bytes of one-hot, 29 images' pixels and states."""
    from kvplan.vllm.multimodal import parse_mm_limits

    best, _, _, note = _activation("0.22", limit_mm_per_prompt=parse_mm_limits('{"video": 0}'))
    assert best == 10 * 2520 * 2 * 10240 * 10 + 29 * 2520 * (3 * 256 * 4 + 1152 * 2) == 5_553_838_080
    assert "29 images of 2520 patches, 10 per tower call" in note


def test_the_shapes_are_the_configs_vision_config() -> None:
    """hidden_size, patch_size, pooling_kernel_size and position_embedding_size as each checkpoint's vision_config
    states them (26B-A4B and 31B: 1,152 wide; E2B and E4B: 768)."""
    for name, hidden in (("google--gemma-4-26B-A4B-it", 1152), ("google--gemma-4-31B-it", 1152),
                         ("google--gemma-4-E2B-it", 768), ("google--gemma-4-E4B-it", 768)):
        shape = load_local(str(CONFIGS / name)).towers[0].gemma4_vision
        assert shape is not None
        assert (shape.hidden_size, shape.patch_size, shape.pooling_kernel_size, shape.position_embedding_size) == (
            hidden, 16, 3, 10240)


def test_a_vision_config_without_pooling_kernel_size_is_refused_in_one_line(tmp_path: Path) -> None:
    """The encoder profile's patch count (gemma4_mm.py: max_patches = soft tokens × pooling_kernel_size²) needs it."""
    import json

    from kvplan.errors import BadConfig

    config = json.loads((CONFIGS / "google--gemma-4-26B-A4B-it" / "config.json").read_text())
    del config["vision_config"]["pooling_kernel_size"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    model = load_local(str(tmp_path))
    with pytest.raises(BadConfig, match=r"^Gemma-4's vision_config has no pooling_kernel_size: ") as err:
        plan_fit(model, get_gpu("h100"), ServeSettings.of(max_model_len=32768, vllm_version="0.22"), advise=False)
    assert "\n" not in str(err.value)
