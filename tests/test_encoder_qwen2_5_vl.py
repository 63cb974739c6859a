"""Qwen2.5-VL's encoder profile (kvplan/vllm/encoder_qwen2_5_vl.py): the dummy item vLLM builds (a video of up to 14
frames at the factorized image size, or the image alone), what its profile run keeps alive and the tower's forward
peak, against the processor file (tests/fixtures/processors/qwen2.5-vl/) and vLLM 0.33's own profile run
(tests/fixtures/oracle-profile/cases/Qwen--Qwen2.5-VL-*-enc*.json)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kvplan.hardware.gpus import get_gpu
from kvplan.model.hub import load_local
from kvplan.model.spec import VisionGeometry
from kvplan.vllm.defaults import VllmVersion
from kvplan.vllm.encoder_profile import max_image
from kvplan.vllm.encoder_qwen2_5_vl import (
    QWEN2_5_VL_PROCESSOR,
    fp32_rotary_attention_bytes,
    max_video,
    native_vision_ops,
    qwen2_5_vl_encoder_phase,
    rope_bytes,
    vision_forward_peak_bytes,
)
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.settings import ServeSettings

FIXTURES = Path(__file__).parent / "fixtures"
PROCESSOR = FIXTURES / "processors" / "qwen2.5-vl"
CORPUS = FIXTURES / "corpus" / "configs"
GOLDENS = FIXTURES / "oracle-profile" / "cases"
SMALL, LARGE = "Qwen--Qwen2.5-VL-3B-Instruct", "Qwen--Qwen2.5-VL-72B-Instruct"
V033 = VllmVersion(0, 33)
CASES = sorted(p.stem for p in GOLDENS.glob("Qwen--Qwen2.5-VL-*-enc*.json"))
MIB = 2**20


def _geometry(name: str = SMALL) -> VisionGeometry:
    g = load_local(str(CORPUS / name)).towers[0].geometry
    assert g is not None and g.kind == "qwen2_5_vl"
    return g


def _phase(g: VisionGeometry, version: VllmVersion = V033, *, runner_v2: bool = False, tp: int = 1,
           batched: int = 8192, seqs: int = 1024, max_model_len: int = 128000, image: int = 999, video: int = 999,
           data_parallel: bool = False):  # type: ignore[no-untyped-def]
    phase = qwen2_5_vl_encoder_phase(g, version, model_runner_v2=runner_v2, tp=tp, max_num_batched_tokens=batched,
                                     max_num_seqs=seqs, max_model_len=max_model_len, image_limit=image,
                                     video_limit=video, data_parallel=data_parallel)
    assert phase is not None
    return phase


def _golden(case: str) -> dict:
    return json.loads((GOLDENS / f"{case}.json").read_text())


def _golden_phase(golden: dict):  # type: ignore[no-untyped-def]
    return _phase(_geometry(golden["config"]), tp=golden["tp"], batched=golden["tokens"], seqs=golden["max_num_seqs"],
                  max_model_len=golden["max_model_len"], video=0 if "video=0" in golden["args"] else 999,
                  data_parallel="mm_encoder_tp_mode=data" in golden["args"])


def test_processor_constants_are_the_checkpoint_file() -> None:
    """The bounds kvplan uses are the committed file's, and the file is the bytes SOURCE.md records."""
    data = json.loads((PROCESSOR / "preprocessor_config.json").read_text())
    p = QWEN2_5_VL_PROCESSOR
    assert (p.image_min_pixels, p.image_max_pixels) == (data["min_pixels"], data["max_pixels"])
    assert (p.video_min_pixels, p.video_max_pixels) == (data["min_pixels"], data["max_pixels"])
    assert hashlib.sha256((PROCESSOR / "preprocessor_config.json").read_bytes()).hexdigest() in (
        PROCESSOR / "SOURCE.md").read_text()


