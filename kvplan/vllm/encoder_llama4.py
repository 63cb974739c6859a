"""Llama-4's multimodal encoder profile: the dummy image vLLM's profile run encodes, what it keeps alive through the
language model's dummy run and the sampler, and the vision tower's own forward peak.

Pure. Read in the wheels 0.11.0, 0.16.0, 0.22.0, 0.23.0, 0.27.1 and 0.33.0 (model_executor/models/mllama4.py; the
dummy is the same in all), checked against vLLM 0.33's own profile run
(tests/fixtures/oracle-profile/cases/RedHatAI--Llama-4-Scout-*-enc.json):

* **The image** (Mllama4ProcessingInfo.get_image_size_with_most_features): max_patches tiles high, one wide (h:w =
  16:1, "the max possible feature size"), 5,376 × 336 with transformers' Llama4ImageProcessorFast default of 16
  tiles. The processor tiles it 16 × 1 and adds the global tile: 17 chunks of 336 × 336. vLLM has no
  get_mm_max_tokens_per_item for Llama-4, so the budget counts the dummy's embeddings (<|patch|> positions:
  PromptUpdateDetails.select_token_ids): (336 / 14)² / (1 / pixel_shuffle_ratio²) = 144 per chunk, 2,448 per image.
* **Items**: encoder_profile.encoder_budget_items — 3 images on 8,192 batched tokens (51 chunks).
* **Kept**: the outputs ([2,448, text hidden] per image: the projector gathers the full width) and, on the V1 runner,
  the pixels as the runner moved them to the GPU (vLLM 0.33: [chunks, 3, 336, 336] in the model dtype; float32 in
  releases that do not cast them, not read: the range's high end).
* **The tower's forward peak** (Llama4VisionModel, Llama4VisionEncoderLayer, Llama4VisionAttention): every chunk is
  577 tokens (576 patches and the class token), S in all. Alive through the encoder are layernorm_pre's output (the
  encoder's argument) and the layer's input; the attention adds input_layernorm's output, qkv (3 · hidden / TP) and
  the complex rotary of q and k (each cast to float32, multiplied as complex64, cast back: 2 + 2 + 1 · hidden / TP);
  the MLP adds the residual, post_attention_layernorm's output, fc1 and GELU (I / TP each) or GELU with fc2 (and
  its all-reduce copy at TP > 1). The vision adapter and the projector run on 144 rows a chunk: smaller.
"""
from __future__ import annotations

from dataclasses import dataclass

from kvplan.model.spec import VisionGeometry
from kvplan.vllm.defaults import LATEST, VllmVersion
from kvplan.vllm.encoder_profile import (
    BUDGET_COPY_UNTIL,
    FLOAT32_PIXEL_BYTES,
    NO_ENCODER_PROFILE,
    DummyItem,
    EncoderPhase,
    encoder_budget_items,
    runner_kept,
)

# transformers models/llama4/image_processing_llama4_fast.py:Llama4ImageProcessorFast: max_patches = 16 (the class
# default; the Llama-4 checkpoints' image_processor_config says max_patches 16, resize_to_max_canvas false:
# tests/fixtures/processors/llama4/SOURCE.md).
MAX_TILES = 16


