"""Qwen3-VL's encoder profile (kvplan/vllm/encoder_profile.py): the dummy item each vLLM release builds, what its
profile run keeps alive, against the processor files (tests/fixtures/processors/qwen3-vl/), vLLM's own log line
("Encoder cache will be initialized with a budget of N tokens, and profiled with K video items") and the figures
read in vLLM's code."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from kvplan.hardware.gpus import get_gpu
from kvplan.model.hub import load_local
from kvplan.model.spec import ModelSpec, VisionGeometry
from kvplan.units import GiB
from kvplan.vllm.defaults import VllmVersion
from kvplan.vllm.encoder_profile import (
    QWEN3_VL_PROCESSOR,
    max_image,
    qwen3_vl_encoder_phase,
    two_frame_video,
    video_011,
    vision_forward_peak_bytes,
)
from kvplan.vllm.fit import plan_fit
from kvplan.vllm.settings import ServeSettings
from tests.conftest import CONFIGS

FIXTURES = CONFIGS.parent
PROCESSOR = FIXTURES / "processors" / "qwen3-vl"
CORPUS = FIXTURES / "corpus" / "configs"
RAW_LOGS = FIXTURES / "startup-logs" / "raw"
MOE = "Qwen--Qwen3-VL-30B-A3B-Instruct"
V011, V033 = VllmVersion(0, 11), VllmVersion(0, 33)


def _model(name: str = MOE) -> ModelSpec:
    return load_local(str(CORPUS / name))


def _geometry(model: ModelSpec) -> VisionGeometry:
    geometry = model.towers[0].geometry
    assert geometry is not None
    return geometry


def test_processor_constants_are_the_checkpoint_files() -> None:
    """The smart_resize bounds kvplan uses are the committed files' (not transformers' class defaults), and the
    files are the bytes SOURCE.md records."""
    image = json.loads((PROCESSOR / "preprocessor_config.json").read_text())
    video = json.loads((PROCESSOR / "video_preprocessor_config.json").read_text())
    p = QWEN3_VL_PROCESSOR
    assert (p.image_min_pixels, p.image_max_pixels) == (image["size"]["shortest_edge"], image["size"]["longest_edge"])
    assert (p.video_min_pixels, p.video_max_pixels) == (video["size"]["shortest_edge"], video["size"]["longest_edge"])
    source = (PROCESSOR / "SOURCE.md").read_text()
    for name in ("preprocessor_config.json", "video_preprocessor_config.json"):
        assert hashlib.sha256((PROCESSOR / name).read_bytes()).hexdigest() in source


@pytest.mark.parametrize("name", [MOE, "Qwen--Qwen3-VL-8B-Instruct", "Qwen--Qwen3-VL-235B-A22B-Instruct"])
def test_processor_patch_geometry_matches_the_vision_config(name: str) -> None:
    """The processor's patch, merge and temporal patch are the vision_config's (vLLM reads the latter)."""
    image = json.loads((PROCESSOR / "preprocessor_config.json").read_text())
    g = _geometry(_model(name))
    assert (g.patch_size, g.spatial_merge_size, g.temporal_patch_size) == (
        image["patch_size"], image["merge_size"], image["temporal_patch_size"])


def test_011_dummy_video_matches_the_logged_budget() -> None:
    """vLLM 0.11 on Qwen3-VL-30B-A3B, max_model_len 65,536, 2,048 batched tokens: the log prints a 153,600-token budget
    and 1 video item; the video is 24,576 frames of 32 × 32 (12,288 embeddings, 49,152 patches)."""
    log = (RAW_LOGS / "zp-4x3090-qwen3-vl-30b-a3b-instruct-tp4-v0110.log").read_text()
    m = re.search(r"budget of (\d+) tokens, and profiled with (\d+) (\w+) items", log)
    assert m is not None
    g = _geometry(_model())
    item = video_011(g, QWEN3_VL_PROCESSOR, max_model_len=65536)
    assert (item.frames, item.embeds, item.patches, item.budget_tokens) == (24576, 12288, 49152, 153600)
    phase = qwen3_vl_encoder_phase(g, V011, model_runner_v2=False, tp=4, max_num_batched_tokens=2048,
                                   max_num_seqs=256, max_model_len=65536, image_limit=999, video_limit=999)
    assert phase is not None
    assert (phase.budget, phase.items, phase.item.modality) == (int(m[1]), int(m[2]), m[3])


def test_011_keeps_the_budget_copy_the_outputs_and_float32_pixels() -> None:
    """0.11 profile_run: new_zeros((153,600, 8,192)) bf16, the original 12,288-row output (the loop variable) and
    49,152 × 1,536 float32 pixels stay allocated: 3,019,898,880 bytes (2.81 GiB)."""
    phase = qwen3_vl_encoder_phase(_geometry(_model()), V011, model_runner_v2=False, tp=4, max_num_batched_tokens=2048,
                                   max_num_seqs=256, max_model_len=65536, image_limit=999, video_limit=999)
    assert phase is not None
    expected = 153600 * 8192 * 2 + 12288 * 8192 * 2 + 49152 * 1536 * 4
    assert phase.retained_bytes == phase.retained_low_bytes == phase.retained_high_bytes == expected


def test_011_short_context_keeps_the_two_start_frames() -> None:
    """_get_max_video_frames stops at the first frame count whose successor's tokens exceed max_model_len: at 4,096
    even 3 frames (16,200 tokens, padded to 4) do, so the video keeps its 2 start frames at 3,520 × 3,520 (12,100
    embeddings, 12.5 × 12,100 budget tokens, over max_model_len as vLLM 0.11 computes it)."""
    item = video_011(_geometry(_model()), QWEN3_VL_PROCESSOR, max_model_len=4096)
    assert (item.frames, item.embeds, item.budget_tokens) == (2, 12100, 151250)


def test_033_profiles_the_largest_image() -> None:
    """From 0.13 the 4,096 × 4,096 image (16,384 tokens, 65,536 patches) is the dummy; H100's 8,192 batched tokens give
    a 16,384-token budget and 1 item; the V1 runner keeps the outputs and the uint8 pixels, Model Runner V2 the
    outputs only."""
    g = _geometry(_model())
    item = max_image(g, QWEN3_VL_PROCESSOR)
    assert (item.embeds, item.patches) == (16384, 65536)
    args = dict(tp=4, max_num_batched_tokens=8192, max_num_seqs=1024, max_model_len=65536, image_limit=999,
                video_limit=999)
    v1 = qwen3_vl_encoder_phase(g, V033, model_runner_v2=False, **args)  # type: ignore[arg-type]
    v2 = qwen3_vl_encoder_phase(g, V033, model_runner_v2=True, **args)  # type: ignore[arg-type]
    assert v1 is not None and v2 is not None
    assert (v1.budget, v1.items, v1.item.modality) == (16384, 1, "image")
    assert v1.retained_bytes == 16384 * 8192 * 2 + 65536 * 1536
    assert v2.retained_bytes == 16384 * 8192 * 2


def test_033_two_images_with_a_larger_batch() -> None:
    """budget // tokens: 32,768 batched tokens profile 2 images."""
    phase = qwen3_vl_encoder_phase(_geometry(_model()), V033, model_runner_v2=True, tp=1, max_num_batched_tokens=32768,
                                   max_num_seqs=1024, max_model_len=65536, image_limit=999, video_limit=999)
    assert phase is not None and phase.items == 2


