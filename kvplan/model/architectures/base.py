"""What one architecture family says about itself: the vLLM classes it covers, how its weights are laid out
beyond the Llama shape, its rotary cache, and its quirks. Frozen, typed records (NamedTuple rather than frozen
dataclasses: `kvplan size` builds these classes at start-up, and a NamedTuple class costs a fifth of a frozen
dataclass's creation): the registry
(kvplan/model/architectures/__init__.py) resolves a config to one `Family`; the reader
(kvplan.model.config) copies what the rest of kvplan needs onto ModelSpec."""

# No `from __future__ import annotations` here: NamedTuple and dataclass creation turn string annotations into
# ForwardRefs (one compile() each) or match them against ClassVar; real ones cost `kvplan size` less at start-up.
from typing import Literal, NamedTuple

AttentionBias = Literal["none", "qkv", "all"]
# Which layers a model-wide `sliding_window` covers when the config lists no per-layer pattern
# (kvplan.model.families.attention.layer_pattern): "uniform" every layer (engine/arg_utils.py), "every_nth" all but
# every sliding_window_pattern-th (default 6; transformers Gemma3), "alternate" the even layers (transformers Gemma2,
# vLLM gpt_oss.py), "max_window_layers" the layers from max_window_layers on (vLLM qwen2.py, qwen3.py).
SlidingLayout = Literal["uniform", "every_nth", "alternate", "max_window_layers"]
# How the attention layers' KV heads are read (transformers_utils/model_arch_config_convertor.py:
# get_total_num_kv_heads and its overrides; kvplan.model.families.classic.total_kv_heads): "keys" the first KV-head
# key, else MHA; "falcon" new_decoder_architecture → n_head_kv, else multi_query (default true) → 1; "chatglm" MHA
# unless multi_query_attention; "multi_query" one head unless multi_query is false (GPTBigCodeConfig default true).
KvHeadsRule = Literal["keys", "falcon", "chatglm", "multi_query"]
# Which SGLang 0.5.23 config class's mamba2_cache_params sizes the recurrent state (kvplan.sglang.mamba; paths
# under sglang/srt/configs/): "gdn" qwen3_next.py, "nemotron_h" nemotron_h.py, "granite" granitemoehybrid.py,
# "short_conv" lfm2.py, "mamba1" mamba.py (_mamba1_cache_params); "" none kvplan models.
SglangStateRule = Literal["", "gdn", "nemotron_h", "granite", "short_conv", "mamba1"]
# Which counter of kvplan.model.families.towers sizes a multimodal wrapper's tower(s), and the modalities vLLM's
# processor supports: "gemma4" (gemma4_mm.py), "qwen3_vl" (qwen3_vl.py), "qwen2_5_vl" (qwen2_5_vl.py), "pixtral"
# (mistral3.py with a pixtral vision_config), "glm4v" (glm4_1v.py), "qwen2_vl" (modalities only, no tower
# counted), "gemma3" (gemma3_mm.py), "llama4" (mllama4.py).
VisionTower = Literal["gemma4", "qwen3_vl", "qwen2_5_vl", "pixtral", "glm4v", "qwen2_vl", "gemma3", "llama4"]


class WeightRules(NamedTuple):
    """How the family's checkpoint differs from a Llama-shaped decoder (kvplan.model.weights.count_parameters),
    each from the family's modeling file."""

    attention_bias: AttentionBias = "none"  # "qkv": q, k, v biases; "all": q, k, v and o biases
    qk_norm: bool = False  # per-head q_norm and k_norm (head_dim each)
    attention_sinks: bool = False  # one learned sink per query head
    mlp_bias: bool = False  # up / down biases
    layernorm_bias: bool = False  # LayerNorm (weight and bias) rather than RMSNorm
    learned_positions: int | None = None  # learned absolute position table: max positions + this many rows
    expert_bias: bool = False  # routed experts carry biases (2·I + hidden each)
    router_bias: bool = False  # the router carries one bias per expert
    router_scales: bool = False  # router scale (hidden) and per-expert scale, three extra norms per MoE block
    shared_expert_gate: bool = False  # a hidden → 1 gate on the shared expert
    # The router's element size as vLLM builds it when not the model dtype (MiniMax-M2: float32); vLLM keeps the
    # router unquantized and whole on every TP rank (kvplan.vllm.memory.weights: replicated layers).
    router_dtype_bytes: int | None = None
    mixer_layers_have_mlp: bool = True  # False: attention / recurrent layers carry no MLP ("-" layers do)
    recurrent_layers_have_mlp: bool = False  # recurrent (Mamba, short-conv) layers also carry the MLP
    gated_mlp: bool = True  # gate, up, down (3 matrices); False: up, down
    four_x_mlp: bool = False  # the config may leave the MLP width out: 4 × hidden


