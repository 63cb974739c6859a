"""Faults from outside: a Hub or metrics server that refuses, stalls, errs, cuts a body short or sends
too much, and output files that cannot be written. Each gets its own one-line message and exit 2, and
nothing is left half-written: no partial file in the Hugging Face cache, no half report.

Hub cases run the real CLI in a fresh interpreter (HF_* variables are read at import). huggingface_hub
retries a failed request five times with back-off (1 + 2 + 4 + 8 + 8 s); to keep each test to a second
or two, the interpreter's `time.sleep` is a no-op and the Hub timeouts are 0.3 s (the HF_HUB_*_TIMEOUT
variables take whole seconds only). kvplan's own code runs unchanged.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.model.hub import MAX_CONFIG_BYTES
from tests.conftest import CONFIGS, run_kvplan
from tests.hubserver import HubServer, fixture_repo

HUB_TIMEOUT_S = 0.3
FAST_HUB = (
    "import sys, time\n"
    "time.sleep = lambda seconds: None  # huggingface_hub's retry back-off: retry at once\n"
    "import huggingface_hub.constants as c\n"
    f"c.HF_HUB_ETAG_TIMEOUT = c.HF_HUB_DOWNLOAD_TIMEOUT = {HUB_TIMEOUT_S}\n"
    "from kvplan.cli.app import main\n"
    "sys.argv[0] = 'kvplan'\n"
    "main()\n"
)
FAULTS = {  # repo → fault of tests/hubserver.py
    "faulty/slow": "slow", "faulty/slow-body": "slow-body", "faulty/server-error": "500",
    "faulty/truncated": "truncate",
}


@pytest.fixture(scope="module")
def faulty_hub(hub: HubServer) -> HubServer:
    """The session's test Hub with repos that fail in each way, and one whose config.json is too large."""
    for repo_id, fault in FAULTS.items():
        hub.state.repos[repo_id] = fixture_repo("Qwen--Qwen2.5-1.5B", fault=fault)
    oversize = fixture_repo("Qwen--Qwen2.5-1.5B")
    oversize.files["config.json"] = b'{"pad": "' + b"x" * MAX_CONFIG_BYTES + b'"}'
    hub.state.repos["faulty/oversize"] = oversize
    return hub


def run_fast(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real CLI in a fresh interpreter, with huggingface_hub's retries immediate and its timeouts short."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "KVPLAN_"))}
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", FAST_HUB, *args], capture_output=True, text=True,
                          env=full_env, timeout=60, check=False)


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), stderr
    assert "internal error" not in stderr and "Traceback" not in stderr
    return lines[0]


def cache_files(hf_home: str) -> list[str]:
    """Every file in the Hugging Face cache except lock files and markers (which hold no model data)."""
    root = Path(hf_home)
    if not root.exists():
        return []
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and p.suffix != ".lock" and p.name != "CACHEDIR.TAG" and "refs" not in p.parts)


# ---------------------------------------------------------------------------------------------------
# The Hub


