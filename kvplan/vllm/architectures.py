"""Whether vLLM serves a model, as vLLM decides it before any flag, with vLLM's own words when it does not.

Data: each minor release's model registry (`model_executor/models/registry.py`, every `_*_MODELS` table;
kvplan/vllm/architectures.json from tools/vllm_registry/compact.py), and what vLLM 0.33 accepts beyond it
(kvplan/vllm/transformers_backend.json from tools/vllm_registry/transformers_backend.py, transformers 5.19).

The order is vLLM 0.33's: the config must load without custom code (transformers' AutoConfig; vLLM's own
config classes), its quantization method must be one vLLM knows (config/model.py:_verify_quantization),
and the architecture must be in the registry or fall back to the Transformers backend
(registry.py:_ModelRegistry.resolve_model_cls, _try_resolve_transformers) — else `_raise_for_unsupported`.
The Transformers-backend fallback and the custom-code and quantization lists are vLLM 0.33's; for older
versions they are assumed the same (their transformers pins were older: a class new in 5.x may be missing).
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from kvplan.errors import BadConfig, KvplanError, NotServed
from kvplan.model.spec import ModelSpec
from kvplan.vllm.defaults import VllmVersion, parse_vllm_version_unchecked


def _packaged(name: str) -> str:
    """A data file installed next to this module. Read directly, not with importlib.resources, whose
    imports (tempfile, zipfile, shutil…) cost `kvplan size` about 10 ms of its start-up."""
    with open(os.path.join(os.path.dirname(__file__), name), encoding="utf-8") as f:
        return f.read()


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(_packaged("architectures.json"))
    return table


@lru_cache(maxsize=1)
def _backend() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(_packaged("transformers_backend.json"))
    table["compatible"] = frozenset(table["compatible"])
    table["model_types"] = frozenset(table["transformers_model_types"]) | frozenset(table["vllm_model_types"])
    table["text_config_wrappers"] = frozenset(table["text_config_wrappers"])
    table["causal_lm_model_types"] = frozenset(table["causal_lm_model_types"])
    return table


def _key(v: VllmVersion) -> tuple[int, int]:
    return (v.major, v.minor)


def served_runs(architecture: str) -> list[tuple[str, str]]:
    """The vLLM minor versions serving `architecture`, as inclusive (first, last) runs; [] if none did."""
    return [(a, b) for a, b in _table()["served"].get(architecture, [])]


def known_version(version: VllmVersion) -> bool:
    """Whether the table covers this vLLM minor version."""
    return f"{version.major}.{version.minor}" in _table()["releases"]


def is_served(architecture: str, version: VllmVersion) -> bool:
    """Whether `version`'s registry has an entry for `architecture`."""
    v = _key(version)
    return any(_key(parse_vllm_version_unchecked(a)) <= v <= _key(parse_vllm_version_unchecked(b))
               for a, b in served_runs(architecture))


def _runs_text(runs: list[tuple[str, str]]) -> str:
    return ", ".join(a if a == b else f"{a}–{b}" for a, b in runs)


def not_served_reason(architectures: Sequence[str], version: VllmVersion) -> str | None:
    """None when vLLM `version` serves one of `architectures` (or kvplan cannot tell: no architectures, or a
    version outside the table); else vLLM's reason in one line, with the versions that did serve it."""
    if not architectures or not known_version(version) or any(is_served(a, version) for a in architectures):
        return None
    previous = _table()["previously_supported"]
    for arch in architectures:
        runs = served_runs(arch)
        if arch in previous and runs and _key(parse_vllm_version_unchecked(runs[-1][1])) < _key(version):
            return (f"Model architecture {arch} was supported in vLLM until v{previous[arch]}, and is not supported "
                    f"anymore (vLLM {version}; served by vLLM {_runs_text(runs)})")
    elsewhere = [f"{a}: vLLM {_runs_text(served_runs(a))}" for a in architectures if served_runs(a)]
    where = f"; served by {'; '.join(elsewhere)}" if elsewhere else "; no vLLM release from 0.8 on serves it"
    return f"Model architectures {list(architectures)} are not supported for now (vLLM {version}{where})"


def needs_custom_code(model: ModelSpec) -> bool:
    """Its config names the repository's own code and neither transformers nor vLLM has a config class for
    its model_type: vLLM loads it only with --trust-remote-code."""
    return model.custom_code and model.config_model_type not in _backend()["model_types"]


def via_transformers_backend(architectures: Sequence[str]) -> bool:
    """Outside the registry, vLLM falls back to its Transformers backend for a transformers class that
    supports the attention interface (a model whose layers cannot all dispatch through it is then refused
    while it is built: see serving_refusal)."""
    return bool(architectures) and architectures[0] in _backend()["compatible"]