@pytest.mark.parametrize("name", [SMALL, LARGE])
def test_processor_patch_geometry_matches_the_vision_config(name: str) -> None:
    data = json.loads((PROCESSOR / "preprocessor_config.json").read_text())
    g = _geometry(name)
    assert (g.patch_size, g.spatial_merge_size, g.temporal_patch_size) == (
        data["patch_size"], data["merge_size"], data["temporal_patch_size"])
    assert (g.embed_width, g.patch_values) == ({SMALL: 2048, LARGE: 8192}[name], 3 * 2 * 14 * 14)


def test_seven_goldens_from_vllm_033() -> None:
    """The seven Qwen2.5-VL cases of profile_goldens.py (one with --mm-encoder-tp-mode data), each with the probe's
    processor and no error."""
    assert len(CASES) == 7
    for case in CASES:
        g = _golden(case)
        assert g["processor"] == "qwen2.5-vl" and g["error"] is None and g["phases"]["encoder"].get("items")


@pytest.mark.parametrize("case", CASES)
def test_dummy_item_budget_and_items_equal_vllm_033(case: str) -> None:
    """The modality, the pixel rows (uint8), the output rows, the budget, the item count and every allowed modality's
    tokens per item, exactly as vLLM 0.33 built them."""
    golden = _golden(case)
    enc, phase, g = golden["phases"]["encoder"], _golden_phase(golden), _geometry(golden["config"])
    assert (phase.item.modality, phase.items, phase.budget) == (enc["modality"], enc["items"],
                                                                enc["encoder_budget_tokens"])
    key = "pixel_values" if enc["modality"] == "image" else "pixel_values_videos"
    assert enc["inputs"][key] == [[phase.items * phase.item.patches, g.patch_values], "uint8"]
    assert enc["output_shapes"] == [[phase.item.embeds, g.embed_width]] * phase.items
    tokens = {"image": max_image(g, QWEN2_5_VL_PROCESSOR).budget_tokens,
              "video": max_video(g, QWEN2_5_VL_PROCESSOR, max_model_len=golden["max_model_len"]).budget_tokens}
    if "video=0" in golden["args"]:
        del tokens["video"]
    assert enc["max_tokens_per_item"] == tokens


@pytest.mark.parametrize("case", CASES)
def test_what_the_encoder_leaves_equals_vllm_033_plus_the_pixels(case: str) -> None:
    """After the encoder vLLM 0.33 holds the outputs and the tower's rotary cache, to the byte; the V1 profile_run
    also keeps the uint8 pixels (the probe drops them at its run_encoder's return)."""
    golden = _golden(case)
    phase, g = _golden_phase(golden), _geometry(golden["config"])
    pixels = phase.items * phase.item.patches * g.patch_values
    assert phase.retained_bytes == golden["phases"]["encoder"]["live_after_bytes"] + pixels


@pytest.mark.parametrize("case", CASES)
def test_vision_tower_peak_within_4_mib_of_vllm_033(case: str) -> None:
    """The encoder phase's peak (the tower with the uint8 pixels, TP 1, 2 and 4, 65,536 to 458,752 patches) within
    4 MiB of vLLM 0.33's own run (what is left: the window indices and small metadata tensors, under 8 bytes a
    patch)."""
    golden = _golden(case)
    assert abs(_golden_phase(golden).forward_peak_bytes - golden["phases"]["encoder"]["peak_bytes"]) <= 4 * MIB


@pytest.mark.parametrize(("max_model_len", "frames", "tokens"), [
    (8192, 1, 16384), (16384, 2, 16384), (32768, 4, 32768), (128000, 14, 114688), (1_000_000, 14, 114688)])
def test_dummy_video_frames_fit_max_model_len_up_to_14(max_model_len: int, frames: int, tokens: int) -> None:
    """_get_max_video_frames grows the frames while the next count's tokens fit (16,384 per temporal pair at 3,584 ×
    3,584), _MAX_FRAMES_PER_VIDEO caps them at 14; one frame is padded to a temporal pair."""
    item = max_video(_geometry(), QWEN2_5_VL_PROCESSOR, max_model_len=max_model_len)
    assert (item.frames, item.embeds, item.patches) == (frames, tokens, tokens * 4)


