"""The one reader of users' files and the one writer of kvplan's output files.

Reading (`read_text`, `read_lines`): every file kvplan reads from a user — config.json and
hf_quant_config.json, --gpus-file / $KVPLAN_GPUS_FILE, plans, metrics files, startup logs, traces,
`empirical:` length files — goes through here, with the bounds of its `FileKind`:

* a regular file, or an already open pipe (`<(…)`, /dev/fd/N); `-` is standard input where a command
  documents it. A device (/dev/zero, /dev/urandom), a socket, a folder or a named FIFO (opening one waits
  for a writer) is an error;
* at most `max_bytes` (the cap is in the message), checked on what is read, not only on the size the
  file system reports; streamed kinds are read line by line, so memory follows the longest line, not
  the file;
* no line longer than `max_line`;
* UTF-8 text: NUL bytes (a binary or UTF-16 file) or, for strict kinds, bytes that are not UTF-8 are an
  error naming the line.

Writing (`write_output`): `-` is standard output, a symlink is written through, a regular file is
replaced atomically with the mode the umask gives, and a write error names the path and the OS reason.
Secrets are scrubbed from all that is written (`kvplan.text.scrub`).
"""
from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from kvplan.errors import BadConfig, InvalidParameter, KvplanError, ModelNotFound, ParseError

KiB, MiB, GiB = 2**10, 2**20, 2**30


@dataclass(frozen=True)
class FileKind:
    """The bounds of one kind of input file and the error its problems raise."""

    what: str  # "metrics file": how messages name it
    max_bytes: int
    max_line: int
    error: type[KvplanError] = ParseError
    missing: type[KvplanError] = ParseError
    strict_utf8: bool = True  # else undecodable bytes are replaced (logs with progress bars, colours)


def _size(n: int) -> str:
    for unit, div in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= div and n % div == 0:
            return f"{n // div:,} {unit}"
    return f"{n:,} bytes"


# Each cap is far above any real file of its kind and small enough to read in seconds.
CONFIG = FileKind("config file", 8 * MiB, 8 * MiB, error=BadConfig, missing=ModelNotFound)
# model.safetensors.index.json: one short weight_map entry per tensor; kvplan's bound, 8× a config's
SAFETENSORS_INDEX = FileKind("safetensors index", 64 * MiB, 64 * MiB, error=BadConfig, missing=ModelNotFound)
GPUS = FileKind("GPU file", 4 * MiB, 1 * MiB, error=BadConfig, missing=BadConfig)
PLAN = FileKind("plan", 1 * MiB, 1 * MiB)
# Streamed, and only the vllm: families are kept (at most observe.metrics.MAX_VLLM_TEXT): a node dump of
# 1 GiB costs time, not memory. vLLM's own /metrics is ~100 KB per engine.
METRICS = FileKind("metrics file", 1 * GiB, 1 * MiB)
# Streamed: memory follows the longest line. A day of a busy server's log is a few hundred MB.
STARTUP_LOG = FileKind("startup log", 2 * GiB, 1 * MiB, strict_utf8=False)
# A trace line holds one request's token ids (a 1M-token prompt is ~7 MB of JSON).
TRACE = FileKind("trace", 4 * GiB, 32 * MiB)
LENGTHS = FileKind("lengths file", 256 * MiB, 1 * MiB)

STDIN = "-"
_INPUTS: set[tuple[int, int]] = set()  # (device, inode) of every regular file read in this process
_OPEN_DESCRIPTOR_DIRS = ("/dev/fd/", "/proc/self/fd/", "/dev/stdin")


def _fail(kind: FileKind, where: str, problem: str) -> KvplanError:
    return kind.error(f"{where}: {problem}")


def _is_open_pipe(path: str) -> bool:
    """A path naming a descriptor this process already holds (`<(…)`): its writer exists, no open waits."""
    return path.startswith(_OPEN_DESCRIPTOR_DIRS) or (path.startswith("/proc/") and "/fd/" in path)


