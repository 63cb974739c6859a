"""`kvplan check PLAN.yaml`: capacity gates for CI. Exit 0 when every requirement holds, 1 when any fails,
2 on bad input (an invalid plan, an unknown model or GPU, …)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

if TYPE_CHECKING:
    from kvplan.ci.checks import CheckReport
    from kvplan.ci.plan import Deployment, Plan

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
    """Load each deployment's model (once per source) and GPU, and judge its requirements."""
    from kvplan.ci.checks import check_report, evaluate_deployment
    from kvplan.cli.common import load_model
    from kvplan.cli.console import err
    from kvplan.errors import KvplanError
    from kvplan.hardware.gpus import get_gpu
    from kvplan.model.spec import ModelSpec

    models: dict[tuple[str, str | None, str], ModelSpec] = {}
    results = []
    for dep in plan.deployments:
        for warning in dep.warnings:
            err().print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
        try:
            key = (dep.model_source, dep.revision, repr(sorted((dep.hf_overrides or {}).items())))
            if key not in models:
                models[key] = load_model(dep.model_source, dep.revision, quiet=quiet,
                                         hf_overrides=dict(dep.hf_overrides) if dep.hf_overrides else None)
        except KvplanError as exc:
            raise dep.locate(exc, "model") from None
        try:
            gpu = get_gpu(dep.gpu, gpus_file if gpus_file is not None else plan.gpus_file)
        except KvplanError as exc:
            raise dep.locate(exc, "gpu") from None
        results.append(evaluate_deployment(_with_draft(dep), models[key], gpu))
    return check_report(plan.path, results)


def _with_draft(dep: Deployment) -> Deployment:
    """The deployment with the speculative draft its `speculative_config` names loaded, as `fit` loads it."""
    from dataclasses import replace

    from kvplan.cli.fit import load_speculative_draft
    from kvplan.errors import KvplanError

    spec = dep.settings.speculative_config
    try:
        draft = load_speculative_draft(dict(spec) if spec is not None else None)
    except KvplanError as exc:
        raise dep.locate(exc, "vllm") from None
    return dep if draft is None else replace(dep, settings=replace(dep.settings, speculative_draft=draft))


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
