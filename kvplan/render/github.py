"""GitHub Actions output of a `kvplan check` report.

* Workflow-command annotations, one `::error file=…,line=…,title=…::message` per failing requirement,
  pointing at the requirement's line in the plan; GitHub shows them on the pull request's diff.
  Escaping follows @actions/core (`toCommandValue`/`escapeData`/`escapeProperty`): `%`, CR and LF in
  the message; also `:` and `,` in property values.
* A Markdown step summary (tables per deployment, the failures' reasons), which the CLI appends to
  the file `$GITHUB_STEP_SUMMARY` names.
"""
from __future__ import annotations

from kvplan.ci.checks import CheckReport
from kvplan.render.check import fmt_at, fmt_margin, fmt_measured, fmt_required, summary_line
from kvplan.text import escape

TITLE_PREFIX = "kvplan check"


def escape_data(text: str) -> str:
    """A workflow command's message (@actions/core escapeData)."""
    return escape(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def escape_property(text: str) -> str:
    """A workflow command's property value (@actions/core escapeProperty)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_annotations(r: CheckReport, file: str) -> str:
    """One `::error` line per failing requirement, then a plain summary line.

    `file` is the plan's path relative to the repository root, as GitHub needs it."""
    lines = []
    for d, c in r.failures:
        title = f"{TITLE_PREFIX}: {d.name} {c.requirement}"
        margin = fmt_margin(c)
        measured = f"required {fmt_required(c)}, measured {fmt_measured(c)}{f', margin {margin}' if margin else ''}: "
        message = f"{c.requirement} failed: {measured if c.unit else ''}{c.message}"
        lines.append(f"::error file={escape_property(file)},line={c.line},title={escape_property(title)}::"
                     f"{escape_data(message)}")
    lines.append(f"{TITLE_PREFIX} {r.plan}: {summary_line(r)}")
    return escape("\n".join(lines) + "\n", keep_newlines=True)  # names from the plan: no control character


def _cell(text: str) -> str:
    """A Markdown table cell: pipes escaped, no line breaks."""
    return text.replace("|", "\\|").replace("\n", " ") or " "


def render_step_summary(r: CheckReport, file: str) -> str:
    """The Markdown job summary: the verdict, a table per deployment, and why each failure fails."""
    mark = "✅" if r.passed else "❌"
    out = [f"## {mark} {TITLE_PREFIX}: {summary_line(r)}", "", f"Plan: `{file}`", ""]
    for d in r.deployments:
        out += [f"### {'✅' if d.passed else '❌'} {d.name}", "",
                f"`{d.model}` on {d.num_gpus} × `{d.gpu}`: {d.headline.replace(' · ', ', ')}", "",
                "| requirement | at | required | measured | margin | result |",
                "|---|---|--:|--:|--:|---|"]
        for c in d.checks:
            result = "✅ pass" if c.passed else "❌ **FAIL**"
            out.append(f"| `{c.requirement}` | {_cell(fmt_at(c))} | {_cell(fmt_required(c))} | "
                       f"{_cell(fmt_measured(c))} | {_cell(fmt_margin(c))} | {result} |")
        out.append("")
    if r.failures:
        out += ["### Why", ""]
        out += [f"- **{d.name}** `{c.requirement}` ({file}:{c.line}): {c.message}" for d, c in r.failures]
        out.append("")
    return escape("\n".join(out) + "\n", keep_newlines=True)