@pytest.mark.parametrize(("version", "v2", "low", "best"), [
    ((0, 31), False, 16384 * 8192 * 2 + 65536 * 1536 * 4, 16384 * 8192 * 2 + 65536 * 1536 * 4),  # float32 pixels
    ((0, 32), False, 16384 * 8192 * 2 + 65536 * 1536, 16384 * 8192 * 2 + 65536 * 1536),  # uint8 (device normalize)
    ((0, 24), True, 0, 0),  # Model Runner V2 0.24: no encoder profile
    ((0, 26), True, 0, 16384 * 8192 * 2),  # 0.25–0.26 not read: the outputs, 0 at the low end
    ((0, 27), True, 16384 * 8192 * 2, 16384 * 8192 * 2),  # profile_encoder_cache: the outputs only
])
def test_retained_bytes_by_release_and_runner(version: tuple[int, int], v2: bool, low: int, best: int) -> None:
    """What stays allocated after the encoder, by release and runner (the module docstring's reading)."""
    phase = qwen3_vl_encoder_phase(_geometry(_model()), VllmVersion(*version), model_runner_v2=v2, tp=1,
                                   max_num_batched_tokens=8192, max_num_seqs=1024, max_model_len=65536,
                                   image_limit=999, video_limit=999)
    assert phase is not None
    assert (phase.retained_low_bytes, phase.retained_bytes) == (low, best)


