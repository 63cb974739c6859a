"""Read a pasted `vllm serve MODEL --flag …` command line into kvplan settings.

Pure: a string in, a `VllmCommand` out. Flag names and aliases come from the table of vLLM's engine
arguments (kvplan/vllm/engine_args.py, after vllm/engine/arg_utils.py:EngineArgs.add_cli_args): `--flag value`,
`--flag=value`, underscores or dashes, `-tp`/`-pp`/`-dp` short forms, `--no-…` negations. Flags that do not
change the KV-cache plan are ignored and reported back, so the caller can say so on stderr.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kvplan.command_words import split_command
from kvplan.errors import ParseError
from kvplan.text import REDACTED
from kvplan.vllm.engine_args import ENGINE_ARGS

# Generated from the one table of vLLM's engine arguments (kvplan/vllm/engine_args.py): a new flag is a row
# there, not an entry here.
# vLLM flag (canonical, dashes, and vLLM's second long names) → the option's name. Values stay strings here.
VALUE_FLAGS: dict[str, str] = {
    flag: arg.name
    for arg in ENGINE_ARGS if arg.effect == "modelled" and arg.takes_value
    for flag in (arg.flag, *(a for a in arg.aliases if a.startswith("--")))
}
# Switches and their `--no-…` negations → (the option's name, the value they give).
BOOL_FLAGS: dict[str, tuple[str, bool]] = {
    flag: (arg.name, value)
    for arg in ENGINE_ARGS if arg.effect == "modelled" and not arg.takes_value
    for flag, value in ((arg.flag, True), *((("--no-" + arg.flag[2:], False),) if arg.negatable else ()))
}
# vLLM's dotted spelling of a JSON option (utils/argparse_utils.py:FlexibleArgumentParser.parse_args):
# `--limit-mm-per-prompt.image 0 --limit-mm-per-prompt.video.num_frames=8` is merged into one JSON object.
DOTTED_FLAGS = frozenset(arg.flag for arg in ENGINE_ARGS if arg.dotted)
SHORT_FLAGS = {alias: arg.flag for arg in ENGINE_ARGS for alias in arg.aliases if not alias.startswith("--")}
# vLLM boolean flags that take no value and do not affect the plan (so they must not swallow the next word).
IGNORED_BOOL_FLAGS = frozenset(arg.flag for arg in ENGINE_ARGS if arg.effect == "ignored" and not arg.takes_value)
# vLLM flags whose value is a secret: it never reaches `ignored`, which callers print.
SECRET_FLAGS = frozenset(arg.flag for arg in ENGINE_ARGS if arg.secret)
# Entry points whose next word is the sub-command or the model.
_PROGRAMS = ("vllm", "python", "python3")
# Options that do not change KV capacity or speed as kvplan models them (engine_args.py says why): accepted
# and ignored, so a real `vllm serve` line or --config file can be used as it is.
VLLM_IGNORED = frozenset(arg.name for arg in ENGINE_ARGS if arg.effect == "ignored")
# Options that change memory or speed in ways kvplan does not model: a warning says the plan ignores them.
VLLM_UNMODELLED: Mapping[str, str] = {arg.name: arg.note for arg in ENGINE_ARGS if arg.effect == "unmodelled"}


@dataclass(frozen=True)
class VllmCommand:
    """What a pasted vLLM command says about the deployment."""

    model: str | None
    options: dict[str, str | bool] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()  # flags (with values) that do not change the KV plan
    env: dict[str, str] = field(default_factory=dict)  # leading `VLLM_…=value` words (others, e.g. tokens, dropped)


def classify_ignored(words: Iterable[str]) -> tuple[list[str], list[str], list[str]]:
    """A command's unused flags as (truly ignored: no memory effect, changes memory but not modelled — with
    the reason —, unknown to kvplan)."""
    ignored, unmodelled, unknown = [], [], []
    for word in words:
        flag = word.split("=", 1)[0].split(" ", 1)[0]
        name = _canonical(flag)[2:].replace("-", "_") if flag.startswith("-") else ""
        if name in VLLM_UNMODELLED:
            unmodelled.append(f"{word}: {VLLM_UNMODELLED[name]}")
        elif name in VLLM_IGNORED or flag in IGNORED_BOOL_FLAGS:
            ignored.append(word)
        else:
            unknown.append(word)
    return ignored, unmodelled, unknown


def _canonical(flag: str) -> str:
    if flag in SHORT_FLAGS:
        return SHORT_FLAGS[flag]
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


def _takes_no_value(flag: str) -> bool:
    return flag in IGNORED_BOOL_FLAGS or flag.startswith(("--no-", "--enable-", "--disable-"))


def parse_vllm_command(text: str) -> VllmCommand:
    """Parse `vllm serve MODEL --flag v …` (also `python -m vllm.entrypoints.openai.api_server --model M …`,
    leading `ENV=value` words, backslash-newline continuations)."""
    pasted = split_command(text, what="--vllm-cmd", env_prefix="VLLM_", programs=_PROGRAMS)
    words, env = pasted.words, pasted.env  # vLLM's own variables; anything else (a token) is dropped
    module = words[1] if pasted.program is not None and words[:1] == ["-m"] and len(words) > 1 else ""
    if module.startswith("sglang") or (pasted.program is None and words[:1] and
                                       words[0].rsplit("/", 1)[-1] == "sglang"):
        # as sglang/command_line.py refuses a vllm line: its flags (--model-path, --tp) are not vLLM's
        raise ParseError("--vllm-cmd: this is an SGLang command line, not vLLM's",
                         hint='paste it with --sglang-cmd (kvplan fit --sglang-cmd "python -m sglang.launch_server '
                              '--model-path M …")')
    if pasted.program is not None:
        if pasted.program.startswith("python") and words[:1] == ["-m"]:
            words = words[2:]
        elif words[:1] == ["serve"]:
            words.pop(0)
    model: str | None = None
    options: dict[str, str | bool] = {}
    ignored: list[str] = []
    dotted: dict[str, dict[str, object]] = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-") or word == "-":
            if model is None:
                model = word
            else:
                ignored.append(word)
            continue
        flag, eq, inline = word.partition("=")
        head, dot, keys = flag.partition(".")  # vLLM turns underscores into dashes before the first dot only
        flag = _canonical(head) + dot + keys
        if dot and _canonical(head) in DOTTED_FLAGS:
            if not eq and i >= len(words):
                raise ParseError(f"--vllm-cmd: {flag} needs a value")
            value_text = inline if eq else words[i]
            i += 0 if eq else 1
            _merge_dotted(dotted, flag, value_text)
            continue
        if flag in BOOL_FLAGS:
            name, value = BOOL_FLAGS[flag]
            options[name] = value if not eq else inline.lower() not in ("0", "false", "no")
            continue
        if flag in VALUE_FLAGS:
            if eq:
                value_text = inline
            elif i < len(words):
                value_text = words[i]
                i += 1
            else:
                raise ParseError(f"--vllm-cmd: {flag} needs a value")
            name = VALUE_FLAGS[flag]
            if name == "model":
                model = value_text
            else:
                options[name] = value_text
            continue
        # A flag kvplan does not use: keep its value out of the way.
        secret = flag in SECRET_FLAGS
        if eq or _takes_no_value(flag):
            ignored.append(word if not eq else f"{flag}={REDACTED if secret else inline}")
        elif i < len(words) and not words[i].startswith("-"):
            ignored.append(f"{flag} {REDACTED if secret else words[i]}")
            i += 1
        else:
            ignored.append(flag)
    for flag, merged in dotted.items():  # vLLM appends them as JSON after the other arguments: they win
        options[VALUE_FLAGS[flag]] = json.dumps(merged)
    return VllmCommand(model, options, tuple(ignored), env)


def _merge_dotted(dotted: dict[str, dict[str, object]], flag: str, value_text: str) -> None:
    """One `--flag.key[.key…] value`: the value as JSON when it is JSON, else the text."""
    name, *keys = flag.split(".")
    try:
        value: object = json.loads(value_text)
    except json.JSONDecodeError:
        value = value_text
    node = dotted.setdefault(name, {})
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[keys[-1]] = value
