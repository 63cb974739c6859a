"""What kvplan knows of a checkpoint: `ModelSpec` and its parts, resolved the way vLLM resolves them.

Frozen data only; `kvplan.model.config.parse_config` builds it from config.json.
"""

# No `from __future__ import annotations` here: NamedTuple and dataclass creation turn string annotations into
# ForwardRefs (one compile() each) or match them against ClassVar; real ones cost `kvplan size` less at start-up.
from dataclasses import dataclass, field, fields
from typing import Literal, NamedTuple

from kvplan.model.architectures.base import DEFAULT, Family

LayerKind = Literal["full", "sliding_window", "chunked_local", "mla", "mamba", "kv_shared", "mlp_only"]
# kv_shared: reuses another layer's KV (YOCO, Gemma-3n/4 num_kv_shared_layers): no cache of its own.
# mlp_only: a layer without a token mixer (Nemotron-H "-" / "E"): no cache.
RecurrentVariant = Literal["mamba1", "mamba2", "gdn", "short_conv", "linear_attention"]


@dataclass(frozen=True)
class RecurrentState:
    """Dimensions of a recurrent (state-space / linear-attention) layer's per-request state.

    The state tensor shapes per TP rank are computed in `kvplan.model.kv_cache.recurrent_state_shapes`
    (vLLM model_executor/layers/mamba/mamba_utils.py:MambaStateShapeCalculator).
    """

    variant: RecurrentVariant
    conv_kernel: int = 0
    # mamba1: d_inner, d_state. mamba2: d_inner, n_groups, d_state, num_heads, head_dim.
    # gdn: num_k_heads, num_v_heads, head_k_dim, head_v_dim.
    intermediate_size: int = 0
    state_size: int = 0
    n_groups: int = 0
    num_heads: int = 0
    head_dim: int = 0
    num_k_heads: int = 0
    num_v_heads: int = 0
    head_k_dim: int = 0
    head_v_dim: int = 0
    conv_dtype: str = "bfloat16"
    ssm_dtype: str = "bfloat16"


@dataclass(frozen=True)
class LayerSpec:
    """One decoder layer as the KV cache sees it (totals across TP; kv.py splits per rank)."""

    index: int
    kind: LayerKind
    num_kv_heads: int = 0
    head_size: int = 0
    head_size_v: int = 0
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    state: RecurrentState | None = None
    num_attention_heads: int = 0  # query heads (attention FLOPs)
    moe: bool = False  # this layer's MLP is a mixture of experts
    indexer_head_size: int = 0  # DeepSeek sparse attention: bytes per token of the layer's indexer K cache
    # DeepSeek-V4 (kind "mla", head_size = head_dim): 1 (sliding-window cache only), 4 (compressed sparse, with
    # the indexer) or 128 (heavily compressed) tokens per compressed state; 0 for every other model.
    compress_ratio: int = 0


@dataclass(frozen=True)
class MoESpec:
    """Mixture-of-experts MLP dimensions."""

    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    shared_intermediate_size: int = 0  # total width of the always-on shared expert(s)
    router_bias: bool = False


