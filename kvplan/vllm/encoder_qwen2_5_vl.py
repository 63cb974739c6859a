"""Qwen2.5-VL's multimodal encoder profile, release by release: the dummy item vLLM's profile run encodes, what it
keeps alive through the language model's dummy run and the sampler, and the vision tower's own forward peak.

Pure. Read in the wheels 0.9.0.1, 0.10.2, 0.11.0, 0.11.2, 0.12.0, 0.13.0–0.18.0, 0.19.0, 0.20.0–0.29.0, 0.31.0 and
0.33.0 (model_executor/models/qwen2_vl.py, qwen2_5_vl.py; multimodal/encoder_budget.py), checked against vLLM 0.33's own
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
  uint8 from 0.28 where qwen2_5_vl.py sets supports_mm_device_do_normalize, float32 before), and from 0.12 the
  tower's rotary cache (Qwen2_5_VisionTransformer.get_rope_by_thw keeps the window-ordered cos and sin, [patches,
  head_dim / 2] each in the model dtype, on the GPU — one entry for the dummy's grid: 0.12.0 … 0.28.0 by
  `functools.lru_cache(maxsize=1024)` on the method, whose cos and sin index get_rope's cos_sin_cache buffer on the
  GPU; 0.29 on by `_rope_by_thw_cache`). Before 0.12 the same lru_cache holds CPU tensors only
  (Qwen2_5_VisionRotaryEmbedding's inv_freq is made with device='cpu'; forward moves a float32 [patches, head_dim / 2]
  copy to the GPU, as many bytes as cos and sin in the model dtype).
* **The tower's forward peak** (qwen2_5_vl.py:Qwen2_5_VisionBlock, Qwen2_5_VisionAttention, Qwen2_5_VisionMLP):
  alive through the blocks are the window-ordered residual stream ([S, hidden]), the concatenated cos and sin of
  this forward beside the cached ones, and the pixels. The MLP holds the block input, the attention output and the
  fused norm's output (an all-reduce copy more at TP > 1), gate_up ([S, 2 · I / TP]) and its activation (I / TP) —
  with the CUDA kernels, as 0.33's enforce_eager run; a compiled serve runs the norm natively, out of place, one
  [S, hidden] more, and before 0.15 F.silu's output beside the product (native_vision_ops);
  the attention holds x, norm1(x), qkv (3 · hidden / TP), q and k stacked for the rotary and the rotary's output (2 + 2
  · hidden / TP), the attention output (hidden / TP) and the projection with its all-reduce copy. The merger: ln_q,
  its two linears on [S / merge², merge² · hidden / TP] and the output with its reverse-window gather.
* **The float32 rotary of 0.9–0.11** (qwen2_vl.py:apply_rotary_pos_emb_vision: `t_ = t.float()`, then
  vllm_flash_attn's Triton apply_rotary_emb, not in place: `output = torch.empty_like(x)`, float32, then
  `.type_as(t)`; read in 0.9.0.1, 0.10.2, 0.11.0 and 0.11.2, gone in 0.12.0, which rotates in the model dtype). While
  it runs the attention holds norm1(x), the qkv projection (3 · hidden / TP, bound to `x` to the end), a
  contiguous copy of q, k and v (rearrange(...).contiguous(): 3 · hidden / TP; 0.9–0.11.0), the float32 copy and
  output and their model-dtype cast, and the float32 cos and sin of the [S, head_dim / 2] table. 0.9.0.1 and 0.10.2
  rotate q, then k (Qwen2_5_VisionAttention.forward: 3 + 3 + 2 · 2 + 1 = 11 · hidden / TP at k's rotary, q rotated
  beside it); 0.11.0 rotates `torch.cat([q, k])` (3 + 3 + 2 + 2 · 4 + 2 = 18 · hidden / TP); 0.11.2 rotates a view
  of qkv (3 + 2 · 4 + 2 = 13), inside the range of 0.11's ±50 % (a VllmVersion is a minor: 0.11.0's is modelled).
  At TP > 1 0.9–0.11.0's split_qkv all-gathers qkv first (all_gather_interleave: TP zeros_like buffers and their
  concatenation, 3 · hidden each, beside the local 3 · hidden / TP). This is the tower's peak on those releases: the
  MLP's is 3 · hidden + 3 · intermediate (Qwen2.5-VL: ≈ 11 · hidden at TP 1).
"""
from __future__ import annotations

from kvplan.model.spec import VisionGeometry
from kvplan.vllm.defaults import LATEST, VllmVersion
from kvplan.vllm.encoder_profile import (
    FACTORIZED_IMAGE_SINCE,
    FLOAT32_PIXEL_BYTES,
    HUGE_SIDE,
    NO_ENCODER_PROFILE,
    DummyItem,
    EncoderPhase,
    QwenVlProcessor,
    data_parallel_forward_bytes,
    data_parallel_items,
    data_parallel_output_rows,
    dummy_pixel_bytes,
    encoder_budget_items,
    factorized_size,
    image_smart_resize,
    max_image,
    modality_with_max_tokens,
    processor_of,
    runner_kept,
)

