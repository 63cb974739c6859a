"""The one bounded reader (kvplan.files) and the one writer: every reader of a user file goes through it,
and each refuses devices, FIFOs, binary/UTF-16 text, oversized files and overlong lines in one line, exit 2."""
from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan import files
from kvplan.cli.app import app

PACKAGE = Path(__file__).resolve().parent.parent / "kvplan"
ROOT = PACKAGE.parent
CONFIG = ROOT / "tests/fixtures/configs/meta-llama--Meta-Llama-3.1-8B"
EXAMPLES = ROOT / "examples"


def one_error_line(stderr: str) -> str:
    """The one `Error: …` line a refused input prints (and nothing else on stderr)."""
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    return lines[0]

# Calls that open or read a file. Only kvplan/files.py may make them on a user's path; the packaged data
# (importlib.resources) and the network (urlopen) are read elsewhere.
_FILE_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "fdopen", "readlines"}
_ALLOWED = {
    ("kvplan/files.py", "*"),
    ("kvplan/hardware/gpus.py", "read_text"),  # files("kvplan.hardware").joinpath(PACKAGED_FILE)
    ("kvplan/vllm/architectures.py", "read_text"),  # files("kvplan.vllm").joinpath("architectures.json")
    ("kvplan/vllm/architectures.py", "open"),  # _packaged: a data file next to the module
    ("kvplan/sglang/engine_args.py", "read_text"),  # files("kvplan.sglang").joinpath("launch_server_flags.json")
    ("kvplan/sglang/architectures.py", "open"),  # the packaged sglang/model_classes.json, next to the module
    ("kvplan/model/families/text_config.py", "open"),  # the packaged model/text_config_defaults.json
    ("kvplan/cli/app.py", "open"),  # os.open(os.devnull): a full stdout silenced after its error
}


def _file_calls(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            via_files = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "files" \
                and name in {"read_text", "read_lines"}
            if name in _FILE_CALLS and not via_files:
                found.append((node.lineno, name))
        elif isinstance(node, ast.Attribute) and node.attr == "stdin" and isinstance(node.value, ast.Name) \
                and node.value.id == "sys":
            found.append((node.lineno, "sys.stdin"))
    return found


def test_every_reader_and_writer_of_a_users_file_goes_through_kvplan_files() -> None:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if (rel, "*") in _ALLOWED:
            continue
        for line, name in _file_calls(path):
            if (rel, name) not in _ALLOWED:
                bad.append(f"{rel}:{line}: {name}(…)")
    assert not bad, "file access outside kvplan/files.py:\n  " + "\n  ".join(bad)


# Each reader of a user file: the command line that reads FILE (and the extra environment).
_READERS: dict[str, Callable[[str], tuple[list[str], dict[str, str]]]] = {
    "config": lambda f: (["size", f], {}),
    "plan": lambda f: (["check", f, "--offline"], {}),
    "gpus-file": lambda f: (["gpus", "--gpus-file", f], {}),
    "KVPLAN_GPUS_FILE": lambda f: (["gpus"], {"KVPLAN_GPUS_FILE": f}),
    "metrics": lambda f: (["diagnose", f], {}),
    "startup-log": lambda f: (["calibrate", f], {}),
    "trace": lambda f: (["simulate", "serve", "--trace", f, "--num-gpu-blocks", "100"], {}),
    "empirical": lambda f: (["simulate", "serve", "--prompt-len", f"empirical:{f}", "--num-gpu-blocks", "100",
                             "--num-requests", "2"], {}),
}


def _run(reader: str, path: str) -> str:
    args, env = _READERS[reader](path)
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 2, (reader, result.output)
    return one_error_line(result.stderr)


@pytest.mark.parametrize("reader", _READERS)
def test_a_device_is_refused_at_once(reader: str) -> None:
    line = _run(reader, "/dev/zero")
    assert "/dev/zero" in line and "not a regular file (a device or socket)" in line


@pytest.mark.parametrize("reader", _READERS)
def test_a_named_fifo_is_refused_without_waiting_for_a_writer(reader: str, tmp_path: Path) -> None:
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    assert "not a regular file (a FIFO)" in _run(reader, str(fifo))


@pytest.mark.parametrize("reader", _READERS)
@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "deployments: []\n".encode("utf-16")],
                         ids=["binary", "utf-16"])