def test_equal_tokens_profile_the_video_from_017_the_image_before() -> None:
    """max_model_len 20,000: a 2-frame video has the image's 16,384 tokens; 0.17+ breaks the tie by name (video), 0.11
    takes the first (image)."""
    g = _geometry()
    assert _phase(g, VllmVersion(0, 17), max_model_len=20000).item.modality == "video"
    assert _phase(g, VllmVersion(0, 11), max_model_len=20000).item.modality == "image"


def test_what_stays_follows_the_release() -> None:
    """The one-image dummy (video limited to 0), V1 runner: float32 pixels to 0.27, uint8 from 0.28
    (supports_mm_device_do_normalize), the rotary cache on the GPU from 0.12 (get_rope_by_thw's lru_cache over
    get_rope's GPU cos_sin_cache, 0.12.0 … 0.28.0; _rope_by_thw_cache from 0.29); Model Runner V2 keeps no pixels
    (0.27+) and runs no encoder on 0.24."""
    g = _geometry()
    outputs, pixels, cache = 16384 * 2048 * 2, 65536 * 1176, rope_bytes(g, 65536)
    assert cache == 2 * 65536 * 40 * 2
    kept = {v: _phase(g, VllmVersion(0, v), video=0).retained_bytes for v in (27, 28, 29, 33)}
    assert kept == {27: outputs + 4 * pixels + cache, 28: outputs + pixels + cache, 29: outputs + pixels + cache,
                    33: outputs + pixels + cache}
    assert _phase(g, V033, runner_v2=True, video=0).retained_bytes == outputs + cache


def test_rotary_cache_on_the_gpu_from_012() -> None:
    """0.11.2's get_rope_by_thw caches CPU tensors (Qwen2_5_VisionRotaryEmbedding's inv_freq on device='cpu'), 0.12.0's
    indexes get_rope's GPU table under lru_cache: the forward then holds this forward's cat of cos and sin beside the
    cached pair. One image at 0.11 and 0.12 (the float32 rotary of 0.11 aside: compared at the MLP's peak)."""
    g = _geometry()
    cache = rope_bytes(g, 65536)
    assert "rotary cache" not in _phase(g, VllmVersion(0, 11), video=0).what
    assert "rotary cache" in _phase(g, VllmVersion(0, 12), video=0).what
    mlp_peak = {v: vision_forward_peak_bytes(g, patches=65536, grid_patches=65536 if v >= 12 else 0, tp=1,
                                             version=VllmVersion(0, v)) for v in (12, 13)}
    assert mlp_peak[12] == mlp_peak[13] == 65536 * 2 * (3 * 1280 + 3 * 3420) + 2 * cache


# The float32 rotary of 0.9–0.11 (qwen2_vl.py:apply_rotary_pos_emb_vision), one 3,584 × 3,584 image (65,536 patches)
# of the 3B/7B tower (hidden 1280, 16 heads of 80, intermediate 3420), TP 1, bf16: U = [S, hidden] in bf16.
S, U = 65536, 65536 * 1280 * 2
TRIG = 2 * S * 40 * 4  # freqs.cos() and freqs.sin(), float32 [S, 40]
ROPE = 2 * S * 40 * 2  # this forward's table: float32 [S, 40] before 0.12, bf16 cos and sin after


@pytest.mark.parametrize(("minor", "units"), [(9, 13), (10, 13), (11, 20)])
def test_fp32_rotary_is_the_towers_peak_before_012(minor: int, units: int) -> None:
    """0.9.0.1/0.10.2: residual, norm1, qkv (3), the q/k/v copies (3, q rotated), k's float32 copy and output (2 + 2)
    and its bf16 cast (1): 13 U; 0.11.0: residual, norm1, qkv, the copies, cat([q, k]) (2), its float32 copy and
    output (4 + 4) and the cast (2): 20 U; each with the float32 cos and sin and the forward's rotary table."""
    g = _geometry()
    peak = vision_forward_peak_bytes(g, patches=S, grid_patches=0, tp=1, version=VllmVersion(0, minor))
    assert peak == units * U + TRIG + ROPE


