"""Gemma-4's vision-encoder profile peak: the one-hot position-embedding transient of the dummy batch, release by
release.

Pure. Read in the wheels (pip download --no-deps): vLLM 0.19.1, 0.20.2, 0.21.0, 0.22.0, 0.22.1, 0.23.0–0.26.0,
0.27.0, 0.28.0–0.32.0, 0.33.0 (model_executor/models/gemma4_mm.py) and transformers 5.5.0, 5.5.4, 5.7.0, 5.9.0,
5.10.1, 5.10.4, 5.11.0, 5.12.1, 5.15.1, 5.16.1, 5.18.0, 5.20.2 (models/gemma4/modeling_gemma4.py):

* vLLM runs HF's own tower (`AutoModel.from_config(config.vision_config)`, every release). **transformers ≤ 5.9.0**
  build the patch positions with `F.one_hot(clamped_positions, num_classes=position_embedding_size)`
  (Gemma4VisionPatchEmbedder._position_embeddings): an int64 (items, patches, 2, 10,240) tensor, cast whole to
  the table's bf16 (`one_hot.permute(0, 2, 1, 3).to(...)`) while the int64 one still lives — 16 + 4 bytes per
  (patch, axis, class) at the cast, the peak; the int64 is freed on the reassignment. **5.10.1 on** index the table
  with F.embedding: no such tensor. The matmul after the cast (`one_hot @ position_embedding_table`, a 4-D by
  3-D broadcast: torch.matmul copies the permuted one-hot to (items · 2, patches, 10,240) and the table expanded
  to (items · 2, 10,240, hidden)) holds 2 + 2 bytes per element plus items · 2 · 10,240 · hidden · 2: below the
  cast's 20 for 630 or 2,520 patches and hidden ≤ 1,152.
* **0.19–0.21** (`_process_image_input` / `_process_video_input`): one image or frame per tower call
  (`pixel_values[i].unsqueeze(0)`), so the transient is one item's (123 MiB for a 630-patch frame).
* **0.22 on** (same code through 0.33): items of one patch count go to the tower in chunks of
  `_encoder_chunk(patches, free, total, position_embedding_size)` = max(1, min(free // 2, total // 10) //
  (patches · 4 · position_embedding_size · 8)), `free, total` from `mem_get_info()` (cudaMemGetInfo) when the
  dummy batch is encoded: after the weights loaded, before the language model's dummy run (gpu_model_runner.py:
  profile_run). vLLM's own cost counts 32 bytes per (patch, class) ("Outer 2x covers the int64 buffer and its
  concurrent bf16 cast plus the matmul output"); the tensors the code allocates hold 20 of them: the estimate's
  point, vLLM's 32 the range's high end.
* **Which transformers**: vLLM 0.19–0.23 require transformers ≥ 4.56 (not 5.0–5.5.0), 0.24–0.28 ≥ 5.5.3, 0.29–0.31
  ≥ 5.10.4, 0.32–0.33 ≥ 5.16.1 (each wheel's METADATA). The point follows the newest transformers when the
  release was built (vllm/__init__.py's timestamp in the wheel against transformers' wheels): 0.19.0/0.19.1
  (2026-04-18), 0.20.2 (05-08), 0.21.0 (05-15) and 0.22.0 (05-29) met 5.5.4–5.9.0, one-hot; 0.22.1 (06-04)
  and later met 5.10.1 (06-03) or newer. Patch releases share their minor's rule here, so 0.22 takes 0.22.0's
  one-hot (the pessimistic side). Until 0.28 an older transformers is allowed, so the range's high end keeps
  the one-hot; from 0.29 none is possible.

The dummy item (gemma4_mm.py: `_VIDEO_MAX_SOFT_TOKENS = 70` per frame, an image vision_config.default_output_length
= 280 soft tokens; pixel_values are padded to `max_patches = max_soft_tokens * pooling_kernel_size**2`): 630
patches a frame, 2,520 an image with every checkpoint's pooling_kernel_size 3. The shapes come from the config's
vision_config (TowerSpec.gemma4_vision: hidden_size, patch_size, pooling_kernel_size, position_embedding_size, as
transformers' Gemma4VisionConfig holds them and gemma4_mm.py reads them); a config without one is refused.
Items: vllm/multimodal.py:gemma4_encoder_profile (the modality with the most tokens per item, the budget's count).
What else the tower call holds beside the one-hot — the dummy pixels in float32 (the HF processor rescales them; an
estimate) and the chunks' hidden states (vision_config.hidden_size wide) — is counted at its largest.
The tower's own layer activations without the one-hot (transformers ≥ 5.10.1) are not modelled: under 1 GiB at
41 frames of 630 patches (a 4,304-wide MLP over 25,830 rows in bf16), below the language model's dummy run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.errors import BadConfig
from kvplan.units import GiB
from kvplan.vllm.defaults import VllmVersion
from kvplan.vllm.encoder_profile import FLOAT32_PIXEL_BYTES
from kvplan.vllm.memory.budget import MemoryTerm, shifted
from kvplan.vllm.multimodal import gemma4_encoder_profile, text_only
from kvplan.vllm.settings import mm_limits

if TYPE_CHECKING:
    from kvplan.model.spec import Gemma4VisionShape, ModelSpec
    from kvplan.vllm.configs import ServeSettings
    from kvplan.vllm.settings import ResolvedSettings

# The patch embedder's input channels (transformers Gemma4VisionPatchEmbedder.input_proj: 3 × patch_size² values a
# patch, RGB); the dummy pixels are float32 (the HF processor rescales them: encoder_profile.FLOAT32_PIXEL_BYTES).
PIXEL_CHANNELS = 3
# gemma4_mm.py: _VIDEO_MAX_SOFT_TOKENS (soft tokens of one video frame)
VIDEO_FRAME_SOFT_TOKENS = 70

CHUNKED_FROM = VllmVersion(0, 22)  # _encoder_chunk batches items per tower call from 0.22
ONE_HOT_POINT_UNTIL = VllmVersion(0, 23)  # built with transformers ≤ 5.9.0 the newest: 0.19–0.22
ONE_HOT_POSSIBLE_UNTIL = VllmVersion(0, 29)  # 0.29 requires transformers ≥ 5.10.4 (F.embedding)
ONE_HOT_BYTES = 8 + 2  # per (patch, axis, class): the int64 one-hot and its bf16 cast, alive together
VLLM_COST_BYTES = 2 * 8  # per (patch, axis, class): _encoder_chunk's `patches * 4 * pos * 8` (the 2x margin)


def encoder_chunk(patches_per_item: int, free_bytes: int, total_bytes: int, position_embedding_size: int) -> int:
    """gemma4_mm.py:Gemma4ForConditionalGeneration._encoder_chunk (0.22–0.33, unchanged): items per tower call."""
    if patches_per_item <= 0:
        return 1
    budget = min(free_bytes // 2, total_bytes // 10)
    if budget <= 0:
        return 1
    cost = patches_per_item * 4 * position_embedding_size * 8
    return max(1, budget // cost) if cost > 0 else 1


@dataclass(frozen=True)
class Gemma4EncoderPeak:
    """The encoder-profile peak above the weights (bytes): the largest tower call's one-hot and what it holds."""

    items: int  # images or frames the dummy batch encodes
    patches: int  # per item, padded to max_patches
    chunk: int  # items per tower call
    one_hot_bytes: int  # the estimate's point (0: transformers ≥ 5.10.1 expected)
    one_hot_high_bytes: int  # vLLM's own cost per chunk when a one-hot transformers is allowed, else 0
    held_bytes: int  # the dummy pixels (float32) and the chunks' hidden states, at their largest

    @property
    def bytes(self) -> int:
        """The point: the peak of the encoder phase."""
        return self.one_hot_bytes + self.held_bytes if self.one_hot_bytes else 0

    @property
    def high_bytes(self) -> int:
        """The range's high end (vLLM's own budgeted cost per chunk)."""
        return self.one_hot_high_bytes + self.held_bytes if self.one_hot_high_bytes else 0


