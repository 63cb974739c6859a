"""Every byte from the Hub bounded in time and size: a guard around huggingface_hub's HTTP client.

kvplan downloads through huggingface_hub's own code (`hf_hub_download`, `get_hf_file_metadata`,
`parse_safetensors_file_metadata`); this module only wraps the transport of the client that library
shares (`huggingface_hub.set_client_factory`), so each request it sends is held to kvplan's limits:

* one overall deadline per Hub operation (`KVPLAN_HUB_TIMEOUT` seconds, default 30): each request's
  connect/read/write timeouts are cut to the time left, each body chunk is checked against it, and the
  library's retry sleeps (`utils/_http.py` `_http_backoff_base`: 1, 2, 4, 8, 8 s, or `Retry-After` + 1 s
  on HTTP 429) are refused when they would end past it;
* a byte cap on every body, counted as it streams (a body without Content-Length, or with a false one,
  is cut at the cap), and a refused Content-Length above the cap;
* `Accept-Encoding: identity` on every request, and a refused body that comes encoded anyway (an
  encoded body could inflate past any cap; the Hub honours identity);
* at most MAX_REDIRECTS redirects in a row (httpx's own limit is 20, the library's HEAD loop 10);
* Xet headers removed, so the download stays on this guarded HTTP path (the Xet client is Rust code
  that this guard cannot bound).

It imports neither huggingface_hub nor its HTTP library at module level; `kvplan.model.hub` installs it.
"""
from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from kvplan.errors import BadConfig, InvalidParameter, NetworkError

TIMEOUT_ENV = "KVPLAN_HUB_TIMEOUT"
DEFAULT_TIMEOUT_S = 30.0  # kvplan's choice: 3× huggingface_hub's 10 s per-request default (constants.py)
MAX_TIMEOUT_S = 3600.0  # an hour: anything longer is a typo, not a slow network
MAX_REDIRECTS = 10  # the real Hub redirects once (resolve → CDN); huggingface_hub's HEAD loop allows 10
# huggingface_hub's own per-request timeouts (constants.py: read with int(); 0 or unset means 10 s)
HF_TIMEOUT_VARIABLES = ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT")
_WHOLE = re.compile(r"\s*[+-]?\d+\s*")
_HINT = f"{TIMEOUT_ENV} sets kvplan's deadline per Hub download, in seconds; default {DEFAULT_TIMEOUT_S:g}"


def hub_timeout(environ: Mapping[str, str]) -> float:
    """KVPLAN_HUB_TIMEOUT in seconds (default 30): a finite number in (0, 3600]."""
    raw = environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise InvalidParameter(f"{TIMEOUT_ENV}={raw[:40]!r} is not a number of seconds", hint=_HINT) from None
    if not math.isfinite(value) or value <= 0 or value > MAX_TIMEOUT_S:
        raise InvalidParameter(f"{TIMEOUT_ENV}={raw[:40]!r} must be more than 0 and at most "
                               f"{MAX_TIMEOUT_S:g} seconds", hint=_HINT)
    return value


def check_hub_environment(environ: Mapping[str, str]) -> None:
    """Refuse, each in its own sentence, the HF_* settings huggingface_hub would misread or fail on."""
    hub_timeout(environ)
    for name in HF_TIMEOUT_VARIABLES:
        raw = environ.get(name)
        if raw is None or raw == "":
            continue
        hint = ("HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT take whole seconds: huggingface_hub reads them "
                "with int()")
        if not _WHOLE.fullmatch(raw):
            raise InvalidParameter(f"huggingface_hub cannot read its environment: {name}={raw[:40]!r} is not a "
                                   "whole number of seconds", hint=hint)
        if int(raw) < 1:  # 0 is read as "unset" (10 s); a negative one reaches httpx as a negative timeout
            raise InvalidParameter(f"{name}={raw.strip()} must be at least 1 second", hint=hint)
    endpoint = environ.get("HF_ENDPOINT")
    if endpoint is not None and endpoint != "":
        _check_endpoint(endpoint)


