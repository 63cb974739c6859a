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
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup

from kvplan import __version__
from kvplan.cli.commands import APP_HELP, COMMANDS, HELP_OPTION_NAMES, VERSION_HELP
from kvplan.cli.exit_codes import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK

if TYPE_CHECKING:
    from types import ModuleType

    from typer import _click as click  # Typer's own copy of Click, whose classes its commands are

F = TypeVar("F", bound=Callable[..., Any])


def _scrub(text: str) -> str:
    """Remove secrets (the HF token, hf_token / api_key values, URL credentials) from text to be printed."""
    from kvplan.text import scrub

    return scrub(text)


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
            result = fn(*args, **kwargs)
            sys.stdout.flush()  # a full disk or a closed stdout is reported here, not at exit
            return result
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
            bad_input = _bad_input(exc)
            if bad_input is not None:
                raise fail(bad_input) from None
            raise fail(
                f"internal error: {type(exc).__name__}: {exc}",
                "this is a kvplan bug; rerun with KVPLAN_DEBUG=1 and report the traceback",
            ) from None

    return wrapper  # type: ignore[return-value]


def _bad_input(exc: BaseException) -> str | None:
    """What an exception that no kvplan bug raises says about the input or the environment, or None.

    Bytes that are not text, a number too large to compute with (a 400-digit size) or to even read (more
    than Python's 4,300 digits), data nested or sized past memory, and a failed write to standard output
    are bad input or a bad environment (exit 2), not internal errors."""
    if isinstance(exc, UnicodeError):
        return f"the input holds bytes that are not UTF-8 text ({exc})"
    if isinstance(exc, OverflowError):
        return f"the input holds a number too large to compute with ({exc})"
    if isinstance(exc, ValueError) and "digits" in str(exc) and "limit" in str(exc):
        return "the input holds a number of more than 4,300 digits"
    if isinstance(exc, MemoryError):
        return "the input is larger than fits in memory"
    if isinstance(exc, RecursionError):
        return "the input is nested too deeply to read"
    if isinstance(exc, OSError):
        _silence_stdout()
        return f"cannot write standard output: {exc.strerror or exc}"
    return None


def _silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null, so the interpreter's last flush of a full or closed
    standard output does not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no descriptor (a test runner's buffer)
        pass


def _print_traceback() -> None:
    import traceback

    sys.stderr.write(_scrub(traceback.format_exc()))


def _command_module(name: str) -> ModuleType:
    """The module of a command, imported now. Written out, not importlib, so that import scans see each."""
    if name == "size":
        from kvplan.cli import size
        return size
    if name == "fit":
        from kvplan.cli import fit
        return fit
    if name == "roofline":
        from kvplan.cli import roofline
        return roofline
    if name == "gpus":
        from kvplan.cli import gpus
        return gpus
    if name == "diagnose":
        from kvplan.cli import diagnose
        return diagnose
    if name == "calibrate":
        from kvplan.cli import calibrate
        return calibrate
    if name == "check":
        from kvplan.cli import check
        return check
    if name == "simulate":
        from kvplan.cli import simulate
        return simulate
    raise KeyError(name)


def command_typer(name: str) -> typer.Typer:
    """A Typer app with just the command `name` registered (for `simulate`, its group of subcommands),
    as `kvplan` itself registers it; imports the command's module."""
    module = _command_module(name)
    sub = typer.Typer(help=COMMANDS[name], no_args_is_help=True) if name == "simulate" else typer.Typer()
    if name == "simulate":
        for sub_name, func, help_, epilog in module.COMMANDS:
            sub.command(sub_name, help=help_, epilog=epilog)(boundary(func))
    else:
        sub.command(module.NAME, help=module.HELP, epilog=module.EPILOG)(boundary(module.command))
    return sub


def _build_command(name: str) -> click.Command:
    """The Click command for `name`, built exactly as Typer builds a command registered on `app`."""
    from typer.main import get_command_from_info, get_group_from_info
    from typer.models import TyperInfo

    sub = command_typer(name)
    if name == "simulate":
        return get_group_from_info(TyperInfo(sub, name=name), pretty_exceptions_short=app.pretty_exceptions_short,
                                   rich_markup_mode=app.rich_markup_mode, suggest_commands=app.suggest_commands)
    return get_command_from_info(sub.registered_commands[0], pretty_exceptions_short=app.pretty_exceptions_short,
                                 rich_markup_mode=app.rich_markup_mode)


class _Placeholder(TyperCommand):
    """A command not built yet: its name and one-line help, enough for the group's help to list it."""


class _KvplanGroup(TyperGroup):
    """The top-level command group. Commands are built on first use (see COMMANDS). Click's usage errors
    (a flag's type or choice, an unknown command or flag) are one stderr line `Error: … (see 'kvplan fit
    -h')` and exit 2, like every kvplan error, instead of Typer's usage block and boxed message."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._listing = False
        for name, help_ in COMMANDS.items():
            self.commands.setdefault(name, _Placeholder(name=name, help=help_))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self.commands.get(cmd_name)
        if isinstance(command, _Placeholder) and not self._listing:
            command = self.commands[cmd_name] = _build_command(cmd_name)
        return command

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True  # the list of commands needs their names and help lines only
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

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
    help=APP_HELP,
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,  # never show locals (a token could be one)
    rich_markup_mode="rich",
    context_settings={"help_option_names": HELP_OPTION_NAMES},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kvplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help=VERSION_HELP),
) -> None:
    """KV-cache sizing and capacity planning for vLLM: how much fits, will it start, how fast."""


def main() -> None:
    """Console-script entry point."""
    app(prog_name="kvplan")
