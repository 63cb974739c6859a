"""Workloads for the simulators: synthetic scenarios, length distributions, arrivals and JSONL traces.

Token content. Synthetic text is a sequence of *segments* `(content_id, length)`: two token ranges are
equal exactly when they come from the same offsets of the same segment (two different "random word"
documents share no prefix). A block's `tokens` in its chained hash are the segment pieces it covers,
which gives vLLM's prefix-hash semantics without materialising token ids. Traces that carry real token
ids are hashed on the ids themselves. Pure: file reading happens in the CLI; these take text.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from kvplan.errors import InvalidParameter, ParseError
from kvplan.sim.block_pool import NO_EXTRA_KEYS, NONE_HASH, BlockHash, hash_block

# --- limits: far above real use, low enough that a typo stops with a message, not after minutes or
# with MemoryError -----------------------------------------------------------------------------------
MAX_REQUESTS = 10_000_000
"""Requests in one workload or trace: a week of traffic at 16 requests/s. The serving simulator replays
6,000–12,000 requests/s in ~0.6 KB each (benchmarks/simulate.py), so this is 15–30 minutes and ~6 GB."""
MAX_DOCUMENTS = 1_000_000
"""Distinct documents of the cyclic and zipf scenarios: each costs a token stream before any block."""
MAX_WORKLOAD_BLOCKS = 1 << 24
"""KV blocks of a prefix-cache workload, summed over its requests (16.8M blocks: 268M tokens at 16 per
block). The prefix simulator serves about a million blocks per second per pass and keeps every block's
hash, so this is about a minute and a few GB; it also bounds the pool of the no-eviction replay."""

# ---------------------------------------------------------------------------------------------------
# Token streams


def salt_key(cache_salt: str) -> int:
    """A `cache_salt` as a stable int extra key (vLLM puts the salt in the first block's extra keys)."""
    return int.from_bytes(hashlib.sha256(cache_salt.encode()).digest()[:8], "big")


class TokenStream:
    """A growing token sequence made of synthetic segments, hashed block by block as it grows.

    `hashes[i]` is the chained hash of full block i (`hash_block_tokens`: parent, tokens, extra keys;
    the extra keys, e.g. a cache salt, go into the first block only, as vLLM does for `cache_salt`).
    """

    __slots__ = ("block_size", "extra_keys", "hashes", "num_tokens", "_pending", "_pending_len")

    def __init__(self, block_size: int, extra_keys: int = NO_EXTRA_KEYS) -> None:
        self.block_size = block_size
        self.extra_keys = extra_keys
        self.hashes: list[BlockHash] = []
        self.num_tokens = 0
        self._pending: list[tuple[int, int, int]] = []
        self._pending_len = 0

    def extend(self, content_id: int, length: int) -> TokenStream:
        """Append the first `length` tokens of the text `content_id`; returns self."""
        bs = self.block_size
        start = 0
        while start < length:
            take = min(bs - self._pending_len, length - start)
            self._pending.append((content_id, start, start + take))
            self._pending_len += take
            start += take
            if self._pending_len == bs:
                parent = self.hashes[-1] if self.hashes else NONE_HASH
                extra = self.extra_keys if not self.hashes else NO_EXTRA_KEYS
                self.hashes.append(hash_block(parent, tuple(self._pending), extra))  # type: ignore[arg-type]
                self._pending = []
                self._pending_len = 0
        self.num_tokens += length
        return self

    def copy(self) -> TokenStream:
        """An independent stream with the same content so far (to branch a shared prefix)."""
        other = TokenStream(self.block_size, self.extra_keys)
        other.hashes = list(self.hashes)
        other.num_tokens = self.num_tokens
        other._pending = list(self._pending)
        other._pending_len = self._pending_len
        return other


def token_block_hashes(token_ids: Sequence[int], block_size: int, extra_keys: int = NO_EXTRA_KEYS) -> list[int]:
    """Chained hashes of the full blocks of a real token-id sequence (`get_request_block_hasher`)."""
    out: list[int] = []
    parent = NONE_HASH
    for i in range(len(token_ids) // block_size):
        parent = hash_block(parent, tuple(token_ids[i * block_size:(i + 1) * block_size]),
                            extra_keys if i == 0 else NO_EXTRA_KEYS)
        out.append(parent)
    return out


# ---------------------------------------------------------------------------------------------------
# Prefix-cache workloads (requests served one at a time, as in the starting document's experiment)


@dataclass(frozen=True, eq=False)
class PrefixRequest:
    """One request of a prefix-cache workload.

    `block_hashes` are the chained hashes of the request's full blocks, prompt first, then generated
    tokens (it may be a longer shared list: only the first `(prompt + output − 1) // block_size` entries
    are read; missing ones are private to the request). KV is computed for `prompt + output − 1` tokens:
    the last sampled token is never fed back.
    """

    num_prompt_tokens: int
    block_hashes: Sequence[BlockHash]
    num_output_tokens: int = 1
    phase: int = 0
    uid: int = 0


@dataclass(frozen=True)
class PrefixWorkload:
    """Requests in the order they are sent, each tagged with the index of its phase (pass)."""

    scenario: str
    description: str
    phase_names: tuple[str, ...]
    requests: tuple[PrefixRequest, ...] = field(repr=False)


def _check_positive(**values: int | float) -> None:
    for name, v in values.items():
        if v <= 0:
            raise InvalidParameter(f"{name.replace('_', '-')} must be > 0, got {v}")


def _check_at_most(name: str, value: int, limit: int) -> None:
    """InvalidParameter naming `name` when `value` exceeds `limit` (one of the MAX_* caps above)."""
    if value > limit:
        raise InvalidParameter(f"{name} {value:,} is more than kvplan simulates (at most {limit:,})")


def check_workload_blocks(blocks: int) -> None:
    """Refuse a prefix-cache workload of more than `MAX_WORKLOAD_BLOCKS` KV blocks in all."""
    if blocks > MAX_WORKLOAD_BLOCKS:
        raise InvalidParameter(
            f"the workload holds {blocks:,} blocks of KV over its requests, more than kvplan simulates "
            f"(at most {MAX_WORKLOAD_BLOCKS:,})", hint="use fewer or shorter requests, or a larger --block-size")


def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def cyclic_documents(docs: int, doc_tokens: int, block_size: int) -> PrefixWorkload:
    """The starting document's experiment (§9): `docs` unrelated documents read in order, again, reversed."""
    _check_positive(docs=docs, doc_tokens=doc_tokens, block_size=block_size)
    _check_at_most("docs", docs, MAX_DOCUMENTS)
    check_workload_blocks(3 * docs * _blocks(doc_tokens, block_size))
    streams = [TokenStream(block_size).extend(d, doc_tokens).hashes for d in range(docs)]
    orders = (("in order", range(docs)), ("same order", range(docs)), ("reversed", range(docs - 1, -1, -1)))
    reqs: list[PrefixRequest] = []
    for phase, (_, order) in enumerate(orders):
        for d in order:
            reqs.append(PrefixRequest(doc_tokens, streams[d], 1, phase, len(reqs)))
    return PrefixWorkload(
        "cyclic", f"{docs} documents of {doc_tokens:,} tokens, no shared prefix: in order, again, reversed",
        tuple(name for name, _ in orders), tuple(reqs))


def shared_prefix(num_requests: int, prefix_tokens: int, suffix_tokens: int, block_size: int,
                  tenants: int = 1) -> PrefixWorkload:
    """A shared system prompt followed by a unique suffix; with `tenants` > 1 each tenant has its own
    `cache_salt`, so tenants never share blocks (vLLM: salt in the first block's extra keys)."""
    _check_positive(num_requests=num_requests, suffix_tokens=suffix_tokens, block_size=block_size, tenants=tenants)
    if prefix_tokens < 0:
        raise InvalidParameter(f"prefix-tokens must be ≥ 0, got {prefix_tokens}")
    _check_at_most("num-requests", num_requests, MAX_REQUESTS)
    check_workload_blocks(num_requests * _blocks(prefix_tokens + suffix_tokens, block_size))
    system = 0
    bases = [TokenStream(block_size, salt_key(f"tenant-{t}") if tenants > 1 else NO_EXTRA_KEYS)
             .extend(system, prefix_tokens) for t in range(min(tenants, num_requests))]  # unused ones: none
    reqs = []
    for i in range(num_requests):
        s = bases[i % tenants].copy().extend(1 + i, suffix_tokens)
        reqs.append(PrefixRequest(s.num_tokens, s.hashes, 1, 0, i))
    who = f", {tenants} tenants (one cache_salt each)" if tenants > 1 else ""
    return PrefixWorkload("shared-prefix", f"{num_requests} requests: a {prefix_tokens:,}-token system prompt, "
                          f"then {suffix_tokens:,} unique tokens{who}", ("requests",), tuple(reqs))


def multi_turn_chat(conversations: int, turns: int, system_tokens: int, user_tokens: int, reply_tokens: int,
                    block_size: int) -> PrefixWorkload:
    """Conversations served round-robin, turn by turn; turn t's prompt is the whole history plus a new user
    message, and its reply (computed by decode, so cached) becomes part of turn t+1's prompt."""
    _check_positive(conversations=conversations, turns=turns, user_tokens=user_tokens, reply_tokens=reply_tokens,
                    block_size=block_size)
    if system_tokens < 0:
        raise InvalidParameter(f"prefix-tokens must be ≥ 0, got {system_tokens}")
    _check_at_most("conversations × turns", conversations * turns, MAX_REQUESTS)
    # turn t's request computes KV for the history, its message and its reply (less the last token)
    check_workload_blocks(conversations * sum(_blocks(system_tokens + (t + 1) * (user_tokens + reply_tokens) - 1,
                                                      block_size) for t in range(turns)))
    streams = [TokenStream(block_size).extend(0, system_tokens) for _ in range(conversations)]
    next_id = 1
    reqs: list[PrefixRequest] = []
    for t in range(turns):
        for c in range(conversations):
            s = streams[c]
            s.extend(next_id, user_tokens)
            prompt = s.num_tokens
            s.extend(next_id + 1, reply_tokens)  # the assistant's reply, read again by the next turn
            next_id += 2
            reqs.append(PrefixRequest(prompt, s.hashes, reply_tokens, t, len(reqs)))
    return PrefixWorkload(
        "chat", f"{conversations} conversations × {turns} turns: {system_tokens:,}-token system prompt, "
        f"{user_tokens:,}-token messages, {reply_tokens:,}-token replies", tuple(f"turn {t + 1}" for t in range(turns)),
        tuple(reqs))


def zipf_documents(docs: int, doc_tokens: int, num_requests: int, s: float, suffix_tokens: int, block_size: int,
                   seed: int) -> PrefixWorkload:
    """Questions about documents whose popularity follows Zipf's law (P(rank k) ∝ 1/k^s)."""
    _check_positive(docs=docs, doc_tokens=doc_tokens, num_requests=num_requests, block_size=block_size)
    if not (math.isfinite(s) and s >= 0) or suffix_tokens < 0:
        raise InvalidParameter("zipf-s must be a finite number ≥ 0 and suffix-tokens ≥ 0")
    _check_at_most("docs", docs, MAX_DOCUMENTS)
    _check_at_most("num-requests", num_requests, MAX_REQUESTS)
    check_workload_blocks(docs * _blocks(doc_tokens, block_size)
                          + num_requests * _blocks(doc_tokens + suffix_tokens, block_size))
    rng = random.Random(f"{seed}:zipf")
    cum: list[float] = []
    acc = 0.0
    for k in range(1, docs + 1):
        acc += float(k) ** -s  # = 1/k^s; underflows to 0 for a large s, where 1/k**s overflows
        cum.append(acc)
    bases = [TokenStream(block_size).extend(d, doc_tokens) for d in range(docs)]
    picks = rng.choices(range(docs), cum_weights=cum, k=num_requests)
    reqs = []
    for i, d in enumerate(picks):
        if suffix_tokens:
            st = bases[d].copy().extend(docs + i, suffix_tokens)
            reqs.append(PrefixRequest(st.num_tokens, st.hashes, 1, 0, i))
        else:
            reqs.append(PrefixRequest(doc_tokens, bases[d].hashes, 1, 0, i))
    return PrefixWorkload("zipf", f"{num_requests:,} requests over {docs} documents of {doc_tokens:,} tokens, "
                          f"Zipf s={s:g}, {suffix_tokens:,}-token unique questions", ("requests",), tuple(reqs))


# ---------------------------------------------------------------------------------------------------
# JSONL traces


@dataclass(frozen=True, eq=False)
class TraceRecord:
    """One trace line: arrival time (s), prompt length, optional output length, prompt block hashes."""

    timestamp_s: float
    prompt_len: int
    output_len: int | None
    block_hashes: Sequence[BlockHash]
    phase: str


_ALIASES = {"input_length": "prompt_len", "output_length": "output_len", "hash_ids": "block_hashes",
            "prompt_tokens": "prompt_len", "num_tokens": "prompt_len", "max_tokens": "output_len"}


def parse_trace(lines: Iterable[str], *, block_size: int, trace_block_size: int | None = None,
                timestamp_unit_s: float = 1.0, source: str = "trace") -> list[TraceRecord]:
    """Read a JSONL trace: one request per line, sorted by timestamp (stable).

    Fields: `timestamp` (×`timestamp_unit_s` seconds, default 0), the prompt as `token_ids` or
    `prompt_len` (alias `input_length`), optionally `block_hashes` (alias `hash_ids`, Mooncake's format:
    already-chained hashes of `trace_block_size`-token blocks, split here into `block_size` sub-blocks),
    `output_len` (alias `output_length`), `cache_salt`, `phase`.
    """
    if block_size < 1:
        raise InvalidParameter(f"block-size must be ≥ 1, got {block_size}")
    tbs = block_size if trace_block_size is None else trace_block_size
    if tbs < 1:
        raise InvalidParameter(f"trace block size must be ≥ 1, got {tbs}")
    if tbs % block_size:
        raise InvalidParameter(f"trace block size {tbs} is not a multiple of block size {block_size}")
    split = tbs // block_size
    out: list[TraceRecord] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if len(out) >= MAX_REQUESTS:
            raise ParseError(f"{source}:{n}: more than {MAX_REQUESTS:,} requests, more than kvplan simulates")
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ParseError(f"{source}:{n}: not JSON ({exc.msg})") from None
        except RecursionError:  # json's decoder recurses once per `[`/`{`
            raise ParseError(f"{source}:{n}: nested too deeply to read") from None
        if not isinstance(raw, dict):
            raise ParseError(f"{source}:{n}: expected a JSON object per line")
        rec: dict[str, object] = {_ALIASES.get(str(k), str(k)): v for k, v in raw.items()}
        try:
            out.append(_record(rec, block_size, split, timestamp_unit_s))
        except (TypeError, ValueError, KeyError, OverflowError) as exc:
            raise ParseError(f"{source}:{n}: {exc}") from None
    if not out:
        raise ParseError(f"{source}: no requests")
    out.sort(key=lambda r: r.timestamp_s)
    return out


def _record(rec: dict[str, object], bs: int, split: int, unit: float) -> TraceRecord:
    salt = rec.get("cache_salt")
    extra = salt_key(str(salt)) if salt else NO_EXTRA_KEYS
    stamp = rec.get("timestamp", 0.0)
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float, str)):
        raise ValueError(f"timestamp must be a number, got {_shown(stamp)}")
    try:
        ts = float(stamp) * unit
    except OverflowError:  # an integer beyond float's range
        ts = math.inf
    if not math.isfinite(ts):
        raise ValueError(f"timestamp {_shown(stamp)} is not a finite number of seconds")
    output = rec.get("output_len")
    out_len = None if output is None else _pos_int(output, "output_len")
    tokens = rec.get("token_ids")
    hashes: Sequence[BlockHash]
    if tokens is not None:
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ValueError("token_ids must be a list of integers")
        prompt = len(tokens)
        hashes = token_block_hashes(tokens, bs, extra)
    else:
        given = rec.get("block_hashes")
        if "prompt_len" in rec:
            prompt = _pos_int(rec["prompt_len"], "prompt_len")
        elif isinstance(given, list):
            prompt = len(given) * split * bs
        else:
            raise KeyError("need token_ids, prompt_len or block_hashes")
        if given is None:
            hashes = ()
        else:
            if not isinstance(given, list) or not all(isinstance(h, (int, str)) for h in given):
                raise ValueError("block_hashes must be a list of integers or strings")
            base: list[Hashable] = [(extra, h) if extra else h for h in given]
            n_blocks = min(len(base) * split, prompt // bs)
            hashes = base[:n_blocks] if split == 1 else SubBlockHashes(base, split, n_blocks)
    if prompt < 1:
        raise ValueError("empty prompt")
    return TraceRecord(ts, prompt, out_len, hashes, str(rec.get("phase", "trace")))


def _pos_int(v: object, name: str) -> int:
    if (isinstance(v, bool) or not isinstance(v, (int, float))
            or (isinstance(v, float) and not (math.isfinite(v) and v.is_integer())) or v < 1):
        raise ValueError(f"{name} must be a positive integer, got {_shown(v)}")
    return int(v)


def _shown(v: object, limit: int = 40) -> str:
    """`repr(v)`, cut short: a trace value can be a 400-digit integer."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**limit:
        digits = str(v)
        return f"{digits[:10]}…({len(digits.lstrip('-'))} digits)"
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "…"


class SubBlockHashes(Sequence[BlockHash]):
    """The hashes of `block_size` sub-blocks of a trace's coarser blocks, made on demand: trace block `h`
    of `split` sub-blocks gives `(h, 0)`, …, `(h, split − 1)` (a chained hash stays unique per sub-block).
    Only the sub-blocks a simulator reads are built, however large `split` is."""

    __slots__ = ("_base", "_split", "_len")

    def __init__(self, base: Sequence[Hashable], split: int, length: int) -> None:
        self._base = base
        self._split = split
        self._len = length

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> BlockHash: ...

    @overload
    def __getitem__(self, i: slice) -> list[BlockHash]: ...

    def __getitem__(self, i: int | slice) -> BlockHash | list[BlockHash]:
        if isinstance(i, slice):
            base, split = self._base, self._split
            return [(base[j // split], j % split) for j in range(*i.indices(self._len))]
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError("sub-block index out of range")
        return (self._base[i // self._split], i % self._split)

    def __iter__(self) -> Iterator[BlockHash]:
        n = self._len
        for h in self._base:
            for j in range(min(self._split, n)):
                yield (h, j)
            n -= self._split
            if n <= 0:
                return


def trace_prefix_workload(records: Sequence[TraceRecord], default_output_len: int = 1) -> PrefixWorkload:
    """A trace as a prefix-cache workload (requests one at a time, in timestamp order; phases by `phase`)."""
    names: dict[str, int] = {}
    reqs = []
    for i, r in enumerate(records):
        ph = names.setdefault(r.phase, len(names))
        reqs.append(PrefixRequest(r.prompt_len, r.block_hashes, r.output_len or default_output_len, ph, i))
    return PrefixWorkload("trace", f"{len(records):,} requests from a trace", tuple(names), tuple(reqs))


# ---------------------------------------------------------------------------------------------------
# Length distributions and arrivals (serving workloads)


@dataclass(frozen=True)
class LengthDist:
    """A token-length distribution: `constant:N`, `uniform:LO:HI` (inclusive), `lognormal:MEDIAN:SIGMA`
    (exp of a normal with mean ln MEDIAN), or `empirical` (values drawn uniformly with replacement)."""

    kind: str
    a: float = 0.0
    b: float = 0.0
    values: tuple[int, ...] = ()
    path: str = ""

    def sample(self, rng: random.Random) -> int:
        """One length (≥ 1)."""
        if self.kind == "constant":
            return int(self.a)
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        if self.kind == "lognormal":
            try:
                return max(1, round(rng.lognormvariate(math.log(self.a), self.b)))
            except OverflowError:  # exp() of a draw beyond float's range: no real length
                raise InvalidParameter(f"lognormal:{self.a:g}:{self.b:g} drew a length beyond any "
                                       "context; use a smaller median or sigma") from None
        if not self.values:
            raise InvalidParameter(f"empirical distribution {self.path!r} has no values loaded")
        return rng.choice(self.values)

    def describe(self) -> str:
        """The spec in the form it was given."""
        if self.kind == "constant":
            return str(int(self.a))
        if self.kind == "uniform":
            return f"uniform:{int(self.a)}:{int(self.b)}"
        if self.kind == "lognormal":
            return f"lognormal:{self.a:g}:{self.b:g}"
        return f"empirical:{self.path}"


def parse_length_dist(spec: str, *, what: str = "length") -> LengthDist:
    """`2048`, `constant:2048`, `uniform:512:4096`, `lognormal:256:0.5` or `empirical:PATH`."""
    parts = spec.strip().split(":")
    kind = parts[0].lower()
    try:
        if len(parts) == 1:
            n = int(parts[0])
            if n < 1:
                raise ValueError
            return LengthDist("constant", n)
        if kind in ("constant", "const") and len(parts) == 2 and int(parts[1]) >= 1:
            return LengthDist("constant", int(parts[1]))
        if kind == "uniform" and len(parts) == 3:
            lo, hi = int(parts[1]), int(parts[2])
            if 1 <= lo <= hi:
                return LengthDist("uniform", lo, hi)
        if kind == "lognormal" and len(parts) == 3:
            med, sigma = float(parts[1]), float(parts[2])
            if med >= 1 and sigma >= 0 and math.isfinite(med) and math.isfinite(sigma):
                return LengthDist("lognormal", med, sigma)
        if kind == "empirical" and len(parts) >= 2:
            return LengthDist("empirical", path=":".join(parts[1:]))
    except ValueError:
        pass
    raise InvalidParameter(f"{what}: cannot read {spec!r}",
                           hint="examples: 2048, uniform:512:4096, lognormal:256:0.5, empirical:lengths.txt")


# An empirical distribution's values: more than any benchmark dataset's requests.
MAX_LENGTH_VALUES = 10_000_000


def parse_length_values(text: str | Iterable[str], *, source: str = "lengths") -> tuple[int, ...]:
    """Lengths for an empirical distribution: a JSON list, or integers separated by whitespace/commas.
    `text` is the whole file or its lines (streamed: the values are read line by line)."""
    lines = iter([text] if isinstance(text, str) else text)
    values: list[int] = []
    try:
        for line in lines:
            stripped = line.strip()
            if not stripped:
                continue
            if not values and stripped.startswith("["):
                raw: Iterable[object] = json.loads("\n".join([stripped, *lines]))
            else:
                raw = stripped.replace(",", " ").split()
            for v in raw:
                values.append(_length_value(v))
                if len(values) > MAX_LENGTH_VALUES:
                    raise ParseError(f"{source}: more than {MAX_LENGTH_VALUES:,} lengths, more than kvplan samples")
    except (ValueError, TypeError, RecursionError):
        raise ParseError(f"{source}: expected integers (one per line or a JSON list)") from None
    if not values or min(values) < 1:
        raise ParseError(f"{source}: need at least one length, all ≥ 1")
    return tuple(values)


def _length_value(v: object) -> int:
    """A whole number from a JSON list (an integral float such as 2048.0 too) or a text token."""
    if isinstance(v, str):
        return int(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"not a length: {v!r}")
    if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
        raise ValueError(f"not a whole number: {v!r}")
    return int(v)


ARRIVALS = ("poisson", "fixed")


def arrival_times(n: int, request_rate: float, arrival: str, rng: random.Random) -> list[float]:
    """Arrival times (s) of `n` requests: the first at 0, then Poisson (exponential gaps, as
    `vllm bench serve` with burstiness 1) or fixed gaps of 1/rate; rate ∞ sends all at once."""
    if arrival not in ARRIVALS:
        raise InvalidParameter(f"arrival must be one of {', '.join(ARRIVALS)}, got {arrival!r}")
    if not request_rate > 0:
        raise InvalidParameter(f"request-rate must be > 0, got {request_rate}")
    if math.isinf(request_rate):
        return [0.0] * n
    out, t = [], 0.0
    for i in range(n):
        if i:
            t += rng.expovariate(request_rate) if arrival == "poisson" else 1.0 / request_rate
        out.append(t)
    return out


@dataclass(frozen=True, eq=False)
class ServeRequest:
    """One request for the serving simulator.

    `prefix_hashes[:num_prefix_blocks]` are the hashes of the prompt's leading full blocks that other
    requests may share (a system prompt, a trace's token ids); every other block is private to the request.
    """

    arrival_s: float
    prompt_len: int
    output_len: int
    prefix_hashes: Sequence[BlockHash] = ()
    num_prefix_blocks: int = 0


@dataclass(frozen=True)
class SyntheticLoad:
    """A synthetic serving load, as `vllm bench serve` describes one: `num_requests` arriving at `request_rate`
    per second (∞: all at once) by `arrival` (ARRIVALS), prompt and output lengths drawn from their
    distributions, the first `shared_prefix_tokens` of every prompt shared (a system prompt), drawn from `seed`."""

    num_requests: int
    request_rate: float
    arrival: str
    prompt_len: LengthDist
    output_len: LengthDist
    shared_prefix_tokens: int = 0
    seed: int = 0


def synthetic_serve_requests(load: SyntheticLoad, *, block_size: int) -> list[ServeRequest]:
    """`load.num_requests` requests with sampled lengths; each prompt starts with the same
    `shared_prefix_tokens` (capped at its length). Arrivals, prompts and outputs use separate seeded
    streams, so changing one distribution leaves the others' draws unchanged."""
    num_requests, shared_prefix_tokens, seed = load.num_requests, load.shared_prefix_tokens, load.seed
    request_rate, arrival, prompt_len, output_len = load.request_rate, load.arrival, load.prompt_len, load.output_len
    _check_positive(num_requests=num_requests, block_size=block_size)
    if shared_prefix_tokens < 0:
        raise InvalidParameter(f"shared-prefix-tokens must be ≥ 0, got {shared_prefix_tokens}")
    _check_at_most("num-requests", num_requests, MAX_REQUESTS)
    times = arrival_times(num_requests, request_rate, arrival, random.Random(f"{seed}:arrival"))
    rp, ro = random.Random(f"{seed}:prompt"), random.Random(f"{seed}:output")
    prompts = [prompt_len.sample(rp) for _ in times]  # own stream: drawing them first changes no value
    # Only the part of the shared prefix some prompt covers is hashed.
    shared_len = min(shared_prefix_tokens, max(prompts))
    if shared_len // block_size > MAX_WORKLOAD_BLOCKS:
        raise InvalidParameter(f"shared-prefix-tokens {shared_prefix_tokens:,} is {shared_len // block_size:,} "
                               f"blocks, more than kvplan simulates (at most {MAX_WORKLOAD_BLOCKS:,})")
    shared = TokenStream(block_size).extend(0, shared_len).hashes
    return [ServeRequest(t, p, output_len.sample(ro), shared, min(p, shared_prefix_tokens) // block_size)
            for t, p in zip(times, prompts, strict=True)]


def trace_serve_requests(records: Sequence[TraceRecord], output_len: LengthDist, seed: int = 0) -> list[ServeRequest]:
    """A trace as serving requests: arrivals relative to the first timestamp; a missing output length is
    drawn from `output_len`."""
    ro = random.Random(f"{seed}:output")
    t0 = records[0].timestamp_s if records else 0.0
    return [ServeRequest(r.timestamp_s - t0, r.prompt_len, r.output_len or output_len.sample(ro), r.block_hashes,
                         len(r.block_hashes)) for r in records]


# ---------------------------------------------------------------------------------------------------
# `kvplan simulate`'s workload options, read and checked (the CLI and kvplan.simulate_prefix|serve)

PREFIX_SCENARIOS = ("cyclic", "shared-prefix", "chat", "zipf", "trace")


@dataclass(frozen=True)
class PrefixScenario:
    """`kvplan simulate prefix`'s workload: the scenario and its shape, each field the option of that name (the
    defaults are the command's: the starting document's ten documents of 5,033 tokens)."""

    scenario: str = "cyclic"
    docs: int = 10
    doc_tokens: int = 5033
    num_requests: int = 200
    prefix_tokens: int = 1024
    suffix_tokens: int = 256
    tenants: int = 1
    conversations: int = 16
    turns: int = 5
    user_tokens: int = 256
    reply_tokens: int = 256
    zipf_s: float = 1.0
    seed: int = 0


def prefix_workload(shape: PrefixScenario, block_size: int,
                    trace: Sequence[TraceRecord] | None = None) -> PrefixWorkload:
    """The workload `shape` names, in blocks of `block_size`; a trace given (read by parse_trace) is the workload
    whatever the scenario, and `--scenario trace` without one is refused."""
    s = shape
    if trace is None and s.scenario not in PREFIX_SCENARIOS:
        raise InvalidParameter(f"--scenario must be one of {', '.join(PREFIX_SCENARIOS)}, got {s.scenario!r}")
    if trace is not None:
        return trace_prefix_workload(trace)
    if s.scenario == "cyclic":
        return cyclic_documents(s.docs, s.doc_tokens, block_size)
    if s.scenario == "shared-prefix":
        return shared_prefix(s.num_requests, s.prefix_tokens, s.suffix_tokens, block_size, s.tenants)
    if s.scenario == "chat":
        return multi_turn_chat(s.conversations, s.turns, s.prefix_tokens, s.user_tokens, s.reply_tokens, block_size)
    if s.scenario == "zipf":
        return zipf_documents(s.docs, s.doc_tokens, s.num_requests, s.zipf_s, s.suffix_tokens, block_size, s.seed)
    raise InvalidParameter("--scenario trace needs --trace FILE")


# The serve scheduler steps every request through prefill and decode: ~150 µs and ~1.6 KB per request
# (200,000 requests: 30 s, 330 MB). A million stay within minutes and 2 GB; `simulate prefix` (no
# timing) runs to MAX_REQUESTS.
MAX_SERVE_REQUESTS = 1_000_000


def check_serve_requests(n: int, what: str) -> None:
    """Refuse a serve simulation of more than MAX_SERVE_REQUESTS requests (`what` names where they came from)."""
    if n > MAX_SERVE_REQUESTS:
        raise InvalidParameter(
            f"{what}: {n:,} is more than kvplan's serve simulation runs (at most {MAX_SERVE_REQUESTS:,}, a few "
            "minutes)", hint="simulate fewer requests (the queue's behaviour settles long before), or use "
            "`kvplan simulate prefix` for cache hits alone")


def parse_request_rate(text: str | float) -> float:
    """`--request-rate`: requests per second, or inf (all at once, `vllm bench serve`'s default); its range is
    arrival_times'."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    try:
        return float(text)
    except (TypeError, ValueError):
        raise InvalidParameter(f"--request-rate: cannot read {text!r}", hint="a number or inf") from None


TIMESTAMP_UNITS = {"s": 1.0, "ms": 1e-3}  # a trace's timestamps: seconds, or ms (Mooncake's traces)


def timestamp_unit_s(unit: str) -> float:
    """`--trace-timestamp-unit` in seconds."""
    if unit not in TIMESTAMP_UNITS:
        raise InvalidParameter("--trace-timestamp-unit must be s or ms")
    return TIMESTAMP_UNITS[unit]
