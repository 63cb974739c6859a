"""Qwen3-VL's multimodal encoder profile, release by release: the dummy item vLLM's profile run encodes, what it
keeps alive through the language model's dummy run and the sampler, and the vision tower's own forward peak.

Pure. Read in the wheels (pip download --no-deps vllm==X: 0.11.0, 0.11.2, 0.12.0, 0.13.0, 0.14.0, 0.15.1, 0.16.0,
0.17.0, 0.18.0, 0.19.0, 0.20.0, 0.24.0, 0.27.1, 0.31.0, 0.32.0, 0.33.0) and in transformers 4.57.1 (the processors'
smart_resize):

* **0.11–0.12** (model_executor/models/qwen3_vl.py): `get_max_video_tokens` is 12.5 × the dummy video's soft tokens
  ("one video token is converted to '<{timestamp} seconds>' (on average 9.5 tokens) + vision_start_token +
  video_token + vision_end_token"), so video is the modality with the most tokens; the video has
  `min(_get_max_video_frames(max_model_len), _MAX_FRAMES_PER_VIDEO = 24576)` frames of the size
  Qwen3VLVideoProcessor's smart_resize gives them (32 × 32 once the frames spread longest_edge thin).
  v1/worker/gpu_model_runner.py:profile_run scatters each encoder output into `output.new_zeros((encoder_budget,
  width))` when it has fewer rows than the budget and caches those; the loop variable `output` keeps the original
  outputs alive (the last one, a torch.split view of the merger's one output), and `batched_dummy_mm_inputs` the
  pixel values (float32: the HF processor rescales and normalizes) until profile_run returns. vLLM 0.10.2 caches
  the outputs without the copy (BUDGET_COPY_SINCE).
* **0.13 on**: no 12.5 factor, no budget-sized copy (the outputs themselves go to `encoder_cache["tmp_i"]`): the
  image of the most features (Qwen2VLProcessingInfo.get_image_size_with_most_features factorizes longest_edge /
  (patch × merge)²: 4,096 × 4,096, 16,384 tokens) outweighs any video (12,288 tokens). 0.13–0.14 build the 0.11
  video (frames from max_model_len, up to _MAX_FRAMES_PER_VIDEO = 24,576, of the factorized image size), its budget
  its embeddings; 0.15+ a 2-frame dummy at the factorized size of the video longest_edge / temporal patch, 3,072 ×
  4,096 (qwen3_vl.py:Qwen3VLDummyInputsBuilder.get_dummy_mm_data `target_num_frames = 2`, get_max_video_tokens
  `num_frames=2`: read in 0.15.1 and 0.16.0; 0.13.0 and 0.14.0 still walk the frames). The V1 runner still holds
  `batched_dummy_mm_inputs` through the run: float32 pixels up to 0.31, uint8 from 0.32, which moves raw pixels to
  the GPU and normalizes them there (mm_device_do_normalize, on for Qwen3-VL: supports_mm_device_do_normalize;
  model_executor/layers/fusion/mm_input_norm.py). Model Runner V2 profiles no encoder in 0.24
  (v1/worker/gpu/model_runner.py:profile_run: the dummy run and the sampler only); from 0.27
  (v1/worker/gpu/mm/encoder_runner.py:profile_encoder_cache) it keeps the outputs and drops the pixels, which
  execute_mm_encoder batches locally. 0.25–0.26 were not read: the outputs, with 0 as the range's other end.

Items per batch (v1/worker/utils.py:MultiModalBudget.get_max_items, 0.11; multimodal/encoder_budget.py, 0.33): budget
// tokens per item, capped by max_num_seqs × items per prompt, at least 1; the budget is
compute_mm_encoder_budget's max(max_num_batched_tokens, the largest item).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.model.spec import VisionGeometry
from kvplan.vllm.defaults import LATEST, VllmVersion

# The processor files Qwen3-VL checkpoints ship (tests/fixtures/processors/qwen3-vl/, with their source):
# preprocessor_config.json size {shortest_edge 65536, longest_edge 16777216}, video_preprocessor_config.json
# size {shortest_edge 4096, longest_edge 25165824}; patch 16, merge 2, temporal patch 2 in both. transformers'
# class defaults differ (Qwen3VLVideoProcessor longest_edge 786,432) and are not what these checkpoints run with.


@dataclass(frozen=True)
class QwenVlProcessor:
    """The smart_resize bounds of a Qwen-VL image and video processor (pixels: size's shortest / longest edge)."""

    image_min_pixels: int
    image_max_pixels: int
    video_min_pixels: int
    video_max_pixels: int


QWEN3_VL_PROCESSOR = QwenVlProcessor(65536, 16777216, 4096, 25165824)

V011 = VllmVersion(0, 11)  # video_011's default: the first release of its 0.11–0.14 dummy video
# 0.11–0.12 qwen3_vl.py: `formatted_video_soft_tokens = video_soft_tokens * 12.5`, _MAX_FRAMES_PER_VIDEO = 24576
VIDEO_TOKEN_FACTOR_011 = 12.5
MAX_FRAMES_PER_VIDEO_011 = 24576
BUDGET_COPY_UNTIL = VllmVersion(0, 13)  # the 12.5 factor and the budget-sized copy: 0.11 and 0.12
# v1/worker/gpu_model_runner.py:profile_run: 0.10.2 caches the outputs as they are (encoder_cache["tmp"]); 0.11.0
# and 0.11.2 scatter each into output.new_zeros((encoder_budget, hidden)) first; 0.13.0 on cache them as they are again
# (encoder_cache[f"tmp_{i}"]; 0.15.1, 0.17.0, 0.20.0, 0.22.0, 0.27.1, 0.33.0 read). Every release frees them after
# _dummy_run and _dummy_sampler_run (encoder_cache.clear()); a model without mm inputs runs no encoder at all.
BUDGET_COPY_SINCE = VllmVersion(0, 11)
DEVICE_NORMALIZE_SINCE = VllmVersion(0, 32)  # uint8 pixels on the GPU (0.32, 0.33; 0.31 still float32)
# the dummy pixels' element size where the model does not normalize on the device: the HF processors rescale and
# normalize them into float32
FLOAT32_PIXEL_BYTES = 4
MRV2_ENCODER_UNREAD = VllmVersion(0, 25)  # Model Runner V2: no encoder profile in 0.24; 0.25–0.26 not read
MRV2_ENCODER_SINCE = VllmVersion(0, 27)  # profile_encoder_cache read in 0.27.1, 0.31, 0.32, 0.33
TWO_FRAME_VIDEO_SINCE = VllmVersion(0, 15)  # the 2-frame dummy video at the factorized size (0.15.1–0.33 read)
# Qwen2VLProcessingInfo.get_image_size_with_most_features: smart_resize of a 9999999 × 9999999 image
HUGE_SIDE = 9999999


def image_smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """transformers 4.57.1 models/qwen2_vl/image_processing_qwen2_vl.py:smart_resize (its aspect-ratio check, > 200,
    left out: the sizes here are square or factorized_size's, which keeps the ratio ≤ 200)."""
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def video_smart_resize(num_frames: int, height: int, width: int, *, temporal_factor: int, factor: int,
                       min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """transformers 4.57.1 models/qwen3_vl/video_processing_qwen3_vl.py:smart_resize: the pixel bounds cover all
    frames (t × h × w)."""
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt(num_frames * height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


@dataclass(frozen=True)
class DummyItem:
    """One dummy item: its modality, the tokens the budget counts, its encoder output rows and its patches."""

    modality: str
    budget_tokens: int  # what MultiModalBudget counts per item (0.11–0.12 video: 12.5 × its embeddings)
    embeds: int  # encoder output rows (merged patches)
    patches: int  # pixel_values rows
    frames: int = 1


FACTORIZED_IMAGE_SINCE = VllmVersion(0, 13)  # get_image_size_with_most_features factorizes (0.13 read; 0.12 not yet)


def max_image(g: VisionGeometry, p: QwenVlProcessor, version: VllmVersion = LATEST) -> DummyItem:
    """The image of the most features: Qwen2VLProcessingInfo.get_image_size_with_most_features — up to 0.12 the
    image processor's smart_resize of a 9,999,999-pixel square, from 0.13 the factorized size (factorized_size) —
    then _get_vision_info (smart_resize again; an image is one temporal patch, its frame repeated: grid_t 1). Both
    give 4,096 × 4,096 with the published bounds; a folder's own max_pixels can tell them apart."""
    factor = g.patch_size * g.spatial_merge_size
    if version >= FACTORIZED_IMAGE_SINCE:
        height, width = factorized_size(p.image_max_pixels, factor)
    else:
        height = width = HUGE_SIDE
    h, w = image_smart_resize(height, width, factor, p.image_min_pixels, p.image_max_pixels)
    patches = (h // g.patch_size) * (w // g.patch_size)
    embeds = patches // g.spatial_merge_size ** 2
    return DummyItem("image", embeds, embeds, patches)


def factorized_size(max_pixels: int, unit: int) -> tuple[int, int]:
    """Qwen2VLProcessingInfo.get_image_size_with_most_features(max_pixels) (0.14+): (height, width) from the closest
    factor pair of the most merged patches, the largest count whose pair keeps the aspect ratio ≤ 200. Bounded by
    max_pixels / unit² (16,384 for Qwen3-VL's image)."""
    for n in range(max_pixels // (unit * unit), 0, -1):
        d = next(d for d in range(math.isqrt(n), 0, -1) if n % d == 0)
        if (n // d) / d <= 200:
            return unit * d, unit * (n // d)
    return unit, unit


def two_frame_video(g: VisionGeometry, p: QwenVlProcessor) -> DummyItem:
    """0.15+ (TWO_FRAME_VIDEO_SINCE) qwen3_vl.py:Qwen3VLDummyInputsBuilder.get_dummy_mm_data: 2 frames at the
    factorized size of the video longest_edge / temporal patch, resized by the video processor
    (Qwen3VLProcessingInfo._get_vision_info)."""
    factor = g.patch_size * g.spatial_merge_size
    height, width = factorized_size(p.video_max_pixels // g.temporal_patch_size, factor)
    h, w = video_smart_resize(2, height, width, temporal_factor=g.temporal_patch_size, factor=factor,
                              min_pixels=p.video_min_pixels, max_pixels=p.video_max_pixels)
    patches = max(2 // g.temporal_patch_size, 1) * (h // g.patch_size) * (w // g.patch_size)
    embeds = patches // g.spatial_merge_size ** 2
    return DummyItem("video", embeds, embeds, patches, 2)


def _video_grid(g: VisionGeometry, p: QwenVlProcessor, frames: int, size: tuple[int, int]) -> tuple[int, int]:
    """Qwen3VLProcessingInfo._get_vision_info for a video of `frames` frames of `size` (height, width), 0.11–0.14:
    (patches, merged tokens)."""
    factor = g.patch_size * g.spatial_merge_size
    h, w = video_smart_resize(frames, *size, temporal_factor=g.temporal_patch_size, factor=factor,
                              min_pixels=p.video_min_pixels, max_pixels=p.video_max_pixels)
    padded = frames + frames % g.temporal_patch_size
    grid_t = max(padded // g.temporal_patch_size, 1)
    patches = grid_t * (h // g.patch_size) * (w // g.patch_size)
    return patches, patches // g.spatial_merge_size ** 2


def video_011(g: VisionGeometry, p: QwenVlProcessor, *, max_model_len: int,
              version: VllmVersion = V011) -> DummyItem:
    """vLLM 0.11–0.14's dummy video: Qwen2VLProcessingInfo._get_max_video_frames(max_model_len, start 2) (frames grow
    while the next count's tokens fit in max_model_len), capped at 24,576 frames, of the image size of the most
    features (max_image's: a resized 9,999,999-pixel square up to 0.12, factorized from 0.13); its frames resized by
    the video processor; the budget counts 12.5 tokens per embedding up to 0.12 (get_max_video_tokens), the
    embeddings from 0.13. Bounded: the walk stops at the cap."""
    factor = g.patch_size * g.spatial_merge_size
    if version >= FACTORIZED_IMAGE_SINCE:
        start = factorized_size(p.image_max_pixels, factor)
    else:
        start = (HUGE_SIDE, HUGE_SIDE)
    size = image_smart_resize(*start, factor, p.image_min_pixels, p.image_max_pixels)
    frames = 2
    while frames < MAX_FRAMES_PER_VIDEO_011 and _video_grid(g, p, frames + 1, size)[1] <= max_model_len:
        frames += 1
    patches, embeds = _video_grid(g, p, frames, size)
    tokens = int(embeds * VIDEO_TOKEN_FACTOR_011) if version < BUDGET_COPY_UNTIL else embeds
    return DummyItem("video", tokens, embeds, patches, frames)


@dataclass(frozen=True)
class EncoderPhase:
    """What the encoder profile adds to vLLM's profiling peak: `retained` stays allocated through the dummy forward
    and the sampler (best, and the range's ends where a release was not read), `forward_peak` is the vision tower's
    own peak while it runs (an estimate)."""

    item: DummyItem
    items: int
    budget: int
    retained_bytes: int
    retained_low_bytes: int
    retained_high_bytes: int
    forward_peak_bytes: int
    what: str


def encoder_budget_items(item_tokens: int, *, max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int,
                         limit: int) -> tuple[int, int]:
    """(budget, items per batch): compute_mm_encoder_budget and MultiModalBudget.get_max_items (chunked prefill on)."""
    budget = max(max_num_batched_tokens, item_tokens)
    per_prompt = max(1, min(limit, max_model_len // item_tokens))
    return budget, max(1, min(budget // item_tokens, max_num_seqs * per_prompt))


# The vision tower's forward peak (qwen3_vl.py:Qwen3_VisionTransformer.forward and Qwen3_VisionBlock, read in 0.11):
# alive through the blocks are the position embeddings (`pos_embeds`, [S, hidden], still bound in forward), the rotary
# table (rot_pos_emb: [S, head_dim / 2] float32), the residual stream and the deepstack features gathered so far
# ([S / merge², out_hidden] each). A block's MLP holds x, norm2(x), linear_fc1's output and its activation
# ([S, I / TP] each) or the activation with linear_fc2's output and its all-reduce copy; its attention x, norm1(x),
# the qkv projection (3·hidden / TP), q and k stacked for the rotary embedding and the rotary's output (2 + 2 ·
# hidden / TP: `contiguous (2, S, heads, head_dim)` and `empty_like` of it in the goldens' largest tensors), v or the
# attention output (hidden / TP) and o_proj with its all-reduce copy: 8 · hidden / TP in all. The merger ends with
# the final output and the concatenated (1 + deepstack) × out_hidden rows while their parts are alive. Checked
# against vLLM 0.33's own run (tests/fixtures/oracle-profile/cases/*-enc*.json: equal to the byte on all six); vLLM
# 0.11–0.12's tower is the same module (qwen3_vl.py read in 0.11), not run: range ±50% there.
VISION_FORWARD_RANGE = (-0.5, 0.5)
# From 0.32 (the device-normalized uint8 input, as 0.33 runs it): what the meta-tensor run cannot see (attention and
# rotary kernels' scratch, the caching allocator's rounding), as ACTIVATION_RANGE.
VISION_FORWARD_RANGE_CHECKED = (-0.10, 0.10)


def vision_forward_range(version: VllmVersion) -> tuple[float, float]:
    """The range of vision_forward_peak_bytes on `version`: ±10% where vLLM 0.33's own run checks it, ±50% before."""
    return VISION_FORWARD_RANGE_CHECKED if version >= DEVICE_NORMALIZE_SINCE else VISION_FORWARD_RANGE


def vision_forward_peak_bytes(g: VisionGeometry, *, patches: int, tp: int, elem: int = 2) -> int:
    """The tower's peak live bytes while it encodes `patches` patches on one TP rank (see the block above), pixels
    not included."""
    s, h = patches, g.hidden_size
    i = -(-g.intermediate_size // tp)
    reduced = h * (2 if tp > 1 else 1)
    merged = s // g.spatial_merge_size ** 2
    head_dim = h // g.num_heads
    steady = s * h * elem * 2 + s * (head_dim // 2) * 4  # pos_embeds and the residual stream; the rotary table
    deepstack = g.deepstack_levels * merged * g.out_hidden_size * elem
    mlp = s * elem * (h + max(2 * i, i + reduced))
    attention = s * elem * (h + 8 * h // tp + reduced)
    block = steady + deepstack + max(mlp, attention)
    final = steady + 2 * merged * g.embed_width * elem  # the merger's parts and their concatenation
    return max(block, final)


# MultiModalBudget.get_modality_with_max_tokens: max over (tokens, modality name) from 0.17
# (multimodal/encoder_budget.py: key=lambda x: (x[1], x[0]), read in 0.17.0), over tokens alone before (dict order
# image, video: the first of equal maxima, read in 0.11.0).
NAME_BREAKS_TIES_SINCE = VllmVersion(0, 17)


def modality_with_max_tokens(candidates: list[DummyItem], version: VllmVersion) -> DummyItem | None:
    """The dummy item vLLM profiles among the allowed modalities' largest items (image first, then video): the most
    budget tokens; a tie goes to the larger name ("video") from 0.17, to the first before. None: no candidate."""
    if not candidates:
        return None
    if version >= NAME_BREAKS_TIES_SINCE:
        return max(candidates, key=lambda c: (c.budget_tokens, c.modality))
    return max(candidates, key=lambda c: c.budget_tokens)


def _dummy_item(g: VisionGeometry, p: QwenVlProcessor, version: VllmVersion, *, image: bool, video: bool,
                max_model_len: int) -> DummyItem | None:
    """Qwen3-VL's dummy item (modality_with_max_tokens): 0.11–0.14's video walks its frames from max_model_len
    (video_011), 0.15+'s has 2 (two_frame_video). None: neither allowed."""
    candidates = []
    if image:
        candidates.append(max_image(g, p, version))
    if video:
        candidates.append(two_frame_video(g, p) if version >= TWO_FRAME_VIDEO_SINCE
                          else video_011(g, p, max_model_len=max_model_len, version=version))
    return modality_with_max_tokens(candidates, version)


def processor_of(g: VisionGeometry, published: QwenVlProcessor = QWEN3_VL_PROCESSOR) -> QwenVlProcessor:
    """The folder's own processor bounds where it had the files (VisionGeometry.image_pixels / video_pixels), else
    the published checkpoints' (`published`: QWEN3_VL_PROCESSOR, or Qwen2.5-VL's)."""
    p = published
    image = g.image_pixels or (p.image_min_pixels, p.image_max_pixels)
    video = g.video_pixels or (p.video_min_pixels, p.video_max_pixels)
    return QwenVlProcessor(*image, *video)


# --mm-encoder-tp-mode data (model_executor/models/vision.py:run_dp_sharded_mrope_vision_model, read in 0.11.2 and
# 0.33; Qwen3-VL, Qwen2.5-VL and GLM-4.xV set supports_encoder_tp_data): the tower is built replicated (disable_tp on
# every linear, vision.py:is_vit_use_data_parallel) and get_load_balance_assignment hands the items, largest first, to
# the least-loaded rank (equal dummies: ceil(items / TP) on the busiest). That rank copies its items' pixels
# (torch.cat), runs the whole tower on them, pads its output to the busiest rank's rows and all-gathers it:
# [TP × busiest rows, out_hidden]; the items returned are views of the gathered tensor, which so stays alive through
# the run (checked against vLLM 0.33's own run: tests/fixtures/oracle-profile/cases/*_mm_encoder_tp_modedata.json).


def data_parallel_items(items: int, tp: int) -> int:
    """The dummy items the busiest TP rank encodes under --mm-encoder-tp-mode data (get_load_balance_assignment)."""
    return -(-items // tp)


def data_parallel_output_rows(item: DummyItem, items: int, tp: int) -> int:
    """The all-gathered output's rows (TP × the busiest rank's), which the items' views keep alive."""
    return tp * data_parallel_items(items, tp) * item.embeds


def data_parallel_forward_bytes(g: VisionGeometry, item: DummyItem, items: int, *, tp: int, pixel_bytes: int,
                                pixel_elem: int, tower: int, elem: int = 2) -> int:
    """The encoder phase's peak on the busiest rank under --mm-encoder-tp-mode data: every item's pixels, the local
    copy of its own items' and `tower`, the whole (unsharded) tower's peak over them; or, at the end, the local output
    beside its all-gathered copy."""
    local = data_parallel_items(items, tp)
    local_pixels = local * item.patches * g.patch_values * pixel_elem
    gather = (local * item.embeds + data_parallel_output_rows(item, items, tp)) * g.embed_width * elem
    return pixel_bytes + local_pixels + max(tower, gather)


def qwen3_vl_encoder_phase(g: VisionGeometry, version: VllmVersion, *, model_runner_v2: bool, tp: int,
                           max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int, image_limit: int,
                           video_limit: int, elem: int = 2, processor: QwenVlProcessor | None = None,
                           data_parallel: bool = False) -> EncoderPhase | None:
    """Qwen3-VL's encoder profile on `version` (see the module docstring): the dummy items, what stays allocated
    after the encoder ran, and the tower's forward peak (`processor`: processor_of(g) when None; `data_parallel`:
    --mm-encoder-tp-mode data, see data_parallel_forward_bytes). None: no modality allowed."""
    processor = processor or processor_of(g)
    item = _dummy_item(g, processor, version, image=image_limit > 0, video=video_limit > 0,
                       max_model_len=max_model_len)
    if item is None:
        return None
    limit = image_limit if item.modality == "image" else video_limit
    budget, items = encoder_budget_items(item.budget_tokens, max_num_batched_tokens=max_num_batched_tokens,
                                         max_num_seqs=max_num_seqs, max_model_len=max_model_len, limit=limit)
    u8 = version >= DEVICE_NORMALIZE_SINCE
    rows = data_parallel_output_rows(item, items, tp) if data_parallel else None
    kept = runner_kept(item, items, budget, width=g.embed_width, patch_values=g.patch_values, version=version,
                       model_runner_v2=model_runner_v2, uint8_pixels=u8, elem=elem, output_rows=rows)
    if kept is None:
        return EncoderPhase(item, 0, budget, 0, 0, 0, 0, NO_ENCODER_PROFILE)
    best, low, high, what = kept
    pixel_bytes = dummy_pixel_bytes(item, items, g.patch_values, uint8_pixels=u8)
    if data_parallel:
        tower = vision_forward_peak_bytes(g, patches=data_parallel_items(items, tp) * item.patches, tp=1, elem=elem)
        forward = data_parallel_forward_bytes(g, item, items, tp=tp, pixel_bytes=pixel_bytes,
                                              pixel_elem=1 if u8 else FLOAT32_PIXEL_BYTES,
                                              tower=tower, elem=elem)
        what += f"; --mm-encoder-tp-mode data: the whole tower on this rank, its output all-gathered over TP {tp}"
    else:
        forward = vision_forward_peak_bytes(g, patches=items * item.patches, tp=tp, elem=elem) + pixel_bytes
    return EncoderPhase(item, items, budget, best, low, high, forward, what)


NO_ENCODER_PROFILE = "none: Model Runner V2's profile_run runs no encoder before 0.25 (read in 0.24)"


def dummy_pixel_bytes(item: DummyItem, items: int, patch_values: int, *, uint8_pixels: bool) -> int:
    """The pixel values of `items` dummy items as the runner's batched_dummy_mm_inputs holds them: uint8 where the
    model normalizes on the device (supports_mm_device_do_normalize, by model and release), else float32."""
    return items * item.patches * patch_values * (1 if uint8_pixels else FLOAT32_PIXEL_BYTES)


def runner_kept(item: DummyItem, items: int, budget: int, *, width: int, patch_values: int, version: VllmVersion,
                model_runner_v2: bool, uint8_pixels: bool, elem: int = 2,
                output_rows: int | None = None) -> tuple[int, int, int, str] | None:
    """What the runner's profile_run keeps allocated once the encoder ran (best, low, high, what), for `items` dummy
    items of `width`-wide embeddings (see the module docstring): 0.11–0.12's budget-sized copies with the outputs and
    float32 pixels; the V1 runner's outputs and pixels (uint8 where the model normalizes on the device, else
    float32); Model Runner V2's outputs (0 at the low end on 0.25–0.26, not read). `output_rows`: the rows the
    outputs keep alive when they are views of a larger tensor (--mm-encoder-tp-mode data: data_parallel_output_rows),
    else items × embeddings. The V1 runner before 0.11 (0.10.2) keeps the outputs and float32 pixels, no copies.
    None: Model Runner V2 before 0.25 profiles no encoder."""
    outputs = (items * item.embeds if output_rows is None else output_rows) * width * elem
    if BUDGET_COPY_SINCE <= version < BUDGET_COPY_UNTIL:
        # V1 only: the budget-sized copies, the originals (the loop's last `output`, a split view that keeps the
        # whole projector output alive), float32 pixels
        copy = items * budget * width * elem if item.embeds < budget else 0
        kept = copy + outputs + dummy_pixel_bytes(item, items, patch_values, uint8_pixels=False)
        return kept, kept, kept, (
            f"{items} {item.modality} item(s) of {item.embeds:,} embeddings ({item.budget_tokens:,} budget tokens"
            f"{f', {item.frames:,} frames' if item.modality == 'video' else ''}) scattered into "
            f"{budget:,}-row copies, kept with the outputs and float32 pixels (vLLM 0.11–0.12)")
    if model_runner_v2 and version < MRV2_ENCODER_UNREAD:  # 0.24: profile_run runs no encoder
        return None
    if model_runner_v2:
        return outputs, outputs if version >= MRV2_ENCODER_SINCE else 0, outputs, (
            f"{items} {item.modality} item(s) × {item.embeds:,} embeddings kept (Model Runner V2"
            f"{'' if version >= MRV2_ENCODER_SINCE else '; 0.25–0.26 not read: 0 at the range low end'})")
    kept = outputs + dummy_pixel_bytes(item, items, patch_values, uint8_pixels=uint8_pixels)
    return kept, kept, kept, (f"{items} {item.modality} item(s) × {item.embeds:,} embeddings kept with the "
                              f"{'uint8' if uint8_pixels else 'float32'} pixels (V1 runner)")
