"""Read a vLLM server's Prometheus `/metrics` into typed snapshots, one per engine.

The adapter half (`read_exposition`, `scrape_twice`) fetches the text with urllib or reads a saved file;
the parsing half (`parse_exposition`, `histogram_quantile`) is pure. Parsing uses prometheus_client's own
text parser, never a hand-written one.

Metric names, types and labels are those of vLLM's `v1/metrics/loggers.py:PrometheusStatLogger`
(vllm-reference.md §8): every series carries `model_name` and `engine`; counters are exposed with the
`_total` suffix; `vllm:cache_config_info` is a gauge of 1 whose labels are the CacheConfig fields (and
`engine`). Older names are read when the current one is absent: `vllm:gpu_cache_usage_perc` (V0 and
V1 ≤ 0.10), `vllm:gpu_prefix_cache_{queries,hits}_total` (V1 ≤ 0.10), `vllm:time_per_output_token_seconds`
(the V0 name of the inter-token latency).
"""
from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kvplan.errors import InvalidParameter, NetworkError, ParseError

VLLM_PREFIX: Final = "vllm:"
METRICS_PATH: Final = "/metrics"  # where vLLM's API server mounts prometheus_client's ASGI app
# kvplan's bound on the engines one exposition may name: a vLLM API server reports one engine per data-parallel
# rank it serves, and the largest public deployments run a few hundred; 50,000 took minutes to render.
MAX_ENGINES: Final = 1_024
MAX_WAIT_S: Final = 86_400.0  # --timeout / --interval: a day; more is a typo (and 1e300 s overflows time_t)

# Gauges and counters kvplan reads: field of EngineMetrics → sample names, the current one first.
_SCALARS: Final[Mapping[str, tuple[str, ...]]] = {
    "num_requests_running": ("vllm:num_requests_running",),
    "num_requests_waiting": ("vllm:num_requests_waiting",),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "num_preemptions": ("vllm:num_preemptions_total",),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "request_success": ("vllm:request_success_total",),  # summed over finished_reason
}
SCALAR_METRICS: Final = _SCALARS  # read by diagnose to name an impossible sample
# Latency histograms: short name → metric names (current first). Buckets: vllm-reference.md §8.
HISTOGRAMS: Final[Mapping[str, tuple[str, ...]]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "queue": ("vllm:request_queue_time_seconds",),
    "prefill": ("vllm:request_prefill_time_seconds",),
    "decode": ("vllm:request_decode_time_seconds",),
    "e2e": ("vllm:e2e_request_latency_seconds",),
}
_WAITING_BY_REASON: Final = "vllm:num_requests_waiting_by_reason"
_CACHE_CONFIG_INFO: Final = "vllm:cache_config_info"
_ENGINE_LABELS: Final = ("model_name", "engine")

EngineKey = tuple[str | None, str | None]  # (model_name, engine) labels; None where a series lacks one


@dataclass(frozen=True)
class Histogram:
    """One Prometheus histogram series: cumulative counts per upper bound `le`, ascending, ending at +Inf."""

    buckets: tuple[tuple[float, float], ...]
    count: float
    sum: float

    def since(self, earlier: Histogram | None) -> Histogram:
        """The observations made after `earlier` (what `rate()` over the window sees).

        A count that went down means the server restarted (a counter reset): then, as Prometheus does,
        everything now counted is new. Bucket layouts that differ also count as a reset.
        """
        if earlier is None or self.count < earlier.count or [b for b, _ in self.buckets] != [
            b for b, _ in earlier.buckets
        ]:
            return self
        buckets = tuple((le, c - e) for (le, c), (_, e) in zip(self.buckets, earlier.buckets, strict=True))
        return Histogram(buckets, self.count - earlier.count, self.sum - earlier.sum)


@dataclass(frozen=True)
class Quantile:
    """A histogram quantile and the bucket it fell in: it is never finer than `lower`..`upper`.

    When the rank lies in the +Inf bucket, `value` is the highest finite bound (PromQL's answer) and
    `upper` is infinity: the true quantile is only known to be at least `value`.
    """

    q: float
    value: float
    lower: float
    upper: float


