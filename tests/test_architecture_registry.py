"""The architecture registry (kvplan/model/architectures/): one module per family, resolved as vLLM resolves a
model class (the config's `architectures` first, its model_type as the fallback), each name claimed once and
each one vLLM registers."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.errors import BadConfig
from kvplan.model.architectures import (
    DEFAULT,
    build_index,
    composite_text_config,
    families,
    family_for,
    index_source,
    model_types_for,
    model_types_where,
    sglang_state_rule,
    sglang_vision_defaults,
    vision_tower,
)
from kvplan.model.architectures.base import ModelTypeRules
from kvplan.model.config import parse_config

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "kvplan" / "model" / "architectures"
FIXTURE_CONFIGS = sorted(set(ROOT.glob("tests/fixtures/**/config.json")))


def test_every_module_in_the_folder_is_a_family() -> None:
    """Adding a family is adding one file: each module but base.py and the generated _index.py registers itself,
    under its own name."""
    modules = sorted(p.stem for p in FOLDER.glob("*.py") if p.name not in ("__init__.py", "base.py", "_index.py"))
    assert [f.name for f in families()] == modules
    assert len(modules) >= 35  # the scan sees the folder (a new family needs no change here)


def test_the_lazy_index_is_what_the_family_modules_define() -> None:
    """_index.py (each key to its module, the cross-family tables) is generated from every module's FAMILY: a family
    added or changed without `python scripts/architecture_index.py` fails here, so the index cannot drift."""
    assert (FOLDER / "_index.py").read_text(encoding="utf-8") == index_source(families())


def test_a_config_parse_imports_only_its_familys_module() -> None:
    """The start-up cost: parsing Qwen2.5's config loads the index and the qwen2 module, not the other families (a
    fresh interpreter, as `kvplan size` runs)."""
    code = ("import sys, json; from kvplan.model.config import parse_config; "
            "m = parse_config(json.load(open(sys.argv[1]))); "
            "print(m.family.name, *sorted(k for k in sys.modules if k.startswith('kvplan.model.architectures.')))")
    config = ROOT / "tests" / "fixtures" / "configs" / "Qwen--Qwen2.5-7B" / "config.json"
    out = subprocess.run([sys.executable, "-c", code, str(config)], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout.split()
    assert out == ["qwen2", "kvplan.model.architectures._index", "kvplan.model.architectures.base",
                   "kvplan.model.architectures.qwen2"]


def test_the_index_tables_answer_as_the_families_do() -> None:
    """model_types_where and sglang_state_rule read the index; an unknown flag is an error, not an empty set."""
    for flag in ("float16_unsafe", "n_positions_alias", "tied_by_default", "pure_ssm"):
        assert model_types_where(flag) == {t for f in families() if getattr(f, flag) for t in f.model_types}
    assert sglang_state_rule("qwen3_5_text") == "gdn"
    assert sglang_state_rule("llama") == ""
    with pytest.raises(KeyError, match="'sliding_layout' is not a boolean Family field"):
        model_types_where("sliding_layout")


def test_a_name_claimed_by_two_families_is_refused() -> None:
    """Two families may not claim one architecture (or one model type): the registry would depend on file order."""
    gpt2 = next(f for f in families() if f.name == "gpt2")
    with pytest.raises(ValueError, match="'GPT2LMHeadModel' is claimed by both gpt2 and copy"):
        build_index([*families(), gpt2._replace(name="copy", model_types=())])
    with pytest.raises(ValueError, match="'gpt2' is claimed by both gpt2 and copy"):
        build_index([*families(), gpt2._replace(name="copy", architectures=())])


def test_every_architecture_a_family_claims_is_one_vllm_registers() -> None:
    """The keys are vLLM's own registry names (model_executor/models/registry.py, kvplan/vllm/architectures.json)."""
    served = json.loads((ROOT / "kvplan" / "vllm" / "architectures.json").read_text(encoding="utf-8"))["served"]
    unknown = [(f.name, a) for f in families() for a in f.architectures if a not in served]
    assert unknown == []


def test_the_architecture_wins_and_the_model_type_is_the_fallback() -> None:
    """registry.py resolves the first registered architecture; a wrapper kvplan does not list (LLaVA-OneVision)
    falls back to its text config's model_type (its language model is Qwen2); a family kvplan knows nothing
    special of is the Llama shape."""
    assert family_for(("GptOssForCausalLM",), "llama").name == "gpt_oss"
    assert family_for(("LlavaOnevisionForConditionalGeneration",), "qwen2").name == "qwen2"
    assert family_for((), "qwen3_vl_text").name == "qwen3"
    assert family_for(("OlmoeForCausalLM",), "olmoe") is DEFAULT


@pytest.mark.parametrize("path", FIXTURE_CONFIGS, ids=lambda p: str(p.parent.relative_to(ROOT / "tests" / "fixtures")))
def test_a_fixture_config_resolves_to_one_family_by_either_key(path: Path) -> None:
    """For every fixture config, the family its architecture names and the family its model_type names agree when
    both are registered, so the fallback never contradicts the architecture."""
    config = json.loads(path.read_text(encoding="utf-8"))
    try:
        model = parse_config(config, name=path.parent.name)
    except BadConfig:  # a config kvplan refuses (its own tests pin that) has no family to check
        return
    by_type = family_for((), model.model_type)
    by_arch = next((family_for((a,), "") for a in model.architectures if family_for((a,), "") is not DEFAULT), None)
    if by_arch is not None and by_type is not DEFAULT:
        assert by_arch is by_type
    assert model.family is (by_arch or by_type)


