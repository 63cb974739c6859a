"""`--limit-mm-per-prompt` and `--language-model-only`: what vLLM 0.33's multimodal limits change in the plan.

Pure. What a limit changes, each where vLLM decides it:

* a tower whose modalities are all limited to 0 is not built, so its weights are not loaded
  (model_executor/models/interfaces.py:SupportsMultiModal._mark_tower_model);
* all of the model's modalities at 0 (or --language-model-only) run the model text-only: vLLM clears
  is_mm_prefix_lm (config/model.py:ModelConfig._supports_multimodal_inputs, _supports_multimodal_for_mm_prefix),
  so a multimodal prefix LM (gemma-3/4) gets the ordinary attention backend, keeps the default
  max_num_batched_tokens and chunked multimodal input, and the encoder is neither profiled nor cached
  (v1/core/encoder_cache_manager.py:compute_mm_encoder_budget: "Encoder cache will not be initialized");
* Gemma-4's per-item token ceilings (gemma4_mm.py:Gemma4ProcessingInfo.get_mm_max_tokens_per_item) follow a
  video's `num_frames` option; vLLM raises the default max_num_batched_tokens to the largest *supported*
  item (engine/arg_utils.py:_get_min_mm_batched_tokens, whatever the limits) and refuses a smaller one
  given by hand when an *allowed* item does not fit (compute_mm_encoder_budget, chunked MM input being
  disabled for prefix LMs: platforms/cuda.py).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvplan.errors import InvalidParameter

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec, TowerSpec

# config/multimodal.py:BaseDummyOptions.count: a modality the user does not name allows 999 items.
DEFAULT_LIMIT = 999
# config/multimodal.py: VideoDummyOptions / ImageDummyOptions / AudioDummyOptions (extra="forbid").
_OPTIONS = {"video": ("count", "num_frames", "width", "height"), "image": ("count", "width", "height"),
            "audio": ("count", "length")}
FLAG = "--limit-mm-per-prompt"

# gemma4_mm.py: a video is at most _VIDEO_MAX_FRAMES frames of _VIDEO_MAX_SOFT_TOKENS soft tokens + boi + eoi
# + ~6 timestamp tokens; an image at most vision_config.default_output_length; audio the processor's
# audio_seq_length (transformers' Gemma4Processor default, no processor_config.json read here). An image's ceiling
# is read from the config (TowerSpec.tokens_per_image); 280 when no tower was counted.
GEMMA4_VIDEO_MAX_FRAMES = 32
GEMMA4_VIDEO_FRAME_TOKENS = 70 + 2 + 6
GEMMA4_VIDEO_ITEM_TOKENS = GEMMA4_VIDEO_MAX_FRAMES * GEMMA4_VIDEO_FRAME_TOKENS
GEMMA4_IMAGE_ITEM_TOKENS = 280
GEMMA4_AUDIO_ITEM_TOKENS = 750


@dataclass(frozen=True)
class ModalityLimit:
    """One modality's entry: the item count and the dummy-input options vLLM profiles with."""

    count: int = DEFAULT_LIMIT
    num_frames: int | None = None
    width: int | None = None
    height: int | None = None
    length: int | None = None


@dataclass(frozen=True)
class MmLimits:
    """--limit-mm-per-prompt (modality → limit, in the order given) and --language-model-only."""

    limits: tuple[tuple[str, ModalityLimit], ...] = ()
    language_model_only: bool = False
    enable_mm_embeds: bool = False  # --enable-mm-embeds: precomputed embeddings of a modality limited to 0
    mm_encoder_tp_mode: str = "weights"  # --mm-encoder-tp-mode (config/multimodal.py:MultiModalConfig)

    def get(self, modality: str) -> ModalityLimit | None:
        return dict(self.limits).get(modality)

    def count(self, modality: str) -> int:
        """config/multimodal.py:MultiModalConfig.get_limit_per_prompt."""
        if self.language_model_only:
            return 0
        entry = self.get(modality)
        return DEFAULT_LIMIT if entry is None else entry.count

    @property
    def given(self) -> bool:
        return bool(self.limits) or self.language_model_only

    def active(self, modalities: tuple[str, ...]) -> tuple[str, ...]:
        """The modalities the encoder budget covers (multimodal/encoder_budget.py:MultiModalBudget): those whose
        limit is above 0 (the tower's), plus, with --enable-mm-embeds, those at 0 (embedding-only)."""
        return tuple(m for m in modalities if self.count(m) > 0 or self.enable_mm_embeds)


