"""`kvplan diagnose` end to end against a real HTTP server on 127.0.0.1 serving vLLM-like expositions,
and every way a scrape can fail (exit 2, one `Error:` line on stderr)."""
from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app
from kvplan.observe.diagnose import diagnose
from kvplan.observe.metrics import parse_exposition
from kvplan.render.json import to_data
from tests.fixtures.metrics.exposition import EngineState, exposition

PROM_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Reply:
    """One canned HTTP answer."""

    body: bytes | str
    status: int = 200
    content_type: str = PROM_TYPE
    delay_s: float = 0.0
    content_length: int | None = None  # lie about the length to cut the body short


class MetricsServer:
    """A /metrics server on an ephemeral port that answers the queued replies in order (the last repeats)."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.paths: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server.paths.append(self.path)
                reply = server.replies.pop(0) if len(server.replies) > 1 else server.replies[0]
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                body = reply.body.encode() if isinstance(reply.body, str) else reply.body
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(reply.content_length or len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/metrics"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)
        self.thread.start()

    def serve(self, *replies: Reply | str) -> str:
        """Queue these replies; return the URL."""
        self.replies = [r if isinstance(r, Reply) else Reply(r) for r in replies]
        return self.url

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[MetricsServer]:
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)  # 127.0.0.1 must be reached directly
    s = MetricsServer()
    yield s
    s.close()


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["diagnose", *args], catch_exceptions=False)


def run_json(*args: str) -> dict[str, Any]:
    result = run(*args, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def _codes(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d["code"], d["severity"]) for d in data["diagnoses"]]


# ---- one exposition per diagnosis


def test_kv_shortage_over_two_scrapes(server: MetricsServer) -> None:
    url = server.serve(exposition(EngineState(running=64, waiting=3, kv_usage=0.97, preemptions=10)),
                       exposition(EngineState(running=64, waiting=8, kv_usage=0.99, preemptions=20)))
    result = run(url, "--interval", "0.05", "--json")
    assert result.exit_code == 0
    assert "Scraping twice" in result.stderr
    data = json.loads(result.stdout)
    assert (data["schema_version"], data["kind"]) == (2, "diagnose")
    assert _codes(data) == [("kv_shortage", "critical")]
    d = data["diagnoses"][0]
    assert set(d) >= {"code", "severity", "message", "model_name", "engine", "actions", "evidence"}
    assert (d["model_name"], d["engine"]) == ("Qwen/Qwen2.5-7B", "0")
    assert d["evidence"]["preemptions"] == 10 and d["evidence"]["waiting_change"] == 5
    window = data["window_s"]
    assert 0.05 <= window < 5
    assert d["evidence"]["preemptions_per_s"] == pytest.approx(10 / window)
    assert len(server.paths) == 2


def test_batch_limit(server: MetricsServer) -> None:
    data = run_json(server.serve(exposition(EngineState(running=256, waiting=40, kv_usage=0.3))))
    assert _codes(data) == [("batch_limit", "warning")]
    (engine,) = data["engines"]
    assert (engine["running"], engine["waiting"], engine["kv_cache_usage"]) == (256, 40, 0.3)


def test_low_prefix_hit_rate(server: MetricsServer) -> None:
    data = run_json(server.serve(exposition(EngineState(prefix_queries=80_000, prefix_hits=800))))
    assert _codes(data) == [("low_prefix_hit_rate", "warning")]
    assert data["engines"][0]["prefix_hit_rate"] == 0.01


def test_high_queue_time(server: MetricsServer) -> None:
    data = run_json(server.serve(exposition(EngineState(queue=[3.0] * 10))))
    assert _codes(data) == [("high_queue_time", "warning")]
    # all 10 in (2.5, 5.0]: p95 = 2.5 + 2.5 × 9.5/10 = 4.875
    assert data["diagnoses"][0]["evidence"]["queue_p95_s"] == pytest.approx(4.875)


def test_healthy_with_figures_and_quantiles(server: MetricsServer) -> None:
    state = EngineState(running=12, waiting=0, kv_usage=0.42, prefix_queries=10_000, prefix_hits=7_000,
                        ttft=[0.3, 0.6, 0.7, 2.0], itl=[0.02] * 9 + [0.3])
    text = exposition(state)
    url = server.serve(text)
    data = run_json(url)
    assert _codes(data) == [("healthy", "ok")]
    expected = to_data(diagnose(parse_exposition(text), source=url))
    assert {k: v for k, v in data.items() if k not in ("schema_version", "kind")} == expected
    (engine,) = data["engines"]
    assert engine["prefix_hit_rate"] == 0.7
    assert engine["cache_config"]["num_gpu_blocks"] == "1345"
    ttft = next(x for x in engine["latencies"] if x["name"] == "ttft")
    # buckets ≤0.5: 1, ≤0.75: 3, ≤2.5: 4. p50: rank 2 → 0.5 + 0.25 × 1/2; p99: rank 3.96 → 1 + 1.5 × 0.96
    assert ttft["quantiles"][0] == {"q": 0.5, "value": 0.625, "lower": 0.5, "upper": 0.75}
    assert ttft["quantiles"][2]["value"] == pytest.approx(2.44)
    assert (ttft["quantiles"][2]["lower"], ttft["quantiles"][2]["upper"]) == (1.0, 2.5)


def test_human_output_shows_figures_quantile_buckets_and_the_caveat(server: MetricsServer) -> None:
    url = server.serve(exposition(EngineState(running=12, kv_usage=0.42, ttft=[0.3, 0.6, 0.7, 2.0])))
    result = run(url)
    assert result.exit_code == 0 and result.stderr == ""
    out = result.stdout
    assert "Qwen/Qwen2.5-7B · engine 0" in out
    assert "42.0%" in out
    assert "625 ms [0.5–0.75]" in out
    assert "only as fine as the bucket" in out
    assert "healthy" in out


def test_several_engines_and_models_are_reported_separately(server: MetricsServer) -> None:
    url = server.serve(exposition(
        EngineState(model_name="Qwen/Qwen2.5-7B", engine="0", waiting=5, kv_usage=0.99, preemptions=3),
        EngineState(model_name="Qwen/Qwen2.5-7B", engine="1", kv_usage=0.2),
        EngineState(model_name="meta-llama/Llama-3.1-8B", engine="0", waiting=7, kv_usage=0.1),
    ))
    data = run_json(url)
    assert [(e["model_name"], e["engine"]) for e in data["engines"]] == [
        ("Qwen/Qwen2.5-7B", "0"), ("Qwen/Qwen2.5-7B", "1"), ("meta-llama/Llama-3.1-8B", "0")]
    assert [(d["model_name"], d["engine"], d["code"]) for d in data["diagnoses"]] == [
        ("Qwen/Qwen2.5-7B", "0", "kv_shortage"), ("Qwen/Qwen2.5-7B", "1", "healthy"),
        ("meta-llama/Llama-3.1-8B", "0", "batch_limit")]
    text = run(url).stdout
    assert "Qwen/Qwen2.5-7B · engine 1" in text and "meta-llama/Llama-3.1-8B · engine 0" in text


def test_thresholds_are_options(server: MetricsServer) -> None:
    url = server.serve(exposition(EngineState(waiting=2, kv_usage=0.92)))
    assert _codes(run_json(url))[0][0] == "kv_shortage"
    assert _codes(run_json(url, "--kv-high", "0.95"))[0][0] == "batch_limit"
    low = exposition(EngineState(prefix_queries=10_000, prefix_hits=1_500))
    url = server.serve(low)
    assert _codes(run_json(url)) == [("healthy", "ok")]
    assert _codes(run_json(url, "--hit-rate-low", "0.2"))[0][0] == "low_prefix_hit_rate"


def test_bare_host_port_url_gets_the_metrics_path(server: MetricsServer) -> None:
    url = server.serve(exposition(EngineState()))
    run_json(url.removesuffix("/metrics"))
    assert server.paths == ["/metrics"]


def test_saved_file(tmp_path: Path) -> None:
    path = tmp_path / "metrics.txt"
    path.write_text(exposition(EngineState(running=256, waiting=40, kv_usage=0.3)))
    data = run_json(str(path))
    assert data["source"] == str(path) and _codes(data) == [("batch_limit", "warning")]


# ---- failures: one line on stderr, exit 2


def _fails(result: Any, *words: str) -> None:
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for w in words:
        assert w in lines[0]


def test_connection_refused() -> None:
    with socket.socket() as s:  # a port nobody listens on: bind, note it, close
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _fails(run(f"http://127.0.0.1:{port}/metrics"), "connection refused", "is the vLLM server running")


def test_timeout(server: MetricsServer) -> None:
    url = server.serve(Reply(exposition(EngineState()), delay_s=1.0))
    started = time.monotonic()
    _fails(run(url, "--timeout", "0.2"), "did not answer within 0.2 s", "--timeout")
    assert time.monotonic() - started < 1.0


def test_body_cut_short_of_its_content_length(server: MetricsServer) -> None:
    body = exposition(EngineState())
    url = server.serve(Reply(body[: len(body) // 2], content_length=len(body)))
    _fails(run(url), "closed the connection before the whole response arrived")


def test_body_cut_mid_line(server: MetricsServer) -> None:
    body = exposition(EngineState(kv_usage=0.93))
    cut = body[: body.index("vllm:kv_cache_usage_perc{") + 60]  # ends inside the sample line
    _fails(run(server.serve(cut)), "truncated")


def test_html_page(server: MetricsServer) -> None:
    url = server.serve(Reply("<html><body><h1>vLLM</h1></body></html>\n", content_type="text/html"))
    _fails(run(url), "HTML page, not Prometheus metrics")


def test_html_body_labelled_as_text(server: MetricsServer) -> None:
    _fails(run(server.serve("<!doctype html>\n<html><body>login</body></html>\n")),
           "not a Prometheus text exposition")


def test_not_vllm_metrics(server: MetricsServer) -> None:
    _fails(run(server.serve("# TYPE up gauge\nup 1\n")), "no vLLM metrics", "--disable-log-stats")


def test_http_404(server: MetricsServer) -> None:
    _fails(run(server.serve(Reply("not found\n", status=404, content_type="text/plain"))), "HTTP 404")


def test_missing_file() -> None:
    _fails(run("/nonexistent/metrics.txt"), "no such file")


def test_interval_needs_a_url(tmp_path: Path) -> None:
    path = tmp_path / "m.txt"
    path.write_text(exposition(EngineState()))
    _fails(run(str(path), "--interval", "5"), "--interval needs a URL")


def test_bad_threshold() -> None:
    _fails(run("whatever.txt", "--kv-high", "1.5"), "--kv-high")


def test_human_output_over_a_window(server: MetricsServer) -> None:
    url = server.serve(exposition(EngineState(running=8, kv_usage=0.5, preemptions=4, ttft=[0.3])),
                       exposition(EngineState(running=8, kv_usage=0.6, preemptions=4, ttft=[0.3, 0.6])))
    result = run(url, "--interval", "0.01")
    assert result.exit_code == 0
    assert "(was 50.0%)" in result.stdout and "Latency (last" in result.stdout
    assert "0 (last" in result.stdout  # no preemption inside the window