# The Qwen2.5-VL checkpoints' preprocessor_config.json (tests/fixtures/processors/qwen2.5-vl/, with its source):
# min_pixels 3136, max_pixels 12845056, patch 14, merge 2, temporal patch 2. The video bounds are the image
# processor's (vLLM sizes the dummy video with them; the video processor reads the same file).
QWEN2_5_VL_PROCESSOR = QwenVlProcessor(3136, 12845056, 3136, 12845056)
MAX_FRAMES_PER_VIDEO = 14  # qwen2_vl.py:_MAX_FRAMES_PER_VIDEO (0.11 … 0.33)
DEVICE_NORMALIZE_SINCE = VllmVersion(0, 28)  # qwen2_5_vl.py: supports_mm_device_do_normalize (0.28 on; not 0.27.1)
# qwen2_5_vl.py:get_rope_by_thw on the GPU: lru_cache over get_rope's cos_sin_cache (0.12.0 … 0.28.0 read), then
# _rope_by_thw_cache (0.29, 0.31, 0.33); 0.11.2 and before cache CPU tensors (Qwen2_5_VisionRotaryEmbedding)
ROPE_CACHE_SINCE = VllmVersion(0, 12)
FP32_ROTARY_BEFORE = VllmVersion(0, 12)  # qwen2_vl.py:apply_rotary_pos_emb_vision `t.float()` (0.9.0.1 … 0.11.2)
QK_CONCAT_ROTARY = VllmVersion(0, 11)  # qwen2_5_vl.py: `qk_concat = torch.cat([q, k])` rotated at once (0.11.0)
# Qwen2_5_VisionBlock: `x_fused_norm, residual = self.norm2(x, residual=x_attn)` and Qwen2_5_VisionMLP's merged
# gate_up_proj with SiluAndMul (0.10.2 on; 0.9.0.1: x + attn(norm1(x)), gate_proj and up_proj; 0.10.0-0.10.1 not read)
FUSED_NORM2_SINCE = VllmVersion(0, 10)
IR_RMS_NORM_SINCE = VllmVersion(0, 21)  # layernorm.py: RMSNorm through vllm.ir.ops (0.21.0 on; 0.20.0 not)
COMPILED_NATIVE_ACT_SINCE = VllmVersion(0, 15)  # custom_op.py:CustomOp.maybe_compile (0.15.1 on; 0.14.0 not)


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
    """Qwen2.5-VL's dummy item over the allowed modalities (encoder_profile.modality_with_max_tokens). None: neither
    allowed."""
    candidates = ([max_image(g, p, version)] if image else []) + (
        [max_video(g, p, max_model_len=max_model_len, version=version)] if video else [])
    return modality_with_max_tokens(candidates, version)