def test_033_video_only_is_two_frames_at_the_factorized_size() -> None:
    """With images limited to 0 (0.17+): 2 frames of 3,072 × 4,096 (25,165,824 / 2 pixels factorized into 96 × 128
    merged patches), 49,152 patches, 12,288 embeddings."""
    phase = qwen3_vl_encoder_phase(_geometry(_model()), V033, model_runner_v2=False, tp=1,
                                   max_num_batched_tokens=8192, max_num_seqs=1024, max_model_len=65536,
                                   image_limit=0, video_limit=999)
    assert phase is not None
    assert (phase.item.modality, phase.item.patches, phase.item.embeds, phase.budget) == ("video", 49152, 12288, 12288)


@pytest.mark.parametrize(("version", "frames"), [((0, 13), 24576), ((0, 14), 24576), ((0, 15), 2), ((0, 16), 2)])
def test_video_only_dummy_by_release(version: tuple[int, int], frames: int) -> None:
    """Images limited to 0: vLLM 0.13.0 and 0.14.0 (qwen3_vl.py get_dummy_mm_data → get_num_frames_with_most_features,
    _MAX_FRAMES_PER_VIDEO = 24,576) still walk the frames from max_model_len — 24,576 frames of 32 × 32, budget the
    12,288 embeddings (no 12.5 factor from 0.13) —, 0.15.1 and 0.16.0 build 2 frames (`target_num_frames = 2`,
    3,072 × 4,096); both are 49,152 patches, kept with their float32 pixels by the V1 runner."""
    phase = qwen3_vl_encoder_phase(_geometry(_model()), VllmVersion(*version), model_runner_v2=False, tp=1,
                                   max_num_batched_tokens=8192, max_num_seqs=1024, max_model_len=65536,
                                   image_limit=0, video_limit=999)
    assert phase is not None
    assert (phase.item.modality, phase.item.frames, phase.item.patches, phase.item.embeds, phase.budget) == (
        "video", frames, 49152, 12288, 12288)
    assert phase.retained_bytes == 12288 * 8192 * 2 + 49152 * 1536 * 4


def test_vision_tower_peak_near_the_probe_figure() -> None:
    """The shared vllm-cuda-oracle kit's profile_probe.py (vLLM 0.33 on meta tensors) measured 1.27 GiB of encoder peak
    for 0.33's dummy image on Qwen3-VL-30B-A3B at TP 4 (its README, figure copied in
    tests/fixtures/oracle-profile/encoder-figures.json): kvplan's estimate with the uint8 pixels within 64 MiB."""
    figures = json.loads((FIXTURES / "oracle-profile" / "encoder-figures.json").read_text())
    case = figures["cases"]["qwen3-vl-30b-a3b-tp4-v033-image"]
    g = _geometry(_model())
    ours = vision_forward_peak_bytes(g, patches=65536, tp=4) + 65536 * 1536
    assert abs(ours - case["encoder_peak_gib"] * GiB) <= max(0.02 * ours, 64 * 2**20) + 0.005 * GiB


def test_fit_adds_the_retained_encoder_memory_on_top_of_the_sampler() -> None:
    """fit's activation term on the 0.11 deployment: the language model's peak plus the 2.81 GiB the encoder leaves,
    and the assumption says so."""
    model = _model()
    s = ServeSettings.of(tp=4, max_model_len=65536, max_num_batched_tokens=2048, vllm_version="0.11",
                         use_flashinfer_sampler=False)
    with_enc = plan_fit(model, get_gpu("rtx-3090"), s, advise=False)
    without = plan_fit(model, get_gpu("rtx-3090"), s.updated(limit_mm_per_prompt=(), language_model_only=True),
                       advise=False)
    act = {t.name: t for t in with_enc.memory.terms}["activation"]
    base = {t.name: t for t in without.memory.terms}["activation"]
    assert act.bytes - base.bytes == 153600 * 8192 * 2 + 12288 * 8192 * 2 + 49152 * 1536 * 4
    assert "encoder profile" in act.assumption and "153,600-row copies" in act.assumption


