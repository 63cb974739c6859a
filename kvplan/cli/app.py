"""The Typer application and the one error boundary every command runs inside.

Exit codes: 0 ok, 1 a capacity check failed (`kvplan check` only), 2 bad input or environment.
Heavy modules (huggingface_hub, rich tables, yaml, prometheus_client) are imported inside commands.
"""
from __future__ import annotations

import functools
import os
import re
import sys
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import typer
from typer.core import TyperGroup

from kvplan import __version__
from kvplan.cli.exit_codes import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK

F = TypeVar("F", bound=Callable[..., Any])


def _scrub(text: str) -> str:
    """Remove any Hugging Face token from text that is about to be printed."""
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        token = os.environ.get(var)
        if token and len(token) >= 4:
            text = text.replace(token, "***")
    return text


# Everything a terminal (or Python's str.splitlines) takes for a line break.
_LINE_BREAKS = re.compile(r"\s*[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]+\s*")


def one_line(text: str) -> str:
    """`text` as one terminal line: line breaks (with the blanks around them) become one space, tabs a
    space, and any other control character its escape (`\\x1b`), so none can move the cursor or colour
    the terminal."""
    text = _LINE_BREAKS.sub(" ", text).replace("\t", " ")
    return "".join(ch if unicodedata.category(ch) != "Cc" else ascii(ch)[1:-1] for ch in text)


def fail(message: str, hint: str | None = None) -> typer.Exit:
    """Print `Error: message (hint)` on one stderr line and return the exit-2 exception to raise."""
    line = f"Error: {message}" + (f" ({hint})" if hint else "")
    sys.stderr.write(one_line(_scrub(line)) + "\n")
    return typer.Exit(EXIT_BAD_INPUT)


def boundary(fn: F) -> F:
    """Run a command so that no traceback reaches the user and exit codes keep their meaning."""
    from kvplan.errors import KvplanError

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except KvplanError as exc:
            if os.environ.get("KVPLAN_DEBUG") == "1":
                _print_traceback()
            raise fail(str(exc), exc.hint) from None
        except KeyboardInterrupt:
            sys.stderr.write("Interrupted\n")
            raise typer.Exit(130) from None
        except BrokenPipeError:
            # `kvplan … | head`: the reader went away; not an error of ours.
            raise typer.Exit(EXIT_OK) from None
        except Exception as exc:  # the last line of defence: a bug must not look like exit 1
            if os.environ.get("KVPLAN_DEBUG") == "1":
                _print_traceback()
            raise fail(
                f"internal error: {type(exc).__name__}: {exc}",
                "this is a kvplan bug; rerun with KVPLAN_DEBUG=1 and report the traceback",
            ) from None

    return wrapper  # type: ignore[return-value]


def _print_traceback() -> None:
    import traceback

    sys.stderr.write(_scrub(traceback.format_exc()))


class _KvplanGroup(TyperGroup):
    """The top-level command group: Click's usage errors (a flag's type or choice, an unknown command or
    flag) are one stderr line `Error: … (see 'kvplan fit -h')` and exit 2, like every kvplan error,
    instead of Typer's usage block and boxed message."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, windows_expand_args: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            # Not standalone: Click's errors reach us; a typer.Exit (ours, --help, --version) is returned.
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except typer.TyperException as exc:  # Click's exceptions derive from it
            # `kvplan` or `kvplan simulate` alone: the help is printed already (Typer tests the name too).
            if type(exc).__name__ != "NoArgsIsHelpError":
                ctx = getattr(exc, "ctx", None)
                command = getattr(ctx, "command_path", None)
                fail(exc.format_message(), f"see '{command} -h'" if command else None)
            sys.exit(EXIT_BAD_INPUT)
        except typer.Abort:
            sys.stderr.write("Aborted!\n")
            sys.exit(EXIT_CHECK_FAILED)
        sys.exit(code if isinstance(code, int) else EXIT_OK)


app = typer.Typer(
    cls=_KvplanGroup,
    name="kvplan",
    help="KV-cache sizing and capacity planning for vLLM: how much fits, will it start, how fast.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # never show locals (a token could be one)
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)
simulate_app = typer.Typer(
    help="Simulate vLLM's block pool (prefix caching) and scheduler step by step.",
    no_args_is_help=True,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kvplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """KV-cache sizing and capacity planning for vLLM: how much fits, will it start, how fast."""


def _register() -> None:
    from kvplan.cli import calibrate, check, diagnose, fit, gpus, roofline, simulate, size

    for module in (size, fit, roofline, gpus, diagnose, calibrate, check):
        app.command(module.NAME, help=module.HELP, epilog=module.EPILOG)(boundary(module.command))
    for name, func, help_, epilog in simulate.COMMANDS:
        simulate_app.command(name, help=help_, epilog=epilog)(boundary(func))
    app.add_typer(simulate_app, name="simulate")


_register()


def main() -> None:
    """Console-script entry point."""
    app(prog_name="kvplan")