@dataclass(frozen=True)
class Llama4Vision:
    """A Llama-4 vision_config's shapes (mllama4.py:Llama4VisionModel) and the text hidden size the projector maps
    to."""

    hidden_size: int
    intermediate_size: int
    num_heads: int
    image_size: int  # one tile (chunk): 336
    patch_size: int
    pixel_shuffle_ratio: float
    text_hidden_size: int
    num_channels: int = 3

    @property
    def tokens_per_chunk(self) -> int:
        """The encoder's sequence per chunk: the patches and the class token (Llama4VisionModel.num_patches)."""
        return (self.image_size // self.patch_size) ** 2 + 1

    @property
    def embeds_per_chunk(self) -> int:
        """Mllama4ProcessingInfo.get_patch_per_chunk: patches over the pixel shuffle's downsampling."""
        return (self.image_size // self.patch_size) ** 2 // int(round(1.0 / self.pixel_shuffle_ratio ** 2))


def max_image(g: Llama4Vision, max_tiles: int = MAX_TILES) -> DummyItem:
    """The dummy image: max_tiles × 1 tiles plus the global tile (Llama4ImageProcessorFast adds it when there is
    more than one tile; mllama4.py: patches_per_image = 1 + r_h · r_w). Its `patches` are the chunks (pixel rows of
    3 × 336² values)."""
    chunks = max_tiles + 1 if max_tiles > 1 else 1
    embeds = chunks * g.embeds_per_chunk
    return DummyItem("image", embeds, embeds, chunks)


def vision_forward_peak_bytes(g: Llama4Vision, *, chunks: int, tp: int, elem: int = 2) -> int:
    """The tower's peak live bytes while it encodes `chunks` chunks on one TP rank (the module docstring), pixels
    not included."""
    s, h = chunks * g.tokens_per_chunk, g.hidden_size
    i = -(-g.intermediate_size // tp)
    attention = s * elem * (3 * h + 13 * h // tp)
    mlp = s * elem * (4 * h + max(2 * i, i + h * (2 if tp > 1 else 1)))
    return max(attention, mlp)


def data_parallel_forward_bytes(g: Llama4Vision, *, chunks: int, tp: int, elem: int = 2) -> int:
    """The encoder phase's peak under --mm-encoder-tp-mode data (vision.py:run_dp_sharded_vision_model, vLLM 0.33:
    the chunks padded to a multiple of TP with F.pad — a copy —, ceil(chunks / TP) of them through the whole tower on
    each rank, the adapter's output all-gathered; mllama4.py:encode_image_chunks), pixels not included: the padded
    copy and the unsharded tower over the local chunks (the gathered adapter output, 144 rows a chunk, is below it)."""
    local = -(-chunks // tp)
    padded = local * tp * g.num_channels * g.image_size ** 2 * elem
    return padded + vision_forward_peak_bytes(g, chunks=local, tp=1, elem=elem)


def llama4_encoder_phase(g: Llama4Vision, version: VllmVersion = LATEST, *, model_runner_v2: bool, tp: int,
                         max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int, image_limit: int,
                         elem: int = 2, max_tiles: int = MAX_TILES, data_parallel: bool = False) -> EncoderPhase | None:
    """Llama-4's encoder profile on `version` (the module docstring; `data_parallel`: --mm-encoder-tp-mode data,
    data_parallel_forward_bytes, the outputs the projector's as in the weights mode). None: images limited to 0."""
    if image_limit <= 0:
        return None
    item = max_image(g, max_tiles)
    budget, items = encoder_budget_items(item.budget_tokens, max_num_batched_tokens=max_num_batched_tokens,
                                         max_num_seqs=max_num_seqs, max_model_len=max_model_len, limit=image_limit)
    values = g.num_channels * g.image_size ** 2
    kept = runner_kept(item, items, budget, width=g.text_hidden_size, patch_values=values, version=version,
                       model_runner_v2=model_runner_v2, uint8_pixels=False, elem=elem)  # float32 pixels
    if kept is None:
        return EncoderPhase(item, 0, budget, 0, 0, 0, 0, NO_ENCODER_PROFILE)
    best, low, high, what = kept
    pixels = items * item.patches * values
    if not model_runner_v2 and version >= BUDGET_COPY_UNTIL:  # vLLM 0.33 holds them in the model dtype
        best = low = best - pixels * (FLOAT32_PIXEL_BYTES - elem)
        what = what.replace("float32 pixels", "pixels (model dtype; float32 at the range's high end)")
    if data_parallel:
        forward = data_parallel_forward_bytes(g, chunks=items * item.patches, tp=tp, elem=elem) + pixels * elem
        what += f"; --mm-encoder-tp-mode data: the whole tower on this rank's share of the chunks (TP {tp})"
    else:
        forward = vision_forward_peak_bytes(g, chunks=items * item.patches, tp=tp, elem=elem) + pixels * elem
    return EncoderPhase(item, items, budget, best, low, high, forward, what)


def vision_of(g: VisionGeometry) -> Llama4Vision:
    """The Llama-4 shapes kvplan.model.families.towers records in a VisionGeometry (kind "llama4": out_hidden_size is
    the text hidden size, spatial_merge_size 1 / pixel_shuffle_ratio, image_size one tile)."""
    return Llama4Vision(g.hidden_size, g.intermediate_size, g.num_heads, g.image_size, g.patch_size,
                        1.0 / g.spatial_merge_size, g.out_hidden_size, g.in_channels)


def llama4_geometry_phase(g: VisionGeometry, version: VllmVersion, *, model_runner_v2: bool, tp: int,
                          max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int, image_limit: int,
                          video_limit: int, elem: int = 2, data_parallel: bool = False) -> EncoderPhase | None:
    """llama4_encoder_phase on a tower's VisionGeometry, with the Qwen-VL phases' signature (kvplan.vllm.fit:
    _with_qwen_vl_encoder); `video_limit` is unused (mllama4.py supports images only)."""
    del video_limit
    return llama4_encoder_phase(vision_of(g), version, model_runner_v2=model_runner_v2, tp=tp,
                                max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                                max_model_len=max_model_len, image_limit=image_limit, elem=elem,
                                data_parallel=data_parallel)