def _check_endpoint(endpoint: str) -> None:
    """HF_ENDPOINT must be an http(s) URL with a host (huggingface_hub prefixes it to every request)."""
    shown = endpoint[:80]
    hint = "HF_ENDPOINT is the Hub's base URL, like https://huggingface.co or http://127.0.0.1:8080"
    if any(ord(c) < 33 or ord(c) == 127 for c in endpoint):
        raise InvalidParameter(f"HF_ENDPOINT {shown!r} holds a space or control character", hint=hint)
    try:
        parts = urlsplit(endpoint)
        port = parts.port  # raises ValueError on a port that is not a number in 0..65535
    except ValueError as exc:
        raise InvalidParameter(f"HF_ENDPOINT {shown!r} is not a valid URL: {exc}", hint=hint) from None
    if parts.scheme.lower() not in {"http", "https"}:
        raise InvalidParameter(f"HF_ENDPOINT {shown!r} is not an http:// or https:// URL", hint=hint)
    if not parts.hostname:
        raise InvalidParameter(f"HF_ENDPOINT {shown!r} names no host", hint=hint)
    if port == 0:
        raise InvalidParameter(f"HF_ENDPOINT {shown!r} names port 0", hint=hint)
    if parts.query or parts.fragment:
        raise InvalidParameter(f"HF_ENDPOINT {shown!r} has a query or fragment; give the base URL only", hint=hint)


class _Budget:
    """The limits of one Hub operation (one file, or a repo's safetensors headers), shared by its threads."""

    def __init__(self, what: str, timeout_s: float, max_body: int) -> None:
        self.what, self.timeout_s, self.max_body = what, timeout_s, max_body
        self.deadline = time.monotonic() + timeout_s
        self.retry_after: float | None = None  # the last HTTP 429's Retry-After, for the message
        self.broke_off = 0  # bodies cut short (huggingface_hub resumes them, each time it receives bytes)
        self.last_status: int | None = None  # of the last response, to say why the retries ran out

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def no_answer(self) -> NetworkError:
        if self.retry_after is not None:
            return NetworkError(f"the Hub is rate-limiting kvplan (HTTP 429) and asks it to wait "
                                f"{self.retry_after:g} s for {self.what}, past the {self.timeout_s:g} s deadline",
                                hint="wait and try again, set HF_TOKEN for a higher limit, or raise " + TIMEOUT_ENV)
        if self.last_status is not None and self.last_status >= 500:
            return NetworkError(f"the Hub answered HTTP {self.last_status} for {self.what} to each try "
                                f"within {self.timeout_s:g} s", hint="try again later, or raise " + TIMEOUT_ENV)
        if self.broke_off:
            return NetworkError(f"the Hub connection broke off {self.broke_off} time(s) while sending {self.what}, "
                                f"which was not complete within {self.timeout_s:g} s",
                                hint="a Content-Length above the body sent, or a bad network; nothing was cached")
        return NetworkError(f"the Hub timed out: no answer for {self.what} within {self.timeout_s:g} s",
                            hint=_HINT)

    def too_slow(self, received: int) -> NetworkError:
        return NetworkError(f"the Hub sent {self.what} too slowly: {received:,} bytes in {self.timeout_s:g} s "
                            "and not finished", hint=_HINT + "; nothing was cached")

    def too_large(self, size: int, announced: bool) -> BadConfig:
        said = f"announced {size:,} bytes" if announced else f"sent more than {self.max_body:,} bytes"
        return BadConfig(f"the Hub {said} for {self.what}, more than kvplan reads ({self.max_body:,}); "
                         "nothing was cached")


_lock = threading.Lock()
_budget: _Budget | None = None
_chain = threading.local()  # redirects in a row on this thread


@contextmanager
def guarded(what: str, *, max_body: int, environ: Mapping[str, str]) -> Iterator[None]:
    """Hold every Hub request made inside to one deadline (KVPLAN_HUB_TIMEOUT) and `max_body` per body."""
    global _budget
    budget = _Budget(what, hub_timeout(environ), max_body)
    with _lock:
        outer, _budget = _budget, budget
    try:
        yield
    finally:
        with _lock:
            _budget = outer


def bounded_sleep(seconds: float) -> None:
    """huggingface_hub's retry back-off, refused when it would end past the deadline (`time.sleep` is
    looked up at each call, so a test that stubs it still applies)."""
    budget = _budget
    if budget is not None and seconds >= budget.left():
        raise budget.no_answer()
    time.sleep(seconds)


