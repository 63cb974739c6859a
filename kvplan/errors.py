"""Typed domain errors. The CLI maps each to one line on stderr and exit code 2."""
from __future__ import annotations

from collections.abc import Iterable, Sequence


class KvplanError(Exception):
    """Base class of every error a user can cause or fix (bad input, environment)."""

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint


class InvalidParameter(KvplanError):
    """A flag or setting outside what vLLM accepts (utilization, TP, lengths, sizes)."""


class BadConfig(KvplanError):
    """A config.json that is malformed, incomplete, or of a structure kvplan does not understand.

    `architectures` is what the config declared, when it was readable: the caller can then say whether vLLM
    serves that architecture at all, which is the reason a user needs first.
    """

    architectures: tuple[str, ...] = ()
    # The first decoder layer whose token mixer kvplan cannot size and that has no attention module (a
    # recurrent block): vLLM's Transformers backend refuses such a layer too (see vllm/architectures.py).
    layer_without_attention: int | None = None


class NotServed(KvplanError):
    """An architecture the chosen vLLM version does not serve (its model registry has no entry for it)."""


class ModelNotFound(KvplanError):
    """No such model: unknown Hub repo, missing local path."""


class RevisionNotFound(KvplanError):
    """The Hub repo exists but not at that revision."""


class GatedRepo(KvplanError):
    """The repo needs an accepted licence and a token (HF_TOKEN)."""


class OfflineCacheMiss(KvplanError):
    """HF_HUB_OFFLINE is set and the file is not in the local cache."""


class NetworkError(KvplanError):
    """The Hub or a metrics server could not be reached, timed out or answered badly."""


class UnknownGpu(KvplanError):
    """A GPU id or alias not in the catalog."""

    def __init__(self, name: str, suggestions: Sequence[str]) -> None:
        hint = f"did you mean {', '.join(suggestions)}?" if suggestions else "run `kvplan gpus` for the list"
        super().__init__(f"unknown GPU {name!r}", hint=hint)
        self.suggestions = list(suggestions)


class ParseError(KvplanError):
    """A metrics exposition, startup log, trace or plan file that cannot be read."""


def close_matches(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Suggestions for a mistyped name (the `difflib` rule the hf CLI uses)."""
    import difflib

    return difflib.get_close_matches(word.lower(), [c.lower() for c in choices], n=n, cutoff=0.5)
