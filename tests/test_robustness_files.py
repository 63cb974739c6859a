"""Property-based fuzzing of every reader of a user file with what a path can be: a regular file of arbitrary
bytes, an empty file, a named FIFO (no writer), a folder, a device, a symlink to a FIFO or a device, a missing
path. Whatever it is, the command ends with exit 0, 1 or 2, and a refusal is one `Error: …` line — never a
hang, a traceback or kvplan's "internal error"."""
from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.cli.app import app
from tests.test_files import _READERS

_KINDS = ("bytes", "empty", "fifo", "folder", "dev-zero", "dev-null", "link-to-fifo", "link-to-device", "missing")


def _make(kind: str, content: bytes, where: Path) -> str:
    path = where / "config.json"  # a name every reader accepts (the config reader wants it in a folder)
    if kind == "bytes":
        path.write_bytes(content)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind in ("dev-zero", "dev-null"):
        return "/dev/zero" if kind == "dev-zero" else "/dev/null"
    elif kind == "link-to-fifo":
        os.mkfifo(where / "target")
        path.symlink_to(where / "target")
    elif kind == "link-to-device":
        path.symlink_to("/dev/zero")
    return str(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reader=st.sampled_from(sorted(_READERS)), kind=st.sampled_from(_KINDS),
       content=st.binary(max_size=512) | st.text(max_size=256).map(lambda t: t.encode("utf-8")))
def test_any_path_a_reader_is_given_ends_cleanly(reader: str, kind: str, content: bytes, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    path = _make(kind, content, tmp_path_factory.mktemp("in"))
    args, env = _READERS[reader](path)
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code in (0, 1, 2), (reader, kind, result.output)
    assert "internal error" not in result.output and "Traceback" not in result.output, (reader, kind)
    if result.exit_code == 2:
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
        assert len(errors) == 1, (reader, kind, result.stderr)
