"""Read a pasted `python -m sglang.launch_server --model-path M --flag …` line (or `sglang serve …`).

Pure: a string in, an `SglangCommand` out. Flags resolve as SGLang's argparse parser resolves them
(engine_args.resolve_flag: exact names, aliases, unique prefixes such as `--tp`); values stay strings;
flags that do not change the KV plan are returned in `ignored` so the caller can say so.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.command_words import split_command
from kvplan.errors import ParseError
from kvplan.sglang.engine_args import MODELLED, UNMODELLED, resolve_flag
from kvplan.text import REDACTED

_PROGRAMS = ("python", "python3", "sglang")
_SECRET_ENDINGS = ("key", "token", "secret", "password")  # --api-key, --admin-api-key: never echoed
_MODULES = ("sglang.launch_server", "sglang.entrypoints.http_server", "sglang.serve")


@dataclass(frozen=True)
class SglangCommand:
    """What a pasted SGLang command says: options by SGLang `dest`, values as typed."""

    model: str | None
    options: dict[str, str | bool] = field(default_factory=dict)
    ignored: tuple[str, ...] = ()  # flags that do not change the KV plan
    unmodelled: tuple[str, ...] = ()  # "flag: why" for flags that change memory in ways not modelled
    env: dict[str, str] = field(default_factory=dict)  # leading SGLANG_…= words
    revision: str | None = None  # --revision: the Hub revision SGLang loads the config of (server_args.revision)


def parse_sglang_command(text: str) -> SglangCommand:
    """Parse `[ENV=v …] python -m sglang.launch_server --model-path M --tp 8 …` or `sglang serve …`."""
    pasted = split_command(text, what="--sglang-cmd", env_prefix="SGLANG_", programs=_PROGRAMS)
    words, env = pasted.words, pasted.env
    model: str | None = None
    revision: str | None = None
    if words and words[0].rsplit("/", 1)[-1] == "vllm":
        raise ParseError("--sglang-cmd: this is a vllm command line, not SGLang's",
                         hint="paste it with --vllm-cmd (kvplan fit --vllm-cmd \"vllm serve M …\")")
    if (prog := pasted.program) is not None:
        if prog.startswith("python") and words[:1] == ["-m"] and len(words) > 1:
            if words[1] not in _MODULES:
                raise ParseError(f"--sglang-cmd: python -m {words[1]} is not an SGLang server",
                                 hint="paste `python -m sglang.launch_server --model-path M …`")
            words = words[2:]
        elif words[:1] == ["serve"]:
            words.pop(0)
            if words and not words[0].startswith("-"):  # cli/serve.py:_normalize_positional_model_path
                model = words.pop(0)
    options: dict[str, str | bool] = {}
    ignored: list[str] = []
    unmodelled: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("--"):
            if i == 1:  # before any flag: argparse has no positional argument (later ones may be nargs values)
                raise ParseError(f"--sglang-cmd: unrecognized arguments: {word}",
                                 hint="SGLang 0.5.23's launch_server would refuse it too (the model is --model-path M)")
            ignored.append(word)
            continue
        flag, eq, inline = word.partition("=")
        found = resolve_flag(flag)
        if found is None:
            raise ParseError(f"--sglang-cmd: unrecognized arguments: {flag}",
                             hint="SGLang 0.5.23's launch_server would refuse it too")
        dest, takes_value = found
        value: str | bool = True
        if eq and not takes_value:  # argparse's store_true action refuses `--switch=value`
            raise ParseError(f"--sglang-cmd: argument {flag}: ignored explicit argument {inline!r}")
        if takes_value:
            if eq:
                value = inline
            elif i < len(words):
                value = words[i]
                i += 1
            else:
                raise ParseError(f"--sglang-cmd: argument {flag}: expected one argument")
        if dest == "model_path":
            model = str(value)
        elif dest == "revision":
            revision = str(value)
        elif dest in MODELLED:
            options[dest] = value
        elif dest in UNMODELLED:
            unmodelled.append(f"{flag}: {UNMODELLED[dest]}")
        elif not takes_value:
            ignored.append(flag)
        else:
            ignored.append(f"{flag} {REDACTED if dest.endswith(_SECRET_ENDINGS) else value}")
    if env.get("SGLANG_USE_AITER", "").lower() in ("true", "1"):
        # utils/common.py:get_bool_env_var, which layers/attention/dsa/utils.py reads it with (true / 1 only)
        options["use_aiter"] = True
    return SglangCommand(model, options, tuple(ignored), tuple(unmodelled), env, revision)
