"""Multimodal encoder towers: the modalities a multimodal model takes and the parameters of its vision /
audio tower and projector, counted as vLLM 0.33's model classes build them (vLLM skips a tower whose
modalities are all limited to 0: model_executor/models/interfaces.py:SupportsMultiModal._mark_tower_model).

Gemma-4 (vision, audio), Gemma-3, Mistral-3 (Pixtral), GLM-4.xV, Qwen3-VL, Qwen2.5-VL and Llama-4 are counted, pinned
against vLLM's own modules built on the meta device (tests/fixtures/oracle-cuda/multimodal/) and published
parameter totals in tests/test_multimodal.py. Families not listed here: no tower counted (the weights estimate
says so).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Literal

from kvplan.model.architectures import vision_tower
from kvplan.model.architectures.base import VisionTower
from kvplan.model.spec import Gemma4VisionShape, TowerSpec, VisionGeometry

VISION = ("image", "video")


def _int(cfg: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise KeyError(key)
    return value


def _gemma4_vision(v: Mapping[str, Any], text_hidden: int) -> TowerSpec:
    """transformers' Gemma4VisionModel (vLLM builds it with AutoModel.from_config and replaces every
    nn.Linear with a ReplicatedLinear: transformers/utils.py:recursive_replace_linear) and vLLM's
    gemma4_mm.py:Gemma4MultimodalEmbedder (a weightless RMSNorm and hidden → text hidden)."""
    h, inter, layers = _int(v, "hidden_size"), _int(v, "intermediate_size"), _int(v, "num_hidden_layers")
    heads, hd = _int(v, "num_attention_heads"), _int(v, "head_dim")
    kvh = _int(v, "num_key_value_heads", heads)
    attn = h * heads * hd + 2 * h * kvh * hd + heads * hd * h + 2 * hd  # q, k, v, o; q_norm, k_norm (v_norm: none)
    layer = attn + 3 * h * inter + 4 * h  # gated MLP; four RMSNorms
    patch = 3 * _int(v, "patch_size") ** 2 * h + 2 * _int(v, "position_embedding_size") * h  # input_proj, 2-D table
    shape = Gemma4VisionShape(**{f.name: _positive(v, f.name) for f in fields(Gemma4VisionShape)})
    return TowerSpec("vision tower + projector", VISION, layers * layer + patch + h * text_hidden, 0,
                     "gemma4_mm.py:Gemma4ForConditionalGeneration (transformers Gemma4VisionModel)",
                     tokens_per_image=_int(v, "default_output_length", 280), gemma4_vision=shape)


def _positive(cfg: Mapping[str, Any], key: str) -> int | None:
    """A positive whole number the config states, else None."""
    value = cfg.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _gemma4_audio(a: Mapping[str, Any], text_hidden: int) -> TowerSpec:
    """transformers' Gemma4AudioModel (Conformer-style: two half-step FFNs, chunked attention with a relative
    key projection, a light depthwise conv) and gemma4_mm.py:Gemma4MultimodalEmbedder (output_proj_dims →
    text hidden)."""
    h, layers, k = _int(a, "hidden_size"), _int(a, "num_hidden_layers"), _int(a, "conv_kernel_size")
    hd = h // _int(a, "num_attention_heads")
    c0, c1 = (int(x) for x in a["subsampling_conv_channels"])
    out = _int(a, "output_proj_dims")
    subsample = 9 * c0 + c0 + 9 * c0 * c1 + c1 + (c0 // 4) * c1 * h  # two 3×3 convs + LayerNorms, input_proj_linear
    ffn = 2 * 4 * h * h + 2 * h  # ffw_layer_1/2, pre/post norms
    attn = 5 * h * h + hd  # q, k, v, post, relative_k_proj; per_dim_scale
    lconv = 3 * h * h + h * k + 2 * h  # linear_start (h → 2h), linear_end, depthwise conv; two norms
    layer = 2 * ffn + attn + lconv + 3 * h
    params = subsample + layers * layer + h * out + out + out * text_hidden  # output_proj (+bias), embed_audio
    return TowerSpec("audio tower + projector", ("audio",), params, 0,
                     "gemma4_mm.py:Gemma4ForConditionalGeneration (transformers Gemma4AudioModel)")


def _qwen3_vision(v: Mapping[str, Any]) -> TowerSpec:
    """qwen3_vl.py:Qwen3_VisionTransformer: Conv3d patch embedding (bias), learned positions, blocks of
    LayerNorm + QKV/proj (biased) + an ungated biased MLP, the patch merger and one deepstack merger per
    deepstack_visual_indexes entry (LayerNorm after the 2×2 shuffle). Column-parallel weights and biases
    and row-parallel weights split over TP; row-parallel biases, norms, patch and position embeddings
    are replicated."""
    h, inter, depth = _int(v, "hidden_size"), _int(v, "intermediate_size"), _int(v, "depth")
    p, t, ch = _int(v, "patch_size"), _int(v, "temporal_patch_size", 2), _int(v, "in_channels", 3)
    out, m = _int(v, "out_hidden_size"), _int(v, "spatial_merge_size", 2)
    deepstack = len(v.get("deepstack_visual_indexes") or [])
    merged = h * m * m
    block_sharded = h * 3 * h + 3 * h + h * h + h * inter + inter + inter * h  # qkv (+bias), proj, fc1 (+bias), fc2
    block_replicated = 4 * h + h + h  # two LayerNorms (weight + bias), proj and fc2 biases
    merger_sharded = merged * merged + merged + merged * out  # fc1 (+bias), fc2
    replicated = (ch * t * p * p * h + h + _int(v, "num_position_embeddings") * h + depth * block_replicated
                  + 2 * h + out + deepstack * (2 * merged + out))
    sharded = depth * block_sharded + (1 + deepstack) * merger_sharded
    geometry = VisionGeometry(h, inter, depth, _int(v, "num_heads"), out, p, m, t, ch, deepstack)
    # --mm-encoder-tp-mode data (Qwen3VLForConditionalGeneration.supports_encoder_tp_data): every linear of the tower,
    # its merger and deepstack mergers built with disable_tp (vision.py:is_vit_use_data_parallel): none split
    return TowerSpec("vision tower + projector", VISION, replicated, sharded,
                     "qwen3_vl.py:Qwen3_VisionTransformer", deepstack_levels=deepstack, geometry=geometry,
                     data_mode_sharded_params=0)


def _qwen25_vision(v: Mapping[str, Any]) -> TowerSpec:
    """qwen2_5_vl.py:Qwen2_5_VisionTransformer: a bias-free Conv3d patch embedding, blocks of RMSNorm + QKV/proj
    (biased) + a gated biased MLP (gate_up, down), and the patch merger (RMSNorm ln_q, two biased linears).
    Column-parallel weights and biases and row-parallel weights split over TP; the rest is replicated."""
    h, inter, depth = _int(v, "hidden_size"), _int(v, "intermediate_size"), _int(v, "depth")
    p, t, ch = _int(v, "patch_size"), _int(v, "temporal_patch_size", 2), _int(v, "in_chans", 3)
    out, m = _int(v, "out_hidden_size"), _int(v, "spatial_merge_size", 2)
    merged = h * m * m
    block_sharded = h * 3 * h + 3 * h + h * h + h * 2 * inter + 2 * inter + inter * h  # qkv, proj, gate_up, down
    block_replicated = 2 * h + h + h  # two RMSNorms, proj and down biases
    replicated = ch * t * p * p * h + depth * block_replicated + h + out  # patch, blocks, ln_q, fc2 bias
    sharded = depth * block_sharded + merged * merged + merged + merged * out
    geometry = VisionGeometry(h, inter, depth, _int(v, "num_heads"), out, p, m, t, ch, kind="qwen2_5_vl")
    # --mm-encoder-tp-mode data (supports_encoder_tp_data): attention, MLP and merger built with disable_tp
    return TowerSpec("vision tower + projector", VISION, replicated, sharded, "qwen2_5_vl.py:Qwen2_5_VisionTransformer",
                     geometry=geometry, data_mode_sharded_params=0)


def _gemma3_vision(v: Mapping[str, Any], text_hidden: int) -> TowerSpec:
    """siglip.py:SiglipVisionModel as gemma3_mm.py:Gemma3ForConditionalGeneration builds it (no pooling head):
    a biased patch Conv2d, learned positions for (image_size / patch_size)² patches, blocks of LayerNorm +
    biased q/k/v/out + LayerNorm + biased fc1/fc2, the post LayerNorm; then Gemma3MultiModalProjector (a
    vision hidden × text hidden nn.Parameter and a GemmaRMSNorm). Column-parallel weights and biases and
    row-parallel weights split over TP; the rest is replicated."""
    h, inter, layers = _int(v, "hidden_size"), _int(v, "intermediate_size"), _int(v, "num_hidden_layers")
    p, ch = _int(v, "patch_size"), _int(v, "num_channels", 3)
    patches = (_int(v, "image_size") // p) ** 2
    block_sharded = h * 3 * h + 3 * h + h * h + h * inter + inter + inter * h  # qkv, out_proj, fc1, fc2
    block_replicated = 4 * h + h + h  # two LayerNorms, out_proj and fc2 biases
    replicated = ch * p * p * h + h + patches * h + layers * block_replicated + 2 * h + h * text_hidden + h
    return TowerSpec("vision tower + projector", ("image",), replicated, layers * block_sharded,
                     "gemma3_mm.py:Gemma3ForConditionalGeneration (siglip.py:SiglipVisionModel)")


def _pixtral_vision(v: Mapping[str, Any], top: Mapping[str, Any], text_hidden: int) -> TowerSpec:
    """mistral3.py:Mistral3ForConditionalGeneration: pixtral.py:PixtralHFVisionModel (a bias-free patch Conv2d,
    RMSNorm ln_pre, blocks of RMSNorm + bias-free QKV/o + RMSNorm + gated bias-free MLP) and
    Mistral3MultiModalProjector (RMSNorm, the patch merger's nn.Linear of merge² × hidden → hidden, linear_1
    hidden → text hidden, linear_2 text hidden → text hidden, biased when multimodal_projector_bias).
    Parallel linears split over TP; the rest is replicated."""
    h, inter, layers = _int(v, "hidden_size"), _int(v, "intermediate_size"), _int(v, "num_hidden_layers")
    heads = _int(v, "num_attention_heads")
    hd = _int(v, "head_dim", h // heads)
    p, ch, m = _int(v, "patch_size"), _int(v, "num_channels", 3), _int(top, "spatial_merge_size", 2)
    bias = bool(top.get("multimodal_projector_bias"))
    block_sharded = h * 3 * heads * hd + heads * hd * h + h * 2 * inter + inter * h  # qkv, o, gate_up, down
    replicated = ch * p * p * h + h + layers * 2 * h + h + m * m * h * h + (text_hidden if bias else 0)
    sharded = layers * block_sharded + h * text_hidden + (text_hidden if bias else 0) + text_hidden * text_hidden
    # the encoder profile's shapes (kvplan.vllm.encoder_pixtral): one temporal patch, the square image of image_size
    geometry = VisionGeometry(h, inter, layers, heads, text_hidden, p, m, 1, ch, kind="pixtral",
                              image_size=_int(v, "image_size"))
    return TowerSpec("vision tower + projector", ("image",), replicated, sharded,
                     "mistral3.py:Mistral3ForConditionalGeneration (pixtral.py:PixtralHFVisionModel)",
                     geometry=geometry)


def _glm4v_vision(v: Mapping[str, Any]) -> TowerSpec:
    """glm4_1v.py:Glm4vVisionTransformer: a biased Conv3d patch embedding, learned positions for
    (image_size / patch_size)² patches, blocks of RMSNorm + bias-free QKV/proj + a gated bias-free MLP of
    out_hidden_size, the post RMSNorms, a biased Conv2d downsample (merge × merge) to out_hidden_size and
    Glm4vPatchMerger (proj, LayerNorm, gate_up to intermediate_size, down; bias-free). Parallel linears split
    over TP; convolutions, norms and positions are replicated."""
    h, depth, out, inter = _int(v, "hidden_size"), _int(v, "depth"), _int(v, "out_hidden_size"), _int(
        v, "intermediate_size")
    p, t, ch, m = (_int(v, "patch_size"), _int(v, "temporal_patch_size", 2), _int(v, "in_channels", 3),
                   _int(v, "spatial_merge_size", 2))
    positions = (_int(v, "image_size") // p) ** 2
    block_sharded = h * 3 * h + h * h + h * 2 * out + out * h  # qkv, proj, gate_up, down
    replicated = (ch * t * p * p * h + h + positions * h + depth * 2 * h + 2 * h + h * out * m * m + out
                  + 2 * out)  # patch, positions, block norms, post norms, downsample, merger LayerNorm
    sharded = depth * block_sharded + out * out + out * 2 * inter + inter * out
    # Glm4vVisionAttention: num_attention_heads_per_partition = dist_utils.divide(num_heads, tp_size); with
    # --mm-encoder-tp-mode data (supports_encoder_tp_data) tp_size is 1 and attention, MLP and merger are built with
    # disable_tp (glm4_1v.py, vLLM 0.33): none split
    return TowerSpec("vision tower + projector", VISION, replicated, sharded, "glm4_1v.py:Glm4vVisionTransformer",
                     tp_heads=_int(v, "num_heads"), data_mode_sharded_params=0)


def _llama4_vision(v: Mapping[str, Any], text_hidden: int) -> TowerSpec:
    """mllama4.py:Llama4ForConditionalGeneration's tower (Llama4VisionModel, built with quant_config=None: in the
    model dtype even in an FP8 checkpoint, whose ignore list names these linears) and Llama4MultiModalProjector.
    Llama4UnfoldConvolution (a bias-free ColumnParallelLinear of channels × patch² → hidden), the class token,
    positions for (image_size / patch_size)² + 1 tokens, LayerNorms pre and post, layers of LayerNorm + biased
    QKVParallelLinear / RowParallelLinear o_proj + LayerNorm + biased fc1 / fc2 (GELU), the pixel-shuffle adapter
    (Llama4VisionMLP: fc1 intermediate_size → projector_input_dim, fc2 → projector_output_dim, biased when
    multi_modal_projector_bias) and linear_1 (vision_output_dim → text hidden, bias-free, ColumnParallelLinear).
    Parallel linears split over TP (mm_encoder_tp_mode "weights", the default); with "data" (vLLM 0.33's
    Llama4ForConditionalGeneration sets supports_encoder_tp_data; mllama4.py builds the unfold linear, MLPs and
    adapter with disable_tp=use_data_parallel, the attention's linears replicated) the tower is replicated and
    only the projector's ColumnParallelLinear linear_1 stays split (`data_mode_sharded_params`); row-parallel
    biases, norms, class token and positions are replicated. The rotary table (a complex64 buffer of 577
    positions) is not a parameter and not counted. Pinned: transformers' Llama4VisionModel +
    Llama4MultiModalProjector built from the config hold the same 871,932,416 parameters (tests/test_multimodal.py)."""
    h, inter, layers = _int(v, "hidden_size"), _int(v, "intermediate_size"), _int(v, "num_hidden_layers")
    p, ch, size = _int(v, "patch_size"), _int(v, "num_channels", 3), _int(v, "image_size")
    pin, pout, vout = _int(v, "projector_input_dim"), _int(v, "projector_output_dim"), _int(v, "vision_output_dim")
    ratio = float(v["pixel_shuffle_ratio"])
    merge = round(1 / ratio)
    if ratio <= 0 or abs(merge * ratio - 1) > 1e-9 or size % p:
        raise ValueError("pixel_shuffle_ratio / image_size")
    bias = bool(v.get("multi_modal_projector_bias"))
    layer_sharded = h * 3 * h + 3 * h + h * h + h * inter + inter + inter * h  # qkv (+bias), o, fc1 (+bias), fc2
    layer_replicated = h + h + 4 * h  # o_proj and fc2 biases, two LayerNorms (weight + bias)
    replicated = h + ((size // p) ** 2 + 1) * h + 4 * h + layers * layer_replicated + (pout if bias else 0)
    sharded = (ch * p * p * h + layers * layer_sharded + inter * pin + (pin if bias else 0) + pin * pout
               + vout * text_hidden)
    geometry = VisionGeometry(h, inter, layers, _int(v, "num_attention_heads"), text_hidden, p, merge, 1, ch,
                              kind="llama4", image_size=size)
    # Llama4VisionAttention: assert self.num_heads % self.tp_size == 0
    return TowerSpec("vision tower + projector", ("image",), replicated, sharded,
                     "mllama4.py:Llama4ForConditionalGeneration (Llama4VisionModel, Llama4MultiModalProjector)",
                     tp_heads=_int(v, "num_attention_heads"), geometry=geometry,
                     data_mode_sharded_params=vout * text_hidden)


def _tower(top: Mapping[str, Any]) -> VisionTower | Literal[""]:
    """The tower counter the top-level model type's family names (Family.vision_towers), "" for none."""
    return vision_tower(str(top.get("model_type") or ""))


def multimodal_parts(top: Mapping[str, Any], text_hidden: int) -> tuple[tuple[str, ...], tuple[TowerSpec, ...]]:
    """(modalities vLLM's processor supports, towers kvplan counts) for the top-level config `top`."""
    tower = _tower(top)
    vision = top.get("vision_config")
    try:
        if tower == "gemma4" and isinstance(vision, Mapping):
            audio = top.get("audio_config")
            towers = [_gemma4_vision(vision, text_hidden)]
            if isinstance(audio, Mapping):  # gemma4_mm.py:Gemma4ProcessingInfo.get_supported_mm_limits
                towers.append(_gemma4_audio(audio, text_hidden))
                return ("image", "audio", "video"), tuple(towers)
            return ("image", "video"), tuple(towers)
        if tower == "qwen3_vl" and isinstance(vision, Mapping):
            return VISION, (_qwen3_vision(vision),)  # qwen2_vl.py:Qwen2VLProcessingInfo.get_supported_mm_limits
        if tower == "qwen2_5_vl" and isinstance(vision, Mapping):
            return VISION, (_qwen25_vision(vision),)
    except (KeyError, TypeError, ValueError):
        return (), ()
    # The pixtral counter is named for the vision config's model_type, which it requires (pixtral by default).
    if tower == "pixtral" and isinstance(vision, Mapping) and vision.get("model_type", tower) == tower:
        try:  # mistral3.py:Mistral3ProcessingInfo.get_supported_mm_limits: image only
            return ("image",), (_pixtral_vision(vision, top, text_hidden),)
        except (KeyError, TypeError, ValueError):
            return ("image",), ()
    if tower == "glm4v" and isinstance(vision, Mapping):
        try:  # glm4_1v.py:Glm4vProcessingInfo.get_supported_mm_limits: image, video
            return VISION, (_glm4v_vision(vision),)
        except (KeyError, TypeError, ValueError):
            return VISION, ()
    if tower == "llama4":  # mllama4.py:Mllama4ProcessingInfo.get_supported_mm_limits: image only
        try:
            return ("image",), ((_llama4_vision(vision, text_hidden),) if isinstance(vision, Mapping) else ())
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            return ("image",), ()
    if tower == "qwen2_vl":
        return VISION, ()
    if tower == "gemma3" and isinstance(vision, Mapping) and not vision.get("vision_use_head"):
        try:  # gemma3_mm.py:Gemma3ProcessingInfo.get_supported_mm_limits: image only
            return ("image",), (_gemma3_vision(vision, text_hidden),)
        except (KeyError, TypeError, ValueError):
            return ("image",), ()
    if tower == "gemma3":
        return ("image",), ()
    return (), ()
