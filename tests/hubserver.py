"""A small Hugging Face Hub-compatible HTTP server for tests (127.0.0.1 only).

It answers what `huggingface_hub` asks of the real Hub when kvplan loads a model: HEAD and GET on
`/{repo}/resolve/{revision}/{file}` (with X-Repo-Commit, ETag, Content-Length and Range support) and
the error headers the client maps to typed errors (X-Error-Code: RepoNotFound, RevisionNotFound,
EntryNotFound, GatedRepo). Faults can be injected per repo: HTTP 500, truncated bodies, a server that
answers nothing for SLOW_SECONDS ("slow": HEAD and GET; "slow-body": headers at once, the body late).
"""
from __future__ import annotations

import hashlib
import json
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

FIXTURES = Path(__file__).parent / "fixtures" / "configs"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
SLOW_SECONDS = 2.0  # how long a "slow" repo keeps the client waiting (tests set timeouts well below it)


def safetensors_header(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A safetensors file made of its header only (the Hub client reads headers with Range requests)."""
    offset, header = 0, {}
    sizes = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "U8": 1, "I32": 4}
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw


@dataclass
class Repo:
    files: dict[str, bytes]
    revisions: tuple[str, ...] = ("main", COMMIT)
    gated: bool = False
    fault: str | None = None  # "500", "truncate", "slow", "slow-body"


@dataclass
class HubState:
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)


def fixture_repo(folder: str, **kw: object) -> Repo:
    """A repo serving the files of tests/fixtures/configs/<folder>."""
    files = {p.name: p.read_bytes() for p in (FIXTURES / folder).iterdir() if p.is_file()}
    return Repo(files=files, **kw)  # type: ignore[arg-type]


class _Handler(BaseHTTPRequestHandler):
    state: HubState

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def _error(self, status: int, code: str | None, message: str = "") -> None:
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        if message:
            self.send_header("X-Error-Message", message)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _route(self, head: bool) -> None:
        self.state.requests.append(f"{self.command} {self.path}")
        if self.headers.get("Authorization"):
            self.state.requests.append("auth-header-present")
        path = unquote(self.path.split("?", 1)[0]).lstrip("/")
        parts = path.split("/")
        if "resolve" not in parts:
            self._error(404, None)
            return
        i = parts.index("resolve")
        repo_id, revision, filename = "/".join(parts[:i]), parts[i + 1], "/".join(parts[i + 2:])
        repo = self.state.repos.get(repo_id)
        if repo is None:
            self._error(401, "RepoNotFound", "Repository not found")
            return
        if repo.gated and not self.headers.get("Authorization"):
            self._error(401, "GatedRepo", "Access to model is restricted")
            return
        if revision not in repo.revisions:
            self._error(404, "RevisionNotFound", "Invalid rev id")
            return
        if filename not in repo.files:
            self._error(404, "EntryNotFound", "Entry not found")
            return
        if repo.fault == "500":
            self._error(500, None, "Internal Error")
            return
        if repo.fault == "slow":
            time.sleep(SLOW_SECONDS)
        body = repo.files[filename]
        status, start, end = 200, 0, len(body)
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            start, end = int(a), min(len(body), int(b) + 1 if b else len(body))
            status = 206
        chunk = body[start:end]
        self.send_response(status)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", '"' + hashlib.sha256(body).hexdigest() + '"')
        self.send_header("Content-Length", str(len(chunk)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(body)}")
        self.end_headers()
        if not head:
            if repo.fault == "slow-body":
                self.wfile.flush()
                time.sleep(SLOW_SECONDS)
            if repo.fault == "truncate":
                self.wfile.write(chunk[: len(chunk) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(chunk)

    def do_HEAD(self) -> None:  # noqa: N802
        self._route(head=True)

    def do_GET(self) -> None:  # noqa: N802
        self._route(head=False)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True  # a "slow" handler still sleeping must not hold up the test run

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that gave up (timeout, truncation tests) is expected: no traceback on stderr."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class HubServer:
    """Start with `HubServer().start()`; `endpoint` is the HF_ENDPOINT to set."""

    def __init__(self) -> None:
        self.state = HubState()
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.httpd = _QuietServer(("127.0.0.1", 0), handler)
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> HubServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
