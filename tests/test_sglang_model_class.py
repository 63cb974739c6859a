"""SGLang 0.5.23's model-class resolution (model_loader/utils.py:get_model_architecture, resolve_transformers_arch)
against SGLang's own run of it on every committed config it has no class for (tests/fixtures/sglang/
model-class-goldens.json, tools/sglang_oracle/arch_probe.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import BadConfig, InvalidParameter
from kvplan.hardware.gpus import get_gpu
from kvplan.model.hub import load_local
from kvplan.sglang.architectures import is_sglang_class, model_class_refusal
from kvplan.sglang.defaults import SglangDeployment
from kvplan.sglang.fit import plan_sglang_fit

FIXTURES = Path(__file__).parent / "fixtures"
GOLDENS = json.loads((FIXTURES / "sglang" / "model-class-goldens.json").read_text())["cases"]
# The errors of resolve_transformers_arch itself; the goldens' other errors come from steps before it (the config
# needs the repository's code, transformers rejects the config, an unknown quantization method).
THIS_STEP = ("ValueError: Cannot find model module.", "has no SGlang implementation")
# Configs kvplan's reader refuses before any engine rule (BadConfig): state-spaces' mamba_ssm-native configs (no
# model_type, no architectures; SGLang 0.5.23 reads them and falls back to TransformersForCausalLM, kvplan does not
# model that); and three SGLang refuses before the model class too (the goldens' errors): EXAONE-4.5-FP8's
# layer_types of 65 entries for 64 layers, RWKV-4's config without num_attention_heads, a speculators-format EAGLE-3
# config without model_type.
KVPLAN_CANNOT_READ = {"state-spaces--mamba2-1.3b", "state-spaces--mamba2-130m", "state-spaces--mamba2-2.7b",
                      "state-spaces--mamba2attn-2.7b", "LGAI-EXAONE--EXAONE-4.5-33B-FP8", "RWKV--rwkv-4-169m-pile",
                      "nm-testing--EAGLE3-LLaMA3.1-Instruct-8B-converted"}


def _spelt(name: str) -> object:
    for base in ("corpus/configs", "configs"):
        if (FIXTURES / base / name / "config.json").exists():
            return load_local(str(FIXTURES / base / name))
    raise FileNotFoundError(name)


@pytest.mark.parametrize("case", GOLDENS, ids=[c["model"] for c in GOLDENS])
def test_model_class_refusal_is_sglangs(case: dict[str, object]) -> None:
    if case["model"] in KVPLAN_CANNOT_READ:
        with pytest.raises(BadConfig):
            _spelt(str(case["model"]))
        return
    spec = _spelt(str(case["model"]))
    mine = model_class_refusal(spec.architectures, auto_model=spec.facts.spelt.auto_model)  # type: ignore[attr-defined]
    error = str(case.get("error", ""))
    if "resolved" in case:  # SGLang loads it natively or through its Transformers backend
        assert mine is None
    elif any(s in error for s in THIS_STEP):
        assert mine is not None and "ValueError: " + mine == error
    else:
        pytest.skip(f"SGLang refuses before the model class: {error[:60]}")


def test_goldens_hold_both_refusals_and_the_fallback() -> None:
    errors = [str(c.get("error", "")) for c in GOLDENS]
    assert sum("has no SGlang implementation" in e for e in errors) == 5  # Bamba ×2, CodeGen, XGLM, OpenAI GPT
    assert sum("Cannot find model module" in e for e in errors) == 2  # Qwen2_5OmniModel ×2
    assert sum("resolved" in c for c in GOLDENS) == 18
    assert {"TransformersForCausalLM", "TransformersMoEForCausalLM", "TransformersMultiModalForCausalLM"} == {
        c["resolved"][0] for c in GOLDENS if "resolved" in c}  # type: ignore[index]


def test_sglang_class_table_is_the_wheels() -> None:
    # EntryClass names of sglang/srt/models/*.py in the 0.5.23 wheel (290 classes)
    assert is_sglang_class("Gemma4AssistantForCausalLM") and is_sglang_class("DeepseekV32ForCausalLM")
    assert not is_sglang_class("BambaForCausalLM") and not is_sglang_class("Dots1ForCausalLM")
    # an architecture beside a native one: SGLang resolves the native one
    assert model_class_refusal(["BambaForCausalLM", "LlamaForCausalLM"], auto_model=False) is None
    # a repository's own AutoModel class: SGLang loads it (not checked by kvplan)
    assert model_class_refusal(["MyOwnForCausalLM"], auto_model=True) is None


def test_refused_before_the_pool_on_the_plan_path() -> None:
    spec = _spelt("Salesforce--codegen-350M-mono")
    with pytest.raises(InvalidParameter, match=r"^CodeGenForCausalLM has no SGlang implementation"):
        plan_sglang_fit(spec, get_gpu("h100-sxm"), SglangDeployment(tp=1), weights_bytes=0,  # type: ignore[arg-type]
                        weights_range=(0, 0))