@pytest.mark.parametrize("batched", [2048, 8192, 16384])
def test_018_log_profiles_one_image_of_16384_tokens(batched: int) -> None:
    """vLLM 0.18.1 on Qwen3.5-35B-A3B (GB10, record ghlog-gb10-qwen3.5-35b-a3b-fp8-util080-v0181) logs "budget of
    16384 tokens, and profiled with 1 image items": Qwen3.5 uses Qwen3-VL's processing info, dummy builder and vision
    tower (qwen3_5.py: Qwen3_5MoeProcessingInfo(Qwen3VLProcessingInfo), Qwen3VLDummyInputsBuilder,
    Qwen3_VisionTransformer), so the 0.13+ rule applies: the 4,096 × 4,096 image, whatever the batch tokens up to
    16,384."""
    log = (RAW_LOGS / "ghlog-gb10-qwen3.5-35b-a3b-fp8-util080-v0181.log").read_text()
    m = re.search(r"budget of (\d+) tokens, and profiled with (\d+) (\w+) items", log)
    assert m is not None
    v = json.loads((CORPUS / "Qwen--Qwen3.5-35B-A3B" / "config.json").read_text())["vision_config"]
    g = VisionGeometry(v["hidden_size"], v["intermediate_size"], v["depth"], v["num_heads"], v["out_hidden_size"],
                       v["patch_size"], v["spatial_merge_size"], v["temporal_patch_size"], v["in_channels"],
                       len(v["deepstack_visual_indexes"]))
    phase = qwen3_vl_encoder_phase(g, VllmVersion(0, 18), model_runner_v2=False, tp=1, max_num_batched_tokens=batched,
                                   max_num_seqs=1024, max_model_len=262144, image_limit=999, video_limit=999)
    assert phase is not None
    assert (phase.budget, phase.items, phase.item.modality) == (int(m[1]), int(m[2]), m[3])
    assert phase.retained_bytes == 16384 * 2048 * 2 + 65536 * 1536 * 4  # no deepstack: 2,048-wide rows


GOLDENS = FIXTURES / "oracle-profile"
# Qwen3-VL's encoder cases (Qwen2.5-VL's: tests/test_encoder_qwen2_5_vl.py)
ENC_CASES = sorted(p.stem for p in (GOLDENS / "cases").glob("Qwen--Qwen3-VL-*-enc*.json"))
BLOCK = 512  # the probe counts in 512-byte blocks: the grid_thw tensor (24 bytes) is one


def _golden(case: str) -> dict:
    return json.loads((GOLDENS / "cases" / f"{case}.json").read_text())


def _phase_for(golden: dict):  # type: ignore[no-untyped-def]
    model = _model(golden["config"])
    image = 0 if "image=0" in golden["args"] else 999
    return qwen3_vl_encoder_phase(_geometry(model), V033, model_runner_v2=False, tp=golden["tp"],
                                  max_num_batched_tokens=golden["tokens"], max_num_seqs=golden["max_num_seqs"],
                                  max_model_len=golden["max_model_len"], image_limit=image, video_limit=999,
                                  data_parallel="mm_encoder_tp_mode=data" in golden["args"])


def test_encoder_goldens_are_indexed() -> None:
    """Seven encoder cases (profile_goldens.py `_enc`; one with --mm-encoder-tp-mode data), each in index.json with its
    phase peaks."""
    index = {c["id"]: c for c in json.loads((GOLDENS / "index.json").read_text())["cases"]}
    assert len(ENC_CASES) == 7
    for case in ENC_CASES:
        g = _golden(case)
        assert g["processor"] == "qwen3-vl" and g["error"] is None
        assert index[case]["peaks"] == {k: v["peak_bytes"] for k, v in g["phases"].items()}


@pytest.mark.parametrize("case", ENC_CASES)
def test_dummy_item_budget_and_items_equal_vllm_033(case: str) -> None:
    """The dummy item vLLM 0.33 built (modality, pixel rows, output rows), its budget and item count, and both
    modalities' per-item tokens, exactly."""
    g = _golden(case)
    enc = g["phases"]["encoder"]
    phase = _phase_for(g)
    assert phase is not None
    pixels = enc["inputs"]["pixel_values" if enc["modality"] == "image" else "pixel_values_videos"]
    assert (phase.item.modality, phase.items, phase.budget) == (enc["modality"], enc["items"],
                                                                enc["encoder_budget_tokens"])
    assert pixels == [[phase.items * phase.item.patches, _geometry(_model(g["config"])).patch_values], "uint8"]
    assert enc["output_shapes"] == [[phase.item.embeds, _geometry(_model(g["config"])).embed_width]] * phase.items
    geometry = _geometry(_model(g["config"]))
    tokens = {"video": two_frame_video(geometry, QWEN3_VL_PROCESSOR).budget_tokens,
              "image": max_image(geometry, QWEN3_VL_PROCESSOR).budget_tokens}
    if "image=0" in g["args"]:
        del tokens["image"]
    assert enc["max_tokens_per_item"] == tokens


