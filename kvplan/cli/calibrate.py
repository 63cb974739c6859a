"""`kvplan calibrate`: read a vLLM startup log and show the memory budget and settings it reveals."""
from __future__ import annotations

from typing import Annotated

import typer

NAME = "calibrate"
HELP = "Read a vLLM startup log (V0 or V1) and show its memory budget, KV capacity and settings."
EPILOG = (
    "Examples:\n\n"
    "  kvplan calibrate vllm.log\n\n"
    "  kubectl logs my-vllm-pod | kvplan calibrate -\n\n"
    "  kvplan calibrate vllm.log --json | jq .log.available_kv_bytes"
)


def command(
    logfile: Annotated[str, typer.Argument(metavar="LOGFILE", help="The server's startup log; - reads stdin.")],
    json_output: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Read a vLLM startup log and show the memory budget, KV capacity and settings it reveals."""
    from kvplan.calibration import CalibrationReport
    from kvplan.cli.console import out, print_json
    from kvplan.errors import ParseError
    from kvplan.render.calibrate import render_calibrate
    from kvplan.render.json import dumps
    from kvplan.startup_log import parse_startup_log

    log = parse_startup_log(_read(logfile))
    if not log.found:
        raise ParseError(f"no vLLM startup lines in {logfile}",
                         hint="give the server's log from its start, e.g. `kubectl logs POD > vllm.log`")
    # TODO(lead): once the fit module exists, predict the budget for log.model with log's settings and
    # fill comparison=kvplan.calibration.compare_terms(log, predicted_terms) and the `overrides` that
    # reproduce the server (see the helper's report for what calibrate needs from fit).
    report = CalibrationReport(source=logfile, log=log)
    if json_output:
        print_json(dumps("calibrate", report))
    else:
        out().print(render_calibrate(report))


def _read(logfile: str) -> str:
    """The log's text; undecodable bytes (progress bars, colours) are replaced, not fatal."""
    import sys
    from pathlib import Path

    from kvplan.errors import ParseError

    if logfile == "-":
        return sys.stdin.read()
    try:
        return Path(logfile).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ParseError(f"no such file: {logfile}") from None
    except OSError as exc:
        raise ParseError(f"cannot read {logfile}: {exc.strerror or exc}") from None
