"""Regenerate the command outputs embedded in README.md and docs/*.md, or check that they are current.

Each block in those files looks like

    <!-- kvplan: size tests/fixtures/configs/Qwen--Qwen2.5-7B -->
    ```text
    …the command's real output…
    ```
    <!-- /kvplan -->

Run `python scripts/readme.py` to rewrite every block, `python scripts/readme.py --check` (CI) to fail
when one is stale. Commands run offline, at a fixed width and without colour, so output is reproducible.
"""
from __future__ import annotations

import argparse
import difflib
import functools
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def documents() -> list[Path]:
    """The files whose blocks are generated: README.md, then docs/*.md by name."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


BLOCK = re.compile(r"(<!-- kvplan: (?P<args>.*?) -->\n)(?P<body>.*?)(<!-- /kvplan -->)", re.S)
WIDTH = "100"


@functools.cache  # README.md and docs/ may show the same command
def run(args: str) -> str:
    """The command's stdout (and its exit code when not 0), as a user at a 100-column terminal sees it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVPLAN_", "FORCE_COLOR"))}
    env.update(COLUMNS=WIDTH, LINES="50", NO_COLOR="1", TERM="dumb", HF_HUB_OFFLINE="1", PYTHONIOENCODING="utf-8")
    proc = subprocess.run([sys.executable, "-m", "kvplan", *shlex.split(args)], capture_output=True, text=True,
                          env=env, cwd=ROOT, check=False, timeout=300)
    text = "\n".join(line.rstrip() for line in proc.stdout.rstrip().splitlines())
    if proc.returncode not in (0, 1):
        raise SystemExit(f"readme: `kvplan {args}` failed ({proc.returncode}): {proc.stderr.strip()}")
    suffix = f"\n# exit status {proc.returncode}" if proc.returncode else ""
    return f"$ kvplan {args}\n{text}{suffix}"


def render(readme: str) -> str:
    def replace(m: re.Match[str]) -> str:
        return f"{m.group(1)}```text\n{run(m.group('args'))}\n```\n{m.group(4)}"

    return BLOCK.sub(replace, readme)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if a file's blocks are not current")
    args = ap.parse_args()
    stale = []
    for path in documents():
        name = path.relative_to(ROOT).as_posix()
        old = path.read_text(encoding="utf-8")
        new = render(old)
        if new == old:
            continue
        if args.check:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                       name, f"{name} (regenerated)"))
            stale.append(name)
        else:
            path.write_text(new, encoding="utf-8")
    if stale:
        print(f"{', '.join(stale)}: stale: run `python scripts/readme.py`", file=sys.stderr)
        return 1
    if args.check:
        print(f"{', '.join(p.relative_to(ROOT).as_posix() for p in documents())}: current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
