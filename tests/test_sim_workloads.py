"""Workloads: chained hashes of synthetic text and token ids, traces, serving requests."""
from __future__ import annotations

import math

import pytest

from kvplan.errors import InvalidParameter, ParseError
from kvplan.sim.workloads import (
    SyntheticLoad,
    TokenStream,
    parse_length_dist,
    parse_length_values,
    parse_trace,
    salt_key,
    synthetic_serve_requests,
    token_block_hashes,
    trace_serve_requests,
)


def test_only_full_blocks_are_hashed() -> None:
    assert len(TokenStream(16).extend(0, 5033).hashes) == 314
    assert len(token_block_hashes(list(range(47)), 16)) == 2


def test_one_different_token_changes_every_later_block() -> None:
    a = token_block_hashes(list(range(64)), 16)
    b = token_block_hashes([0, *range(1, 20), 999, *range(21, 64)], 16)
    assert a[0] == b[0]
    assert all(x != y for x, y in zip(a[1:], b[1:], strict=True))


def test_a_shorter_reading_of_the_same_text_shares_its_full_blocks() -> None:
    whole = TokenStream(16).extend(3, 40).extend(4, 40)
    part = TokenStream(16).extend(3, 40).extend(4, 10)  # 50 tokens: 3 full blocks, the 3rd straddling texts
    assert part.hashes == whole.hashes[:3]
    branch = whole.copy().extend(5, 16)
    assert branch.hashes[:len(whole.hashes)] == whole.hashes
    assert len(whole.hashes) == 5 and len(branch.hashes) == 6


def test_cache_salt_changes_the_first_block_and_so_all() -> None:
    plain = TokenStream(16).extend(0, 64).hashes
    salted = TokenStream(16, salt_key("tenant-a")).extend(0, 64).hashes
    assert all(x != y for x, y in zip(plain, salted, strict=True))
    assert salt_key("tenant-a") == salt_key("tenant-a")


def test_trace_reads_mooncake_fields_and_splits_their_blocks() -> None:
    lines = ['{"timestamp": 27482, "input_length": 1100, "output_length": 10, "hash_ids": [46, 47, 48]}', "",
             '{"timestamp": 0, "prompt_len": 20}']
    recs = parse_trace(lines, block_size=16, trace_block_size=512, timestamp_unit_s=1e-3)
    assert [r.timestamp_s for r in recs] == [0.0, pytest.approx(27.482)]  # sorted by time
    first = recs[1]
    assert (first.prompt_len, first.output_len) == (1100, 10)
    assert len(first.block_hashes) == 1100 // 16  # 68 sub-blocks: 32 per 512-token hash, cut at the prompt
    assert first.block_hashes[0] == (46, 0) and first.block_hashes[32] == (47, 0)
    assert recs[0].block_hashes == () and recs[0].output_len is None


def test_trace_errors_name_the_line() -> None:
    with pytest.raises(ParseError, match="t:2: not JSON"):
        parse_trace(['{"prompt_len": 3}', "{oops"], block_size=16, source="t")
    with pytest.raises(ParseError, match="t:1: .*token_ids"):
        parse_trace(['{"output_len": 3}'], block_size=16, source="t")
    with pytest.raises(ParseError, match="no requests"):
        parse_trace([], block_size=16, source="t")
    with pytest.raises(InvalidParameter):
        parse_trace(['{"prompt_len": 3}'], block_size=16, trace_block_size=24)


def test_trace_serve_requests_start_at_zero_and_fill_missing_outputs() -> None:
    recs = parse_trace(['{"timestamp": 5, "prompt_len": 20}', '{"timestamp": 7, "prompt_len": 20, "output_len": 4}'],
                       block_size=16)
    reqs = trace_serve_requests(recs, parse_length_dist("9"))
    assert [(r.arrival_s, r.output_len) for r in reqs] == [(0.0, 9), (2.0, 4)]


def test_shared_prefix_blocks_are_capped_by_the_prompt() -> None:
    reqs = synthetic_serve_requests(SyntheticLoad(50, request_rate=math.inf, arrival="poisson",
                                                  prompt_len=parse_length_dist("uniform:10:100"),
                                                  output_len=parse_length_dist("5"), shared_prefix_tokens=64, seed=0),
                                    block_size=16)
    assert all(r.num_prefix_blocks == min(r.prompt_len, 64) // 16 for r in reqs)
    assert reqs[0].prefix_hashes is reqs[1].prefix_hashes  # one shared list, not a copy per request


def test_empirical_values_parse() -> None:
    assert parse_length_values("[3, 4]") == (3, 4)
    assert parse_length_values("3\n4, 5") == (3, 4, 5)
    with pytest.raises(ParseError):
        parse_length_values("0 1")