class RopeRules(NamedTuple):
    """The rotary cos/sin cache the family's vLLM model builds (kvplan.vllm.memory.weights.rope_cache_bytes)."""

    rotary: bool = True  # False: learned or ALiBi positions, or no positional encoding
    half_rotary: bool = False  # rotary_dim = head_dim // 2
    cache_dtype_bytes: int | None = None  # the cache's element size when not the model dtype
    local_cache: bool = False  # a second, unscaled cache for the sliding-window layers
    # A multimodal rope (mrope_section) over 1 × the positions from vLLM 0.32, not 4 × (qwen3_vl.py:
    # mrope_positions_factor, without video pruning; kvplan.vllm.memory.weights.mrope_positions_factor)
    mrope_single_positions: bool = False
    # The full-attention layers build their own cache over their whole head size (Gemma 4's proportional rope),
    # beside the sliding layers' one
    full_layer_cache: bool = False


class ModelTypeRules(NamedTuple):
    """Reader rules vLLM (or SGLang) keys by a config's model_type rather than by its architecture, each the model
    types it applies to (a family may list types beyond its own when vLLM's table does: the DeepSeek family lists
    every type is_deepseek_mla names). The registry's index unions each field over the families
    (kvplan.model.architectures.model_types_for); a model type is listed by one family only."""

    # transformers_utils/model_arch_config_convertor.py:is_deepseek_mla: MLA when kv_lora_rank is set
    # (kvplan.model.families.mla.mla_dims).
    deepseek_mla: tuple[str, ...] = ()
    # Text model types whose layers models/deepseek_v2.py:DeepseekV2DecoderLayer builds (its use_mha rule:
    # kvplan.model.families.mla.deepseek_mha), and the one it always builds as plain MHA (`config.model_type ==
    # "deepseek"`, DeepseekAttention).
    deepseek_decoder: tuple[str, ...] = ()
    deepseek_v1_mha: tuple[str, ...] = ()
    # DeepSeek-V4's compressed attention (compress_ratios: kvplan.model.families.dsv4).
    compressed_attention: tuple[str, ...] = ()
    # Recurrent state per family (kvplan.model.families.recurrent.recurrent_state; layers/mamba/mamba_utils.py:
    # MambaStateShapeCalculator): gated delta net, MiniMax's lightning attention, Nemotron-H's Mamba-2 (float32
    # SSM state), Mamba-1 and Mamba-2 configs.
    gated_delta_net: tuple[str, ...] = ()
    lightning_attention: tuple[str, ...] = ()
    nemotron_h_mamba2: tuple[str, ...] = ()
    mamba1: tuple[str, ...] = ()
    mamba2: tuple[str, ...] = ()
    # config/model.py:_get_and_verify_max_len skips the rope factor for `"gemma3" in model_type`: Gemma-3's
    # max_position_embeddings is already the scaled length (kvplan.model.config._max_model_len).
    max_len_already_scaled: tuple[str, ...] = ()
    # models/llama4.py: the RoPE layers (no_rope_layers[i] == 1) use chunked local attention when
    # attention_chunk_size is set (kvplan.model.config).
    chunked_local_attention: tuple[str, ...] = ()
    # An always-on MLP of intermediate_size beside the routed experts when the config states no shared width
    # (kvplan.model.families.moe.moe_spec): Llama-4's shared expert (modeling_llama4.py), Gemma-4's dense MLP kept
    # beside the experts (vLLM 0.33 gemma4.py:Gemma4DecoderLayer).
    shared_expert_dense_width: tuple[str, ...] = ()
    # transformers_utils/model_arch_config_convertor.py:is_mm_prefix_lm (vLLM 0.33): top-level model types vLLM
    # treats as multimodal prefix LMs (kvplan.model.families.text_config.mm_prefix_lm).
    mm_prefix_lm: tuple[str, ...] = ()
    # SGLang 0.5.23 arg_groups/model_overrides/qwen3_vl.py:_HOPPER_QWEN3_VL_TYPES (top-level model types;
    # kvplan.sglang).
    sglang_hopper_qwen3_vl: tuple[str, ...] = ()
    # SGLang 0.5.23 utils/hf_transformers/config.py:_apply_gemma4_attention_overrides: text model types whose
    # full-attention head_dim / KV heads SGLang makes the model's own (kvplan.model.spelt: gemma4_full_attention).
    sglang_gemma4_attention: tuple[str, ...] = ()
    # transformers 5.19 config classes (SGLang 0.5.23's pin) that build text_config from a flat config's own keys,
    # popping them from the outer config (configuration_qwen2_vl.py, configuration_qwen2_5_vl.py `__post_init__`;
    # hunyuan_vl and paddleocr_vl do too): an outer --json-model-override-args key misses the text model
    # (kvplan.sglang.model_override).
    sglang_flat_text_config: tuple[str, ...] = ()


