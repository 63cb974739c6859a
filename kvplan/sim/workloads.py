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
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field

from kvplan.errors import InvalidParameter, ParseError
from kvplan.sim.block_pool import NO_EXTRA_KEYS, NONE_HASH, BlockHash, hash_block

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


def cyclic_documents(docs: int, doc_tokens: int, block_size: int) -> PrefixWorkload:
    """The starting document's experiment (§9): `docs` unrelated documents read in order, again, reversed."""
    _check_positive(docs=docs, doc_tokens=doc_tokens, block_size=block_size)
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
    system = 0
    bases = [TokenStream(block_size, salt_key(f"tenant-{t}") if tenants > 1 else NO_EXTRA_KEYS)
             .extend(system, prefix_tokens) for t in range(tenants)]
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
    if s < 0 or suffix_tokens < 0:
        raise InvalidParameter("zipf-s and suffix-tokens must be ≥ 0")
    rng = random.Random(f"{seed}:zipf")
    cum: list[float] = []
    acc = 0.0
    for k in range(1, docs + 1):
        acc += 1.0 / k**s
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
    tbs = trace_block_size or block_size
    if tbs % block_size:
        raise InvalidParameter(f"trace block size {tbs} is not a multiple of block size {block_size}")
    split = tbs // block_size
    out: list[TraceRecord] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ParseError(f"{source}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(raw, dict):
            raise ParseError(f"{source}:{n}: expected a JSON object per line")
        rec: dict[str, object] = {_ALIASES.get(str(k), str(k)): v for k, v in raw.items()}
        try:
            out.append(_record(rec, block_size, split, timestamp_unit_s))
        except (TypeError, ValueError, KeyError) as exc:
            raise ParseError(f"{source}:{n}: {exc}") from None
    if not out:
        raise ParseError(f"{source}: no requests")
    out.sort(key=lambda r: r.timestamp_s)
    return out


def _record(rec: dict[str, object], bs: int, split: int, unit: float) -> TraceRecord:
    salt = rec.get("cache_salt")
    extra = salt_key(str(salt)) if salt else NO_EXTRA_KEYS
    ts = float(rec.get("timestamp", 0.0)) * unit  # type: ignore[arg-type]
    if not math.isfinite(ts):
        raise ValueError("timestamp is not finite")
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
            if split == 1:
                hashes = base
            else:
                hashes = [(h, j) for h in base for j in range(split)]
            hashes = hashes[: prompt // bs]
    if prompt < 1:
        raise ValueError("empty prompt")
    return TraceRecord(ts, prompt, out_len, hashes, str(rec.get("phase", "trace")))


def _pos_int(v: object, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


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
            return max(1, round(rng.lognormvariate(math.log(self.a), self.b)))
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


def parse_length_values(text: str, *, source: str = "lengths") -> tuple[int, ...]:
    """Lengths for an empirical distribution: a JSON list, or integers separated by whitespace/commas."""
    stripped = text.strip()
    try:
        raw = json.loads(stripped) if stripped.startswith("[") else stripped.replace(",", " ").split()
        values = tuple(int(v) for v in raw)
    except (ValueError, TypeError):
        raise ParseError(f"{source}: expected integers (one per line or a JSON list)") from None
    if not values or min(values) < 1:
        raise ParseError(f"{source}: need at least one length, all ≥ 1")
    return values


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


def synthetic_serve_requests(num_requests: int, *, request_rate: float, arrival: str, prompt_len: LengthDist,
                             output_len: LengthDist, block_size: int, shared_prefix_tokens: int = 0,
                             seed: int = 0) -> list[ServeRequest]:
    """`num_requests` requests with sampled lengths; each prompt starts with the same
    `shared_prefix_tokens` (capped at its length). Arrivals, prompts and outputs use separate seeded
    streams, so changing one distribution leaves the others' draws unchanged."""
    _check_positive(num_requests=num_requests, block_size=block_size)
    if shared_prefix_tokens < 0:
        raise InvalidParameter(f"shared-prefix-tokens must be ≥ 0, got {shared_prefix_tokens}")
    times = arrival_times(num_requests, request_rate, arrival, random.Random(f"{seed}:arrival"))
    rp, ro = random.Random(f"{seed}:prompt"), random.Random(f"{seed}:output")
    shared = TokenStream(block_size).extend(0, shared_prefix_tokens).hashes
    out = []
    for t in times:
        p = prompt_len.sample(rp)
        out.append(ServeRequest(t, p, output_len.sample(ro), shared, min(p, shared_prefix_tokens) // block_size))
    return out


def trace_serve_requests(records: Sequence[TraceRecord], output_len: LengthDist, seed: int = 0) -> list[ServeRequest]:
    """A trace as serving requests: arrivals relative to the first timestamp; a missing output length is
    drawn from `output_len`."""
    ro = random.Random(f"{seed}:output")
    t0 = records[0].timestamp_s if records else 0.0
    return [ServeRequest(r.timestamp_s - t0, r.prompt_len, r.output_len or output_len.sample(ro), r.block_hashes,
                         len(r.block_hashes)) for r in records]