def test_binary_or_utf16_text_is_bad_input(reader: str, content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "config.json" if reader == "config" else tmp_path / "in.txt"
    path.write_bytes(content)
    assert "not UTF-8 text (binary data or UTF-16;" in _run(reader, str(path))


_KINDS = {"config": "CONFIG", "plan": "PLAN", "gpus-file": "GPUS", "KVPLAN_GPUS_FILE": "GPUS",
          "metrics": "METRICS", "startup-log": "STARTUP_LOG", "trace": "TRACE", "empirical": "LENGTHS"}


@pytest.mark.parametrize("reader", _READERS)
def test_a_file_over_its_kinds_cap_is_refused_with_the_cap(reader: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    kind = getattr(files, _KINDS[reader])
    monkeypatch.setattr(files, _KINDS[reader], dataclasses.replace(kind, max_bytes=4096, max_line=1024))
    path = tmp_path / "config.json" if reader == "config" else tmp_path / "in.txt"
    path.write_text("1\n" * 3000)
    assert f"is more than a {kind.what} may be (4 KiB)" in _run(reader, str(path))


@pytest.mark.parametrize("reader", ["plan", "gpus-file", "metrics", "startup-log", "trace", "empirical"])
def test_a_line_over_the_cap_is_refused_with_its_number(reader: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    kind = getattr(files, _KINDS[reader])
    monkeypatch.setattr(files, _KINDS[reader], dataclasses.replace(kind, max_line=100))
    path = tmp_path / "in.txt"
    first = {"trace": '{"prompt_len": 10}', "empirical": "10"}.get(reader, "# a")
    path.write_text(first + "\n" + "#" * 500 + "\n")
    line = _run(reader, str(path))
    assert str(path) in line and ":2: a line longer than 100 bytes" in line


def test_a_pipe_through_stdin_is_read_where_documented() -> None:
    log = (EXAMPLES / "vllm-startup.log").read_text(encoding="utf-8")
    result = CliRunner().invoke(app, ["calibrate", "-"], input=log)
    assert result.exit_code == 0, result.output


def test_streamed_lines_keep_memory_to_the_longest_line(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"x" * 1000 + b"\n" + b"y\r\n" * 5)
    lines = files.read_lines(str(path), files.STARTUP_LOG)
    assert next(lines) == "x" * 1000
    assert list(lines) == ["y"] * 5


# --------------------------------------------------------------------------------------------------
# Output files


@pytest.fixture
def plan_file(tmp_path: Path) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(f"deployments:\n  - name: d\n    model: {CONFIG}\n    gpu: h100\n    require:\n"
                    "      starts: true\n", encoding="utf-8")
    return path


def test_a_write_error_names_the_path_and_the_os_reason(plan_file: Path) -> None:
    for args in (["check", str(plan_file), "--format", "json", "-o", "/dev/full"],
                 ["roofline", str(CONFIG), "--gpu", "h100", "--svg", "/dev/full"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "cannot write /dev/full: No space left on device" in one_error_line(result.stderr)


def test_an_empty_output_path_is_refused(plan_file: Path) -> None:
    result = CliRunner().invoke(app, ["check", str(plan_file), "-o", ""])
    assert result.exit_code == 2
    assert "--output: an empty path" in one_error_line(result.stderr)


def test_dash_is_stdout_a_symlink_is_written_through_and_the_mode_follows_the_umask(
        plan_file: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["check", str(plan_file), "--format", "json", "-o", "-"])
    assert result.exit_code == 0 and '"check"' in result.stdout
    assert not Path("-").exists()
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    old = os.umask(0o022)
    try:
        assert CliRunner().invoke(app, ["check", str(plan_file), "--format", "json", "-o", str(link)]).exit_code == 0
        fresh = tmp_path / "fresh.xml"
        assert CliRunner().invoke(app, ["check", str(plan_file), "--format", "junit", "-o", str(fresh)]).exit_code == 0
    finally:
        os.umask(old)
    assert link.is_symlink() and "check" in target.read_text()
    assert fresh.stat().st_mode & 0o777 == 0o644
