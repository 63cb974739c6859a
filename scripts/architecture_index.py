"""Rewrite kvplan/model/architectures/_index.py from the FAMILY of each module in that folder (run it after adding
or changing a family; tests/test_architecture_registry.py fails while the index is stale).

Run: python scripts/architecture_index.py [--check]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvplan.model.architectures import families, index_source  # noqa: E402

INDEX = ROOT / "kvplan" / "model" / "architectures" / "_index.py"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 when _index.py is stale, write nothing")
    args = ap.parse_args()
    text = index_source(families())
    current = INDEX.read_text(encoding="utf-8") if INDEX.exists() else ""
    if args.check:
        if current != text:
            print(f"{INDEX.relative_to(ROOT)} is stale: run python scripts/architecture_index.py", file=sys.stderr)
            return 1
        return 0
    if current != text:
        INDEX.write_text(text, encoding="utf-8")
        print(f"wrote {INDEX.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
