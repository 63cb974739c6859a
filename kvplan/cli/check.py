"""`kvplan check PLAN.yaml`: capacity gates for CI. Exit 0 when every requirement holds, 1 when any fails,
2 on bad input (an invalid plan, an unknown model or GPU, …)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

if TYPE_CHECKING:
    from kvplan.ci.checks import CheckReport
    from kvplan.ci.plan import Plan

NAME = "check"
HELP = "Check a plan of deployments against capacity requirements (CI gate: exit 1 when one fails)."
EPILOG = """Examples:

  kvplan check examples/plan.yaml

  kvplan check plan.yaml --offline --format junit --output kvplan-junit.xml

  kvplan check plan.yaml --offline --format github
"""

Format = Literal["table", "json", "junit", "github"]
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
WORKSPACE_ENV = "GITHUB_WORKSPACE"
OFFLINE_ENV = "HF_HUB_OFFLINE"
TABLE_FILE_WIDTH = 140  # columns of the table when written to a file


def command(
    plan: Annotated[Path, typer.Argument(help="The plan: a YAML file of deployments and requirements.",
                                         show_default=False)],
    format_: Annotated[Format, typer.Option("--format", "-f", help="table, json, junit (XML) or github "
                                            "(annotations; also appends a Markdown summary to "
                                            "$GITHUB_STEP_SUMMARY when set).")] = "table",
    output: Annotated[str | None, typer.Option("--output", "-o", help="Write the report to this file "
                                               "(atomically; - is stdout) instead of stdout.",
                                               show_default=False)] = None,
    offline: Annotated[bool, typer.Option("--offline", help="Use only local paths and the Hugging Face cache "
                                          "(sets HF_HUB_OFFLINE=1 for the run).")] = False,
    gpus_file: Annotated[Path | None, typer.Option(
        "--gpus-file", help="YAML file of GPUs to add or override [default: the plan's gpus_file, else "
        "$KVPLAN_GPUS_FILE].", show_default=False)] = None,
    json_: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
) -> None:
    """Check every deployment of a plan against its requirements; exit 1 when one fails."""
    from kvplan.ci.plan import load_plan
    from kvplan.cli.exit_codes import EXIT_CHECK_FAILED

    fmt: Format = "json" if json_ else format_
    saved = os.environ.get(OFFLINE_ENV)
    if offline:  # before huggingface_hub is imported: it reads the variable once, at import
        os.environ[OFFLINE_ENV] = "1"
    try:
        loaded = load_plan(plan)
        report = _evaluate(loaded, gpus_file, quiet=fmt != "table" or output is not None)
    finally:
        if offline:
            _restore(OFFLINE_ENV, saved)
    _emit(report, fmt, output, _repo_path(plan))
    if not report.passed:
        raise typer.Exit(EXIT_CHECK_FAILED)


def _evaluate(plan: Plan, gpus_file: Path | None, *, quiet: bool) -> CheckReport:
    """Load each deployment's model (once per source) and GPU, and judge its requirements: the library's
    kvplan.check (kvplan/api.py), with the CLI's spinner and warnings."""
    from kvplan import api
    from kvplan.cli.common import progress, warn

    return api.check(plan, gpus_file, progress=progress(quiet), on_warning=warn)


def _emit(report: CheckReport, fmt: Format, output: str | None, repo_path: str) -> None:
    """Print the report in `fmt`, or write it to `output`; `github` also appends the step summary."""
    from kvplan.cli.console import err, out, print_json

    if fmt == "github":
        from kvplan.files import append_output
        from kvplan.render.github import render_annotations, render_step_summary

        summary_file = os.environ.get(STEP_SUMMARY_ENV)
        if summary_file:
            append_output(summary_file, render_step_summary(report, repo_path), what=f"${STEP_SUMMARY_ENV}")
        text = render_annotations(report, repo_path)
    elif fmt == "json":
        from kvplan.render.json import dumps

        text = dumps("check", report)
    elif fmt == "junit":
        from kvplan.render.junit import render_junit

        text = render_junit(report)
    else:
        from kvplan.render.check import render_check

        if output is None:
            out().print(render_check(report))
            return
        text = _plain_text(render_check(report))
    if output is None or output == "-":
        print_json(text)  # verbatim, no Rich markup or wrapping
        return
    from kvplan.files import write_output

    write_output(output, text, what="--output")
    from kvplan.render.check import summary_line

    err().print(f"{summary_line(report)} Report written to {output}.", markup=False, highlight=False, soft_wrap=True)


def _plain_text(renderable: object) -> str:
    import io

    from kvplan.cli.console import console

    buffer = io.StringIO()
    console(file=buffer, width=TABLE_FILE_WIDTH, color_system=None, highlight=False).print(renderable)
    return buffer.getvalue()


def _repo_path(plan: Path) -> str:
    """The plan's path as GitHub annotations need it: relative to $GITHUB_WORKSPACE (else the working
    directory) when it lies below it, else as given."""
    resolved = plan.resolve()
    for root in (os.environ.get(WORKSPACE_ENV), os.getcwd()):
        if root:
            try:
                return resolved.relative_to(Path(root).resolve()).as_posix()
            except ValueError:
                continue
    return str(plan)


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
