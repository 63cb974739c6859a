"""The `kvplan` console script: the two everyday calls that need no option parser, without importing Typer.

Importing Typer (its copy of Click, `inspect`, `subprocess`…) and `typer.rich_utils` (which imports
`rich.markdown` and `rich.traceback`, hence markdown-it and Pygments) costs more than the rest of
`kvplan --help` or `kvplan size` together. So `main` answers these itself, and hands everything else to
the Typer app (`kvplan.cli.app.main`) untouched:

* `kvplan --help` / `kvplan -h`: the top-level help, drawn with the Rich renderables Typer's
  `rich_utils.rich_format_help` builds for the group (same console settings, same tables and panels);
* `kvplan --version`;
* `kvplan size <local folder or config.json>` with no options: the command's own code
  (`kvplan.cli.size_run`); if it raises anything, nothing has been printed yet and the Typer app runs the
  command again from the start, so errors and exit codes are the Typer path's by construction.

Every output is byte-identical to the Typer app's in every width and colour mode (tests/test_launch.py
compares them), and the help text is the text the Typer app is built from (kvplan.cli.commands).
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from kvplan import __version__
from kvplan.cli.commands import APP_HELP, COMMANDS, HELP_OPTION_HELP, VERSION_HELP

if TYPE_CHECKING:
    from rich.console import Console
    from rich.highlighter import RegexHighlighter

def main() -> None:
    """Console-script entry point."""
    _closed_streams()
    argv = sys.argv[1:]
    if argv in (["--help"], ["-h"]):
        quick: str | None = top_help()
    elif argv == ["--version"]:
        quick = f"kvplan {__version__}\n"
    else:
        quick = _size_quick(argv)
    if quick is not None and _write(quick):
        # Skip the interpreter's teardown of every imported module (about 6 ms): nothing runs at exit on
        # these paths, and stdout is flushed.
        os._exit(0)
    from kvplan.cli.app import main as typer_main

    typer_main()


def _closed_streams() -> None:
    """Standard streams the shell closed or cannot encode (kvplan.files.repair_standard_streams); a closed
    stdout is one error line and exit 2."""
    from kvplan.files import repair_standard_streams

    problem = repair_standard_streams()
    if problem is not None:
        sys.stderr.write(f"Error: {problem}\n")
        sys.stderr.flush()
        os._exit(2)


def _write(text: str) -> bool:
    """Write and flush `text` on stdout; False if that fails (a closed pipe, a full disk): the Typer path
    then runs, meets the same failure and reports it as it always does."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except Exception:
        return False
    return True


def _size_quick(argv: list[str]) -> str | None:
    """The output of `kvplan size <local model>` if that is all argv says and it succeeds, else None."""
    if len(argv) != 2 or argv[0] != "size" or argv[1].startswith("-"):
        return None
    from kvplan.model.hub import is_hub_id

    if is_hub_id(argv[1]):  # the network, spinners on stderr: the Typer path
        return None
    from kvplan.cli.console import out
    from kvplan.cli.size_run import size_report_for
    from kvplan.render.size import render_size

    try:
        report = size_report_for(argv[1])
        console = out()
        with console.capture() as captured:  # what `kvplan size` prints, with this terminal's settings
            console.print(render_size(report))
    except KeyboardInterrupt:
        sys.stderr.write("Interrupted\n")
        sys.exit(130)
    except Exception:  # the Typer path reports it (running the command again: nothing is printed yet)
        return None
    return captured.get()


# -- the top-level help, as typer.rich_utils.rich_format_help draws it ------------------------------------

def _typer_console() -> Console:
    """`typer.rich_utils._get_rich_console()`: the same theme, highlighter and terminal settings."""
    from rich.console import Console
    from rich.theme import Theme

    force_terminal = True if (os.getenv("GITHUB_ACTIONS") or os.getenv("FORCE_COLOR") or os.getenv("PY_COLORS")) \
        else None
    if os.getenv("_TYPER_FORCE_DISABLE_TERMINAL"):
        force_terminal = False
    width = os.getenv("TERMINAL_WIDTH")
    return Console(
        theme=Theme({"option": "bold cyan", "switch": "bold green", "negative_option": "bold magenta",
                     "negative_switch": "bold red", "types": "bold yellow", "types_sep": "dim",
                     "usage": "yellow"}),
        highlighter=_option_highlighter(),
        color_system="auto",
        force_terminal=force_terminal,
        width=int(width) if width else None,
        stderr=False,
    )


def _option_highlighter() -> RegexHighlighter:
    from rich.highlighter import RegexHighlighter

    class OptionHighlighter(RegexHighlighter):  # typer.rich_utils.OptionHighlighter
        highlights = [
            r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])",
            r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
            r"(?P<types>\<[^\>]+\>)",
            r"(?P<usage>Usage: )",
        ]

    return OptionHighlighter()


def _types_highlighter() -> RegexHighlighter:
    from rich.highlighter import RegexHighlighter

    class TypesHighlighter(RegexHighlighter):  # typer.rich_utils.TypesHighlighter
        highlights = [
            r"^(?P<types_sep>(\[|<))",
            r"(?P<types_sep>\|)",
            r"(?P<types_sep>(\]|>))(\.\.\.)?$",
        ]

    return TypesHighlighter()


# Typer's completion options (typer/main.py:get_install_completion_arguments), as it words them.
INSTALL_HELP = "Install completion for the current shell."
SHOW_HELP = "Show completion for the current shell, to copy it or customize the installation."


def top_help() -> str:
    """`kvplan --help`, byte for byte what Typer prints for the `kvplan` group on this terminal."""
    console = _typer_console()
    with console.capture() as captured:
        _print_top_help(console)
    return captured.get() + "\n"  # Click then echoes the (empty) plain-text help: one newline


def _print_top_help(console: Console) -> None:
    from rich.align import Align
    from rich.columns import Columns
    from rich.console import Group
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    hl = console.highlighter
    types_hl = _types_highlighter()

    def rich_text(text: str) -> Text:  # rich_utils._make_rich_text in "rich" markup mode (no ANSI in ours)
        return hl(Text.from_markup(text.strip(), style=""))

    console.print(Padding(hl("Usage: kvplan [OPTIONS] COMMAND [ARGS]..."), 1), style="bold")
    console.print(Padding(Align(Group(rich_text(APP_HELP)), pad=False), (0, 1, 1, 1)))

    options = Table(highlight=True, show_header=False, expand=True, box=None, show_lines=False, leading=0,
                    border_style=None, row_styles=None, pad_edge=False, padding=(0, 1))
    for long, short, help_ in (("--version", "", VERSION_HELP), ("--install-completion", "", INSTALL_HELP),
                               ("--show-completion", "", SHOW_HELP), ("--help", "-h", HELP_OPTION_HELP)):
        options.add_row(hl(long), hl(short), hl(""), hl(""),
                        types_hl(Text(style="bold yellow", overflow="fold")),
                        Columns([rich_text(help_)]))
    console.print(Panel(options, border_style="dim", title="Options", title_align="left"))

    commands = Table(highlight=False, show_header=False, expand=True, box=None, show_lines=False, leading=0,
                     border_style=None, row_styles=None, pad_edge=False, padding=(0, 1))
    commands.add_column(style="bold cyan", no_wrap=True, width=max(len(name) for name in COMMANDS))
    commands.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for name, help_ in COMMANDS.items():
        commands.add_row(Text(name), rich_text(help_))
    console.print(Panel(commands, border_style="dim", title="Commands", title_align="left"))