def rope_bytes(g: VisionGeometry, patches: int, elem: int = 2) -> int:
    """The window-ordered cos and sin of `patches` patches: [patches, head_dim / 2] each, in the model dtype
    (Qwen2_5_VisionTransformer.rotary_pos_emb_thw, get_rope_by_thw)."""
    return 2 * patches * (g.hidden_size // g.num_heads // 2) * elem


def fp32_rotary_attention_bytes(g: VisionGeometry, *, patches: int, tp: int, version: VllmVersion,
                                elem: int = 2) -> int:
    """The attention's peak besides the residual stream on releases that rotate q and k in float32 (before 0.12: the
    module docstring's last point), at `elem` bytes a model-dtype value; 0 from 0.12. A float32 model's `.float()`
    and `.type_as` copy nothing."""
    if version >= FP32_ROTARY_BEFORE:
        return 0
    s, h = patches, g.hidden_size
    a = g.num_heads // tp * (h // g.num_heads)  # q, k or v on one rank: num_attention_heads_per_partition · head_dim
    cast, back = (0, 0) if elem == 4 else (4, elem)  # t.float()'s copy, .type_as(t)'s cast
    trig = rope_bytes(g, s, elem=4)  # freqs.cos() and freqs.sin(), float32 [S, head_dim / 2] each
    if version >= QK_CONCAT_ROTARY:  # qkv, the q/k/v copies, cat([q, k]), its float32 copy and output, the cast
        rotary = s * (6 * a * elem + 2 * a * elem + 2 * a * (cast + 4 + back))
    else:  # qkv, rotated q, the k and v copies, k's float32 copy and output, the cast
        rotary = s * (6 * a * elem + a * (cast + 4 + back))
    gather = s * elem * (3 * a + 6 * h) if tp > 1 else 0  # split_qkv's all_gather_interleave: buffers and their cat
    return s * h * elem + max(rotary + trig, gather)  # norm1(x) beside it


def native_vision_ops(version: VllmVersion, *, compiled: bool, backend: str = "",
                      custom_ops: tuple[str, ...] = ()) -> tuple[bool, bool]:
    """(RMSNorm, SiluAndMul) run as their PyTorch-native forward, eagerly, in the vision tower (which vLLM does not
    compile by default): a compiled serve under Inductor turns custom ops off (config/compilation.py: custom_ops
    'none' when Inductor is the backend; CustomOp.dispatch_forward then takes forward_native). RMSNorm: from 0.21
    through vllm.ir, whose CUDA default priority is ['native'] under Inductor, ['vllm_c', 'native'] otherwise
    (platforms/cuda.py:get_default_ir_op_priority), before by custom_ops ('+rms_norm' or 'all' keeps the CUDA
    kernel). SiluAndMul: forward_native is torch.compile'd from 0.15 (CustomOp.maybe_compile; one fused output), eager
    before (F.silu's output beside the product)."""
    inductor = compiled and backend in ("", "inductor")
    enabled = set(custom_ops) & {"all"}
    norm = inductor and (version >= IR_RMS_NORM_SINCE or not (enabled or "+rms_norm" in custom_ops))
    silu = inductor and version < COMPILED_NATIVE_ACT_SINCE and not (enabled or "+silu_and_mul" in custom_ops)
    return norm, silu


def vision_forward_peak_bytes(g: VisionGeometry, *, patches: int, grid_patches: int, tp: int, elem: int = 2,
                              version: VllmVersion = LATEST, native_norm: bool = False,
                              eager_silu: bool = False) -> int:
    """The tower's peak live bytes while it encodes `patches` patches on one TP rank (the module docstring) on
    `version`, with the cached rotary of one grid of `grid_patches` beside this forward's; pixels not included.
    `native_norm`, `eager_silu`: native_vision_ops. The MLP's count is vLLM 0.33's own run with the CUDA kernels
    (enforce_eager: the in-place fused_add_rms_norm); the native fused norm returns a new normed tensor and a new
    residual (`x.to(orig_dtype)`) beside x and x_attn, one [S, hidden] more (vLLM 0.33's profile run with
    enforce_eager off and custom ops 'none' counts both: to.dtype and mul.Tensor (S, 1, hidden)); the eager SiluAndMul
    holds F.silu's [S, I / TP] beside the product."""
    s, h = patches, g.hidden_size
    i = -(-g.intermediate_size // tp)
    reduced = h * (2 if tp > 1 else 1)
    steady = s * h * elem + rope_bytes(g, s, elem) + rope_bytes(g, grid_patches, elem)
    mlp = s * elem * (h + reduced + 3 * i)  # besides the residual stream (steady)
    if version >= FUSED_NORM2_SINCE:  # 0.9's block norms unfused and its MLP applies SiLU to gate_proj alone
        mlp += s * elem * (h * native_norm + i * eager_silu)
    attention = max(s * elem * (h + 8 * h // tp + reduced),
                    fp32_rotary_attention_bytes(g, patches=s, tp=tp, version=version, elem=elem))
    merged, wide, out = s // g.spatial_merge_size ** 2, g.spatial_merge_size ** 2 * h // tp, g.out_hidden_size
    # the merger (nn.Sequential: each output frees the one before): ln_q beside the residual stream, then fc1 and
    # GELU, or GELU with fc2 (and its all-reduce copy); then the output and its reverse-window gather
    merger = max(s * h * elem + merged * elem * max(2 * wide, wide + out * (1 + (tp > 1))), 2 * merged * out * elem)
    return steady + max(mlp, attention, merger)


def qwen2_5_vl_encoder_phase(g: VisionGeometry, version: VllmVersion, *, model_runner_v2: bool, tp: int,
                             max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int, image_limit: int,
                             video_limit: int, elem: int = 2, processor: QwenVlProcessor | None = None,
                             data_parallel: bool = False,
                             native_ops: tuple[bool, bool] = (False, False)) -> EncoderPhase | None:
    """Qwen2.5-VL's encoder profile on `version` (the module docstring): the dummy items, what stays allocated after
    the encoder ran, and the tower's forward peak (`processor`: the folder's bounds, else the published ones;
    `data_parallel`: --mm-encoder-tp-mode data, encoder_profile.data_parallel_forward_bytes; `native_ops`:
    native_vision_ops). None: no modality allowed."""
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
    pixel_bytes = dummy_pixel_bytes(item, items, g.patch_values, uint8_pixels=u8)
    grid = item.patches if cache else 0
    if data_parallel:
        tower = vision_forward_peak_bytes(g, patches=data_parallel_items(items, tp) * item.patches, grid_patches=grid,
                                          tp=1, elem=elem, version=version, native_norm=native_ops[0],
                                          eager_silu=native_ops[1])
        forward = data_parallel_forward_bytes(g, item, items, tp=tp, pixel_bytes=pixel_bytes,
                                              pixel_elem=1 if u8 else FLOAT32_PIXEL_BYTES, tower=tower, elem=elem)
        what += f"; --mm-encoder-tp-mode data: the whole tower on this rank, its output all-gathered over TP {tp}"
    else:
        forward = vision_forward_peak_bytes(g, patches=items * item.patches, grid_patches=grid, tp=tp,
                                            elem=elem, version=version, native_norm=native_ops[0],
                                            eager_silu=native_ops[1]) + pixel_bytes
    return EncoderPhase(item, items, budget, best + cache, low + cache, high + cache, forward, what)
