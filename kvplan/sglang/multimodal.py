"""How SGLang 0.5.23 treats a multimodal model's memory (paths relative to `sglang/srt/`).

* `configs/model_config.py:ModelConfig.is_multimodal`: a listed architecture or a nested text config, unless
  multimodal is off by default for the architecture (Gemma-3, Llama-4, Step3-VL, Inkling: `mm_disabled_models`;
  the checkpoint is then served as its language model) or the config says `language_model_only`;
* `arg_groups/cuda_graph_hook.py:disable_breakable_cudagraph_if_incompatible`: the breakable prefill CUDA graph
  is turned off for a multimodal model whose architecture is not in
  `multimodal_breakable_cuda_graph_supported_model_archs`, before mem_fraction_static is computed (so its
  graph reserve is not charged);
* `arg_groups/memory_hook.py:adjust_mem_fraction_for_vlm`: mem_fraction_static ×
  0.95 × clamp(1 − 0.1 × (L × H² / (24 × 1024²) − 1), 0.8, 1.05), L and H the vision tower's num_hidden_layers
  and hidden_size (`getattr` defaults 24 and 1024), when the config has a vision_config;
* `mem_cache/kv_cache_configurator.py:mm_runtime_reservation_gb`: SGLANG_VLM_CACHE_SIZE_MB (100) off the KV
  budget, plus SGLANG_MM_FEATURE_CACHE_MB (1024) with a cuda_ipc feature transport; Qwen3-VL on a large Hopper
  GPU sets the first to 0 and the transport to cuda_ipc (`arg_groups/model_overrides/qwen3_vl.py`).
Pure: numbers in, numbers out.
"""
from __future__ import annotations

from kvplan.model.spec import ModelSpec
from kvplan.sglang.architectures import MULTIMODAL_ARCHITECTURES

# configs/model_config.py:ModelConfig.__init__ (enable_multimodal None): multimodal off by default for these.
MM_DISABLED_ARCHITECTURES = frozenset({
    "Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration", "Step3VLForConditionalGeneration",
    "InklingForConditionalGeneration",
})
# configs/model_config.py:multimodal_breakable_cuda_graph_supported_model_archs.
BREAKABLE_GRAPH_MULTIMODAL_ARCHITECTURES = frozenset({
    "MiniMaxM3SparseForConditionalGeneration", "Cohere2VisionForConditionalGeneration",
    "Glm5NextForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "PaddleOCRVLForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen4ExpForConditionalGeneration", "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration",
    "KimiK3ForConditionalGeneration", "KimiK25ForConditionalGeneration", "MiniMaxM3SparseForCausalLM",
})
# adjust_mem_fraction_for_vlm's getattr defaults and its baseline (ViT-L/14).
VIT_LAYERS_DEFAULT, VIT_HIDDEN_DEFAULT = 24, 1024
BASELINE_SCORE = 24 * 1024 ** 2


def is_multimodal(spec: ModelSpec) -> bool:
    """ModelConfig.is_multimodal with SGLang's default --enable-multimodal."""
    arch = spec.architectures[0] if spec.architectures else ""
    if arch in MM_DISABLED_ARCHITECTURES or spec.facts.sglang.language_model_only:
        return False
    if any(a in MULTIMODAL_ARCHITECTURES for a in spec.architectures):
        return True
    # kvplan's ModelSpec reads the text config; a top-level model_type of its own means it was nested.
    nested = bool(spec.config_model_type) and spec.config_model_type != spec.model_type
    return nested or spec.facts.spelt.nested  # a text_config, thinker_config or llm_config object in it


def breakable_prefill_graph_kept(spec: ModelSpec) -> bool:
    """Whether disable_breakable_cudagraph_if_incompatible keeps the prefill graph of a multimodal model."""
    return not is_multimodal(spec) or any(a in BREAKABLE_GRAPH_MULTIMODAL_ARCHITECTURES for a in spec.architectures)


def vlm_fraction_factor(spec: ModelSpec) -> float | None:
    """adjust_mem_fraction_for_vlm's factor for a multimodal model with a vision_config (None: unchanged).

    A key the config omits reads as the getattr default (24 layers, 1024 wide), which is what SGLang sees where
    the transformers class has no such attribute (Qwen2.5-VL, Qwen3-VL, Qwen3.5, GLM-4V and EXAONE-4.5 vision
    configs name their depth `depth`: pinned by the corpus goldens), or SGLang's own class default
    (kvplan.model.spelt: SglangFacts.vision_defaults, Kimi-K2.5's)."""
    if not is_multimodal(spec):
        return None
    vision = spec.facts.sglang  # the vision_config's num_hidden_layers / hidden_size, 0 when not positive integers
    defaults = vision.vision_defaults
    if not vision.has_vision_config and defaults is None:
        return None
    layers_default, hidden_default = defaults or (VIT_LAYERS_DEFAULT, VIT_HIDDEN_DEFAULT)
    layers = vision.vision_layers or layers_default
    hidden = vision.vision_hidden or hidden_default
    ratio = layers * hidden ** 2 / BASELINE_SCORE
    dynamic = max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))
    return 0.95 * dynamic


# The architectures arg_groups/model_overrides/qwen3_vl.py's override registers for (its model types:
# kvplan.model.spelt, SglangFacts.hopper_qwen3_vl_type).
HOPPER_QWEN3_VL_ARCHITECTURES = frozenset({"Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"})
VLM_CACHE_MB = 100  # environ.py: SGLANG_VLM_CACHE_SIZE_MB
MM_FEATURE_CACHE_MB = 1024  # environ.py: SGLANG_MM_FEATURE_CACHE_MB
MM_FEATURE_CACHE_HIGH_CONCURRENCY_MB = 3 * 1024  # qwen3_vl.py, --max-running-requests ≥ 400 with cuda_ipc


def mm_reservation_gib(spec: ModelSpec, *, hopper: bool, gpu_mem_mib: int | None,
                       max_running_requests: int | None) -> float:
    """mm_runtime_reservation_gb under SGLang's defaults (one node, no preprocess cache, no transport given).
    `hopper`: utils/common.py:is_sm90_supported (compute capability 9.x, CUDA ≥ 12.3)."""
    if not is_multimodal(spec):
        return 0.0
    arch = spec.architectures[0] if spec.architectures else ""
    large_hopper = hopper and gpu_mem_mib is not None and gpu_mem_mib >= 60 * 1024
    if large_hopper and arch in HOPPER_QWEN3_VL_ARCHITECTURES and spec.facts.sglang.hopper_qwen3_vl_type:
        # _qwen3vl_hopper_serving_overrides: no embedding cache, cuda_ipc transport with its feature pool.
        feature = (MM_FEATURE_CACHE_HIGH_CONCURRENCY_MB if max_running_requests is not None
                   and max_running_requests >= 400 else MM_FEATURE_CACHE_MB)
        return feature / 1024
    # serving_hook.py:handle_multimodal_feature_transport resolves cpu on one node: the embedding cache only.
    return VLM_CACHE_MB / 1024
