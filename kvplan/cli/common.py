"""Steps several commands share: loading a model (kvplan/vllm/loading.py, the library's own loader) with a
spinner on stderr while on the network, and its warning printed."""
from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from kvplan.model.hub import WeightsInfo
    from kvplan.model.spec import ModelSpec


def _spinner(text: str, quiet: bool) -> AbstractContextManager[Any]:
    from kvplan.cli.console import err

    console = err()
    if quiet or not console.is_terminal:
        return nullcontext()
    return console.status(text, spinner="dots")


def progress(quiet: bool) -> Callable[[str], AbstractContextManager[Any]]:
    """The spinner the loaders show while on the Hub (none under --json or off a terminal)."""
    return lambda text: _spinner(text, quiet)


def notice(text: str, kind: Literal["Warning", "Note"] = "Warning") -> None:
    """The one way a command tells the user something beside its answer: one `Warning: …` (the answer ignores or
    may be wrong about something) or `Note: …` (how it was reached) line on stderr, never stdout, so --json stays
    clean; the text is printed as given (no Rich markup read from it, no wrapping) and scrubbed of secrets."""
    from kvplan.cli.console import err

    err().print(f"{kind}: {text}", markup=False, highlight=False, soft_wrap=True)


def warn(text: str) -> None:
    """A `Warning: …` notice (see notice)."""
    notice(text, "Warning")


def load_model(source: str, revision: str | None = None, *, quiet: bool = False,
               hf_overrides: dict[str, Any] | None = None) -> ModelSpec:
    """Load a model as the library does (a config vLLM refuses fails with vLLM's reason); a spinner shows on
    stderr (never stdout, never under --json) while on the Hub."""
    from kvplan.vllm import loading

    return loading.load_model(source, revision, hf_overrides=hf_overrides, progress=progress(quiet))


def load_model_with_weights(
    source: str, revision: str | None = None, *, quiet: bool = False, hf_overrides: dict[str, Any] | None = None
) -> tuple[ModelSpec, WeightsInfo | None]:
    """The model and, for Hub models, the stored weight bytes from safetensors metadata (its note a warning)."""
    from kvplan.vllm import loading

    loaded = loading.load_model_with_weights(source, revision, hf_overrides=hf_overrides, progress=progress(quiet))
    if loaded.note:
        warn(loaded.note)
    return loaded.spec, loaded.weights