_CLASSES = {"video": "VideoDummyOptions", "image": "ImageDummyOptions", "audio": "AudioDummyOptions"}


def _refuse(text: str) -> InvalidParameter:
    return InvalidParameter(text, hint=f"vLLM's {FLAG} validation (config/multimodal.py:MultiModalConfig)")


def _pydantic(field: str, message: str, kind: str, value: object) -> InvalidParameter:
    """pydantic's ValidationError for MultiModalConfig, on one line."""
    shown = repr(value) if not isinstance(value, str) else f"'{value}'"
    return _refuse(f"1 validation error for MultiModalConfig: limit_per_prompt.{field}: {message} "
                   f"[type={kind}, input_value={shown}, input_type={type(value).__name__}]")


def _option(key: str, value: object) -> int:
    """A count (≥ 0) or a size option (> 0), as pydantic checks them in lax mode (BaseDummyOptions.count:
    Field(ge=0); num_frames / width / height / length: Field(gt=0); a bool is an int)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        if isinstance(value, float):
            raise _pydantic(key, "Input should be a valid integer, got a number with a fractional part",
                            "int_from_float", value)
        raise _pydantic(key, "Input should be a valid integer", "int_type", value)
    if key == "count" and value < 0:
        raise _pydantic(key, "Input should be greater than or equal to 0", "greater_than_equal", value)
    if key != "count" and value <= 0:
        raise _pydantic(key, "Input should be greater than 0", "greater_than", value)
    return int(value)


def _entry(name: str, entry: object) -> ModalityLimit:
    """One modality's value: a count (the legacy form) or its options (MultiModalConfig._validate_limit_per_prompt:
    `isinstance(v, int)` → {"count": v}, else `XDummyOptions(**v)`)."""
    if isinstance(entry, int):
        return ModalityLimit(count=_option("count", entry))
    if not isinstance(entry, Mapping):
        cls = _CLASSES.get(name, "BaseDummyOptions")
        raise _refuse(f"vllm.config.multimodal.{cls}() argument after ** must be a mapping, not "
                      f"{type(entry).__name__ if entry is not None else 'NoneType'}")
    allowed = _OPTIONS.get(name, ("count",))
    fields: dict[str, int] = {}
    for key, v in entry.items():
        if key in allowed:
            fields[str(key)] = _option(str(key), v)
        elif name in _OPTIONS:  # extra="forbid"; any other modality's options ignore unknown keys
            raise _pydantic(str(key), "Unexpected keyword argument", "unexpected_keyword_argument", v)
    return ModalityLimit(**fields)


def parse_mm_limits(value: object) -> tuple[tuple[str, ModalityLimit], ...]:
    """--limit-mm-per-prompt as vLLM 0.33 reads it: JSON text (engine/arg_utils.py: parse_type(json.loads)) or a
    mapping of modality → a count (the legacy form, {"image": 16}) or options ({"video": {"count": 1,
    "num_frames": 32}}), both mixed. Raises InvalidParameter with vLLM's own message, on one line (argparse's
    "Value … cannot be converted" for text that is not JSON, without the function's address)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise InvalidParameter(f"Value {value} cannot be converted to <function loads>.",
                                   hint='give a JSON object, e.g. \'{"image": 0, "video": 0}\'') from None
    if not isinstance(value, Mapping):
        raise _refuse(f"'{type(value).__name__ if value is not None else 'NoneType'}' object has no attribute "
                      "'items'")
    return tuple((str(name), _entry(str(name), entry)) for name, entry in value.items())


