"""LoRA adapters' GPU memory: the stacked A/B buffers vLLM allocates for `--max-loras` slots at load time.

lora/layers/base_linear.py:BaseLinearLayerWithLoRA.create_lora_weights: per wrapped linear layer and slice,
`lora_a_stacked` (max_loras × max_lora_rank × input size) and `lora_b_stacked` (max_loras × output size ×
max_lora_rank), in the LoRA dtype (the model's under `auto`, config/lora.py). Column-parallel layers keep the
whole input and 1/tp of the output, row-parallel ones 1/tp of the input and the whole output. The default
targets are the decoder's linear layers: qkv (3 slices), o, gate_up (2 slices), down. They are allocated
while the model loads, so vLLM counts them in "Model loading took". An estimate from the allocation shapes:
MoE experts' LoRA buffers (fused_moe.py) are not counted.
"""
from __future__ import annotations

from kvplan.model.spec import ModelSpec

_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# config/lora.py: MaxLoRARanks.
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
MAX_LORAS = 1024  # far above any deployment; bounds the product below


def lora_bytes_per_gpu(model: ModelSpec, *, tp: int, max_loras: int, max_lora_rank: int) -> int:
    """Bytes of the LoRA buffers on one GPU (all decoder layers; the busiest pipeline stage is not split out)."""
    h, r = model.hidden_size, max_lora_rank
    q = model.num_attention_heads * model.head_size
    kv = model.num_kv_heads * model.head_size
    per_layer = 0
    for layer in model.layers:
        if layer.kind in ("full", "sliding_window", "chunked_local", "mla"):
            per_layer_attn = 3 * r * h + r * (q + 2 * kv) // tp  # qkv: 3 slices of A, B over the output
            per_layer_attn += r * q // tp + r * h  # o_proj (row parallel)
            per_layer += per_layer_attn
        if not layer.moe and model.intermediate_size:
            width = model.intermediate_size
            per_layer += 2 * r * h + r * 2 * width // tp  # gate_up (2 slices)
            per_layer += r * width // tp + r * h  # down (row parallel)
    return max_loras * per_layer * _DTYPE_BYTES.get(model.dtype, 2)
