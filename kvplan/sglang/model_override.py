"""SGLang 0.5.23's `--json-model-override-args`: a JSON object applied to the model's Hugging Face config before
anything reads it (paths relative to `sglang/srt/`).

`configs/model_config.py:ModelConfig.__init__` json.loads the flag and hands it to
`utils/hf_transformers/config.py:get_config`, which applies it key by key to the loaded config:

- a dict value whose key holds a nested PretrainedConfig (`text_config`, `vision_config`, …) updates that
  sub-config one level deep (`current.update(value)`: each of its keys set whole);
- `rope_scaling` / `rope_parameters` with a dict value over a dict is merged (`{**current, **value}`: "partial
  overrides keep rope_theta"); in transformers 5.19 `rope_scaling` is a property over `rope_parameters`, so the
  two spellings are one attribute;
- any other key is `setattr` whole (a new key included).

Every ModelConfig SGLang builds from the server arguments takes the same override (`ModelConfig.from_server_args`:
the target's, and the draft's with `is_draft_model=True`), so it changes the layers, heads, head sizes, sliding
window, context length and rope scaling the pool is sized from. Pure: text in, overrides out (a
kvplan/model/config.py:ConfigOverrides, applied where the config is read).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kvplan.errors import BadConfig, ParseError
from kvplan.model.architectures import model_types_for
from kvplan.model.config import NESTED_CONFIGS, ConfigOverrides

FLAG = "--json-model-override-args"
# kvplan's bounds on the flag (SGLang has none): a config override is a few keys, at most a sub-config deep.
MAX_TEXT_CHARS = 64 * 1024
MAX_DEPTH = 8  # nested objects/arrays
MAX_VALUES = 4096  # keys and array items, all levels
# outer keys those classes keep (not the text model's): what an outer override still changes
_OUTER_KEYS = frozenset({"architectures", "model_type", "vision_config", "quantization_config", "auto_map",
                         "torch_dtype", "dtype"})
_ROPE_KEYS = ("rope_scaling", "rope_parameters")  # get_config's merge; one attribute in transformers 5.19


def _check_shape(value: object, depth: int, budget: list[int]) -> None:
    if depth > MAX_DEPTH:
        raise ParseError(f"{FLAG}: nested deeper than {MAX_DEPTH} levels (kvplan's bound on a config override)")
    items = list(value.values()) if isinstance(value, dict) else value if isinstance(value, list) else []
    budget[0] -= len(items)
    if budget[0] < 0:
        raise ParseError(f"{FLAG}: more than {MAX_VALUES} keys and items (kvplan's bound on a config override)")
    for item in items:
        _check_shape(item, depth + 1, budget)


def parse_model_override_args(text: object) -> dict[str, Any]:
    """The flag's JSON object (a plan file's mapping as it is), bounded; ParseError in one line otherwise.
    `{}` (SGLang's default) is an empty override."""
    if isinstance(text, Mapping):
        parsed: object = dict(text)
    else:
        raw = str(text)
        if len(raw) > MAX_TEXT_CHARS:
            raise ParseError(f"{FLAG}: {len(raw):,} characters, more than kvplan reads ({MAX_TEXT_CHARS:,})")
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ParseError(f"{FLAG}: not valid JSON ({exc.msg} at character {exc.pos})") from None
        except RecursionError:
            raise ParseError(f"{FLAG}: nested deeper than {MAX_DEPTH} levels "
                             "(kvplan's bound on a config override)") from None
    if not isinstance(parsed, dict):
        # get_config calls .items() on it: SGLang fails with AttributeError on a non-empty array or value
        raise ParseError(f"{FLAG} must be a JSON object, got {type(parsed).__name__}",
                         hint="SGLang applies it key by key to the model's config")
    _check_shape(parsed, 1, [MAX_VALUES])
    return parsed


class SglangOverrides(ConfigOverrides):
    """--json-model-override-args as utils/hf_transformers/config.py:get_config applies it (module docstring),
    on the config.json kvplan reads."""

    def apply_to(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The config with the overrides applied, key by key (after SGLang's own reading of a raw state-spaces
        config: raw_mamba_refusal)."""
        refusal = raw_mamba_refusal(config)
        if refusal is not None:
            raise BadConfig(refusal)
        out = dict(config)
        # transformers 5.19 built text_config from the flat keys (ModelTypeRules.sglang_flat_text_config: "Hub
        # configs are saved as flat dicts so we pop some of kwargs to init `TextConfig`")
        flat_text = config.get("model_type") in model_types_for("sglang_flat_text_config") and not isinstance(
            config.get("text_config"), Mapping)
        for key, value in self.items():
            current = out.get(key)
            if flat_text and key == "text_config" and isinstance(value, Mapping):
                out.update(value)  # the text config transformers built from the flat keys: updated in place
            elif flat_text and key not in _OUTER_KEYS:
                continue  # set on the outer config; hf_text_config (the built text_config) never reads it
            elif isinstance(value, Mapping) and key in NESTED_CONFIGS and isinstance(current, Mapping):
                out[key] = {**current, **value}  # PretrainedConfig.update: one level, each key set whole
            elif isinstance(value, Mapping) and key in _ROPE_KEYS:
                names = (key, *(k for k in _ROPE_KEYS if k != key))  # one attribute in transformers 5.19
                base: Mapping[str, Any] = next((out[k] for k in names if isinstance(out.get(k), Mapping)), {})
                for name in names:
                    if name == key or name in out:
                        out[name] = {**base, **value}
            else:
                out[key] = value
        return out


def raw_mamba_refusal(config: Mapping[str, Any]) -> str | None:
    """utils/hf_transformers/config.py:_try_load_raw_mamba_config, which HfModelConfigParser.parse runs before
    AutoConfig: a config with `d_model` and `ssm_cfg` and neither model_type nor architectures (the raw
    state-spaces/mamba* repositories) becomes a Mamba-1 MambaConfig (MambaForCausalLM) whatever ssm_cfg's
    `layer` says. For a Mamba-2 one (`"layer": "Mamba2"`) SGLang so sizes a Mamba-1 state pool (the oracle, for
    state-spaces/mamba2-130m: d_state 16, 2,048 tokens, 1,024 requests) for a checkpoint whose mixer weights are
    Mamba-2's: refused here. A raw Mamba-1 config is not modelled yet (kvplan reads only the -hf conversions)."""
    if config.get("model_type") or config.get("architectures") or "d_model" not in config \
            or "ssm_cfg" not in config:
        return None
    layer = config["ssm_cfg"].get("layer") if isinstance(config["ssm_cfg"], Mapping) else None
    if layer == "Mamba2":
        return ("SGLang 0.5.23 reads this raw state-spaces Mamba-2 config as Mamba-1 "
                "(utils/hf_transformers/config.py:_try_load_raw_mamba_config builds MambaConfig / MambaForCausalLM "
                "and ignores ssm_cfg.layer): it would size a Mamba-1 state pool for Mamba-2 weights; not planned")
    return ("SGLang 0.5.23 reads a raw state-spaces config as Mamba-1 (utils/hf_transformers/config.py:"
            "_try_load_raw_mamba_config); kvplan does not model that reading yet (use the -hf conversion)")


def deployment_config_overrides(text: str | None) -> SglangOverrides:
    """What SglangDeployment.json_model_override_args does to the model's config, SGLang's config reader's own
    steps first (an empty override still applies them)."""
    return SglangOverrides(parse_model_override_args(text) if text else {})