@dataclass(frozen=True)
class EngineMetrics:
    """What one engine (one `model_name`, `engine` pair) exposes. None where the series is absent."""

    model_name: str | None
    engine: str | None
    num_requests_running: float | None = None
    num_requests_waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1 (vllm:kv_cache_usage_perc is a fraction despite its name)
    num_preemptions: float | None = None  # counter
    prefix_cache_queries: float | None = None  # counter, tokens
    prefix_cache_hits: float | None = None  # counter, tokens
    prompt_tokens: float | None = None  # counter
    generation_tokens: float | None = None  # counter
    request_success: float | None = None  # counter, all finished_reason values
    waiting_by_reason: Mapping[str, float] = field(default_factory=dict)
    histograms: Mapping[str, Histogram] = field(default_factory=dict)  # keys from HISTOGRAMS
    cache_config: Mapping[str, str] = field(default_factory=dict)  # labels of vllm:cache_config_info

    @property
    def key(self) -> EngineKey:
        """The labels that tell engines apart."""
        return (self.model_name, self.engine)


@dataclass(frozen=True)
class MetricsSnapshot:
    """One scrape: every engine in the exposition, in the order first seen."""

    engines: tuple[EngineMetrics, ...]

    def engine(self, key: EngineKey) -> EngineMetrics | None:
        """The engine with these labels, if this snapshot has it."""
        return next((e for e in self.engines if e.key == key), None)


# --------------------------------------------------------------------------------------------------
# Parsing (pure)


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _samples(text: str) -> list[Any]:
    """All `vllm:` samples, via prometheus_client's parser; a body it cannot read is a ParseError."""
    from prometheus_client.parser import text_string_to_metric_families

    # The text format ends every line, the last included, with "\n" (Prometheus exposition format
    # spec, "Line format"). A body cut off mid-line would otherwise parse: "0.93" cut to "0." reads 0.0.
    if text and not text.endswith("\n"):
        raise ParseError("the metrics text is truncated: its last line has no end",
                         hint="the server or a proxy cut the response short; scrape again")
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise ParseError(f"not a Prometheus text exposition ({_short(str(exc))})",
                         hint="point kvplan at the vLLM server's /metrics") from None
    samples = [s for f in families for s in f.samples if s.name.startswith(VLLM_PREFIX)]
    if not samples:
        raise ParseError("no vLLM metrics (vllm:…) in the exposition",
                         hint="is this a vLLM server's /metrics, started without --disable-log-stats?")
    return samples


def _key(labels: Mapping[str, str]) -> EngineKey:
    return (labels.get("model_name"), labels.get("engine"))


def _le(text: str) -> float:
    if text in ("+Inf", "Inf", "inf"):
        return math.inf
    try:
        value = float(text)
    except ValueError:
        raise ParseError(f"a histogram bucket has le={text!r}, not a number",
                         hint="point kvplan at the vLLM server's /metrics") from None
    if math.isnan(value):  # a bound orders the buckets; NaN orders nothing (OpenMetrics: le is a number)
        raise ParseError(f"a histogram bucket has le={text!r}, and a bucket bound cannot be NaN",
                         hint="point kvplan at the vLLM server's /metrics")
    return value


def _no_duplicates(samples: Iterable[Any]) -> None:
    """Refuse a series exposed twice (same name, same labels): Prometheus' scrape refuses it as a duplicate
    sample, and summing or picking one would report a figure no server counted."""
    seen: set[tuple[str, frozenset[tuple[str, str]]]] = set()
    for s in samples:
        key = (s.name, frozenset(s.labels.items()))
        if key in seen:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            raise ParseError(f"the exposition has the series {_short(s.name + '{' + labels + '}')} twice",
                             hint="Prometheus refuses duplicate series; scrape the server itself, not a merge")
        seen.add(key)


def _histograms(samples: Iterable[Any]) -> dict[EngineKey, dict[str, Histogram]]:
    bucket_rows: dict[tuple[str, EngineKey], list[tuple[float, float]]] = defaultdict(list)
    totals: dict[tuple[str, EngineKey], dict[str, float]] = defaultdict(dict)
    names = {name: short for short, alts in HISTOGRAMS.items() for name in alts}
    for s in samples:
        base, _, suffix = s.name.rpartition("_")
        if base not in names:
            continue
        labels = {k: v for k, v in s.labels.items() if k != "le"}
        if labels.keys() - set(_ENGINE_LABELS):
            continue  # a split kvplan does not know; never mix it into the engine's histogram
        where = (base, _key(labels))
        if suffix == "bucket" and "le" in s.labels:
            bucket_rows[where].append((_le(s.labels["le"]), float(s.value)))
        elif suffix in ("count", "sum"):
            totals[where][suffix] = float(s.value)
    found: dict[EngineKey, dict[str, Histogram]] = defaultdict(dict)
    for (base, key), rows in bucket_rows.items():
        rows.sort()
        if not rows or rows[-1][0] != math.inf:
            continue  # without the +Inf bucket no quantile is defined (PromQL returns NaN)
        short = names[base]
        if short in found[key] and HISTOGRAMS[short].index(base) > 0:
            continue  # the current name wins over an old alias
        extra = totals[(base, key)]
        count, total = extra.get("count", rows[-1][1]), extra.get("sum", math.nan)
        found[key][short] = Histogram(tuple(rows), count, total)
    return found


