"""vLLM's environment variables that change the KV-cache budget, read as vllm/envs.py reads them. Pure: the
CLI passes `os.environ`."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kvplan.errors import InvalidParameter

ALLOW_LONG_MAX_MODEL_LEN = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
USE_V2_MODEL_RUNNER = "VLLM_USE_V2_MODEL_RUNNER"
MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
USE_FLASHINFER_SAMPLER = "VLLM_USE_FLASHINFER_SAMPLER"
USE_FLASHINFER_MOE_FP8 = "VLLM_USE_FLASHINFER_MOE_FP8"
ROCM_USE_AITER = "VLLM_ROCM_USE_AITER"
ROCM_USE_AITER_MHA = "VLLM_ROCM_USE_AITER_MHA"
ROCM_USE_AITER_MLA = "VLLM_ROCM_USE_AITER_MLA"


@dataclass(frozen=True)
class VllmEnvironment:
    """The variables kvplan models; None: unset (vLLM's default applies). ServeSettings.env holds one
    (`fit`, `simulate` and plan files all pass it on)."""

    allow_long_max_model_len: bool = False
    use_v2_model_runner: bool | None = None
    estimate_cudagraphs: bool | None = None
    use_flashinfer_sampler: bool | None = None
    # VLLM_USE_FLASHINFER_MOE_FP8 (envs.py: bool(int(os.getenv(name, "0"))), read only when envs.is_set, 0.16.0 and
    # 0.19.1): which FP8 MoE kernel a block-FP8 checkpoint runs (vllm/memory/flashinfer_moe.py)
    use_flashinfer_moe_fp8: bool | None = None
    rocm_use_aiter: bool = False  # VLLM_ROCM_USE_AITER (ROCm: aiter kernels on; envs.py default False)
    rocm_use_aiter_mha: bool = True  # VLLM_ROCM_USE_AITER_MHA (default True)
    rocm_use_aiter_mla: bool = True  # VLLM_ROCM_USE_AITER_MLA (default True)
    # ROCm (AMD GPUs): the aiter + flash_attn packages installed (vLLM's ROCm images; False: a bare pip install);
    # no variable, but the environment vLLM runs in (kvplan/vllm/rocm.py:RocmAiter).
    rocm_aiter_installed: bool = True


def _int_flag(env: Mapping[str, str], name: str) -> bool | None:
    # envs.py: maybe_convert_bool / bool(int(os.getenv(name, default))): an integer, any other text fails
    text = env.get(name)
    if text is None:
        return None
    try:
        return bool(int(text))
    except ValueError:
        raise InvalidParameter(f"{name}={text!r}: vLLM reads it as an integer (0 or 1)") from None


def _true_flag(env: Mapping[str, str], name: str, default: str) -> bool:
    # envs.py: os.getenv(name, default).lower() in ("true", "1"): any other text is False, never an error
    return env.get(name, default).lower() in ("true", "1")


def vllm_environment(env: Mapping[str, str]) -> VllmEnvironment:
    """The modelled variables of `env`. VLLM_ALLOW_LONG_MAX_MODEL_LEN is on for "1" or "true" (any case,
    spaces stripped); the 0/1 variables must be integers, as vLLM's int() demands; the ROCm aiter switches are
    on for "1" or "true" in any case, anything else off (envs.py)."""
    return VllmEnvironment(
        allow_long_max_model_len=env.get(ALLOW_LONG_MAX_MODEL_LEN, "0").strip().lower() in ("1", "true"),
        use_v2_model_runner=_int_flag(env, USE_V2_MODEL_RUNNER),
        estimate_cudagraphs=_int_flag(env, MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS),
        use_flashinfer_sampler=_int_flag(env, USE_FLASHINFER_SAMPLER),
        use_flashinfer_moe_fp8=_int_flag(env, USE_FLASHINFER_MOE_FP8),
        rocm_use_aiter=_true_flag(env, ROCM_USE_AITER, "False"),
        rocm_use_aiter_mha=_true_flag(env, ROCM_USE_AITER_MHA, "True"),
        rocm_use_aiter_mla=_true_flag(env, ROCM_USE_AITER_MLA, "True"),
    )
