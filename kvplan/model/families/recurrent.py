"""Recurrent layers' per-request state: Mamba-1, Mamba-2, gated delta net (Qwen3-Next / Qwen3.5) and short
convolution (LFM2), read for `model_executor/layers/mamba/mamba_utils.py:MambaStateShapeCalculator`. vLLM
keeps one MambaSpec state per request and layer, whatever the context length. Which model types take which rule
is their family's (kvplan/model/architectures/: ModelTypeRules).
"""
from __future__ import annotations

from kvplan.errors import BadConfig
from kvplan.model.architectures import model_types_for
from kvplan.model.reader import ConfigReader
from kvplan.model.spec import RecurrentState


def recurrent_state(c: ConfigReader, model_type: str, dtype: str, kind: str) -> RecurrentState:
    """Per-request state dimensions of a recurrent layer of `kind` ("mamba" or "conv"): the inputs of
    MambaStateShapeCalculator for the model class vLLM picks."""
    if kind == "conv":  # LFM2 short convolution (lfm2.py: conv_dim, conv_L_cache; short_conv_state_shape)
        return RecurrentState(variant="short_conv", conv_kernel=c.num("conv_L_cache"),
                              intermediate_size=c.num("conv_dim", "hidden_size"), conv_dtype=dtype, ssm_dtype=dtype)
    if model_type in model_types_for("gated_delta_net") or c.has("linear_num_value_heads"):
        return RecurrentState(
            variant="gdn",
            conv_kernel=c.num("linear_conv_kernel_dim"),
            num_k_heads=c.num("linear_num_key_heads"),
            num_v_heads=c.num("linear_num_value_heads"),
            head_k_dim=c.num("linear_key_head_dim"),
            head_v_dim=c.num("linear_value_head_dim"),
            conv_dtype=dtype,
            # Qwen3.5 declares `mamba_ssm_dtype: float32`: vLLM uses it as the SSM state dtype under `auto`
            # (models/config.py:Qwen3_5ForConditionalGenerationConfig.verify_and_update_config).
            ssm_dtype=_state_dtype(c.get("mamba_ssm_dtype"), dtype),
        )
    hidden = c.num("hidden_size", "d_model")
    if model_type in model_types_for("lightning_attention"):  # MiniMax (minimax_text_01.py)
        heads = c.num("num_attention_heads")
        return RecurrentState(variant="linear_attention", num_heads=heads,
                              head_dim=c.num("head_dim", default=hidden // heads), conv_dtype=dtype, ssm_dtype=dtype)
    if model_type in model_types_for("nemotron_h_mamba2"):
        heads, hd = c.num("mamba_num_heads"), c.num("mamba_head_dim")
        # vLLM models/config.py NemotronH: the SSM state is kept in float32 (mamba_ssm_cache_dtype).
        return RecurrentState(variant="mamba2", conv_kernel=c.num("conv_kernel"), intermediate_size=heads * hd,
                              state_size=c.num("ssm_state_size"), n_groups=c.num("n_groups"), num_heads=heads,
                              head_dim=hd, conv_dtype=dtype, ssm_dtype="float32")
    if c.has("mamba_n_heads") or c.has("mamba_d_head"):  # Granite-4.0-H / Bamba / FalconH1-style Mamba2
        expand = c.num("mamba_expand", default=2)
        heads, hd = c.num("mamba_n_heads"), c.num("mamba_d_head")
        return RecurrentState(variant="mamba2", conv_kernel=c.num("mamba_d_conv"),
                              intermediate_size=expand * hidden, state_size=c.num("mamba_d_state"),
                              n_groups=c.num("mamba_n_groups", default=1), num_heads=heads, head_dim=hd,
                              conv_dtype=dtype, ssm_dtype=dtype)
    if model_type in model_types_for("mamba1"):  # mamba.py: intermediate_size, state_size, conv_kernel
        return RecurrentState(variant="mamba1", conv_kernel=c.num("conv_kernel"),
                              intermediate_size=c.num("intermediate_size"), state_size=c.num("state_size"),
                              conv_dtype=dtype, ssm_dtype=dtype)
    if model_type in model_types_for("mamba2"):  # mamba2.py: expand × hidden, n_groups, num_heads, head_dim, state_size
        heads, hd = c.num("num_heads"), c.num("head_dim")
        return RecurrentState(variant="mamba2", conv_kernel=c.num("conv_kernel"),
                              intermediate_size=c.num("expand", default=2) * hidden, state_size=c.num("state_size"),
                              n_groups=c.num("n_groups", default=1), num_heads=heads, head_dim=hd,
                              conv_dtype=dtype, ssm_dtype=dtype)
    if c.has("mamba_d_state") or c.has("mamba_expand"):  # Jamba: Mamba1
        return RecurrentState(variant="mamba1", conv_kernel=c.num("mamba_d_conv"),
                              intermediate_size=c.num("mamba_expand") * hidden,
                              state_size=c.num("mamba_d_state"), conv_dtype=dtype, ssm_dtype=dtype)
    raise BadConfig(f"config.json: recurrent layers of model type {model_type!r} are not understood by kvplan "
                    "(no Mamba / linear-attention dimensions found)")


_STATE_DTYPES = frozenset({"float32", "bfloat16", "float16"})


def _state_dtype(declared: object, default: str) -> str:
    name = str(declared).replace("torch.", "") if declared is not None else ""
    return name if name in _STATE_DTYPES else default
