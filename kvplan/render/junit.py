"""JUnit XML of a `kvplan check` report, in the shape CI systems ingest (Jenkins, GitLab, Azure, CircleCI,
the GitHub test-report actions): one <testsuite> per deployment, one <testcase> per requirement, a
<failure message="…"> for each requirement that fails. Built with xml.etree, so every value is escaped.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from kvplan.ci.checks import CheckReport, CheckResult
from kvplan.render.check import fmt_at, fmt_margin, fmt_measured, fmt_required
from kvplan.text import escape

SUITES_NAME = "kvplan check"


def _detail(plan: str, c: CheckResult) -> str:
    at = fmt_at(c)
    margin = fmt_margin(c)
    return (f"required {fmt_required(c)}{f' at {at}' if at else ''}, measured {fmt_measured(c)}"
            f"{f', margin {margin}' if margin else ''}\n{plan}:{c.line}: {c.key}")


def render_junit(r: CheckReport) -> str:
    """The report as a JUnit XML document (UTF-8 declaration included, newline-terminated)."""
    root = ET.Element("testsuites", name=SUITES_NAME, tests=str(r.num_requirements), failures=str(r.num_failed),
                      errors="0", skipped="0", time="0")
    for d in r.deployments:
        failed = sum(1 for c in d.checks if not c.passed)
        suite = ET.SubElement(root, "testsuite", name=d.name, tests=str(len(d.checks)), failures=str(failed),
                              errors="0", skipped="0", time="0", file=r.plan)
        props = ET.SubElement(suite, "properties")
        for name, value in (("model", d.model), ("gpu", d.gpu), ("num_gpus", str(d.num_gpus)),
                            ("startup", d.startup), ("max_model_len", str(d.max_model_len)),
                            ("max_num_seqs", str(d.max_num_seqs)), ("num_gpu_blocks", str(d.num_gpu_blocks)),
                            ("kv_cache_tokens", str(d.kv_cache_tokens))):
            ET.SubElement(props, "property", name=name, value=value)
        for c in d.checks:
            case = ET.SubElement(suite, "testcase", name=c.requirement, classname=d.name, file=r.plan,
                                 line=str(c.line), time="0")
            if not c.passed:
                failure = ET.SubElement(case, "failure", message=c.message, type=c.requirement)
                failure.text = _detail(r.plan, c)
            out = ET.SubElement(case, "system-out")
            out.text = c.message
    ET.indent(root, space="  ")
    # Names and messages come from the plan: no control character (invalid in XML 1.0, live in a CI log).
    return escape('<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n",
                  keep_newlines=True)