def test_the_float16_rule_is_vllms_table() -> None:
    """vLLM 0.33 config/model.py:_FLOAT16_NOT_SUPPORTED_MODELS = {gemma2, gemma3, gemma3_text, glm4}."""
    assert model_types_where("float16_unsafe") == {"gemma2", "gemma3", "gemma3_text", "glm4"}


def test_qwen3_next_defaults_to_one_mtp_layer() -> None:
    """qwen3_next_mtp.py: `self.num_mtp_layers = getattr(config, "num_nextn_predict_layers", 1)`."""
    config = json.loads((ROOT / "tests/fixtures/corpus/configs/Qwen--Qwen3-Next-80B-A3B-Instruct-FP8/config.json")
                        .read_text(encoding="utf-8"))
    assert config.get("num_nextn_predict_layers") is None
    assert parse_config(config).facts.mtp_layers == 1
    assert parse_config({**config, "num_nextn_predict_layers": 3}).facts.mtp_layers == 3


def test_sglangs_state_rules_are_its_config_classes_model_types() -> None:
    """SGLang 0.5.23 keys the recurrent-state rule by the config class (configs/qwen3_next.py, qwen3_5.py whose text
    configs subclass Qwen3NextConfig, nemotron_h.py, granitemoehybrid.py, lfm2.py, mamba.py): each model type is
    claimed by one family only, and the table is exactly these."""
    claimed = [(t, f.sglang_state) for f in families() for t in f.sglang_state_model_types]
    assert len({t for t, _ in claimed}) == len(claimed)
    assert dict(claimed) == {
        "qwen3_next": "gdn", "qwen3_5": "gdn", "qwen3_5_text": "gdn", "qwen3_5_moe": "gdn", "qwen3_5_moe_text": "gdn",
        "nemotron_h": "nemotron_h", "granitemoehybrid": "granite", "lfm2": "short_conv", "lfm2_moe": "short_conv",
        "lfm2_vl": "short_conv", "mamba": "mamba1", "falcon_mamba": "mamba1"}


@pytest.mark.parametrize(("fixture", "rule"), [
    ("Qwen--Qwen3.5-0.8B", "gdn"), ("LiquidAI--LFM2-VL-1.6B", "short_conv"),
    ("ibm-granite--granite-4.0-h-1b", "granite"), ("Qwen--Qwen3-0.6B", ""),
])
def test_the_text_configs_model_type_picks_sglangs_state_rule(fixture: str, rule: str) -> None:
    """The rule follows the text config's own model_type (Qwen3.5's qwen3_5_text, LFM2-VL's text lfm2), not the
    architecture: SGLang builds the state from the text config class."""
    config = json.loads((ROOT / f"tests/fixtures/corpus/configs/{fixture}/config.json").read_text(encoding="utf-8"))
    assert parse_config(config).facts.sglang.state_rule == rule


def test_each_model_type_rule_is_listed_by_one_family() -> None:
    """A model type appears at most once per ModelTypeRules field, and each keyed table (towers, composite text
    configs, SGLang's vision defaults) names a model type once, so the index does not depend on file order."""
    for rule in ModelTypeRules._fields:
        listed = [t for f in families() for t in getattr(f.model_type_rules, rule)]
        assert len(listed) == len(set(listed)), rule
    for keys in ([t for f in families() for t, _ in f.vision_towers],
                 [t for f in families() for t, _, _ in f.composite_text_configs],
                 [t for f in families() for t, _, _ in f.sglang_vision_defaults]):
        assert len(keys) == len(set(keys))


def test_the_model_type_rules_are_the_tables_the_reader_held() -> None:
    """The rules moved from the reader (families/mla.py, recurrent.py, text_config.py, towers.py, spelt.py) with the
    same model types: is_deepseek_mla's list (transformers_utils/model_arch_config_convertor.py, with Mistral-Small-4's
    mistral4), DeepseekV2DecoderLayer's types, is_mm_prefix_lm's, SGLang's _HOPPER_QWEN3_VL_TYPES."""
    assert model_types_for("deepseek_mla") == {
        "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_mtp", "kimi_k2", "kimi_linear", "glm_moe_dsa",
        "longcat_flash", "pangu_ultra_moe", "mistral_large_3", "mistral4"}
    assert model_types_for("deepseek_decoder") == {"deepseek", "deepseek_v2", "deepseek_v3", "kimi_k2", "glm_moe_dsa",
                                                   "mistral_large_3"}
    assert model_types_for("lightning_attention") == {"minimax", "minimax_m1", "minimax_text_01"}
    assert model_types_for("mamba1") == {"mamba", "falcon_mamba"}
    assert model_types_for("mm_prefix_lm") == {"bagel", "gemma3", "molmo2", "moondream3", "paligemma"}
    assert model_types_for("sglang_hopper_qwen3_vl") == {"qwen3_vl", "qwen3_vl_moe"}
    assert composite_text_config("deepseek_vl_v2") == ("language_config", "deepseek_v2")
    assert sglang_vision_defaults("kimi_k25") == (27, 1152)
    assert vision_tower("mistral3") == "pixtral" and vision_tower("llama") == ""
    with pytest.raises(KeyError, match="'gpt_oss' is not a ModelTypeRules field"):
        model_types_for("gpt_oss")