def test_no_fp32_rotary_from_012() -> None:
    """0.12.0 rotates in the model dtype (apply_rotary_pos_emb_vision without t.float()): the MLP's peak, 3 U + 3 ·
    intermediate, as on 0.33."""
    g = _geometry()
    for minor in (12, 23, 33):
        assert fp32_rotary_attention_bytes(g, patches=S, tp=1, version=VllmVersion(0, minor)) == 0
    assert vision_forward_peak_bytes(g, patches=S, grid_patches=0, tp=1, version=VllmVersion(0, 12)) == (
        S * 2 * (3 * 1280 + 3 * 3420) + ROPE)


def test_fp32_rotary_at_tp2_and_in_float32() -> None:
    """TP 2 on 0.11: 8 heads a rank (a = 640), the rotary's 18 a beside norm1 (the all-gather's 3 a + 6 · hidden is
    below it); a float32 model copies nothing in .float() and .type_as: 6 + 2 copies of 4 B plus the output."""
    g = _geometry()
    a = 640
    assert fp32_rotary_attention_bytes(g, patches=S, tp=2, version=VllmVersion(0, 11)) == (
        S * 1280 * 2 + S * a * 36 + TRIG)
    assert fp32_rotary_attention_bytes(g, patches=S, tp=4, version=VllmVersion(0, 11)) == (
        S * 1280 * 2 + S * 2 * (3 * 320 + 6 * 1280))  # the all-gather is the larger at TP 4
    assert fp32_rotary_attention_bytes(g, patches=S, tp=1, version=VllmVersion(0, 11), elem=4) == (
        S * 1280 * 4 + S * 1280 * (8 * 4 + 2 * 4) + TRIG)
    assert _phase(g, VllmVersion(0, 24), runner_v2=True, video=0).items == 0


def test_fit_plans_the_video_profile() -> None:
    """fit on Qwen2.5-VL-3B (vLLM 0.33, H100 defaults): the activation term is the tower's own peak (12.69 GiB for the
    14-frame video), well above the language model's dummy run, and says what it profiled."""
    model = load_local(str(CORPUS / SMALL))
    s = ServeSettings.of(vllm_version="0.33")
    with_enc = plan_fit(model, get_gpu("h100"), s, advise=False)
    without = plan_fit(model, get_gpu("h100"), s.updated(language_model_only=True), advise=False)
    act = {t.name: t for t in with_enc.memory.terms}["activation"]
    base = {t.name: t for t in without.memory.terms}["activation"]
    assert act.bytes > base.bytes + 10 * 2**30
    assert "1 video item(s) × 114,688 embeddings" in act.assumption


def test_data_mode_keeps_the_gathered_video_and_the_rotary_cache() -> None:
    """--mm-encoder-tp-mode data at TP 2 (vLLM 0.33's own run): the 14-frame video runs whole on one rank, and what
    stays is its output all-gathered over both ranks, (2 × 114,688, 2,048) bf16, with the tower's rotary cache of the
    dummy's grid (2 × 458,752 × 40 bf16): 1,012,924,416 bytes, to the byte; the V1 runner keeps the pixels too."""
    golden = _golden("Qwen--Qwen2.5-VL-3B-Instruct__h100-tp2-enc_engine-arg_mm_encoder_tp_modedata")
    phase, g = _golden_phase(golden), _geometry(golden["config"])
    assert golden["phases"]["encoder"]["live_after_bytes"] == 2 * 114688 * 2048 * 2 + 2 * 458752 * 40 * 2
    assert phase.retained_bytes == golden["phases"]["encoder"]["live_after_bytes"] + 458752 * g.patch_values


NATIVE = FIXTURES / "oracle-profile-native"


