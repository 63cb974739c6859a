"""The explicit limits the hardening suite asked for: each refuses with one line naming the limit, at
once, and real-sized inputs stay well inside them. Also the pool's lazy free queue (a pool of tens
of millions of blocks costs no queue entry per block) and the one-line error output."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli.app import app, fail, one_line
from kvplan.errors import InvalidParameter, ParseError
from kvplan.sim import block_pool as bp
from kvplan.sim import workloads as wl
from tests.conftest import CONFIGS

runner = CliRunner()


def one_error_line(stderr: str) -> str:
    lines = stderr.split("\n")
    assert len(lines) == 2 and lines[0].startswith("Error: ") and lines[1] == "", stderr
    assert "internal error" not in stderr
    return lines[0]


# ---------------------------------------------------------------------------------------------------
# Simulator limits, through the command line: refused at once, the limit named


@pytest.mark.parametrize(("argv", "message"), [
    (["simulate", "serve", "--num-requests", "100000000", "--num-gpu-blocks", "512"],
     "--num-requests: 100,000,000 is more than kvplan's serve simulation runs (at most 1,000,000"),
    (["simulate", "prefix", "--scenario", "zipf", "--num-requests", "100000000", "--num-gpu-blocks", "512"],
     "num-requests 100,000,000 is more than kvplan simulates (at most 10,000,000)"),
    (["simulate", "prefix", "--docs", "100000000", "--num-gpu-blocks", "512"],
     "docs 100,000,000 is more than kvplan simulates (at most 1,000,000)"),
    (["simulate", "serve", "--num-requests", "5", "--num-gpu-blocks", "100000000000"],
     "a pool of 100,000,000,000 blocks is more than kvplan simulates (at most 33,554,432;"),
    (["simulate", "serve", "--num-requests", "5", "--kv-tokens", "1e17"],
     "a pool of 6,250,000,000,000,000 blocks is more than kvplan simulates"),
    (["simulate", "prefix", "--num-gpu-blocks", "512", "--what-if-blocks", "100000000000"],
     "a pool of 100,000,000,000 blocks is more than kvplan simulates"),
    (["simulate", "serve", "--num-requests", "5", "--num-gpu-blocks", "512", "--block-size", "100000000000"],
     "block-size 100,000,000,000 is more than kvplan simulates (at most 65,536;"),
    (["simulate", "prefix", "--num-gpu-blocks", "512", "--doc-tokens", "100000000000"],
     "the workload holds 187,500,000,000 blocks of KV over its requests, more than kvplan simulates "
     "(at most 16,777,216)"),
    (["simulate", "prefix", "--scenario", "chat", "--turns", "100000000000", "--num-gpu-blocks", "512"],
     "conversations × turns 1,600,000,000,000 is more than kvplan simulates (at most 10,000,000)"),
    (["simulate", "serve", "--num-requests", "5", "--num-gpu-blocks", "512", "--shared-prefix-tokens",
      "100000000000", "--prompt-len", "100000000000"],
     "shared-prefix-tokens 100,000,000,000 is 6,250,000,000 blocks, more than kvplan simulates"),
    (["simulate", "prefix", "--scenario", "zipf", "--zipf-s", "nan", "--num-gpu-blocks", "512"],
     "zipf-s must be a finite number ≥ 0"),
])
def test_simulator_limit_is_one_line_at_once(argv: list[str], message: str) -> None:
    started = time.process_time()  # CPU time: a loaded machine does not count
    result = runner.invoke(app, argv)
    assert result.exit_code == 2, result.stdout
    assert message in one_error_line(result.stderr)
    assert time.process_time() - started < 5


def test_a_huge_shared_prefix_is_hashed_only_as_far_as_a_prompt_reaches() -> None:
    reqs = wl.synthetic_serve_requests(wl.SyntheticLoad(3, request_rate=1.0, arrival="fixed",
                                                        prompt_len=wl.LengthDist("constant", 40),
                                                        output_len=wl.LengthDist("constant", 2),
                                                        shared_prefix_tokens=10**11), block_size=16)
    assert [(r.prompt_len, len(r.prefix_hashes), r.num_prefix_blocks) for r in reqs] == [(40, 2, 2)] * 3


def test_zipf_with_a_huge_exponent_sends_every_request_to_the_first_document() -> None:
    w = wl.zipf_documents(docs=5, doc_tokens=32, num_requests=20, s=1e308, suffix_tokens=0, block_size=16, seed=0)
    first = w.requests[0].block_hashes
    assert all(r.block_hashes is first for r in w.requests)


def test_shared_prefix_builds_streams_only_for_tenants_that_get_a_request() -> None:
    started = time.process_time()  # CPU time: a loaded machine does not count
    w = wl.shared_prefix(num_requests=3, prefix_tokens=64, suffix_tokens=16, block_size=16, tenants=10**11)
    assert len(w.requests) == 3 and len({r.block_hashes[0] for r in w.requests}) == 3  # one salt each
    assert time.process_time() - started < 1


# ---------------------------------------------------------------------------------------------------
# Traces and length files


@pytest.mark.parametrize(("line", "message"), [
    ('{"prompt_len": Infinity}', "trace:1: prompt_len must be a positive integer, got inf"),
    ('{"prompt_len": 2.5}', "trace:1: prompt_len must be a positive integer, got 2.5"),
    ('{"prompt_len": 5, "timestamp": 1' + "0" * 400 + "}",
     "trace:1: timestamp 1000000000…(401 digits) is not a finite number of seconds"),
    ('{"prompt_len": 5, "timestamp": [1]}', "trace:1: timestamp must be a number, got [1]"),
    ("[" * 100_000 + "]" * 100_000, "trace:1: nested too deeply to read"),
])
def test_trace_value_beyond_reason_is_a_parse_error(line: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        wl.parse_trace([line], block_size=16)
    assert str(info.value) == message


@pytest.mark.parametrize("trace_block_size", [0, -16])
def test_trace_block_size_below_one_is_refused(trace_block_size: int) -> None:
    with pytest.raises(InvalidParameter, match="trace block size must be ≥ 1"):
        wl.parse_trace(['{"prompt_len": 5}'], block_size=16, trace_block_size=trace_block_size)


def test_trace_sub_block_hashes_are_made_on_demand_and_equal_the_eager_list() -> None:
    (rec,) = wl.parse_trace(['{"hash_ids": [7, 8]}'], block_size=16, trace_block_size=2**40)
    assert rec.prompt_len == 2 * 2**40 and len(rec.block_hashes) == 2 * 2**36
    hashes = rec.block_hashes
    assert hashes[0] == (7, 0) and hashes[2**36] == (8, 0) and hashes[-1] == (8, 2**36 - 1)
    (small,) = wl.parse_trace(['{"prompt_len": 100, "hash_ids": [7, 8]}'], block_size=16, trace_block_size=64)
    eager = [(h, j) for h in (7, 8) for j in range(4)][: 100 // 16]
    assert list(small.block_hashes) == eager == small.block_hashes[:] and len(small.block_hashes) == 6


def test_too_many_trace_lines_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wl, "MAX_REQUESTS", 2)
    with pytest.raises(ParseError, match="trace:3: more than 2 requests"):
        wl.parse_trace(['{"prompt_len": 5}'] * 3, block_size=16)


@pytest.mark.parametrize(("text", "values"), [("[2048.0, 512]", (2048, 512)), ("1 2,3", (1, 2, 3))])
def test_length_values_are_whole_numbers(text: str, values: tuple[int, ...]) -> None:
    assert wl.parse_length_values(text) == values


@pytest.mark.parametrize("text", ["[1e400]", "[2.5]", "[true]", "[NaN]", "[[1]]", "[" * 100_000 + "]" * 100_000])
def test_length_values_that_are_not_whole_numbers_are_refused(text: str) -> None:
    with pytest.raises(ParseError, match="expected integers"):
        wl.parse_length_values(text)


# ---------------------------------------------------------------------------------------------------
# The block pool: limits and the lazy free queue


def test_pool_limits_name_the_limit() -> None:
    bp.check_pool_size(bp.MAX_GPU_BLOCKS)
    with pytest.raises(InvalidParameter, match="at most 33,554,432"):
        bp.BlockPool(bp.MAX_GPU_BLOCKS + 1)
    bp.check_block_size(bp.MAX_BLOCK_SIZE)
    with pytest.raises(InvalidParameter, match="at most 65,536"):
        bp.check_block_size(bp.MAX_BLOCK_SIZE + 1)


def test_a_large_pool_costs_no_queue_entry_per_block() -> None:
    started = time.process_time()  # CPU time: a loaded machine does not count
    pool = bp.BlockPool(10_000_000)
    assert time.process_time() - started < 1  # an OrderedDict of 10M entries took ~5 s and ~1 GB
    assert pool.num_free_blocks() == 9_999_999 and pool.usage() == 0.0
    assert pool.get_new_blocks(3) == [1, 2, 3]
    assert pool.num_free_blocks() == 9_999_996


def test_never_used_blocks_sit_between_freed_unhashed_and_hashed_ones() -> None:
    pool = bp.BlockPool(8)  # usable 1..7
    a = pool.get_new_blocks(3)  # 1, 2, 3
    pool.cache_block(1, "a0")
    pool.free_blocks(reversed(a))  # 3 then 2 unhashed to the front; 1 hashed to the tail
    assert pool.free_queue() == [2, 3, 4, 5, 6, 7, 1]
    pool.check_invariants()
    b = pool.get_new_blocks(6)  # unhashed first, then the never-used ones, then the cached one (evicted)
    assert b == [2, 3, 4, 5, 6, 7] and pool.num_evictions == 0
    assert pool.get_new_blocks(1) == [1] and pool.num_evictions == 1
    assert pool.free_queue() == [] and pool.usage() == 1.0
    pool.free_blocks(reversed([*b, 1]))
    assert pool.free_queue() == [2, 3, 4, 5, 6, 7, 1]  # the last freed unhashed block is reused first
    pool.check_invariants()


# ---------------------------------------------------------------------------------------------------
# Plans: self-merging anchors, devices and pipes


def test_a_plan_that_merges_itself_names_the_line() -> None:
    from kvplan.ci.plan import parse_yaml

    with pytest.raises(ParseError) as info:
        parse_yaml("deployments: []\nx-d: &d {b: 1, <<: [*d, *d]}\n", "plan.yaml")
    assert str(info.value) == "plan.yaml:2: x-d: `<<` merges a mapping into itself (through an alias)"


def test_a_plan_naming_a_device_or_fifo_is_refused_and_an_open_pipe_is_read(tmp_path: Path) -> None:
    from kvplan.ci.plan import MAX_PLAN_BYTES, read_yaml

    with pytest.raises(ParseError, match="/dev/zero: not a regular file"):
        read_yaml(Path("/dev/zero"), "/dev/zero")
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)  # opening a named FIFO would wait for a writer: refused at once
    with pytest.raises(ParseError, match=r"plan.fifo: not a regular file \(a FIFO\)"):
        read_yaml(fifo, "plan.fifo")

    def pipe_with(data: bytes) -> tuple[int, threading.Thread]:  # what `<(…)` hands over: /dev/fd/N
        r, w = os.pipe()

        def write() -> None:
            try:
                with os.fdopen(w, "wb") as f:
                    f.write(data)
            except BrokenPipeError:  # the reader stopped at MAX_PLAN_BYTES + 1
                pass

        writer = threading.Thread(target=write)
        writer.start()
        return r, writer

    r, writer = pipe_with(b"deployments: []\n")
    assert read_yaml(Path(f"/dev/fd/{r}"), "plan.yaml").data == {"deployments": []}
    writer.join()
    os.close(r)
    r, writer = pipe_with(b"#" * (MAX_PLAN_BYTES + 10))
    with pytest.raises(ParseError, match=r"plan.yaml: more than a plan may be \(1 MiB\)"):
        read_yaml(Path(f"/dev/fd/{r}"), "plan.yaml")
    os.close(r)
    writer.join()


# ---------------------------------------------------------------------------------------------------
# One line per error


def test_fail_folds_line_breaks_and_escapes_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    exit_ = fail("bad value:\n  'x'\r\n\tthen\x1b[31mred\x00", "a\u2028hint")
    assert exit_.exit_code == 2
    assert capsys.readouterr().err == "Error: bad value: 'x' then\\x1b[31mred\\x00 (a hint)\n"
    assert one_line("a\x1cb\x85c") == "a b c"


def test_a_usage_error_is_one_error_line_with_exit_2() -> None:
    result = runner.invoke(app, ["fit", str(CONFIGS / "Qwen--Qwen2.5-7B"), "--gpu", "h100", "-tp", "abc"])
    assert result.exit_code == 2 and result.stdout == ""
    assert one_error_line(result.stderr) == ("Error: Invalid value for '--tensor-parallel-size' / '-tp': 'abc' is not "
                                             "a valid int. (see 'kvplan fit -h')")
    result = runner.invoke(app, ["nosuch"])
    assert result.exit_code == 2
    assert one_error_line(result.stderr) == "Error: No such command 'nosuch'. (see 'kvplan -h')"


def test_help_version_and_no_arguments_keep_their_exit_codes() -> None:
    assert runner.invoke(app, ["-h"]).exit_code == 0
    assert runner.invoke(app, ["--version"]).exit_code == 0
    bare = runner.invoke(app, [])
    assert bare.exit_code == 2 and "Usage: kvplan" in bare.stdout and bare.stderr == ""
