"""Which GPU model runner vLLM picks: the V1 runner (v1/worker/gpu_model_runner.py) or Model Runner V2
(v1/worker/gpu/model_runner.py), as config/vllm.py:VllmConfig.use_v2_model_runner decides it when
VLLM_USE_V2_MODEL_RUNNER is unset. Read in each release's wheel, 0.21.0 to 0.33.0:

- ≤ 0.21: only the environment variable turns V2 on.
- 0.22–0.24: V2 for the architectures of DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES; 0.22 and 0.23 only if the
  model is neither MoE nor quantized (`_is_default_v2_model_runner_model`).
- 0.25–0.28: V2 for every generate model that is not MoE, or whose architecture is listed; not for
  attention-free models, nor for hybrids (0.27–0.28: unless listed).
- 0.29+: V2 by default.
- Every release: a feature V2 lacks keeps the V1 runner (`_get_v2_model_runner_unsupported_features`) —
  among those kvplan models, a separate draft model (until 0.31), EAGLE-3 with pipeline parallelism (until
  0.30) and prefill context parallelism (0.22–0.26; MLA from 0.27; from 0.28 it forces V2).

What it changes in the budget: with async scheduling V2 keeps pp + 1 batches in flight
(defaults.max_concurrent_batches), and its sampler's penalty state is counted from 0.27
(memory/activation.py:penalty_state_bytes). Pure.
"""
from __future__ import annotations

from dataclasses import dataclass

from kvplan.model.parallel import attention_free, has_recurrent_layers
from kvplan.model.spec import ModelSpec
from kvplan.vllm.defaults import VllmVersion

# config/vllm.py:DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES in each release that has one (0.29 dropped it).
_LLAMA_QWEN3 = frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"})
_MOE_LISTED = frozenset({"DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "Qwen2MoeForCausalLM"})
_V026 = _MOE_LISTED | {"InklingForCausalLM", "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM"}
V2_DEFAULT_ARCHITECTURES: dict[VllmVersion, frozenset[str]] = {
    VllmVersion(0, 22): frozenset({"Qwen3ForCausalLM"}),
    VllmVersion(0, 23): _LLAMA_QWEN3,
    VllmVersion(0, 24): _LLAMA_QWEN3 | _MOE_LISTED,
    VllmVersion(0, 25): _MOE_LISTED,
    VllmVersion(0, 26): _V026,
    VllmVersion(0, 27): _V026 | {"KimiK3ForConditionalGeneration"},
    VllmVersion(0, 28): _V026 | {"KimiK3ForConditionalGeneration", "DeepseekV4ForCausalLM"},
}
V2_FIRST_DEFAULT = VllmVersion(0, 22)
V2_DEFAULT_FOR_ALL = VllmVersion(0, 29)
# _get_v2_model_runner_unsupported_features, for the speculative methods kvplan models: a separate draft
# model is outside the allowlist of 0.22–0.29 (EAGLE, EAGLE-3, MTP, DFlash, …) and on 0.30's blocklist, so it
# runs on V1 until 0.31; EAGLE-3 with pipeline parallelism stays on V1 up to 0.29.
DRAFT_MODEL_ON_V2_SINCE = VllmVersion(0, 31)
EAGLE3_PP_ON_V2_SINCE = VllmVersion(0, 30)


@dataclass(frozen=True)
class ModelRunner:
    """The runner vLLM would build, and why."""

    v2: bool
    reason: str

    @property
    def name(self) -> str:
        return "V2" if self.v2 else "V1"


def _default_model(model: ModelSpec, version: VllmVersion, quantized: bool) -> str | None:
    """Why `_is_default_v2_model_runner_model` says no for this release (None: it says yes)."""
    archs = set(model.architectures)
    listed = bool(archs & V2_DEFAULT_ARCHITECTURES[version])
    if version < VllmVersion(0, 24) and (model.moe is not None or quantized):
        return "MoE and quantized models are not on it by default" if listed else "architecture not on its list"
    if version < VllmVersion(0, 25):
        return None if listed else "architecture not on its default list"
    hybrid = has_recurrent_layers(model)
    if attention_free(model):
        return "attention-free models stay on V1"
    if hybrid and (version < VllmVersion(0, 27) or not listed):
        return "hybrid models stay on V1"
    return None if listed or model.moe is None else "MoE architectures off its list stay on V1"


def model_runner(model: ModelSpec, version: VllmVersion, *, quantized: bool, speculative_method: str | None = None,
                 pp: int = 1, pcp: int = 1, env: bool | None = None) -> ModelRunner:
    """The runner config/vllm.py:VllmConfig.use_v2_model_runner picks for `model` on `version` (module
    docstring); `env` is VLLM_USE_V2_MODEL_RUNNER (None: unset), which decides alone. `quantized`: vLLM's
    ModelConfig.is_quantized (a checkpoint scheme or --quantization)."""
    if env is not None:
        return ModelRunner(env, f"VLLM_USE_V2_MODEL_RUNNER={int(env)}")
    if version < V2_FIRST_DEFAULT:
        return ModelRunner(False, f"vLLM {version}: the V1 runner unless VLLM_USE_V2_MODEL_RUNNER=1")
    if pcp > 1 and version >= VllmVersion(0, 28):
        return ModelRunner(True, "prefill context parallelism runs only on Model Runner V2")
    if version < V2_DEFAULT_FOR_ALL:
        why_not = _default_model(model, version, quantized)
        if why_not is not None:
            return ModelRunner(False, f"vLLM {version}: Model Runner V2 is the default for some models only; "
                                      f"{why_not}")
    if pcp > 1 and (version < VllmVersion(0, 27) or model.mla is None):
        return ModelRunner(False, f"vLLM {version}: Model Runner V2 does not support prefill context parallelism "
                                  "here")
    if ((speculative_method == "draft_model" and version < DRAFT_MODEL_ON_V2_SINCE)
            or (speculative_method == "eagle3" and pp > 1 and version < EAGLE3_PP_ON_V2_SINCE)):
        return ModelRunner(False, f"vLLM {version}: Model Runner V2 does not run speculative method "
                                  f"{speculative_method!r}" + (" with pipeline parallelism" if pp > 1 else ""))
    if version >= V2_DEFAULT_FOR_ALL:
        return ModelRunner(True, f"vLLM {version}: Model Runner V2 is the default")
    arch = model.architectures[0] if model.architectures else model.model_type
    return ModelRunner(True, f"vLLM {version}: Model Runner V2 is the default for {arch}")
