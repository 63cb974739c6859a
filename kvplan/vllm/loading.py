"""Loading a model as every command loads it: config.json from a folder or the Hub, read as vLLM reads it.

A config kvplan cannot read whose architecture vLLM does not serve either fails with vLLM's reason (the one a
user needs), not kvplan's (vllm/architectures.py:explain_bad_config). Hub models also bring the stored weight
bytes from their safetensors headers. The network is reached only through kvplan/model/hub.py; `progress`
is the caller's way to show a spinner while it is (the CLI's; a library caller passes none).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.model.hub import WeightsInfo
    from kvplan.model.spec import ModelSpec
    from kvplan.vllm.settings import ServeSettings

Progress = Callable[[str], AbstractContextManager[Any]]


@dataclass(frozen=True)
class LoadedModel:
    """A model and what its checkpoint says of its weights: `weights` from the Hub's safetensors headers (None for
    a local config), `note` when those headers were refused or disagree with the config's own count."""

    spec: ModelSpec
    weights: WeightsInfo | None = None
    note: str | None = None


def _step(progress: Progress | None, text: str) -> AbstractContextManager[Any]:
    return nullcontext() if progress is None else progress(text)


def load_model(source: str, revision: str | None = None, *, hf_overrides: Mapping[str, Any] | None = None,
               progress: Progress | None = None) -> ModelSpec:
    """The model `source` names (a Hub id, a folder holding config.json, or a config.json), as every command
    loads it; a config vLLM would refuse anyway fails with vLLM's reason (raises a KvplanError)."""
    from kvplan.errors import BadConfig
    from kvplan.model import hub
    from kvplan.model.config import ConfigOverrides
    from kvplan.vllm.architectures import explain_bad_config
    from kvplan.vllm.defaults import LATEST

    # a copy, except of overrides that apply themselves by another engine's rules (model/config.py)
    overrides = (hf_overrides if hf_overrides is None or isinstance(hf_overrides, ConfigOverrides)
                 else dict(hf_overrides))
    try:
        if not hub.is_hub_id(source):
            return (hub.load_local(source, hf_overrides=overrides) if not revision
                    else hub.load_model(source, revision, hf_overrides=overrides))
        with _step(progress, f"Fetching {source} config.json…"):
            return hub.load_model(source, revision, hf_overrides=overrides)
    except BadConfig as exc:
        explained = explain_bad_config(exc, LATEST)
        if explained is exc:
            raise
        raise explained from exc


def load_model_with_weights(source: str, revision: str | None = None, *,
                            hf_overrides: Mapping[str, Any] | None = None,
                            progress: Progress | None = None) -> LoadedModel:
    """The model and, for Hub models, the stored weight bytes from safetensors metadata (with a note when the
    headers were not used or disagree with the config's analytic count: model/weights.py)."""
    from kvplan.model import hub
    from kvplan.model.weights import metadata_disagreement

    spec = load_model(source, revision, hf_overrides=hf_overrides, progress=progress)
    if not hub.is_hub_id(source):
        return LoadedModel(spec)
    with _step(progress, f"Reading {source} safetensors metadata…"):
        weights, refused = hub.safetensors_metadata(source, revision)
    note = (f"safetensors metadata not used ({refused}); weights are the analytic count" if refused
            else metadata_disagreement(spec, weights.bytes) if weights else None)
    return LoadedModel(spec, weights, note)


def with_stored_weights(settings: ServeSettings, weights: WeightsInfo | None) -> ServeSettings:
    """`settings` with the checkpoint's stored bytes (`weights`: the Hub's safetensors metadata) as the weights to
    split per GPU, unless measured weights (--weights-memory, a plan's `measured`) replace kvplan's estimate or
    none were read (a local config: the analytic count). The one step every command planning a loaded model
    takes (fit, its sweep, check, diagnose --plan, calibrate, simulate --model, roofline), so they agree."""
    if weights is None or settings.measured.weights_bytes is not None:
        return settings
    return settings.updated(weights_total_bytes=weights.bytes)


def load_speculative_draft(config: Mapping[str, Any] | None) -> ModelSpec | None:
    """The EAGLE / EAGLE-3 draft or the draft model that `--speculative-config` names (`model`: a Hub id or a
    folder), parsed as the target is (never its code); None when it names none. A speculators-format
    checkpoint is read as vLLM reads it (its layer config: vllm/speculative.py)."""
    from kvplan.model import hub
    from kvplan.model.config import parse_config
    from kvplan.vllm.speculative import needs_draft_config, speculators_layer_config

    if config is None or not needs_draft_config(dict(config)):
        return None
    source = str(config["model"])
    revision = config.get("revision") if hub.is_hub_id(source) and isinstance(config.get("revision"), str) else None
    raw = hub.read_config(source, revision)
    flat = speculators_layer_config(raw)
    if flat is raw:
        return load_model(source, revision)
    return parse_config(flat, name=source)