class Family(NamedTuple):
    """One architecture family: the vLLM registry names (`architectures`) and model types it covers, and what
    kvplan needs to know of it beyond what config.json spells."""

    name: str
    source: str  # the vLLM model file(s) and transformers modeling file the rules follow
    architectures: tuple[str, ...] = ()  # names vLLM registers (model_executor/models/registry.py)
    model_types: tuple[str, ...] = ()  # the fallback key (the text config's model_type)
    weights: WeightRules = WeightRules()
    rope: RopeRules = RopeRules()
    # How the config is read: the sliding-window layout, whether every layer is a state-space block (no attention
    # heads to read), and the block kinds the config class cycles through when the config names none.
    sliding_layout: SlidingLayout = "uniform"
    kv_heads: KvHeadsRule = "keys"
    pure_ssm: bool = False
    default_block_types: tuple[str, ...] = ()
    tied_by_default: bool = False  # transformers' config class ties the LM head when the key is absent
    # config/model.py:_FLOAT16_NOT_SUPPORTED_MODELS lists every model type of this family.
    float16_unsafe: bool = False
    mtp_default_layers: int = 0  # MTP layers the family's MTP module assumes when the config states none
    # The dense MLP's forward rebinds `x` to the SiluAndMul output, so gate_up is freed before down_proj runs
    # (kvplan.vllm.memory.activation: the profile run's peak). Every other dense MLP keeps gate_up alive through
    # down_proj (qwen2.py:Qwen2MLP.forward, deepseek_v2.py, gemma*.py, granite.py, commandr.py: `gate_up, _ = …;
    # x = act(gate_up)`): the default, and the pessimistic side.
    mlp_rebinds_gate_up: bool = False
    # Top-level model types whose multimodal item sizes kvplan states without running the processor.
    mm_item_tokens_model_types: tuple[str, ...] = ()
    # transformers' attribute_map reads max_position_embeddings from n_positions (SGLang's context length).
    n_positions_alias: bool = False
    # SGLang keys its recurrent-state rule by the text config's model_type (the config class it builds), not by the
    # architecture: these model types get `sglang_state` (kvplan.model.spelt: SglangFacts.state_rule).
    sglang_state: SglangStateRule = ""
    sglang_state_model_types: tuple[str, ...] = ()
    model_type_rules: ModelTypeRules = ModelTypeRules()
    # Top-level (wrapper) model types whose towers kvplan counts, each with its counter (VisionTower); keyed by the
    # wrapper's model_type, as vLLM's processor is.
    vision_towers: tuple[tuple[str, VisionTower], ...] = ()
    # vLLM's own composite configs that build their text config from another key: (top-level model_type, the key,
    # the text config's model_type) (kvplan.model.families.text_config).
    composite_text_configs: tuple[tuple[str, str, str], ...] = ()
    # Vision configs SGLang builds with its own class, whose defaults stand in for keys the JSON does not give:
    # (top-level model_type, num_hidden_layers, hidden_size) (kvplan.model.spelt: SglangFacts.vision_defaults).
    sglang_vision_defaults: tuple[tuple[str, int, int], ...] = ()
    # models/config.py:MODELS_CONFIG_MAP's verify_and_update_config raises max_cudagraph_capture_size to this unless
    # the user set the sizes or the maximum (kvplan.vllm.memory.cuda_graphs); 0: the platform default.
    max_cudagraph_capture_size: int = 0
    # Layers whose V head is narrower than K pick a DiffKV attention backend themselves (models/mimo_v2.py:
    # MiMoV2Attention; kvplan.vllm.rocm).
    diffkv_attention: bool = False
    # The KV-cache dtype `--kv-cache-dtype auto` becomes on SM10x (Blackwell) (models/config.py:
    # MODELS_CONFIG_MAP's verify_and_update_config; kvplan.vllm.settings); "": auto stays auto.
    blackwell_auto_kv_cache_dtype: str = ""
    # The family's architectures whose vLLM class builds the embedding and the LM head on every pipeline stage (no
    # is_first_rank / is_last_rank guard; kvplan.vllm.memory.weights.pp_vocab_copies_bytes).
    pp_vocab_every_stage: tuple[str, ...] = ()
    # Classes that allocate a per-layer-input buffer with the model (max_num_batched_tokens × layers ×
    # hidden_size_per_layer_input: gemma4_mm.py / gemma3n_mm.py, kvplan.vllm.memory.weights._per_layer_input_buffer).
    per_layer_input_buffer: tuple[str, ...] = ()


# A family kvplan knows nothing special of: the Llama shape.
DEFAULT = Family(name="default", source="model_executor/models/llama.py (the Llama shape)")