def parse_exposition(text: str) -> MetricsSnapshot:
    """Parse a Prometheus text exposition from vLLM into one EngineMetrics per (model_name, engine).

    Raises ParseError for a truncated body, text that is not Prometheus format, or one without
    `vllm:` metrics.
    """
    samples = _samples(text)
    _no_duplicates(samples)
    order: dict[EngineKey, None] = {}
    scalars: dict[EngineKey, dict[str, float]] = defaultdict(dict)
    by_reason: dict[EngineKey, dict[str, float]] = defaultdict(dict)
    cache_infos: list[dict[str, str]] = []
    field_of = {name: (fld, rank) for fld, names in _SCALARS.items() for rank, name in enumerate(names)}
    rank_seen: dict[tuple[EngineKey, str], int] = {}
    for s in samples:
        if s.name == _CACHE_CONFIG_INFO:
            cache_infos.append(dict(s.labels))
            continue
        key = _key(s.labels)
        if any(label in s.labels for label in _ENGINE_LABELS):
            order.setdefault(key)
        if s.name == _WAITING_BY_REASON:
            by_reason[key][s.labels.get("reason", "")] = float(s.value)
        if s.name not in field_of:
            continue
        fld, rank = field_of[s.name]
        previous = rank_seen.get((key, fld))
        if previous is not None and previous < rank:
            continue  # the current metric name already gave this field
        if previous is not None and previous == rank:
            scalars[key][fld] += float(s.value)  # extra labels (finished_reason, …): sum them
        else:
            scalars[key][fld] = float(s.value)
        rank_seen[(key, fld)] = rank
    histograms = _histograms(samples)
    for key in histograms:
        order.setdefault(key)
    if not order:
        order[(None, None)] = None
    if len(order) > MAX_ENGINES:
        raise ParseError(f"the exposition names {len(order):,} engines (model_name, engine), more than kvplan "
                         f"diagnoses at once ({MAX_ENGINES:,})",
                         hint="more engines than a vLLM deployment runs; scrape one server's /metrics")

    # cache_config_info is labelled by engine only (vllm-reference.md §8); match model_name too if set. The
    # first info of each (engine, model_name) wins; indexed so that 50,000 engines stay linear.
    infos: dict[tuple[str | None, str | None], dict[str, str]] = {}
    for labels in cache_infos:
        infos.setdefault((labels.get("engine"), labels.get("model_name")), labels)
    first_info = {id(labels): n for n, labels in enumerate(cache_infos)}

    def cache_config(key: EngineKey) -> dict[str, str]:
        hits = [infos[k] for k in ((key[1], key[0]), (key[1], None), (None, key[0]), (None, None)) if k in infos]
        if not hits:
            return {}
        labels = min(hits, key=lambda h: first_info[id(h)])  # the earliest in the exposition, as before
        return {k: v for k, v in labels.items() if k not in _ENGINE_LABELS}

    engines = tuple(
        EngineMetrics(
            model_name=key[0],
            engine=key[1],
            **scalars.get(key, {}),
            waiting_by_reason=by_reason.get(key, {}),
            histograms=histograms.get(key, {}),
            cache_config=cache_config(key),
        )
        for key in order
    )
    return MetricsSnapshot(engines)