def serving_refusal(model: ModelSpec, version: VllmVersion, *, allow_custom_code: bool = False) -> str | None:
    """vLLM's reason for refusing this model outright, or None when it would load it."""
    if needs_custom_code(model) and not allow_custom_code:
        return (f"The repository {model.name} contains custom code which must be executed to correctly load the "
                "model (vLLM: pass --trust-remote-code; kvplan itself only ever reads config.json)")
    mt = model.config_model_type
    if mt and mt not in _backend()["model_types"] and not model.custom_code:
        # transformers' AutoConfig.from_pretrained (vLLM 0.33 pins transformers 5.x)
        return (f"The checkpoint you are trying to load has model type `{mt}` but Transformers does "
                f"not recognize this architecture (transformers {_backend()['transformers']}, as vLLM "
                f"{_backend()['vllm']} pins it)")
    methods = _backend()["quantization_methods"]
    if model.quant_method is not None and model.quant_method not in methods:
        return (f"Unknown quantization method: {model.quant_method} (vLLM {_backend()['vllm']} knows "
                f"{', '.join(methods)})")
    if model.custom_code and allow_custom_code and model.config_model_type not in _backend()["model_types"]:
        return None  # the repository's own model class: vLLM serves what it defines
    if (text_type := _unnamed_text_model(model)) is not None:
        return (f"No model architectures are specified (vLLM {_backend()['vllm']} builds {model.architectures[0]}'s "
                f"language model from text_config, whose model_type `{text_type}` names no causal-LM class in "
                f"transformers {_backend()['transformers']})")
    # Decoder layers with no attention module: a recurrent / convolution mixer, or none at all.
    no_attention = [layer.index for layer in model.layers if layer.kind in ("mamba", "mlp_only")]
    if via_transformers_backend(model.architectures) and not any(is_served(a, version)
                                                                        for a in model.architectures):
        if no_attention:
            return transformers_backend_refusal(no_attention[0], model.facts.layer_type_names,
                                                model.architectures[0], version)
        return None
    return not_served_reason(model.architectures, version)


def transformers_backend_refusal(index: int, layer_types: Sequence[str] | None, architecture: str,
                                 version: VllmVersion) -> str:
    """vLLM's refusal of a model its Transformers backend would serve but one of whose decoder layers has no
    module dispatching through the Transformers attention interface: models/transformers/base.py
    `_create_attention_instances`, for each layer on the rank `if i not in self.attention_fusers: raise
    ValueError(f"Layer {layer} does not dispatch through the Transformers attention interface and vLLM has no
    other way to handle it.")`, `layer` being `f"{i} ({layer_types[i]})"` when text_config has layer_types."""
    layer = (f"{index} ({layer_types[index]})" if layer_types is not None and index < len(layer_types)
             else str(index))
    return (f"Layer {layer} does not dispatch through the Transformers attention interface and vLLM has no other "
            f"way to handle it (vLLM {version} would serve {architecture} through its Transformers backend)")


def _unnamed_text_model(model: ModelSpec) -> str | None:
    """The text_config model_type vLLM cannot name a class for, when the wrapper builds its language model
    from text_config alone (config/vllm.py:with_hf_config fills `architectures` only from transformers'
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES; models/registry.py then raises "No model architectures are specified")."""
    text_type = model.unnamed_text_model_type
    if not text_type or not model.architectures or model.architectures[0] not in _backend()["text_config_wrappers"]:
        return None  # named, or no nested text model
    return None if text_type in _backend()["causal_lm_model_types"] else text_type


def explain_bad_config(exc: BadConfig, version: VllmVersion) -> KvplanError:
    """A config kvplan cannot read: when vLLM would refuse it anyway, vLLM's reason (the one a user needs)."""
    if not exc.architectures and str(exc).startswith("config.json has no model_type and no architectures"):
        return exc
    if exc.architectures and not any(is_served(a, version) for a in exc.architectures) and \
            via_transformers_backend(exc.architectures) and exc.layer_without_attention is not None:
        return NotServed(transformers_backend_refusal(exc.layer_without_attention, None, exc.architectures[0],
                                                      version))
    if exc.architectures and not any(is_served(a, version) for a in exc.architectures) and not \
            via_transformers_backend(exc.architectures):
        reason = not_served_reason(exc.architectures, version)
        if reason is not None:
            return NotServed(reason)
    return exc


def served_quantization_methods() -> tuple[str, ...]:
    """vLLM 0.33's QUANTIZATION_METHODS (config/model.py:_verify_quantization accepts only these)."""
    return tuple(_backend()["quantization_methods"])
