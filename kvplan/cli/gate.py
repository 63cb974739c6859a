"""`kvplan-check-plans PLAN...`: `kvplan check` over several plans, the worst exit code wins.

The entry of the pre-commit hook (`.pre-commit-hooks.yaml`: pre-commit passes the staged plan files) and
of the composite GitHub Action (`action.yml`: the `plans` input). Each plan is checked in this process by
`kvplan check` itself, with the same options; exit 2 (bad input) outranks 1 (a failed requirement),
which outranks 0. `--junit DIR` also writes each plan's JUnit report to DIR/<plan stem>.xml.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from kvplan.cli.exit_codes import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK

FORMATS = ("table", "json", "junit", "github")
# The Action passes its inputs as environment variables, never spliced into a shell script (a plan name
# or a format from a pull request cannot run code); an option on the command line wins over its variable.
ENV_PLANS, ENV_FORMAT, ENV_OFFLINE, ENV_JUNIT = "KVPLAN_PLANS", "KVPLAN_FORMAT", "KVPLAN_OFFLINE", "KVPLAN_JUNIT"
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"", "0", "false", "no", "off"}


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one `Error: …` line and exit 2, like every kvplan error (argparse
    prints its usage block first)."""

    def error(self, message: str) -> NoReturn:
        from kvplan.cli.app import one_line

        sys.stderr.write(one_line(f"Error: {message} (see '{self.prog} -h')") + "\n")
        sys.exit(EXIT_BAD_INPUT)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kvplan-check-plans", description=__doc__.splitlines()[0])
    parser.add_argument("plans", nargs="*", help=f"plan files (default: the lines of ${ENV_PLANS})")
    parser.add_argument("--format", "-f", choices=FORMATS, help=f"as kvplan check --format (default: "
                        f"${ENV_FORMAT}, else table)")
    parser.add_argument("--offline", action="store_true", default=None,
                        help=f"as kvplan check --offline (default: ${ENV_OFFLINE} true/1)")
    parser.add_argument("--gpus-file", help="as kvplan check --gpus-file")
    parser.add_argument("--junit", metavar="DIR", help=f"also write DIR/<plan stem>.xml (JUnit) per plan "
                        f"(default: ${ENV_JUNIT})")
    return parser


def _from_env(ns: argparse.Namespace) -> str | None:
    """Fill what the command line left out from the environment; the problem with a variable, or None."""
    env = os.environ
    ns.plans = list(ns.plans) or [line.strip() for line in env.get(ENV_PLANS, "").splitlines() if line.strip()]
    ns.format = ns.format or env.get(ENV_FORMAT, "").strip() or "table"
    if ns.format not in FORMATS:
        return f"${ENV_FORMAT}={ns.format[:40]!r} is not one of {', '.join(FORMATS)}"
    if ns.offline is None:
        raw = env.get(ENV_OFFLINE, "").strip().lower()
        if raw not in _TRUE | _FALSE:
            return f"${ENV_OFFLINE}={raw[:40]!r} is not true or false"
        ns.offline = raw in _TRUE
    ns.junit = ns.junit or env.get(ENV_JUNIT, "").strip() or None
    return None


def _check(args: list[str]) -> int:
    """`kvplan check ARGS` in this process: its exit code."""
    from kvplan.cli.app import app

    try:
        app(["check", *args], prog_name="kvplan")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    return EXIT_OK


def _worst(codes: Sequence[int]) -> int:
    """2 outranks 1 outranks 0; any other code (130: interrupted) is passed on as it is."""
    for code in codes:
        if code not in (EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT):
            return code
    return max(codes, default=EXIT_OK)


def main(argv: Sequence[str] | None = None) -> int:
    """Check each plan; return the worst exit code (no plans: 0, nothing to check)."""
    ns = _parser().parse_args(argv)
    problem = _from_env(ns)
    if problem is not None:
        sys.stderr.write(f"Error: {problem}\n")
        return EXIT_BAD_INPUT
    plans = ns.plans
    if ns.junit and plans:
        try:
            os.makedirs(ns.junit, exist_ok=True)
        except OSError as exc:  # a file of that name, no permission: not a traceback
            sys.stderr.write(f"Error: --junit: cannot make the folder {ns.junit}: {exc.strerror or exc}\n")
            return EXIT_BAD_INPUT
    common = [*(["--offline"] if ns.offline else []), *(["--gpus-file", ns.gpus_file] if ns.gpus_file else [])]
    codes = []
    for plan in plans:
        codes.append(_check([plan, "--format", ns.format, *common]))
        if ns.junit and codes[-1] != EXIT_BAD_INPUT:
            stem = os.path.splitext(os.path.basename(plan))[0] or "plan"
            codes.append(_check([plan, "--format", "junit", "--output", os.path.join(ns.junit, f"{stem}.xml"),
                                 *common]))
    return _worst(codes)


def console_main() -> None:
    """Console-script entry point (`kvplan-check-plans`)."""
    sys.exit(main())