def test_native_ops_by_release_and_compilation() -> None:
    """A compiled serve under Inductor runs the tower's RMSNorm natively (0.21+: vllm.ir's ['native'] priority,
    whatever custom_ops says; before: custom ops 'none' unless '+rms_norm' or 'all') and, before 0.15, SiluAndMul's
    native forward eagerly; enforce_eager or another backend keeps the CUDA kernels."""
    assert native_vision_ops(VllmVersion(0, 23), compiled=True) == (True, False)
    assert native_vision_ops(VllmVersion(0, 23), compiled=True, custom_ops=("+rms_norm",)) == (True, False)
    assert native_vision_ops(VllmVersion(0, 23), compiled=False) == (False, False)
    assert native_vision_ops(VllmVersion(0, 23), compiled=True, backend="eager") == (False, False)
    assert native_vision_ops(VllmVersion(0, 13), compiled=True) == (True, True)
    assert native_vision_ops(VllmVersion(0, 13), compiled=True, custom_ops=("all",)) == (False, False)
    assert native_vision_ops(VllmVersion(0, 20), compiled=True, custom_ops=("+rms_norm",)) == (False, False)


def test_native_fused_norm_adds_one_hidden_row_as_vllm_033_counts_it() -> None:
    """vLLM 0.33's own profile run of one 65,536-patch image (tests/fixtures/oracle-profile-native/): with the CUDA
    kernels (eager.json, the committed golden's figure) the peak is kvplan's; with the custom ops native
    (compiled.json) the MLP holds the native fused norm's new normed tensor and residual (to.dtype and mul.Tensor (S,
    1, 1280) among the largest tensors) and the probe's eager F.silu: kvplan with native_norm and eager_silu, within
    the goldens' 4 MiB (window indices and metadata)."""
    g = _geometry()
    pixels = S * 1176  # uint8 on 0.33
    eager, compiled = (json.loads((NATIVE / f).read_text())["encoder"] for f in ("eager.json", "compiled.json"))
    cache = rope_bytes(g, S)
    assert eager["peak_bytes"] == _golden("Qwen--Qwen2.5-VL-3B-Instruct__h100-tp1-enc_mm-limit_video0")["phases"][
        "encoder"]["peak_bytes"]
    kvplan_eager = vision_forward_peak_bytes(g, patches=S, grid_patches=S, tp=1) + pixels
    kvplan_native = vision_forward_peak_bytes(g, patches=S, grid_patches=S, tp=1, native_norm=True,
                                              eager_silu=True) + pixels
    assert kvplan_native - kvplan_eager == S * 2 * (1280 + 3420)
    assert abs(eager["peak_bytes"] - kvplan_eager) <= 4 * MIB
    assert abs(compiled["peak_bytes"] - kvplan_native) <= 4 * MIB
    assert kvplan_eager == 3 * U + S * 2 * 3 * 3420 + 2 * cache + pixels
    largest = {t["what"] for t in compiled["largest_at_peak"]}
    assert {"to.dtype (65536, 1, 1280) bfloat16", "mul.Tensor (65536, 1, 1280) bfloat16",
            "silu.default (65536, 1, 3420) bfloat16"} <= largest


def test_served_023_video_holds_the_native_norms_row() -> None:
    """vLLM 0.23 serving (compiled) one 14-frame dummy video, 458,752 patches: the MLP's peak is one bf16 [S, 1280]
    (1.09 GiB) above the enforce_eager one; the float32 pixels (4 B a value before 0.28) beside it."""
    g, v023 = _geometry(), VllmVersion(0, 23)
    args = dict(model_runner_v2=False, tp=1, max_num_batched_tokens=2048, max_num_seqs=1024, max_model_len=128000,
                image_limit=999, video_limit=999)
    served = qwen2_5_vl_encoder_phase(g, v023, native_ops=native_vision_ops(v023, compiled=True), **args)
    eager = qwen2_5_vl_encoder_phase(g, v023, **args)  # type: ignore[arg-type]
    assert served is not None and eager is not None
    assert served.forward_peak_bytes - eager.forward_peak_bytes == 458752 * 1280 * 2
    assert eager.forward_peak_bytes == (458752 * 2 * (3 * 1280 + 3 * 3420) + 2 * rope_bytes(g, 458752)
                                        + 458752 * 1176 * 4)
