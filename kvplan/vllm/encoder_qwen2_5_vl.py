"""Qwen2.5-VL's multimodal encoder profile, release by release: the dummy item vLLM's profile run encodes, what it
keeps alive through the language model's dummy run and the sampler, and the vision tower's own forward peak.

Pure. Read in the wheels 0.11.0, 0.11.2, 0.17.0, 0.19.0, 0.22.0–0.24.0, 0.26.0–0.29.0, 0.31.0 and 0.33.0
(model_executor/models/qwen2_vl.py, qwen2_5_vl.py; multimodal/encoder_budget.py), checked against vLLM 0.33's own
profile run (tests/fixtures/oracle-profile/cases/Qwen--Qwen2.5-VL-*-enc*.json):

* **The image** (Qwen2VLProcessingInfo.get_image_size_with_most_features): the image processor's longest_edge
  factorized (0.13+; a 9,999,999-pixel square resized before), 3,584 × 3,584 with the published bounds: 65,536
  patches, 16,384 tokens (encoder_profile.max_image).
* **The video** (get_num_frames_with_most_features, the same in every release read): frames of that image size, as
  many as fit in max_model_len (_get_max_video_frames, from 1 frame), at most _MAX_FRAMES_PER_VIDEO = 14, resized
  with the *image* processor's bounds (_get_vision_info; 0.33 says so: default_size=image_processor.size), padded to
  the temporal patch: 14 frames are 7 × 16,384 = 114,688 tokens at max_model_len 128,000 — the modality with the
  most tokens, so Qwen2.5-VL profiles one video of 458,752 patches where Qwen3-VL profiles one image. No 12.5
  factor (that is qwen3_vl.py's), so the budget is the video's tokens.
* **Kept through the run**: the runner's (encoder_profile.runner_kept: outputs, plus the pixels on the V1 runner,
  uint8 from 0.28 where qwen2_5_vl.py sets supports_mm_device_do_normalize, float32 before), and from 0.29 the
  tower's rotary cache (Qwen2_5_VisionTransformer.get_rope_by_thw: `_rope_by_thw_cache[(t, h, w)]` keeps the
  window-ordered cos and sin, [patches / merge², merge², head_dim / 2] each in the model dtype, on the GPU — one
  entry for the dummy's grid).
* **The tower's forward peak** (qwen2_5_vl.py:Qwen2_5_VisionBlock, Qwen2_5_VisionAttention, Qwen2_5_VisionMLP):
  alive through the blocks are the window-ordered residual stream ([S, hidden]), the concatenated cos and sin of
  this forward beside the cached ones, and the pixels. The MLP holds the block input, the attention output and the
  fused norm's output (an all-reduce copy more at TP > 1), gate_up ([S, 2 · I / TP]) and its activation (I / TP);
  the attention holds x, norm1(x), qkv (3 · hidden / TP), q and k stacked for the rotary and the rotary's output (2 + 2
  · hidden / TP), the attention output (hidden / TP) and the projection with its all-reduce copy. The merger: ln_q,
  its two linears on [S / merge², merge² · hidden / TP] and the output with its reverse-window gather.
"""
from __future__ import annotations

from kvplan.model.spec import VisionGeometry
from kvplan.vllm.defaults import LATEST, VllmVersion
from kvplan.vllm.encoder_profile import (
    FACTORIZED_IMAGE_SINCE,
    HUGE_SIDE,
    NO_ENCODER_PROFILE,
    DummyItem,
    EncoderPhase,
    QwenVlProcessor,
    data_parallel_forward_bytes,
    data_parallel_items,
    data_parallel_output_rows,
    encoder_budget_items,
    factorized_size,
    image_smart_resize,
    max_image,
    processor_of,
    runner_kept,
)

# The Qwen2.5-VL checkpoints' preprocessor_config.json (tests/fixtures/processors/qwen2.5-vl/, with its source):
# min_pixels 3136, max_pixels 12845056, patch 14, merge 2, temporal patch 2. The video bounds are the image
# processor's (vLLM sizes the dummy video with them; the video processor reads the same file).
QWEN2_5_VL_PROCESSOR = QwenVlProcessor(3136, 12845056, 3136, 12845056)
MAX_FRAMES_PER_VIDEO = 14  # qwen2_vl.py:_MAX_FRAMES_PER_VIDEO (0.11 … 0.33)
DEVICE_NORMALIZE_SINCE = VllmVersion(0, 28)  # qwen2_5_vl.py: supports_mm_device_do_normalize (0.28 on; not 0.27.1)
ROPE_CACHE_SINCE = VllmVersion(0, 29)  # qwen2_5_vl.py: _rope_by_thw_cache (0.29, 0.31, 0.33; not 0.28)
NAME_BREAKS_TIES_SINCE = VllmVersion(0, 17)  # get_modality_with_max_tokens: key (tokens, name) in 0.17+, tokens in 0.11


def _image_side(g: VisionGeometry, p: QwenVlProcessor, version: VllmVersion) -> tuple[int, int]:
    """get_image_size_with_most_features as (height, width), resized: the size every dummy frame has."""
    factor = g.patch_size * g.spatial_merge_size
    if version >= FACTORIZED_IMAGE_SINCE:
        height, width = factorized_size(p.image_max_pixels, factor)
    else:
        height = width = HUGE_SIDE
    return image_smart_resize(height, width, factor, p.image_min_pixels, p.image_max_pixels)


