"""A pasted server command line, split as the shell splits it: the leading `NAME=value` words, then the
program and its arguments. Shared by `vllm serve …` (vllm/command_line.py) and `python -m
sglang.launch_server …` (sglang/command_line.py). Pure: a string in, words out.
"""
from __future__ import annotations

import shlex
from collections.abc import Collection
from dataclasses import dataclass

from kvplan.errors import ParseError


@dataclass(frozen=True)
class PastedWords:
    """The words after the program, the engine's environment assignments, and the program word (or None)."""

    words: list[str]
    env: dict[str, str]
    program: str | None


def split_command(text: str, *, what: str, env_prefix: str, programs: Collection[str]) -> PastedWords:
    """Split `text` (backslash-newline continuations joined). Leading `NAME=value` words are the server's
    environment: the names starting with `env_prefix` are kept, anything else (a token, say) is dropped
    unread. A first word whose basename is in `programs` is taken off as the program."""
    try:
        words = shlex.split(text.replace("\\\n", " "))
    except ValueError as exc:
        raise ParseError(f"{what}: cannot split the command line: {exc}") from None
    env: dict[str, str] = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        variable, _, setting = words.pop(0).partition("=")
        if variable.startswith(env_prefix):
            env[variable] = setting
    program = None
    if words and words[0].rsplit("/", 1)[-1] in programs:
        program = words.pop(0).rsplit("/", 1)[-1]
    return PastedWords(words, env, program)