@pytest.mark.parametrize("case", ENC_CASES)
def test_vision_tower_peak_equals_vllm_033(case: str) -> None:
    """The encoder phase's peak (the tower's forward with the uint8 pixels) within one 512-byte block of vLLM 0.33's
    own run: the image_grid_thw tensor the probe counts as a block."""
    g = _golden(case)
    phase = _phase_for(g)
    assert phase is not None
    assert 0 <= g["phases"]["encoder"]["peak_bytes"] - phase.forward_peak_bytes <= BLOCK


@pytest.mark.parametrize("case", ENC_CASES)
def test_what_the_encoder_leaves_equals_vllm_033_plus_the_pixels(case: str) -> None:
    """After the encoder the probe holds exactly the outputs; vLLM 0.33's V1 profile_run also keeps
    `batched_dummy_mm_inputs` bound until it returns (the probe's run_encoder drops it at its own return), so
    kvplan's retained bytes are the probe's plus the uint8 pixels."""
    g = _golden(case)
    enc = g["phases"]["encoder"]
    phase = _phase_for(g)
    assert phase is not None
    pixels = phase.items * phase.item.patches * _geometry(_model(g["config"])).patch_values
    assert phase.retained_bytes == enc["live_after_bytes"] + pixels


@pytest.mark.parametrize(("with_encoder", "without"), [
    ("Qwen--Qwen3-VL-30B-A3B-Instruct__h100-tp4-enc", "Qwen--Qwen3-VL-30B-A3B-Instruct__h100-tp4"),
    ("Qwen--Qwen3-VL-8B-Instruct__h100-tp1-enc", "Qwen--Qwen3-VL-8B-Instruct__h100-tp1"),
])
def test_the_outputs_add_to_the_forward_and_sampler_peaks(with_encoder: str, without: str) -> None:
    """The language model's forward and sampler peaks with the encoder profile are those without it plus the encoder
    outputs, to the byte: what stays allocated adds, as fit adds it (_with_qwen_vl_encoder)."""
    a, b = _golden(with_encoder), _golden(without)
    outputs = a["phases"]["encoder"]["live_after_bytes"]
    for phase in ("forward", "sampler"):
        assert a["phases"][phase]["peak_bytes"] - b["phases"][phase]["peak_bytes"] == outputs


def test_a_folders_own_processor_files_set_the_dummy(tmp_path: Path) -> None:
    """A folder with its own preprocessor_config.json (a fine-tune capping images at 1,003,520 pixels, the legacy
    max_pixels form) plans the dummy image vLLM would build from it: the factorized 980 merged patches → 28 × 35 ×
    32² px, and no video file means the video processor reads the same file."""
    (tmp_path / "config.json").write_bytes((CORPUS / MOE / "config.json").read_bytes())
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"min_pixels": 3136, "max_pixels": 1003520}))
    g = _geometry(load_local(str(tmp_path)))
    assert (g.image_pixels, g.video_pixels) == ((3136, 1003520), (3136, 1003520))
    phase = qwen3_vl_encoder_phase(g, V033, model_runner_v2=True, tp=1, max_num_batched_tokens=8192,
                                   max_num_seqs=1024, max_model_len=65536, image_limit=999, video_limit=0)
    assert phase is not None and (phase.item.embeds, phase.items) == (980, 8)


@pytest.mark.parametrize("size", [{"shortest_edge": 0, "longest_edge": 10}, {"shortest_edge": 20, "longest_edge": 10},
                                  {"shortest_edge": "x", "longest_edge": 10}])
def test_bad_processor_bounds_are_one_clear_error(tmp_path: Path, size: dict) -> None:
    (tmp_path / "config.json").write_bytes((CORPUS / MOE / "config.json").read_bytes())
    (tmp_path / "video_preprocessor_config.json").write_text(json.dumps({"size": size}))
    from kvplan.errors import BadConfig
    with pytest.raises(BadConfig, match="video_preprocessor_config.json"):
        load_local(str(tmp_path))


