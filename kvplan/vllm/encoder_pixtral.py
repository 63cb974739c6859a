"""Mistral-3's (Pixtral vision) multimodal encoder profile, release by release: the dummy image vLLM's profile run
encodes and what it keeps alive through the language model's dummy run and the sampler.

Pure. Read in the wheels 0.10.2, 0.11.0, 0.11.2, 0.13.0, 0.15.1, 0.17.0, 0.20.0, 0.22.0, 0.27.1 and 0.33.0
(v1/worker/gpu_model_runner.py:profile_run, multimodal/registry.py, multimodal/profiling.py,
model_executor/models/mistral3.py and pixtral.py; mistral_common 1.13.1 tokens/tokenizers/image.py):

* **The image** (mistral3.py:Mistral3ProcessingInfo.get_image_size_with_most_features: a square of
  vision_config.image_size; pixtral.py:PixtralHFEncoderInfo.get_patch_grid_size counts tokens with the patch of
  patch_size × spatial_merge_size, ceil'd: 1,540 px / 28 = 55 × 55 = 3,025 embeddings for Mistral-Small-3.x). The
  prompt holds `([IMG] × ncols + [IMG_BREAK]) × nrows` with the last one [IMG_END] (mistral3.py:
  _get_prompt_updates): 55 × 56 = 3,080 tokens. The Mistral-format path (params.json,
  pixtral.py:PixtralForConditionalGeneration with mistral_common's ImageEncoder: `(w - 1) // (patch × merge) + 1`
  tokens a side, the image resized to that many patch × merge pixels) gives the same counts and pixels.
* **The budget's tokens per item**: up to 0.12 the placeholder's whole length, break tokens included
  (profiling.py:get_mm_max_contiguous_tokens, read in 0.10.2, 0.11.0, 0.11.2), from 0.13 its embeddings
  (get_mm_max_tokens: "excluding any break/text tokens"; 0.12 not read, taken with 0.11).
* **Kept through the run**: encoder_profile.runner_kept. get_multimodal_embeddings returns torch.split views of the
  projector's one output (mistral3.py:_process_image_input, pixtral.py likewise), so any one item keeps all of
  them. float32 pixels (the processors rescale and normalize) up to 0.31, uint8 from 0.32 (mistral3.py sets
  supports_mm_device_do_normalize in 0.32.0 and 0.33.0, not 0.31.0).
* **The tower's own peak** (pixtral.py:PixtralHFVisionModel with xformers' block-diagonal attention, a vLLM 0.11
  dependency, so no dense [S, S] mask): an estimate, not checked against a run — the residual stream and the
  rotary table through the blocks, the MLP's gate_up and activation or the attention's q, k, v and output; ±50 %.
"""
from __future__ import annotations

from kvplan.model.spec import VisionGeometry
from kvplan.vllm.defaults import VllmVersion
from kvplan.vllm.encoder_profile import (
    BUDGET_COPY_UNTIL,
    NO_ENCODER_PROFILE,
    DummyItem,
    EncoderPhase,
    dummy_pixel_bytes,
    encoder_budget_items,
    runner_kept,
)

# the budget counts the placeholder's length with its break tokens before 0.13 (get_mm_max_contiguous_tokens)
CONTIGUOUS_BUDGET_UNTIL = BUDGET_COPY_UNTIL
# mistral3.py: supports_mm_device_do_normalize, uint8 pixels normalized on the GPU (0.32.0, 0.33.0; not 0.31.0)
DEVICE_NORMALIZE_SINCE = VllmVersion(0, 32)


def pixtral_image(g: VisionGeometry, version: VllmVersion) -> DummyItem:
    """The dummy image: a square of vision_config.image_size (`g.image_size`), ncols = nrows = ceil(side / (patch ×
    merge)) tokens a side (PixtralHFEncoderInfo.get_patch_grid_size); embeddings ncols × nrows, the budget's tokens
    (ncols + 1) × nrows before 0.13, the patches (side tokens × merge)²."""
    unit = g.patch_size * g.spatial_merge_size
    side = -(-g.image_size // unit)
    embeds = side * side
    tokens = (side + 1) * side if version < CONTIGUOUS_BUDGET_UNTIL else embeds
    return DummyItem("image", tokens, embeds, (side * g.spatial_merge_size) ** 2)


def pixtral_forward_peak_bytes(g: VisionGeometry, *, patches: int, tp: int, elem: int = 2) -> int:
    """An estimate of the tower's peak live bytes over `patches` patches on one TP rank, pixels not included
    (pixtral.py:PixtralHFTransformerBlock): the residual stream and the rotary table (complex64, head_dim / 2 per
    patch) throughout; the MLP holds x, its norm, gate_up ([S, 2 · I / TP]) and the activation (I / TP); the
    attention x, its norm, q, k, v (hidden / TP each), the rotated q and k and the output with o_proj's."""
    s, h = patches, g.hidden_size
    i = -(-g.intermediate_size // tp)
    steady = s * h * elem + s * (h // g.num_heads // 2) * 8
    mlp = s * elem * (2 * h + 3 * i)
    attention = s * elem * (2 * h + 6 * h // tp + h)
    return steady + max(mlp, attention)


PIXTRAL_FORWARD_RANGE = (-0.5, 0.5)  # the tower's forward peak is not checked against a run: an estimate, ±50 %


def pixtral_encoder_phase(g: VisionGeometry, version: VllmVersion, *, model_runner_v2: bool, tp: int,
                          max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int, image_limit: int,
                          video_limit: int, elem: int = 2, data_parallel: bool = False) -> EncoderPhase | None:
    """Mistral-3's encoder profile on `version` (the module docstring), with the Qwen-VL phases' signature
    (kvplan.vllm.fit; `video_limit` and `data_parallel` unused: images only, no supports_encoder_tp_data). None: the
    image limit is 0."""
    del video_limit, data_parallel
    if image_limit <= 0:
        return None
    item = pixtral_image(g, version)
    budget, items = encoder_budget_items(item.budget_tokens, max_num_batched_tokens=max_num_batched_tokens,
                                         max_num_seqs=max_num_seqs, max_model_len=max_model_len, limit=image_limit)
    u8 = version >= DEVICE_NORMALIZE_SINCE
    kept = runner_kept(item, items, budget, width=g.embed_width, patch_values=g.patch_values, version=version,
                       model_runner_v2=model_runner_v2, uint8_pixels=u8, elem=elem)
    if kept is None:
        return EncoderPhase(item, 0, budget, 0, 0, 0, 0, NO_ENCODER_PROFILE)
    best, low, high, what = kept
    pixel_bytes = dummy_pixel_bytes(item, items, g.patch_values, uint8_pixels=u8)
    forward = pixtral_forward_peak_bytes(g, patches=items * item.patches, tp=tp, elem=elem) + pixel_bytes
    return EncoderPhase(item, items, budget, best, low, high, forward, what)
