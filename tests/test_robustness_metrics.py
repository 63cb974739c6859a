"""A metrics server (or a saved exposition) that breaks Prometheus' rules, or never finishes its answer.

What the exposition format forbids is refused (a NaN bucket bound, a series repeated) or listed as
impossible and left out of the figures (a histogram whose cumulative counts decrease or whose +Inf bucket
is not its _count, a count above 2**63, more prefix-cache hits than queries): never shown as a fact. A URL
is read like a file, bounded: the whole answer within --timeout, lines of at most 1 MiB, at most 64 MiB of
vllm: lines.
"""
from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from kvplan.errors import NetworkError, ParseError
from kvplan.observe.diagnose import engine_figures
from kvplan.observe.metrics import MAX_VLLM_TEXT, fetch_exposition, parse_exposition
from tests.fixtures.metrics.exposition import EngineState, exposition
from tests.test_robustness_faults import RawServer

ENGINE = '{engine="0",model_name="m"}'


def _ttft(buckets: list[tuple[str, float]], count: float) -> str:
    lines = ["# TYPE vllm:time_to_first_token_seconds histogram"]
    lines += [f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="{le}",model_name="m"}} {c}'
              for le, c in buckets]
    lines += [f"vllm:time_to_first_token_seconds_count{ENGINE} {count}",
              f"vllm:time_to_first_token_seconds_sum{ENGINE} 1.0"]
    return "\n".join(lines) + "\n"


def _figures(text: str):  # type: ignore[no-untyped-def]
    return engine_figures(parse_exposition(text).engines[0])


def test_prefix_hits_above_queries_are_impossible_not_a_1000_percent_hit_rate() -> None:
    f = _figures(exposition(EngineState(prefix_queries=100, prefix_hits=1000)))
    assert f.prefix_hit_rate is None and f.prefix_cache_hits is None
    assert f.invalid["vllm:prefix_cache_hits_total"] == "1000 hits is above the 100 queries they are part of"


def test_prefix_hits_above_queries_in_the_window_are_impossible() -> None:
    first = parse_exposition(exposition(EngineState(prefix_queries=100, prefix_hits=50))).engines[0]
    second = parse_exposition(exposition(EngineState(prefix_queries=110, prefix_hits=90))).engines[0]
    f = engine_figures(second, first, 10.0)
    assert f.prefix_hit_rate is None
    assert f.invalid["vllm:prefix_cache_hits_total"] == \
        "40 hits is above the 10 queries they are part of, in the window"


def test_a_300_digit_count_is_impossible() -> None:
    f = _figures(f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{ENGINE} 1e300\n")
    assert f.running is None
    assert f.invalid["vllm:num_requests_running"] == "1e+300 is above 2**63, more than any counter of a server reaches"


def test_a_histogram_whose_counts_decrease_is_left_out() -> None:
    f = _figures(_ttft([("0.5", 5), ("1.0", 3), ("+Inf", 5)], 5))
    assert f.latencies == ()
    assert f.invalid["vllm:time_to_first_token_seconds"] == \
        "its cumulative bucket counts decrease (le=0.5: 5, le=1: 3)"


def test_a_histogram_whose_inf_bucket_is_not_its_count_is_left_out() -> None:
    f = _figures(_ttft([("0.5", 2), ("1.0", 3), ("+Inf", 5)], 7))
    assert f.latencies == ()
    assert f.invalid["vllm:time_to_first_token_seconds"] == "its +Inf bucket (5) is not its _count (7)"


def test_a_nan_bucket_bound_is_refused() -> None:
    with pytest.raises(ParseError, match="le='NaN', and a bucket bound cannot be NaN"):
        parse_exposition(_ttft([("NaN", 2), ("+Inf", 5)], 5))


def test_a_series_exposed_twice_is_refused_not_summed() -> None:
    text = (f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{ENGINE} 3\n"
            f"vllm:num_requests_running{ENGINE} 4\n")
    with pytest.raises(ParseError, match=r'the series vllm:num_requests_running\{engine="0",model_name="m"\} twice'):
        parse_exposition(text)


def test_a_well_formed_histogram_still_gives_its_quantiles() -> None:
    f = _figures(_ttft([("0.5", 2), ("1.0", 3), ("+Inf", 5)], 5))
    assert f.invalid == {} and f.latencies[0].count == 5


# ---- the bounded reader


HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nConnection: close\r\n\r\n"


def _trickle(conn: socket.socket) -> None:
    conn.sendall(HEADERS + b"# TYPE vllm:num_requests_running gauge\n")
    for _ in range(100):  # 20 s at most
        conn.sendall(b" ")
        time.sleep(0.2)


def _endless_line(conn: socket.socket) -> None:
    conn.sendall(HEADERS)
    for _ in range(64):  # 4 MiB at most, no newline
        conn.sendall(b"x" * 65536)


def _vllm_flood(conn: socket.socket) -> None:
    conn.sendall(HEADERS + b"# TYPE vllm:num_requests_running gauge\n")
    line = f"vllm:num_requests_running{ENGINE} 1\n".encode() * 1000
    for _ in range(MAX_VLLM_TEXT // len(line) + 100):
        conn.sendall(line)


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[RawServer]:
    s = RawServer(request.param)
    yield s
    s.close()


@pytest.mark.parametrize("server", [_trickle], indirect=True)
def test_a_trickling_server_cannot_outlive_the_timeout(server: RawServer) -> None:
    pattern = r"did not answer within 1 s: its whole answer had not arrived \([\d,]+ bytes had\)"
    with pytest.raises(NetworkError, match=pattern):
        fetch_exposition(server.url, 1.0)


@pytest.mark.parametrize("server", [_endless_line], indirect=True)
def test_a_line_without_end_is_cut_at_1_mib(server: RawServer) -> None:
    with pytest.raises(ParseError, match="sent a line longer than 1 MiB"):
        fetch_exposition(server.url, 10.0)


@pytest.mark.parametrize("server", [_vllm_flood], indirect=True)
def test_an_endless_vllm_body_is_cut_at_64_mib(server: RawServer) -> None:
    with pytest.raises(ParseError, match="more than 64 MiB of vllm: metrics in one exposition"):
        fetch_exposition(server.url, 15.0)