def text_only(model: ModelSpec, limits: MmLimits) -> bool:
    """Every modality the model supports limited to 0, and no --enable-mm-embeds: vLLM runs it as a language
    model (config/model.py:ModelConfig._supports_multimodal_inputs)."""
    return (bool(model.mm_modalities) and not limits.enable_mm_embeds
            and all(limits.count(m) == 0 for m in model.mm_modalities))


def apply_mm_limits(model: ModelSpec, limits: MmLimits) -> tuple[ModelSpec, list[str]]:
    """The model as vLLM builds it under these limits: towers marked loaded or skipped (and laid out as
    --mm-encoder-tp-mode says: encoder_tp_towers), and a text-only model no longer a multimodal prefix LM. Returns the
    notes to report."""
    if not model.mm_modalities:
        note = (f"--limit-mm-per-prompt / --language-model-only: not applied: kvplan does not know "
                f"{model.architectures[0] if model.architectures else model.name}'s modalities (a text model "
                "ignores them)")
        return model, [note] if limits.given else []
    towers = tuple(replace(t, loaded=any(limits.count(m) > 0 for m in t.modalities)) for t in model.towers)
    notes = [f"{t.name} ({', '.join(t.modalities)}) not loaded: --limit-mm-per-prompt is 0 for "
             f"{'them' if len(t.modalities) > 1 else 'it'}" for t in towers if not t.loaded]
    towers, tp_note = encoder_tp_towers(towers, limits.mm_encoder_tp_mode)
    notes += tp_note
    if text_only(model, limits):
        notes.append("All limits of multimodal modalities supported by the model are set to 0, running in "
                     "text-only mode (no encoder profiling, no encoder cache).")
        return replace(model, towers=towers, mm_prefix_lm=False), notes
    return replace(model, towers=towers), notes


# config/model.py:ModelConfig.__post_init__ (vLLM 0.33): "data" on a model without supports_encoder_tp_data
ENCODER_TP_FALLBACK = ("This model does not support `--mm-encoder-tp-mode data`. Falling back to "
                       "`--mm-encoder-tp-mode weights`.")


def encoder_tp_towers(towers: tuple[TowerSpec, ...], mode: str) -> tuple[tuple[TowerSpec, ...], list[str]]:
    """The towers under --mm-encoder-tp-mode `mode`: with "data", a tower whose data-mode layout is known
    (TowerSpec.data_mode_sharded_params: the models setting supports_encoder_tp_data, whose towers build their linears
    with disable_tp, vision.py:is_vit_use_data_parallel) is marked "data" (memory/weights.py:tower_bytes_per_gpu
    replicates it; the encoder profile runs it whole on one rank); with none, vLLM's own fallback warning."""
    if mode != "data" or not towers:
        return towers, []
    if not any(t.data_mode_sharded_params is not None for t in towers):
        return towers, [ENCODER_TP_FALLBACK]
    return tuple(replace(t, mm_encoder_tp_mode="data") if t.data_mode_sharded_params is not None else t
                 for t in towers), []


def gemma4_item_tokens(model: ModelSpec, limits: MmLimits) -> dict[str, int]:
    """Gemma-4's per-item token ceilings, every supported modality (gemma4_mm.py:get_mm_max_tokens_per_item)."""
    image = next((t.tokens_per_image for t in model.towers if t.tokens_per_image), GEMMA4_IMAGE_ITEM_TOKENS)
    tokens = {"image": image}
    if "audio" in model.mm_modalities:
        tokens["audio"] = GEMMA4_AUDIO_ITEM_TOKENS
    video = limits.get("video")
    frames = GEMMA4_VIDEO_MAX_FRAMES
    if video is not None and video.num_frames is not None:
        frames = min(frames, video.num_frames)
    tokens["video"] = frames * GEMMA4_VIDEO_FRAME_TOKENS
    return tokens