class _Unclosed:
    """Standard input for a `with` block that leaves it open."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream

    def __enter__(self) -> IO[bytes]:
        return self.stream

    def __exit__(self, *exc: object) -> None:
        return None


def _open(path: str, kind: FileKind, where: str, stdin: bool) -> IO[bytes] | _Unclosed:
    """The file, opened for binary reading once it is known to be a regular file or an open pipe."""
    if path == STDIN and stdin:
        return _Unclosed(sys.stdin.buffer)
    if path == "":
        raise kind.error(f"an empty path is not a {kind.what}")
    try:
        fd = os.open(os.path.expanduser(path), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise kind.missing(f"{where}: no such file") from None
    except IsADirectoryError:
        raise _fail(kind, where, "is a folder, not a file") from None
    except OSError as exc:
        raise _fail(kind, where, f"cannot open: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise _fail(kind, where, "is a folder, not a file")
        if stat.S_ISFIFO(mode) and _is_open_pipe(path):
            os.set_blocking(fd, True)
        elif not stat.S_ISREG(mode):
            what = "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
            raise _fail(kind, where, f"not a regular file ({what}); give a file"
                        + (", or - for standard input" if stdin else ""))
        elif os.fstat(fd).st_size > kind.max_bytes:
            size = os.fstat(fd).st_size
            raise _fail(kind, where, f"{size:,} bytes is more than a {kind.what} may be ({_size(kind.max_bytes)})")
        if stat.S_ISREG(mode):
            st = os.fstat(fd)
            _INPUTS.add((st.st_dev, st.st_ino))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _too_large(kind: FileKind, where: str) -> KvplanError:
    return _fail(kind, where, f"more than a {kind.what} may be ({_size(kind.max_bytes)})")


def _decode(kind: FileKind, where: str, data: bytes, line: int | None = None) -> str:
    at = f"{where}:{line}" if line is not None else where
    bad = data.find(b"\0")
    if bad < 0:
        try:
            return data.decode("utf-8", errors="strict" if kind.strict_utf8 else "replace")
        except UnicodeDecodeError as exc:
            bad = exc.start
    raise kind.error(f"{at}: not UTF-8 text (binary data or UTF-16; byte {bad + 1:,} of the "
                     f"{'line' if line is not None else 'file'})")


def read_text(path: str, kind: FileKind, *, where: str | None = None, stdin: bool = False) -> str:
    """The whole file as text, within `kind`'s bounds (for formats that are parsed whole: JSON, YAML)."""
    where = where if where is not None else path
    with _open(path, kind, where, stdin) as f:
        try:
            data = f.read(kind.max_bytes + 1)
        except OSError as exc:
            raise _fail(kind, where, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > kind.max_bytes:
        raise _too_large(kind, where)
    text = _decode(kind, where, data)
    if kind.max_line < kind.max_bytes and len(data) > kind.max_line:
        for number, line in enumerate(text.split("\n"), 1):
            if len(line) > kind.max_line:
                raise _fail(kind, f"{where}:{number}", f"a line longer than {_size(kind.max_line)}")
    return text


def read_lines(path: str, kind: FileKind, *, where: str | None = None, stdin: bool = False,
               keep_ends: bool = False) -> Iterator[str]:
    """The file's lines (without line ends, unless `keep_ends`), read as they are consumed, within
    `kind`'s bounds."""
    where = where if where is not None else path
    with _open(path, kind, where, stdin) as f:
        total = 0
        number = 0
        readline = f.readline
        limit = kind.max_line + 1
        while True:
            try:
                raw = readline(limit)
            except OSError as exc:
                raise _fail(kind, where, f"cannot read: {exc.strerror or exc}") from None
            if not raw:
                return
            number += 1
            total += len(raw)
            if total > kind.max_bytes:
                raise _too_large(kind, where)
            if len(raw) == limit and not raw.endswith(b"\n"):
                raise _fail(kind, f"{where}:{number}", f"a line longer than {_size(kind.max_line)}")
            text = _decode(kind, where, raw, number)
            yield text if keep_ends else text.rstrip("\r\n")


def repair_standard_streams() -> str | None:
    """A standard stream the shell closed (`>&-`, `2>&-`, `<&-`) is None in Python: stdin and stderr then
    read and write nothing (an error still exits 2). A stream whose encoding is not UTF (PYTHONIOENCODING=
    ascii, LC_ALL=C with PYTHONUTF8=0) writes what it cannot encode as backslash escapes, so the output
    stays whole. Returns the problem when stdout is closed (nothing can be reported), else None."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (lives as long as the process)
    if sys.stdin is None:
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115
    if sys.stdout is None:
        return ("cannot write standard output: it is closed (the shell's >&-); redirect it to a file or "
                "/dev/null instead")
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if not encoding.startswith("utf") and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")  # "≥" shows as \u2265
    return None


def write_output(path: str, text: str, *, what: str = "--output") -> None:
    """Write `text` (secrets scrubbed) to `path`: `-` is standard output; a symlink is followed; a regular
    file is replaced atomically (a reader never sees half a report) with the mode the umask gives a new
    file; a device or pipe is written in place. A failure is InvalidParameter naming the path and why."""
    from kvplan.text import scrub

    text = scrub(text)
    if path == "":
        raise InvalidParameter(f"{what}: an empty path; give a file name, or - for standard output")
    if path == STDIN:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except OSError as exc:
            raise InvalidParameter(f"{what}: cannot write to standard output: {exc.strerror or exc}") from None
        return
    target = os.path.realpath(os.path.expanduser(path))
    _refuse_an_input(path, what)
    try:
        if os.path.exists(target) and not stat.S_ISREG(os.stat(target).st_mode):
            if os.path.isdir(target):
                raise IsADirectoryError(21, "Is a directory")
            with open(target, "w", encoding="utf-8") as f:  # /dev/stdout, /dev/full, a pipe: in place
                f.write(text)
            return
        _write_atomic(target, text)
    except OSError as exc:
        raise InvalidParameter(f"{what}: cannot write {path}: {exc.strerror or exc}") from None


def append_output(path: str, text: str, *, what: str) -> None:
    """Append `text` (secrets scrubbed) to `path` (GitHub's step summary); errors as in `write_output`."""
    from kvplan.text import scrub

    _refuse_an_input(path, what)
    try:
        with open(os.path.expanduser(path), "a", encoding="utf-8") as f:
            f.write(scrub(text))
    except OSError as exc:
        raise InvalidParameter(f"{what}: cannot append to {path}: {exc.strerror or exc}") from None


def _refuse_an_input(path: str, what: str) -> None:
    """Refuse to write onto a file this run has read (`--output plan.yaml` for `check plan.yaml`): the
    report would replace its own input."""
    try:
        st = os.stat(os.path.expanduser(path))
    except (OSError, ValueError):
        return  # no such file yet (or a path the write itself will refuse)
    if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) in _INPUTS:
        raise InvalidParameter(f"{what}: {path} is also an input of this run; writing it would replace what "
                               "was read", hint="write the report to another file")


def _write_atomic(target: str, text: str) -> None:
    import tempfile

    folder, name = os.path.split(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder or ".")
    try:
        umask = os.umask(0)
        os.umask(umask)
        mode = stat.S_IMODE(os.stat(target).st_mode) if os.path.exists(target) else 0o666 & ~umask
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        tmp = ""
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
