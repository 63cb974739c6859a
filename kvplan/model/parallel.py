"""How a checkpoint is split over GPUs: pipeline stages' layers and the tensor-parallel sizes vLLM accepts."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec

def pp_layer_ranges(num_layers: int, pp: int) -> list[range]:
    """Layers of each pipeline stage (vllm/distributed/utils.py:get_pp_indices).

    `num_layers // pp` each; the remainder goes +1 to the stages before the last one, counting
    backwards from the second-to-last.
    """
    base, rem = divmod(num_layers, pp)
    sizes = [base] * pp
    for i in range(rem):
        sizes[pp - 2 - i if pp > 1 else 0] += 1
    out, start = [], 0
    for s in sizes:
        out.append(range(start, start + s))
        start += s
    return out


def has_recurrent_layers(model: ModelSpec) -> bool:
    """Some layer keeps a recurrent state (Mamba, GDN, short conv, linear attention): what vLLM's Mamba cache
    mode applies to, and a hybrid when attention layers sit beside it."""
    return any(layer.kind == "mamba" for layer in model.layers)


def attention_free(model: ModelSpec) -> bool:
    """No layer attends (Mamba, Falcon-Mamba): vLLM's `is_attention_free`."""
    return not any(layer.kind not in ("mamba", "mlp_only", "kv_shared") for layer in model.layers)


def check_tensor_parallel(model: ModelSpec, tp: int) -> None:
    """Reject a TP size vLLM would reject (config/parallel.py / ModelConfig.verify_with_parallel_config:
    num_attention_heads must be divisible by tensor_parallel_size), and non-positive sizes."""
    from kvplan.errors import InvalidParameter

    if tp < 1:
        raise InvalidParameter(f"--tensor-parallel-size must be ≥ 1, got {tp}")
    if attention_free(model):
        return  # attention-free (Mamba, Falcon-Mamba): no heads to divide; the state splits by channels
    if model.num_attention_heads % tp:
        raise InvalidParameter(
            f"--tensor-parallel-size {tp} does not divide the {model.num_attention_heads} attention heads",
            hint="vLLM requires num_attention_heads % tensor_parallel_size == 0",
        )
    kv = model.num_kv_heads
    if model.mla is None and tp > kv and tp % kv:
        raise InvalidParameter(
            f"--tensor-parallel-size {tp} is larger than the {kv} KV heads and not a multiple of them",
            hint="vLLM replicates KV heads only when tp % num_kv_heads == 0",
        )
