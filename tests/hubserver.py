"""A small Hugging Face Hub-compatible HTTP server for tests (127.0.0.1 only).

It answers what `huggingface_hub` asks of the real Hub when kvplan loads a model: HEAD and GET on
`/{repo}/resolve/{revision}/{file}` (with X-Repo-Commit, ETag, Content-Length and Range support) and
the error headers the client maps to typed errors (X-Error-Code: RepoNotFound, RevisionNotFound,
EntryNotFound, GatedRepo). Faults can be injected per repo: HTTP 500, truncated bodies, a server that
answers nothing for SLOW_SECONDS ("slow": HEAD and GET; "slow-body": headers at once, the body late).

Hostile modes (HOSTILE), each what a broken proxy or an attacker's endpoint could do:
"hang" (HEAD and GET never answered), "hang-get" (HEAD answered, GET never), "trickle" (one byte every
TRICKLE_SECONDS), "flood" (a GET body with no Content-Length that never ends; the HEAD says the true
size), "lie-long" (Content-Length far above the body, which stops), "lie-huge" (HEAD true, GET announcing
3 GiB), "redirect-loop" (every request redirected to itself), "429" (rate-limited with Retry-After:
3600), "429-once" (the first GET rate-limited with Retry-After: 0, then served), "gzip" (a gzip body whatever the
client's Accept-Encoding), "503-get" (HEAD answered, every GET HTTP 503). A hanging handler waits at
most HANG_SECONDS, or until the server stops.
"""
from __future__ import annotations

import gzip
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
HANG_SECONDS = 30.0  # a "hang" handler gives up after this (tests' deadlines are 1-2 s)
TRICKLE_SECONDS = 0.25  # one byte per this, on a "trickle" repo
FLOOD_LIMIT = 64 * 2**20  # a "flood" body stops after this many bytes, so a broken client cannot fill the disk
HOSTILE = ("hang", "hang-get", "trickle", "flood", "lie-long", "lie-huge", "redirect-loop", "429", "429-once",
           "gzip", "503-get")


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
    fault: str | None = None  # "500", "truncate", "slow", "slow-body", or one of HOSTILE
    fault_files: tuple[str, ...] = ()  # the files the fault applies to (none named: every file)


@dataclass
class HubState:
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    rate_limited: set[str] = field(default_factory=set)  # "429-once" repos already refused once


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
        fault = repo.fault if not repo.fault_files or filename in repo.fault_files else None
        if fault == "500":
            self._error(500, None, "Internal Error")
            return
        if fault == "slow":
            time.sleep(SLOW_SECONDS)
        if fault in HOSTILE and self._hostile(fault, repo_id, head):
            return
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
            if fault == "slow-body":
                self.wfile.flush()
                time.sleep(SLOW_SECONDS)
            if fault == "truncate":
                self.wfile.write(chunk[: len(chunk) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(chunk)

    def _hostile(self, fault: str, repo_id: str, head: bool) -> bool:
        """Misbehave as `fault` says before the normal answer; True when the answer is done."""
        if fault == "hang" or (fault == "hang-get" and not head):
            self.state.stopping.wait(HANG_SECONDS)
            self.close_connection = True
            return True
        if fault == "redirect-loop":
            self.send_response(302)
            self.send_header("Location", self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True
        if fault == "429" or (fault == "429-once" and not head and repo_id not in self.state.rate_limited):
            self.state.rate_limited.add(repo_id)
            self.send_response(429)
            self.send_header("Retry-After", "3600" if fault == "429" else "0")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True
        if fault == "503-get" and not head:
            self._error(503, None, "Service Unavailable")
            return True
        if head or fault in ("429-once", "503-get"):
            return False  # HEAD answered truly: the GET misbehaves
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        body = b'{"model_type": "qwen2", "pad": "' + b"x" * 4096 + b'"}'
        if fault == "gzip":
            packed = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(packed)))
            self.end_headers()
            self.wfile.write(packed)
            return True
        if fault == "lie-long":
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.write(body)
        elif fault == "lie-huge":
            self.send_header("Content-Length", str(3 * 2**30))
            self.end_headers()
            self.wfile.write(body)
        elif fault == "trickle":
            self.send_header("Content-Length", "100000")
            self.end_headers()
            for _ in range(int(HANG_SECONDS / TRICKLE_SECONDS)):
                if self.state.stopping.is_set():
                    break
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(TRICKLE_SECONDS)
        elif fault == "flood":
            self.end_headers()  # no Content-Length: the body ends when the connection does
            chunk = b" " * 65536
            for _ in range(FLOOD_LIMIT // len(chunk)):
                self.wfile.write(chunk)
        self.close_connection = True
        return True

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
        self.state.stopping.set()
        self.httpd.shutdown()