@dataclass(frozen=True)
class MLADims:
    """Multi-head latent attention projections (DeepSeek-V2/V3)."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None
    # DeepSeek sparse attention's indexer (DeepSeek-V3.2, GLM-5: `index_topk` in the config), weights only:
    # models/deepseek_v2.py:Indexer's wq_b (q_lora_rank → index_n_heads × index_head_dim), wk (hidden →
    # index_head_dim), k_norm and weights_proj (hidden → index_n_heads). 0: no indexer.
    index_n_heads: int = 0
    index_head_dim: int = 0


@dataclass(frozen=True)
class Dsv4Dims:
    """What DeepSeek-V4's caches are sized from (vllm/models/deepseek_v4/attention.py:DeepseekV4Attention
    .__init__); the defaults are transformers' DeepseekV4Config's."""

    head_dim: int  # the latent each state stores: 448 NoPE + 64 RoPE = 512 (sparse_mla.py supports 512 only)
    rope_head_dim: int
    index_head_dim: int
    index_topk: int
    sliding_window: int
    ratios: tuple[int, ...]  # per decoder layer: 1 (sliding window only), 4 or 128
    # weights only (kvplan.model.weights): the low-rank query / grouped output projections and the indexer heads
    q_lora_rank: int = 1024
    o_lora_rank: int = 1024
    o_groups: int = 8
    index_n_heads: int = 64
    fp4_experts: bool = True  # expert_dtype "fp4": MXFP4 routed experts (quant_config.py:DeepseekV4FP8Config)
    hc_mult: int = 4  # hyper-connection streams: fp32 mixers per layer, the (tokens, hc_mult·hidden) MTP buffer
    num_hash_layers: int = 0  # first layers routed by a (vocab, top-k) int32 table (gate.tid2eid)
    # compress_rope_theta ≠ rope_theta: the compressed layers build a second rotary cache (common/rope.py)
    separate_compress_rope: bool = True


@dataclass(frozen=True)
class QuantSpec:
    """Weight quantization declared by the checkpoint (quantization_config / hf_quant_config.json)."""

    method: str  # fp8, gptq, awq, modelopt_fp8, modelopt_fp4 (nvfp4), mxfp4, compressed-tensors, bitsandbytes
    weight_bits: float  # stored bits per quantized weight, scales excluded
    group_size: int | None = None
    kv_cache_dtype: str | None = None  # KV scheme the checkpoint declares (vLLM uses it under `auto`)
    excluded: tuple[str, ...] = ()  # module name patterns kept unquantized
    act_order: bool = False  # GPTQ desc_act with groups (not per channel): a dynamic activation order
    # compressed-tensors W8A8 (8-bit weights and input activations): "float" (FP8) or "int" (INT8), else None;
    # vLLM then runs the matmuls on FP8 / INT8 tensor cores (CompressedTensorsW8A8Fp8 / W8A8Int8).
    w8a8: str | None = None


# QuantLayout, RopeConfig and SpeltText are NamedTuples, as kvplan.model.architectures' records are: built at
# start-up, a NamedTuple class costs a fifth of a frozen dataclass's.
class QuantLayout(NamedTuple):
    """How the quantization_config lays the scales out, as the text config spells it (vLLM's per-scheme
    process_weights_after_loading; kvplan.vllm.memory.weights)."""

    symmetric: bool = True  # `sym` is true (or absent): GPTQ on Marlin drops the constant qzeros
    desc_act: bool = False  # GPTQ act-order: Marlin keeps g_idx and the sort indices
    fp8_block: tuple[int, int] | None = None  # weight_block_size (or a config group's block_structure)
    channel_scales: bool = False  # a compressed-tensors config group with strategy "channel"


class RopeConfig(NamedTuple):
    """What config.json says of the rotary embedding (rotary_embedding/__init__.py:get_rope's inputs); the family's
    own rules (kvplan.model.architectures) say whether and how it builds one."""

    disabled: bool = False  # `alibi`, or position_embedding_type "nope"
    partial_rotary_factor: float | None = None
    max_positions: float | None = None  # max_position_embeddings, else seq_length (positive only)
    rope_type: str = "default"  # rope_scaling / rope_parameters (their full_attention entry when per layer type)
    factor: float | None = None
    original_max_positions: float | None = None
    mrope: bool = False  # an `mrope_section` entry: get_rope builds rotary_embedding/mrope.py:MRotaryEmbedding


class SpeltText(NamedTuple):
    """The text config's keys as config.json spells them, before kvplan's own resolution: for readers that follow
    another engine's rules (kvplan.sglang), which read the config differently from vLLM."""

    model_type: str | None = None  # its own `model_type` key (None when absent)
    dtype: object = None  # the first set of dtype, torch_dtype (and those of a text_config nested in it)
    has_auto_map: bool = False
    auto_model: bool = False  # its auto_map has an `AutoModel` key (SGLang's Transformers-backend check reads it)
    nested: bool = False  # it holds a text_config, thinker_config or llm_config object
    # The context-length keys of the text config (of its nested text_config when it has one), numbers only:
    # max_sequence_length, seq_length, max_seq_len, model_max_length, max_position_embeddings, n_positions.
    lengths: tuple[tuple[str, float], ...] = ()
    has_max_position_embeddings: bool = False  # the key is present, whatever its value
    rope_scaling: bool = False  # rope_scaling is a non-empty object
    rope_factor: float = 1.0  # its factor when a number, else 1
    rope_has_original: bool = False  # it names original_max_position_embeddings
    rope_type: str | None = None


class SglangFacts(NamedTuple):
    """The text config's keys that only kvplan.sglang reads (SGLang 0.5.23's configs/model_config.py reads them
    off the config its own way), typed by kvplan.model.spelt; paths relative to `sglang/srt/`."""

    # configs/<file>.py:mamba2_cache_params that sizes the recurrent state, chosen by the text config's model_type
    # (kvplan.model.architectures Family.sglang_state_model_types; "" when none of kvplan's modelled rules).
    state_rule: str = ""
    mamba_ssm_dtype: str | None = None  # `mamba_ssm_dtype` as written (None: absent or null)
    # get_total_num_kv_heads' first integer of n_head_kv, num_kv_heads, num_key_value_heads, multi_query_group_num,
    # num_attention_groups (None: none is an integer).
    stated_kv_heads: int | None = None
    language_model_only: bool = False  # `language_model_only` is true
    has_sliding_window: bool = False  # `sliding_window` is set (not absent, not null)
    window_size: int | None = None  # _get_sliding_window_size: sliding_window_size, sliding_window, window_size
    # DeepSeek sparse attention (kvplan.sglang.dsa): learnable_sink; index_head_dim (0 when not a positive
    # integer), index_kpool (1 likewise); dsa_layer_skips_topk's inputs: indexer_types (each entry "shared"?),
    # cli_factor, index_topk_pattern (each entry "S"?), index_topk_freq (1 when not a positive integer) and
    # index_skip_topk_offset (0 when not a positive integer).
    learnable_sink: bool = False
    index_head_dim: int = 0
    index_kpool: int = 1
    indexer_shared: tuple[bool, ...] | None = None
    cli_factor: int = 1
    topk_pattern_shared: tuple[bool, ...] | None = None
    index_topk_freq: int = 1
    skip_topk_offset: int = 0
    # The top-level config's vision_config (arg_groups/memory_hook.py:adjust_mem_fraction_for_vlm): whether it is a
    # non-empty object, and its num_hidden_layers / hidden_size when positive integers (0 otherwise).
    has_vision_config: bool = False
    vision_layers: int = 0
    vision_hidden: int = 0
    # SGLang's own vision config class defaults (num_hidden_layers, hidden_size) for the top-level model_type, when
    # it builds one (None: transformers' class, read as the JSON gives it).
    vision_defaults: tuple[int, int] | None = None
    hopper_qwen3_vl_type: bool = False  # the top-level model_type is one qwen3_vl.py's Hopper override names
    # A gemma4_text config's full-attention (head_dim, num_key_value_heads), which SGLang makes the model's own
    # (utils/hf_transformers/config.py:_apply_gemma4_attention_overrides, on transformers 5.19's per-layer split,
    # Gemma4TextConfig.__post_init__): global_head_dim (512 when absent); num_global_key_value_heads when set and
    # attention_k_eq_v is not false, else num_key_value_heads. None for other model_types.
    gemma4_full_attention: tuple[int, int] | None = None
    # configs/model_config.py: `num_nextn_predict_layers` of the text config as written, a positive integer (None
    # otherwise): the EAGLE/MTP draft's KV layers (kvplan.sglang.speculative), bounded by MAX_MTP_LAYERS.
    nextn_predict_layers: int | None = None


@dataclass(frozen=True)
class VisionGeometry:
    """A vision tower's shapes as its vision_config gives them (qwen3_vl.py:Qwen3_VisionTransformer,
    qwen2_5_vl.py:Qwen2_5_VisionTransformer, mllama4.py:Llama4VisionModel): what the encoder profile's dummy item
    costs (kvplan.vllm.encoder_profile, kvplan.vllm.encoder_qwen2_5_vl, kvplan.vllm.encoder_llama4)."""

    hidden_size: int
    intermediate_size: int
    depth: int
    num_heads: int
    out_hidden_size: int  # the merger's output: the text hidden size
    patch_size: int
    spatial_merge_size: int
    temporal_patch_size: int
    in_channels: int = 3
    deepstack_levels: int = 0
    # the smart_resize bounds (shortest edge, longest edge) of the folder's own processor files, when it has them
    # (kvplan.model.hub.load_local); None: the checkpoints' published files (kvplan.vllm.encoder_profile)
    image_pixels: tuple[int, int] | None = None
    video_pixels: tuple[int, int] | None = None
    # the tower's model file, which picks the encoder profile (kvplan.vllm.fit: qwen3_vl.py, qwen2_5_vl.py,
    # mllama4.py, "llama4", or mistral3.py's Pixtral tower, "pixtral")
    kind: str = "qwen3_vl"
    # Llama-4: one tile's edge in pixels (vision_config.image_size; spatial_merge_size is 1 / pixel_shuffle_ratio);
    # Pixtral: the dummy image's side (vision_config.image_size)
    image_size: int = 0

    @property
    def embed_width(self) -> int:
        """One encoder output row: the merger's and each deepstack merger's outputs, concatenated
        (Qwen3_VisionTransformer.forward: torch.cat([hidden_states] + deepstack_feature_lists, dim=1))."""
        return self.out_hidden_size * (1 + self.deepstack_levels)

    @property
    def patch_values(self) -> int:
        """Values per flattened patch in pixel_values: channels × temporal patch × patch² (Qwen2VLImageProcessor)."""
        return self.in_channels * self.temporal_patch_size * self.patch_size ** 2


@dataclass(frozen=True)
class Gemma4VisionShape:
    """What Gemma-4's encoder profile reads from vision_config (transformers' Gemma4VisionConfig as vLLM's
    gemma4_mm.py uses it: Gemma4ProcessingInfo's max_patches = soft tokens × pooling_kernel_size², _encoder_chunk's
    position_embedding_size, the patch embedder's 3 × patch_size² input and the hidden_size states). None: the config
    does not state it (kvplan.vllm.encoder_gemma4 refuses then)."""

    hidden_size: int | None
    patch_size: int | None
    pooling_kernel_size: int | None
    position_embedding_size: int | None

    @property
    def missing(self) -> tuple[str, ...]:
        """The keys vision_config lacks (or gives as something other than a positive whole number)."""
        return tuple(f.name for f in fields(self) if getattr(self, f.name) is None)


@dataclass(frozen=True)
class TowerSpec:
    """A multimodal encoder tower with its projector, as vLLM builds it (kvplan.model.families.towers).

    vLLM skips a tower when the limits of all its modalities are 0 (`loaded` False then)."""

    name: str  # "vision tower + projector", "audio tower + projector"
    modalities: tuple[str, ...]  # the modalities it encodes (vLLM's _mark_tower_model set)
    replicated_params: int  # on every TP rank (replicated linears, embeddings, norms)
    sharded_params: int  # split over the TP ranks (column/row-parallel linears)
    source: str  # the vLLM model file and class that builds it
    # Qwen3-VL deepstack: per-level buffers of max_num_batched_tokens × text hidden, built with the tower.
    deepstack_levels: int = 0
    tokens_per_image: int = 0  # gemma-4: vision_config.default_output_length (an image's soft-token ceiling)
    gemma4_vision: Gemma4VisionShape | None = None  # gemma-4's vision tower: the shapes its encoder profile reads
    loaded: bool = True
    # attention heads the tower splits over the TP ranks (dist_utils.divide asserts they divide); 0: not checked
    tp_heads: int = 0
    geometry: VisionGeometry | None = None  # Qwen3-VL: the shapes its encoder profile needs
    # --mm-encoder-tp-mode data (a model with supports_encoder_tp_data): the parameters still split over TP, the
    # rest of sharded_params replicated on every rank; None: that layout is not modelled for this tower
    data_mode_sharded_params: int | None = None
    # the layout vLLM builds it in (kvplan/vllm/multimodal.py:apply_mm_limits): "data" only where
    # data_mode_sharded_params is set, else "weights" (vLLM falls back for a model without the support)
    mm_encoder_tp_mode: str = "weights"

    @property
    def params(self) -> int:
        """All its parameters (what the checkpoint stores)."""
        return self.replicated_params + self.sharded_params


class ConfigFacts(NamedTuple):
    """What kvplan's consumers need from the text config beyond the KV geometry and the weight shapes, read by
    kvplan.model.spelt (a NamedTuple field of ModelSpec rather than 14 more dataclass fields: start-up cost)."""

    rope: RopeConfig = RopeConfig()
    quant_layout: QuantLayout = QuantLayout()
    parallel_attn: bool = False  # Falcon: attention and MLP in parallel off one input norm
    per_layer_input_size: int = 0  # Gemma-3n / Gemma-4 "E": hidden_size_per_layer_input (0: none)
    per_layer_input_vocab: int = 0  # vocab_size_per_layer_input (0: the vocabulary)
    double_wide_mlp: bool = False  # Gemma-4 use_double_wide_mlp: the KV-shared layers' MLP twice as wide
    mtp_layers: int = 0  # MTP layers the checkpoint carries (num_nextn_predict_layers …; the family's default)
    n_predict: object = None  # a draft config's `n_predict` as written (vLLM checks it)
    draft_vocab_size: int = 0  # an EAGLE-3 draft's own vocabulary (0: the target's)
    index_topk: object = None  # DeepSeek sparse attention's `index_topk` as written (None: absent)
    swa_attention_sinks: bool = False  # MiMo-V2 add_swa_attention_sink_bias, Laguna swa_attention_sink_enabled
    layer_type_names: tuple[str, ...] | None = None  # text config `layer_types` as written (vLLM quotes it)
    float16_unsafe_model_type: str = ""  # the model type vLLM refuses float16 for ("" when none)
    mm_item_tokens_stated: bool = False  # the multimodal item sizes are stated (Gemma-4), not the processor's
    spelt: SpeltText = SpeltText()
    sglang: SglangFacts = SglangFacts()


@dataclass(frozen=True)
class ModelSpec:
    """What kvplan needs from a model's config.json, resolved the way vLLM resolves it."""

    name: str
    model_type: str
    architectures: tuple[str, ...]
    dtype: str  # bfloat16 | float16 | float32: the model dtype (`auto` KV dtype)
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int  # total KV heads of the full-attention layers
    head_size: int
    vocab_size: int
    intermediate_size: int  # dense MLP width (0 if every layer is MoE)
    max_model_len: int  # derived as config/model.py:_get_and_verify_max_len
    layers: tuple[LayerSpec, ...]
    tie_word_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU-style: gate, up, down (3 matrices) vs up, down (2)
    moe: MoESpec | None = None
    mla: MLADims | None = None
    dsv4: Dsv4Dims | None = None  # DeepSeek-V4's compressed sparse attention (kvplan.model.families.dsv4)
    quant: QuantSpec | None = None
    max_model_len_source: str = ""
    notes: tuple[str, ...] = ()
    # How the config was read where vLLM reads it otherwise than config.json spells it (transformers class defaults
    # for keys a text sub-config leaves out; a params.json beside it): shown by `size` and `fit` alike.
    config_notes: tuple[str, ...] = ()
    weights_unknown: str | None = None  # why the analytic weight count cannot be made (the KV cache can)
    config_model_type: str = ""  # the top-level config's model_type (what transformers' AutoConfig reads)
    config_dtype: str = ""  # the checkpoint's own dtype (torch_dtype), "" when it states none
    mm_prefix_lm: bool = False  # bidirectional attention over image tokens (vLLM's is_mm_prefix_lm)
    custom_code: bool = False  # config.json's auto_map names the repository's own config/model code
    quant_method: str | None = None  # quantization_config.quant_method as vLLM normalizes it
    # hf_quant_config.json's quantization.kv_cache_quant_algo as written (config.json without a
    # quantization_config), whatever its producer: SGLang reads the file regardless
    # (configs/model_config.py:ModelConfig._parse_quant_hf_config); vLLM drops it without producer modelopt.
    checkpoint_kv_quant_algo: str = ""
    unnamed_text_model_type: str = ""  # a nested text_config's model_type when it names no architectures
    # Multimodal models: the modalities vLLM's processor supports (get_supported_mm_limits) and the encoder
    # towers whose parameters kvplan counts; () for text models and towers kvplan does not count.
    mm_modalities: tuple[str, ...] = ()
    towers: tuple[TowerSpec, ...] = ()
    # The architecture family (kvplan.model.architectures): its weight layout, rotary cache and quirks.
    family: Family = field(default=DEFAULT, repr=False)  # not in --json output (kvplan.render.json skips repr=False)
    # What only some consumers need, read by the reader (kvplan.model.spelt) so that nothing past it reads config.json.
    # Not compared or hashed: n_predict / index_topk hold the config's values as written (a list is unhashable).
    facts: ConfigFacts = field(default=ConfigFacts(), repr=False, compare=False)