def test_data_mode_gathers_the_output_over_tp_and_runs_the_whole_tower() -> None:
    """--mm-encoder-tp-mode data at TP 4 (vLLM 0.33's own run, ..._mm_encoder_tp_modedata.json): the one dummy image
    runs on one rank through the unsharded tower (qkv 65,536 × 3,456 in the golden's largest tensors: 2,224,030,208
    bytes at the peak), and its output all-gathered over the 4 ranks, (4 × 16,384, 8,192) bf16, stays alive: 1 GiB
    where the weights mode keeps 16,384 rows (0.25 GiB)."""
    case = "Qwen--Qwen3-VL-30B-A3B-Instruct__h100-tp4-enc_engine-arg_mm_encoder_tp_modedata"
    g = _golden(case)
    data = _phase_for(g)
    weights = qwen3_vl_encoder_phase(_geometry(_model()), V033, model_runner_v2=False, tp=4,
                                     max_num_batched_tokens=g["tokens"], max_num_seqs=g["max_num_seqs"],
                                     max_model_len=g["max_model_len"], image_limit=999, video_limit=999)
    assert data is not None and weights is not None
    pixels = 65536 * 1536
    assert data.retained_bytes == 4 * 16384 * 8192 * 2 + pixels == g["phases"]["encoder"]["live_after_bytes"] + pixels
    assert weights.retained_bytes == 16384 * 8192 * 2 + pixels
    assert g["phases"]["encoder"]["peak_bytes"] - data.forward_peak_bytes == BLOCK


def test_fit_with_mm_encoder_tp_mode_data_replicates_the_tower_and_keeps_the_gathered_output() -> None:
    """`--mm-encoder-tp-mode data` at TP 4 on vLLM 0.33 (qwen3_vl.py: supports_encoder_tp_data; every tower linear
    built with disable_tp): the weights hold the tower's 533,981,808 parallel parameters whole instead of a quarter,
    (533,981,808 − 133,495,452) × 2 = 800,972,712 bytes more; the profile keeps the all-gathered image output,
    (4 − 1) × 16,384 × 8,192 × 2 = 805,306,368 bytes more than the weights mode's own rows."""
    model = _model()
    assert model.towers[0].sharded_params == 533981808
    s = ServeSettings.of(tp=4, vllm_version="0.33.0")
    weights, data = (plan_fit(model, get_gpu("h100"), s.updated(mm_encoder_tp_mode=m), advise=False).memory
                     for m in ("weights", "data"))
    terms = [{t.name: t.bytes for t in b.terms} for b in (weights, data)]
    assert terms[1]["weights"] - terms[0]["weights"] == 800972712
    assert terms[1]["activation"] - terms[0]["activation"] == 805306368
    assert "replicated: --mm-encoder-tp-mode data" in next(t.assumption for t in data.terms if t.name == "weights")


def test_mm_encoder_tp_mode_data_lifts_the_vision_head_split_and_falls_back_where_unsupported() -> None:
    """GLM-4.5V's 12 vision heads refuse TP 8 in the weights mode ("12 is not divisible by 8",
    tests/test_rocm.py); in data mode Glm4vVisionAttention's tp_size is 1 (glm4_1v.py, vLLM 0.33), so it is served.
    Gemma-4 sets no supports_encoder_tp_data: vLLM's own fallback warning (config/model.py)."""
    from kvplan.errors import NotServed

    glm = _model("zai-org--GLM-4.5V")
    s = ServeSettings.of(tp=8, max_model_len=8192, kv_cache_memory_bytes=20 * GiB, weights_bytes=0)
    with pytest.raises(NotServed, match=r"^12 is not divisible by 8"):
        plan_fit(glm, get_gpu("h100"), s, advise=False)
    assert plan_fit(glm, get_gpu("h100"), s.updated(mm_encoder_tp_mode="data"), advise=False).verdict.fits
    gemma = plan_fit(_model("google--gemma-4-31B-it"), get_gpu("h100"),
                     ServeSettings.of(tp=2, mm_encoder_tp_mode="data"), advise=False)
    assert any("does not support `--mm-encoder-tp-mode data`" in n for n in gemma.notes)


def test_equal_modalities_go_to_video_from_0_17_and_to_image_before() -> None:
    """multimodal/encoder_budget.py:get_modality_with_max_tokens keys on (tokens, name) in 0.17.0; 0.11.0 keys on the
    tokens alone, so dict order (image first) breaks a tie. One rule for every tower (Qwen3-VL and Qwen2.5-VL)."""
    from kvplan.vllm.defaults import VllmVersion
    from kvplan.vllm.encoder_profile import DummyItem, modality_with_max_tokens

    image, video = DummyItem("image", 16_384, 16_384, 65_536), DummyItem("video", 16_384, 16_384, 65_536, frames=2)
    assert modality_with_max_tokens([image, video], VllmVersion(0, 17)) is video
    assert modality_with_max_tokens([image, video], VllmVersion(0, 16)) is image
    assert modality_with_max_tokens([image], VllmVersion(0, 33)) is image
    assert modality_with_max_tokens([], VllmVersion(0, 33)) is None
