"""Rendering of a `kvplan check` report: one row per requirement (renderers never compute).

The cell formatters here are shared by the table, the GitHub step summary and the JUnit report, so
every format words a result the same way. Rich is imported only by `render_check`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.ci.checks import CheckReport, CheckResult

if TYPE_CHECKING:
    from rich.console import Group

_SIGN = {">=": "≥", "<=": "≤"}
_MINUS = "−"  # U+2212, as the rest of kvplan's output
_MAX_SHOWN_PCT = 1000.0  # a margin of 10× the threshold or more is shown without its percentage


def fmt_number(value: float, unit: str) -> str:
    """A measured or required value in its unit: whole requests/tokens, tok/s, ms, %."""
    if value < 0:
        return _MINUS + fmt_number(-value, unit)
    if unit in ("requests", "tokens", "blocks"):
        return f"{value:,.0f}"
    if unit == "tok/s":
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"
    if unit == "ms":
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:,.2f}"
    if unit == "%":
        return f"{value:,.1f}"
    return f"{value:,g}"


def _with_unit(text: str, unit: str) -> str:
    if not unit:
        return text
    return f"{text}{unit}" if unit == "%" else f"{text} {unit}"


def fmt_threshold(value: float) -> str:
    """A threshold as the plan gives it: `8`, `400,000`, `0.5`."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"


def fmt_required(c: CheckResult) -> str:
    """`≥ 8 requests`, `≤ 30 ms`, `starts`."""
    if isinstance(c.required, str):
        return c.required
    return f"{_SIGN[c.comparison]} {_with_unit(fmt_threshold(c.required), c.unit)}"


def fmt_measured(c: CheckResult) -> str:
    """The measured value with its unit; `—` when the load cannot run."""
    if c.measured is None:
        return "—"
    if isinstance(c.measured, str):
        return c.measured
    return _with_unit(fmt_number(c.measured, c.unit), c.unit)


def fmt_margin(c: CheckResult) -> str:
    """Signed slack, `+21 (+262.5%)` or `−3 (−37.5%)`; percentages get points: `+25.2 pts`."""
    if c.margin is None:
        return ""
    if c.margin == 0:
        return "0"
    text = fmt_number(abs(c.margin), c.unit)
    sign = "+" if c.margin >= 0 else _MINUS
    if c.unit == "%":
        return f"{sign}{text} pts"
    if c.margin_pct is None or abs(c.margin_pct) >= _MAX_SHOWN_PCT:
        return f"{sign}{text}"
    pct = abs(c.margin_pct)
    return f"{sign}{text} ({'+' if c.margin_pct >= 0 else _MINUS}{pct:,.0f}%)" if pct >= 10 else \
        f"{sign}{text} ({'+' if c.margin_pct >= 0 else _MINUS}{pct:.1f}%)"


def fmt_at(c: CheckResult) -> str:
    """The load a requirement is judged at: `32,768 tokens`, `64 × 8,192 tokens`, `batch 32 × 4,096 tokens`."""
    if c.batch is not None and c.context is not None:
        return f"batch {c.batch:,} × {c.context:,} tokens"
    if c.concurrency is not None and c.context is not None:
        return f"{c.concurrency:,} × {c.context:,} tokens"
    if c.context is not None:
        return f"{c.context:,} tokens"
    return ""


def fmt_result(c: CheckResult) -> str:
    """`pass` or `FAIL`."""
    return "pass" if c.passed else "FAIL"


def summary_line(r: CheckReport) -> str:
    """`All 8 requirements hold.` or `2 of 8 requirements fail.`"""
    if r.passed:
        return ("The requirement holds." if r.num_requirements == 1 else
                f"All {r.num_requirements} requirements hold.")
    if r.num_requirements == 1:
        return "The requirement fails."
    return f"{r.num_failed} of {r.num_requirements} requirements fail."


def render_check(r: CheckReport) -> Group:
    """A table per deployment (the load each requirement is judged at under its name), one line per
    failure saying why, then the summary. Fits 80 columns."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list[Text | Table] = []
    for d in r.deployments:
        t = Table(title=f"{d.name}: {d.model} on {d.num_gpus} × {d.gpu}", title_justify="left",
                  caption=d.headline,
                  caption_justify="left", box=box.SIMPLE_HEAD)
        t.add_column("requirement", no_wrap=True)
        t.add_column("required", justify="right")
        t.add_column("measured", justify="right")
        t.add_column("margin", justify="right")
        t.add_column("result", no_wrap=True)
        for c in d.checks:
            at = fmt_at(c)
            name = Text(c.requirement)
            if at:
                name.append(f"\n  {at}", style="dim")
            t.add_row(name, fmt_required(c), fmt_measured(c), fmt_margin(c),
                      Text(fmt_result(c), style="green" if c.passed else "bold red"))
        parts.append(t)
    for d, c in r.failures:
        parts.append(Text.assemble(("✗ ", "bold red"), f"{r.plan}:{c.line}: {d.name} {c.requirement}: {c.message}"))
    parts.append(Text(summary_line(r), style="bold green" if r.passed else "bold red"))
    return Group(*parts)