def histogram_quantile(q: float, hist: Histogram) -> Quantile | None:
    """The q-quantile by linear interpolation within buckets, exactly as PromQL `histogram_quantile`.

    Prometheus `promql/quantile.go:BucketQuantile`: rank = q × total; the first bucket whose cumulative
    count reaches the rank holds the quantile, interpolated linearly between its lower bound (0 for the
    first bucket) and its upper bound; a rank in the +Inf bucket returns the highest finite bound.
    Cumulative counts are first made monotonic (`ensureMonotonic`). None when there are no observations.
    """
    if not 0.0 <= q <= 1.0:
        raise InvalidParameter(f"quantile must be within [0, 1], got {q}")
    bounds = [le for le, _ in hist.buckets]
    counts: list[float] = []
    for _, c in hist.buckets:
        counts.append(max(c, counts[-1]) if counts else c)
    if len(counts) < 2 or bounds[-1] != math.inf or counts[-1] <= 0:
        return None
    rank = q * counts[-1]
    b = next((i for i in range(len(counts) - 1) if counts[i] >= rank), len(counts) - 1)
    if b == len(counts) - 1:
        return Quantile(q, bounds[-2], bounds[-2], math.inf)
    if b == 0 and bounds[0] <= 0:
        return Quantile(q, bounds[0], bounds[0], bounds[0])
    start = bounds[b - 1] if b > 0 else 0.0
    in_bucket = counts[b] - (counts[b - 1] if b > 0 else 0.0)
    below = counts[b - 1] if b > 0 else 0.0
    value = start + (bounds[b] - start) * ((rank - below) / in_bucket) if in_bucket > 0 else bounds[b]
    return Quantile(q, value, start, bounds[b])


# --------------------------------------------------------------------------------------------------
# Fetching (the adapter: the only I/O of the diagnose path)


def is_url(source: str) -> bool:
    """Whether SOURCE names a server (http:// or https://) rather than a saved file."""
    return source.startswith(("http://", "https://"))