def tower_tp_refusal(model: ModelSpec, limits: MmLimits, tp: int) -> str | None:
    """vLLM's refusal when a built tower's attention heads do not split over the TP ranks
    (distributed/utils.py:ensure_divisibility, "{numerator} is not divisible by {denominator}"), e.g. GLM-4.5V's
    12 vision heads at TP 8 (glm4_1v.py:Glm4vVisionAttention). A tower whose modalities are all limited to 0 is
    not built (TowerSpec.loaded); one in --mm-encoder-tp-mode data splits no heads (Glm4vVisionAttention: tp_size 1
    under use_data_parallel)."""
    active = set(limits.active(model.mm_modalities))
    for tower in model.towers:
        if tower.mm_encoder_tp_mode == "data":
            continue
        if tower.tp_heads and tower.loaded and active & set(tower.modalities) and tower.tp_heads % tp:
            return f"{tower.tp_heads} is not divisible by {tp}"
    return None


def encoder_budget_refusal(model: ModelSpec, limits: MmLimits, max_num_batched_tokens: int) -> str | None:
    """v1/core/encoder_cache_manager.py:compute_mm_encoder_budget: chunked MM input is disabled for a prefix
    LM, so the largest item of an allowed modality must fit in one step."""
    if not model.mm_prefix_lm or not model.facts.mm_item_tokens_stated:
        return None
    tokens = gemma4_item_tokens(model, limits)
    active = [tokens[m] for m in limits.active(model.mm_modalities) if m in tokens]
    if not active or max(active) <= max_num_batched_tokens:
        return None
    return (f"Chunked MM input disabled but max_tokens_per_mm_item ({max(active)}) is larger than "
            f"max_num_batched_tokens ({max_num_batched_tokens}). Please increase max_num_batched_tokens.")


@dataclass(frozen=True)
class EncoderProfile:
    """What vLLM's encoder profile keeps allocated through the profiling run (gemma-4, whose item sizes are known)."""

    modality: str
    items: int
    embeds_per_item: int
    retained_bytes: int  # the dummy encoder outputs, held in the encoder cache until the run ends


def gemma4_encoder_profile(model: ModelSpec, limits: MmLimits, *, max_num_batched_tokens: int, max_num_seqs: int,
                           max_model_len: int) -> EncoderProfile | None:
    """v1/worker/gpu/mm/encoder_runner.py:profile_encoder_cache: the allowed modality with the most tokens per
    item (MultiModalBudget.get_modality_with_max_tokens), max(1, min(budget // tokens, max_num_seqs × items per
    prompt)) items of it (MultiModalBudget._get_max_items; chunked prefill on), encoded and kept in the encoder
    cache while the language model's dummy run and the sampler run. The budget is
    compute_mm_encoder_budget's: max(max_num_batched_tokens, the largest item). None: not gemma-4, or nothing
    allowed."""
    if not model.facts.mm_item_tokens_stated or not any(t.loaded for t in model.towers):
        return None
    tokens = gemma4_item_tokens(model, limits)
    active = {m: tokens[m] for m in model.mm_modalities if limits.count(m) > 0 and m in tokens}
    if not active:
        return None
    modality, per_item = max(active.items(), key=lambda x: (x[1], x[0]))
    budget = max(max_num_batched_tokens, max(active.values()))
    per_prompt = max(1, min(limits.count(modality), max_model_len // per_item))
    items = max(1, min(budget // per_item, max_num_seqs * per_prompt))
    # embeddings per item: a video's frames × 70 soft tokens (its timestamps and boi/eoi are text), else the item
    embeds = per_item // GEMMA4_VIDEO_FRAME_TOKENS * 70 if modality == "video" else per_item
    elem = 4 if model.dtype == "float32" else 2
    return EncoderProfile(modality, items, embeds, items * embeds * model.hidden_size * elem)