@pytest.mark.parametrize(("repo_id", "message"), [
    ("faulty/slow", "the Hub timed out"),
    ("faulty/slow-body", "the Hub timed out while sending config.json of faulty/slow-body"),
    ("faulty/server-error", "the Hub answered HTTP 500 for faulty/server-error/config.json"),
    ("faulty/truncated", "the Hub connection broke off while sending config.json of faulty/truncated"),
])
def test_hub_fault_is_one_line_and_leaves_no_partial_file_in_the_cache(
        faulty_hub: HubServer, hub_env: dict[str, str], repo_id: str, message: str) -> None:
    started = time.monotonic()
    proc = run_fast(["size", repo_id], hub_env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert message in one_error_line(proc.stderr)
    assert cache_files(hub_env["HF_HOME"]) == []  # no snapshot, no blob, no *.incomplete download
    assert time.monotonic() - started < 10


def test_hub_refusing_connections(hub_env: dict[str, str]) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = run_fast(["size", "Qwen/Qwen2.5-1.5B"], {**hub_env, "HF_ENDPOINT": f"http://127.0.0.1:{port}"})
    assert proc.returncode == 2
    assert "cannot reach the Hugging Face Hub for Qwen/Qwen2.5-1.5B" in one_error_line(proc.stderr)
    assert cache_files(hub_env["HF_HOME"]) == []


def test_hub_config_larger_than_any_real_one_is_refused_before_it_is_downloaded(
        faulty_hub: HubServer, hub_env: dict[str, str]) -> None:
    proc = run_kvplan(["size", "faulty/oversize"], hub_env)
    assert proc.returncode == 2
    line = one_error_line(proc.stderr)
    assert "faulty/oversize/config.json is" in line and f"larger than any real config ({MAX_CONFIG_BYTES:,})" in line
    asked = [r for r in faulty_hub.state.requests if r.split(" ", 1)[-1].startswith("/faulty/oversize/")]
    assert asked and all(r.startswith("HEAD ") for r in asked), asked  # its size was asked; nothing was fetched
    assert cache_files(hub_env["HF_HOME"]) == []


def test_a_device_as_a_local_config_is_refused_not_read(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["size", "/dev/zero"])
    assert result.exit_code == 2
    assert "/dev/zero: not a regular file (a device or socket)" in one_error_line(result.stderr)


def test_a_malformed_hf_variable_is_named_not_an_internal_error(hub_env: dict[str, str]) -> None:
    proc = run_kvplan(["size", "Qwen/Qwen2.5-1.5B"], {**hub_env, "HF_HUB_ETAG_TIMEOUT": "0.5"})
    assert proc.returncode == 2
    line = one_error_line(proc.stderr)
    assert "huggingface_hub cannot read its environment" in line and "whole seconds" in line


def test_a_config_that_is_too_large_on_disk_is_refused_before_it_is_read(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(b" " * (MAX_CONFIG_BYTES + 1))
    result = CliRunner().invoke(app, ["size", str(tmp_path)])
    assert result.exit_code == 2
    assert f"{MAX_CONFIG_BYTES + 1:,} bytes is more than a config file may be (8 MiB)" in one_error_line(result.stderr)


# ---------------------------------------------------------------------------------------------------
# A metrics server that misbehaves below HTTP (test_diagnose_cli.py covers refused, timeout before the
# headers, a short body, HTML, 404 and non-vLLM text)


class RawServer:
    """A TCP server on 127.0.0.1 that answers every connection with `behave(socket)`."""

    def __init__(self, behave: Callable[[socket.socket], None]) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/metrics"
        self.behave = behave
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.recv(65536)  # the request
                    self.behave(conn)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def _reply(status: str, body: bytes, headers: str = "Content-Type: text/plain; version=0.0.4\r\n",
           length: int | None = None) -> Callable[[socket.socket], None]:
    def behave(conn: socket.socket) -> None:
        n = len(body) if length is None else length
        conn.sendall(f"HTTP/1.1 {status}\r\n{headers}Content-Length: {n}\r\n\r\n".encode() + body)
    return behave


def _stall(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n# TYPE vllm:")
    time.sleep(1.5)


@pytest.fixture
def raw_server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[RawServer]:
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    server = RawServer(request.param)
    yield server
    server.close()


@pytest.mark.parametrize(("raw_server", "message"), [
    (_reply("500 Internal Server Error", b"boom\n"), "answered HTTP 500 Internal Server Error"),
    (_reply("503 Service Unavailable", b""), "answered HTTP 503"),
    (lambda conn: None, "reading http://127.0.0.1:"),  # closed without a word
    (lambda conn: conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n"), "reading http://127.0.0.1:"),  # not HTTP
    (_stall, "did not answer within 0.3 s"),  # headers, then the body stalls
    (_reply("200 OK", b"\xff\xfe\x00v\x00l\x00l\x00m\n"), "bytes that are not UTF-8"),
    (_reply("200 OK", b"\x1f\x8b\x08\x00" + bytes(20), "Content-Encoding: gzip\r\n"), "not UTF-8"),
    (_reply("200 OK", b""), "no vLLM metrics"),
    (_reply("200 OK", b'vllm:time_to_first_token_seconds_bucket{le="soon"} 1\n'), "le='soon', not a number"),
], indirect=["raw_server"], ids=["500", "503", "closed", "not-http", "stalled-body", "utf-16", "gzip", "empty",
                                 "bad-le"])
def test_metrics_server_fault_is_one_line(raw_server: RawServer, message: str) -> None:
    started = time.monotonic()
    result = CliRunner().invoke(app, ["diagnose", raw_server.url, "--timeout", "0.3"])
    assert result.exit_code == 2 and result.stdout == ""
    assert message in one_error_line(result.stderr)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--timeout", "nan", "--timeout must be positive"), ("--timeout", "inf", "--timeout must be positive"),
    ("--timeout", "1e300", "at most 86400 s"), ("--interval", "nan", "--interval must be positive"),
    ("--interval", "1e300", "--interval must be positive"),
])
def test_metrics_waits_that_no_socket_takes_are_refused(option: str, value: str, message: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)  # accepts, never answers: a refused or hung scrape must not be what stops these
        url = f"http://127.0.0.1:{s.getsockname()[1]}/metrics"
        args = ["diagnose", url, option, value] + (["--timeout", "0.3"] if option == "--interval" else [])
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert message in one_error_line(result.stderr)  # refused before "Scraping twice…" is printed


def test_an_unreadable_url_is_an_input_error() -> None:
    result = CliRunner().invoke(app, ["diagnose", "http://[::1/metrics"])
    assert result.exit_code == 2
    assert "cannot read 'http://[::1/metrics' as a URL" in one_error_line(result.stderr)


# ---------------------------------------------------------------------------------------------------
# Output files: all or nothing


def _plan(tmp_path: Path, model: str = str(CONFIGS / "Qwen--Qwen2.5-7B")) -> Path:
    plan = tmp_path / "plan.yaml"
    plan.write_text(f"deployments:\n  - name: chat\n    model: {model}\n    gpu: h100\n"
                    "    require: {starts: true}\n")
    return plan


def test_check_output_into_a_missing_folder_fails_cleanly(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "report.json"
    result = CliRunner().invoke(app, ["check", str(_plan(tmp_path)), "--offline", "-f", "json", "-o", str(target)])
    assert result.exit_code == 2
    assert "--output: cannot write" in one_error_line(result.stderr)
    assert not target.parent.exists()


def test_check_output_onto_a_folder_leaves_no_temporary_file(tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    result = CliRunner().invoke(app, ["check", str(_plan(tmp_path)), "--offline", "-f", "junit", "-o", str(folder)])
    assert result.exit_code == 2
    assert "--output: cannot write" in one_error_line(result.stderr)
    assert list(folder.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["plan.yaml", "reports"]


def test_a_failed_check_leaves_the_previous_report_intact(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    first = CliRunner().invoke(app, ["check", str(_plan(tmp_path)), "--offline", "-f", "json", "-o", str(report)])
    assert first.exit_code in (0, 1), first.stderr
    before = report.read_text()
    broken = _plan(tmp_path, model=str(tmp_path / "missing-model"))
    second = CliRunner().invoke(app, ["check", str(broken), "--offline", "-f", "json", "-o", str(report)])
    assert second.exit_code == 2
    one_error_line(second.stderr)
    assert report.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.yaml", "report.json"]  # no temporary file left


def test_roofline_svg_into_a_missing_folder_fails_cleanly(tmp_path: Path) -> None:
    target = tmp_path / "no" / "chart.svg"
    result = CliRunner().invoke(app, ["roofline", str(CONFIGS / "Qwen--Qwen2.5-7B"), "--gpu", "h100",
                                      "--svg", str(target)])
    assert result.exit_code == 2
    assert "--svg: cannot write" in one_error_line(result.stderr)
    assert not target.parent.exists()