def metrics_url(source: str) -> str:
    """The URL to scrape: a bare `http://host:port` gets vLLM's `/metrics` path."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(source)
        hostname = parts.hostname
    except ValueError:  # e.g. "http://[::1": an unclosed IPv6 bracket
        hostname = None
    if not hostname:
        raise InvalidParameter(f"cannot read {source!r} as a URL (example: http://localhost:8000/metrics)")
    if "@" in parts.netloc:  # urllib would take user:password@host for the host name and fail to resolve it
        raise InvalidParameter("a metrics URL with credentials (user:password@host) is not supported",
                               hint="give the host alone, or save the page with curl and pass the file")
    try:
        hostname.encode("idna")
    except UnicodeError as exc:  # a label over 63 characters, an empty label: urllib fails on it later
        raise InvalidParameter(f"cannot read {_short(source)!r} as a URL: its host is no DNS name ({exc})") from None
    if parts.path in ("", "/"):
        parts = parts._replace(path=METRICS_PATH)
    return urlunsplit(parts)


def fetch_exposition(url: str, timeout: float) -> str:
    """GET `url` and return the body as text; every failure is a NetworkError or ParseError."""
    if not 0 < timeout <= MAX_WAIT_S:  # NaN, ∞ or 1e300 s would reach the socket layer and overflow
        raise InvalidParameter(f"--timeout must be positive, at most {MAX_WAIT_S:g} s, got {timeout:g}")
    import http.client
    import urllib.error
    import urllib.request

    from kvplan import __version__

    request = urllib.request.Request(url, headers={
        # prometheus_client answers the classic text format unless OpenMetrics is asked for.
        "Accept": "text/plain;version=0.0.4",
        "User-Agent": f"kvplan/{__version__}",
    })
    deadline = time.monotonic() + timeout
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            content_type = response.headers.get("Content-Type", "")
            if "html" in content_type.lower():
                raise ParseError(f"{url} answered an HTML page, not Prometheus metrics",
                                 hint="point kvplan at the server's /metrics path")
            return _vllm_lines(_body_lines(response, url, deadline, timeout))
    except urllib.error.HTTPError as exc:
        raise NetworkError(f"{url} answered HTTP {exc.code} {exc.reason}",
                           hint="vLLM serves its metrics at /metrics") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise NetworkError(f"{url} did not answer within {timeout:g} s", hint="raise --timeout") from None
        if isinstance(exc.reason, ConnectionRefusedError):
            raise NetworkError(f"cannot connect to {url}: connection refused",
                               hint="is the vLLM server running on that host and port?") from None
        raise NetworkError(f"cannot reach {url}: {_short(str(exc.reason))}") from None
    except TimeoutError:
        raise NetworkError(f"{url} did not answer within {timeout:g} s", hint="raise --timeout") from None
    except http.client.IncompleteRead:
        raise ParseError(f"{url} closed the connection before the whole response arrived",
                         hint="the metrics text is truncated; scrape again") from None
    except (http.client.HTTPException, OSError) as exc:
        raise NetworkError(f"reading {url} failed: {type(exc).__name__}: {_short(str(exc))}") from None


def _body_lines(response: Any, url: str, deadline: float, timeout: float) -> Iterator[str]:
    """The response body as lines, read as a metrics file is (kvplan.files.METRICS: at most 1 GiB, lines of
    at most 1 MiB, UTF-8), and all of it within `timeout` seconds of the request: each read waits at most
    the time left, so a server that trickles its body cannot outlive --timeout."""
    from kvplan import files

    kind = files.METRICS
    sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)  # http.client's socket
    received, pending = 0, b""

    def too_slow() -> NetworkError:
        return NetworkError(f"{url} did not answer within {timeout:g} s: its whole answer had not arrived "
                            f"({received:,} bytes had)", hint="raise --timeout")

    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise too_slow()
        if sock is not None:
            sock.settimeout(left)
        try:
            chunk = response.read1(65536)
        except TimeoutError:
            raise too_slow() from None
        if not chunk:
            if getattr(response, "length", None):  # bytes still owed by Content-Length: read() would raise it
                import http.client

                raise http.client.IncompleteRead(b"", response.length)
            break
        received += len(chunk)
        if received > kind.max_bytes:
            raise ParseError(f"{url} sent more than {kind.max_bytes // 2**30} GiB, more than a metrics "
                             "exposition is", hint="is this a vLLM server's /metrics?")
        *lines, pending = (pending + chunk).split(b"\n")
        if len(pending) > kind.max_line:
            raise ParseError(f"{url} sent a line longer than {kind.max_line // 2**20} MiB")
        for line in lines:
            yield _utf8(line + b"\n", url)
    if pending:
        yield _utf8(pending, url)


def _utf8(line: bytes, url: str) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        raise ParseError(f"{url} answered bytes that are not UTF-8 text, not Prometheus metrics") from None


def read_exposition(source: str, timeout: float) -> str:
    """The exposition text from a URL (fetched) or a saved file (read)."""
    if is_url(source):
        return fetch_exposition(metrics_url(source), timeout)
    if "://" in source:
        raise InvalidParameter(f"unsupported URL scheme in {source!r}; use http:// or https://")
    from kvplan import files

    try:
        return _vllm_lines(files.read_lines(source, files.METRICS, keep_ends=True))
    except ParseError as exc:
        if str(exc) == f"{source}: no such file":
            raise ParseError(f"no such file: {source}",
                             hint="give a saved /metrics file or a URL like http://localhost:8000/metrics") from None
        raise


# The part of an exposition kvplan parses, at most: vLLM's own families of a 1,000-engine fleet.
MAX_VLLM_TEXT = 64 * 2**20


def _vllm_lines(lines: Iterable[str]) -> str:
    """The lines of a saved exposition that concern vLLM, streamed: `vllm:` samples and their # HELP / #
    TYPE lines. Other families (process_, python_, a whole node exporter's dump) are dropped as they are
    read, so a large dump costs time, not memory; lines that are no metric at all are kept for the
    parser to reject."""
    kept: list[str] = []
    size = 0
    for line in lines:
        if line.startswith("#"):
            if not line.startswith(("# HELP vllm:", "# TYPE vllm:")):
                continue
        elif not line.strip():
            continue
        elif (line[0].isalpha() or line[0] in "_:") and not line.startswith(VLLM_PREFIX):
            continue
        kept.append(line)
        size += len(line)
        if size > MAX_VLLM_TEXT:
            raise ParseError(f"more than {MAX_VLLM_TEXT // 2**20} MiB of vllm: metrics in one exposition",
                             hint="more engines than a vLLM deployment runs; split the file")
    text = "".join(kept)
    if kept and not kept[-1].endswith("\n"):
        raise ParseError("the metrics text is truncated: its last line has no end",
                         hint="the server or a proxy cut the response short; scrape again")
    return text


@dataclass(frozen=True)
class TwoScrapes:
    """Two snapshots of one server and the seconds between them."""

    first: MetricsSnapshot
    second: MetricsSnapshot
    elapsed_s: float


def scrape_twice(
    url: str,
    interval_s: float,
    timeout: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> TwoScrapes:
    """Scrape `url`, wait `interval_s`, scrape again; the elapsed time is measured between the answers.

    The first answer is parsed before waiting, so a bad URL or body fails at once.
    """
    if not 0 < interval_s <= MAX_WAIT_S:
        raise InvalidParameter(f"--interval must be positive, at most {MAX_WAIT_S:g} s, got {interval_s:g}")
    url = metrics_url(url)
    first = parse_exposition(fetch_exposition(url, timeout))
    t0 = clock()
    sleep(interval_s)
    text = fetch_exposition(url, timeout)
    elapsed = clock() - t0
    return TwoScrapes(first, parse_exposition(text), elapsed)
