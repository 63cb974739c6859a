"""Steps several commands share: loading a model (with a spinner on stderr while on the network)."""
from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.model.hub import WeightsInfo
    from kvplan.model.spec import ModelSpec


def _spinner(text: str, quiet: bool) -> object:
    from kvplan.cli.console import err

    console = err()
    if quiet or not console.is_terminal:
        return nullcontext()
    return console.status(text, spinner="dots")


def load_model(source: str, revision: str | None = None, *, quiet: bool = False,
               hf_overrides: dict[str, Any] | None = None) -> ModelSpec:
    """Load a model; a spinner shows on stderr (never stdout, never under --json) while on the Hub.

    A config kvplan cannot read whose architecture vLLM does not serve either fails with vLLM's reason
    (the one the user needs), not kvplan's."""
    from kvplan.errors import BadConfig
    from kvplan.model import hub

    try:
        if not hub.is_hub_id(source):
            return (hub.load_local(source, hf_overrides=hf_overrides) if not revision
                    else hub.load_model(source, revision, hf_overrides=hf_overrides))
        with _spinner(f"Fetching {source} config.json…", quiet):  # type: ignore[attr-defined]
            return hub.load_model(source, revision, hf_overrides=hf_overrides)
    except BadConfig as exc:
        from kvplan.vllm.architectures import explain_bad_config
        from kvplan.vllm.defaults import LATEST

        explained = explain_bad_config(exc, LATEST)
        if explained is exc:
            raise
        raise explained from exc


def load_model_with_weights(
    source: str, revision: str | None = None, *, quiet: bool = False, hf_overrides: dict[str, Any] | None = None
) -> tuple[ModelSpec, WeightsInfo | None]:
    """The model and, for Hub models, the stored weight bytes from safetensors metadata."""
    from kvplan.model import hub

    spec = load_model(source, revision, quiet=quiet, hf_overrides=hf_overrides)
    if not hub.is_hub_id(source):
        return spec, None
    with _spinner(f"Reading {source} safetensors metadata…", quiet):  # type: ignore[attr-defined]
        weights, refused = hub.safetensors_metadata(source, revision)
    from kvplan.cli.console import err
    from kvplan.model.weights import metadata_disagreement

    note = (f"safetensors metadata not used ({refused}); weights are the analytic count" if refused
            else metadata_disagreement(spec, weights.bytes) if weights else None)
    if note:
        err().print(f"Warning: {note}", markup=False, soft_wrap=True)
    return spec, weights