def vision_shape(model: ModelSpec) -> Gemma4VisionShape | None:
    """The loaded image tower's vision_config shapes (None: no Gemma-4 image tower loaded). Raises BadConfig, one
    line, where the config lacks one the encoder profile reads."""
    tower = next((t for t in model.towers if t.loaded and "image" in t.modalities and t.gemma4_vision), None)
    if tower is None or tower.gemma4_vision is None:
        return None
    missing = tower.gemma4_vision.missing
    if missing:
        raise BadConfig(f"Gemma-4's vision_config has no {', '.join(missing)}: the encoder profile's patches and "
                        "one-hot (gemma4_mm.py: max_patches, _encoder_chunk) need it",
                        hint="use the checkpoint's config.json, or pass --activation-memory")
    return tower.gemma4_vision


def gemma4_encoder_peak(version: VllmVersion, *, modality: str, items: int, embeds_per_item: int,
                        total_bytes: int, weights_bytes: int, vision: Gemma4VisionShape) -> Gemma4EncoderPeak | None:
    """The one-hot transient of the dummy batch (`items` of `modality` from vllm/multimodal.py:
    gemma4_encoder_profile, `embeds_per_item` soft tokens each), on a GPU of CUDA total `total_bytes` with
    `weights_bytes` loaded (free = total − weights: the larger free the larger the chunk), with the tower's
    vision_config shapes (`vision`: vision_shape). None: audio (its tower has no such tensor) or nothing encoded."""
    if modality not in ("image", "video") or items <= 0:
        return None
    if modality == "video":
        items *= max(1, embeds_per_item // VIDEO_FRAME_SOFT_TOKENS)
        soft = VIDEO_FRAME_SOFT_TOKENS
    else:
        soft = embeds_per_item
    assert not vision.missing  # vision_shape refuses first
    pooling, positions = int(vision.pooling_kernel_size or 0), int(vision.position_embedding_size or 0)
    patch, hidden = int(vision.patch_size or 0), int(vision.hidden_size or 0)
    patches = soft * pooling ** 2
    chunk = 1 if version < CHUNKED_FROM else min(items, encoder_chunk(patches, max(0, total_bytes - weights_bytes),
                                                                      total_bytes, positions))
    elements = chunk * patches * 2 * positions
    point = elements * ONE_HOT_BYTES if version < ONE_HOT_POINT_UNTIL else 0
    high = elements * VLLM_COST_BYTES if version < ONE_HOT_POSSIBLE_UNTIL else 0
    held = items * patches * (PIXEL_CHANNELS * patch ** 2 * FLOAT32_PIXEL_BYTES + hidden * 2)
    return Gemma4EncoderPeak(items, patches, chunk, point, high, held)


def with_gemma4_encoder_peak(term: MemoryTerm, model: ModelSpec, s: ServeSettings, r: ResolvedSettings, *,
                             total_bytes: int, weights_bytes: int, first: bool) -> MemoryTerm:
    """The activation term (`term`: the language model's dummy run and sampler with the encoder outputs held, fit's
    _with_encoder_profile) against Gemma-4's encoder phase, which runs first on the first PP stage
    (gpu_model_runner.py:profile_run): the peak is the larger of the two, end by end. Other models unchanged."""
    if not first or not model.facts.mm_item_tokens_stated or not any(
            t.loaded and "image" in t.modalities for t in model.towers):
        return term
    limits = mm_limits(s)
    if text_only(model, limits):
        return term
    vision = vision_shape(model)
    if vision is None:
        return term
    batch = r.scheduler_config.batch
    enc = gemma4_encoder_profile(model, limits, max_num_batched_tokens=batch.max_num_batched_tokens,
                                 max_num_seqs=batch.max_num_seqs, max_model_len=r.model_config.max_model_len)
    peak = None if enc is None else gemma4_encoder_peak(
        r.version, modality=enc.modality, items=enc.items, embeds_per_item=enc.embeds_per_item,
        total_bytes=total_bytes, weights_bytes=weights_bytes, vision=vision)
    if peak is None or (peak.bytes <= term.bytes and peak.high_bytes <= term.high_bytes):
        return term  # below the language model's dummy run and sampler at both ends: no change
    best, low, high = max(term.bytes, peak.bytes), term.low_bytes, max(term.high_bytes, peak.high_bytes)
    if peak.bytes:
        low = max(low, peak.one_hot_bytes * 4 // 5 + peak.held_bytes)  # the int64 one-hot alone (16 of 20 bytes)
    kind = "frames" if enc is not None and enc.modality == "video" else "images"
    what = (f"Gemma-4 vision encoder: {peak.items} {kind}"
            f" of {peak.patches} patches, {peak.chunk} per tower call (_encoder_chunk), one-hot position transient "
            f"{peak.one_hot_bytes / GiB:.2f} GiB (estimate, up to {peak.one_hot_high_bytes / GiB:.2f}")
    what += ")" if peak.bytes else "; 0 with transformers ≥ 5.10.1, the newest at this release)"
    return shifted(term, best - term.bytes, what, low_delta=low - term.low_bytes, high_delta=high - term.high_bytes)