def _video_tokens(g: VisionGeometry, h: int, w: int, frames: int) -> tuple[int, int]:
    """Qwen2VLProcessingInfo._get_vision_info for `frames` frames of h × w (already resized): (patches, tokens)."""
    padded = frames + (-frames % g.temporal_patch_size)
    patches = max(padded // g.temporal_patch_size, 1) * (h // g.patch_size) * (w // g.patch_size)
    return patches, patches // g.spatial_merge_size ** 2


def max_video(g: VisionGeometry, p: QwenVlProcessor, *, max_model_len: int, version: VllmVersion = LATEST) -> DummyItem:
    """The dummy video (get_num_frames_with_most_features with one video): frames grow from 1 while the next
    count's tokens fit in max_model_len, capped at 14, at least 1. Bounded: the walk stops at the cap."""
    h, w = _image_side(g, p, version)
    frames = 1
    while frames < MAX_FRAMES_PER_VIDEO and _video_tokens(g, h, w, frames + 1)[1] <= max_model_len:
        frames += 1
    patches, tokens = _video_tokens(g, h, w, frames)
    return DummyItem("video", tokens, tokens, patches, frames)


def dummy_item(g: VisionGeometry, p: QwenVlProcessor, version: VllmVersion, *, image: bool, video: bool,
               max_model_len: int) -> DummyItem | None:
    """MultiModalBudget.get_modality_with_max_tokens over the allowed modalities: the most tokens, ties to the
    larger name from 0.17 ("video"), to the first (image) before. None: neither allowed."""
    candidates = ([max_image(g, p, version)] if image else []) + (
        [max_video(g, p, max_model_len=max_model_len, version=version)] if video else [])
    if not candidates:
        return None
    if version >= NAME_BREAKS_TIES_SINCE:
        return max(candidates, key=lambda c: (c.budget_tokens, c.modality))
    return max(candidates, key=lambda c: c.budget_tokens)


def rope_bytes(g: VisionGeometry, patches: int, elem: int = 2) -> int:
    """The window-ordered cos and sin of `patches` patches: [patches, head_dim / 2] each, in the model dtype
    (Qwen2_5_VisionTransformer.rotary_pos_emb_thw, get_rope_by_thw)."""
    return 2 * patches * (g.hidden_size // g.num_heads // 2) * elem


def vision_forward_peak_bytes(g: VisionGeometry, *, patches: int, grid_patches: int, tp: int, elem: int = 2) -> int:
    """The tower's peak live bytes while it encodes `patches` patches on one TP rank (the module docstring), with the
    cached rotary of one grid of `grid_patches` beside this forward's; pixels not included."""
    s, h = patches, g.hidden_size
    i = -(-g.intermediate_size // tp)
    reduced = h * (2 if tp > 1 else 1)
    steady = s * h * elem + rope_bytes(g, s, elem) + rope_bytes(g, grid_patches, elem)
    mlp = s * elem * (h + reduced + 3 * i)  # besides the residual stream (steady)
    attention = s * elem * (h + 8 * h // tp + reduced)
    merged, wide, out = s // g.spatial_merge_size ** 2, g.spatial_merge_size ** 2 * h // tp, g.out_hidden_size
    # the merger (nn.Sequential: each output frees the one before): ln_q beside the residual stream, then fc1 and
    # GELU, or GELU with fc2 (and its all-reduce copy); then the output and its reverse-window gather
    merger = max(s * h * elem + merged * elem * max(2 * wide, wide + out * (1 + (tp > 1))), 2 * merged * out * elem)
    return steady + max(mlp, attention, merger)


def qwen2_5_vl_encoder_phase(g: VisionGeometry, version: VllmVersion, *, model_runner_v2: bool, tp: int,
                             max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int, image_limit: int,
                             video_limit: int, elem: int = 2, processor: QwenVlProcessor | None = None,
                             data_parallel: bool = False) -> EncoderPhase | None:
    """Qwen2.5-VL's encoder profile on `version` (the module docstring): the dummy items, what stays allocated after
    the encoder ran, and the tower's forward peak (`processor`: the folder's bounds, else the published ones;
    `data_parallel`: --mm-encoder-tp-mode data, encoder_profile.data_parallel_forward_bytes). None: no modality
    allowed."""
    processor = processor or processor_of(g, QWEN2_5_VL_PROCESSOR)
    item = dummy_item(g, processor, version, image=image_limit > 0, video=video_limit > 0,
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
    cache = rope_bytes(g, item.patches, elem) if version >= ROPE_CACHE_SINCE else 0
    if cache:
        what += f", and the tower's rotary cache ({cache / 2**20:,.0f} MiB)"
    pixel_bytes = items * item.patches * g.patch_values * (1 if u8 else 4)
    grid = item.patches if cache else 0
    if data_parallel:
        tower = vision_forward_peak_bytes(g, patches=data_parallel_items(items, tp) * item.patches, grid_patches=grid,
                                          tp=1, elem=elem)
        forward = data_parallel_forward_bytes(g, item, items, tp=tp, pixel_bytes=pixel_bytes, pixel_elem=1 if u8 else 4,
                                              tower=tower, elem=elem)
        what += f"; --mm-encoder-tp-mode data: the whole tower on this rank, its output all-gathered over TP {tp}"
    else:
        forward = vision_forward_peak_bytes(g, patches=items * item.patches, grid_patches=grid, tp=tp,
                                            elem=elem) + pixel_bytes
    return EncoderPhase(item, items, budget, best + cache, low + cache, high + cache, forward, what)