class BoundedTime:
    """Stands in for the `time` module inside huggingface_hub.utils._http: `sleep` is bounded_sleep."""

    sleep = staticmethod(bounded_sleep)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _retry_after(headers: Any) -> float | None:
    raw = headers.get("retry-after")
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


class GuardTransport:
    """An httpx transport that applies the current budget to each request and response it carries."""

    def __init__(self, inner: Any, httpx: Any) -> None:
        self.inner, self.httpx = inner, httpx

    def handle_request(self, request: Any) -> Any:
        """Send `request` with its timeouts cut to the deadline; check the response's headers."""
        budget = _budget
        request.headers["Accept-Encoding"] = "identity"
        if budget is None:
            return self.inner.handle_request(request)
        left = budget.left()
        if left <= 0:
            raise budget.no_answer()
        timeouts = dict(request.extensions.get("timeout") or {})
        request.extensions["timeout"] = {key: min(timeouts.get(key) or left, left)
                                         for key in ("connect", "read", "write", "pool")}
        try:
            response = self.inner.handle_request(request)
        except self.httpx.TimeoutException:
            if budget.left() <= 0.05:
                raise budget.no_answer() from None
            raise
        try:
            self._check(response, budget, request.method)
        except Exception:
            response.close()
            raise
        response.stream = _make_stream(self.httpx, response.stream, budget)
        return response

    def _check(self, response: Any, budget: _Budget, method: str) -> None:
        budget.last_status = response.status_code
        if 300 <= response.status_code < 400 and "location" in response.headers:
            _chain.count = getattr(_chain, "count", 0) + 1
            if _chain.count > MAX_REDIRECTS:
                _chain.count = 0
                raise NetworkError(f"the Hub redirected the request for {budget.what} more than {MAX_REDIRECTS} "
                                   "times in a row (a redirect loop)", hint="check HF_ENDPOINT")
        else:
            _chain.count = 0
        if response.status_code == 429:
            budget.retry_after = _retry_after(response.headers)
            if budget.retry_after is not None and budget.retry_after + 1 >= budget.left():
                raise budget.no_answer()
        for name in [k for k in response.headers if k.lower().startswith("x-xet-")]:
            del response.headers[name]
        if "xet-auth" in response.headers.get("link", ""):
            del response.headers["link"]
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if method != "HEAD" and encoding not in {"", "identity"}:
            raise NetworkError(f"the Hub sent {budget.what} encoded ({encoding[:20]}) although kvplan asked for it "
                               "unencoded (Accept-Encoding: identity); nothing was cached")
        length = response.headers.get("content-length", "")
        if method != "HEAD" and length.strip().isdigit() and int(length) > budget.max_body:
            raise budget.too_large(int(length), announced=True)

    def close(self) -> None:
        """Close the wrapped transport."""
        self.inner.close()

    def __enter__(self) -> GuardTransport:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(*exc)


def _make_stream(httpx: Any, inner: Any, budget: _Budget) -> Any:
    """The response body, counted against `budget.max_body` and checked against the deadline per chunk."""

    class GuardStream(httpx.SyncByteStream):  # type: ignore[misc]
        def __iter__(self) -> Iterator[bytes]:
            received = 0
            chunks = iter(inner)
            while True:
                try:
                    chunk = next(chunks)
                except StopIteration:
                    return
                except httpx.TimeoutException:
                    if budget.left() <= 0.05:
                        raise budget.too_slow(received) from None
                    raise
                except httpx.RemoteProtocolError:
                    budget.broke_off += 1
                    raise
                received += len(chunk)
                if received > budget.max_body:
                    raise budget.too_large(received, announced=False)
                if budget.left() <= 0:
                    raise budget.too_slow(received)
                yield chunk

        def close(self) -> None:
            inner.close()

    return GuardStream()


def wrap_client(client: Any, httpx: Any) -> Any:
    """`client` (huggingface_hub's default httpx client) with its transports guarded."""
    client._transport = GuardTransport(client._transport, httpx)  # noqa: SLF001 (httpx has no setter)
    mounts = getattr(client, "_mounts", {})
    for pattern, transport in list(mounts.items()):
        if transport is not None:
            mounts[pattern] = GuardTransport(transport, httpx)
    return client
