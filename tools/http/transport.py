"""Sending one request under a deadline and reading its body, decoded and bounded.

**Deadline.** ``timeout`` bounds the whole attempt — connecting, waiting for the
headers and reading the whole body — not each socket read: a server trickling one
byte a second cannot hold a step longer than its timeout. httpx's own timeouts bound
each phase; a watchdog shuts the connection's socket down when the attempt's deadline
passes, which ends a read in progress at once (its timer is an entry in the process's
one deadline thread, ``tools.http.deadlines``, not a thread per request).

**Encodings.** The request asks for ``gzip, deflate, identity`` explicitly (httpx
would offer ``br``/``zstd`` whenever those packages happen to be installed), and the
body is inflated here piece by piece so a decompression bomb never fills memory.
Any other ``Content-Encoding`` is a ``response_invalid`` error naming the coding,
never garbage text in a succeeded step.

**Sent or not.** Failures known to happen before the request left (connection
refused, DNS failure, connect timeout) are marked ``not_sent``: only those, and
answers saying the request was not processed, may be retried for a non-idempotent
tool.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from tools.calls import ToolCallContext
from tools.errors import ToolError, ToolResponseInvalid, ToolTimeout, ToolUnreachable
from tools.http.deadlines import DEADLINES, Deadline
from tools.http.request import PreparedRequest

_INFLATE_PIECE = 64 * 1024
_DECODED = ("gzip", "x-gzip", "deflate", "identity")
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


@dataclass(frozen=True)
class Received:
    status: int
    headers: httpx.Headers
    body: bytes
    truncated: bool
    encoding: str
    url: str


class _Watchdog:
    """Shuts the attempt's socket down at the deadline (ending a blocked read)."""

    def __init__(self, seconds: float) -> None:
        self.fired = False
        self._stream: Any = None
        self._lock = threading.Lock()
        self._seconds = seconds
        self._deadline: Deadline | None = None

    def __enter__(self) -> _Watchdog:
        self._deadline = DEADLINES.schedule(self._seconds, self._fire)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._deadline is not None:
            self._deadline.cancel()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore trace hook: remember a new connection's stream as soon as it exists."""
        if event == "connection.connect_tcp.complete":
            self.watch(info.get("return_value"))

    def watch(self, stream: Any) -> None:
        with self._lock:
            self._stream = stream
            if self.fired:
                self._shutdown()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            self._shutdown()

    def _shutdown(self) -> None:
        sock = self._stream.get_extra_info("socket") if self._stream is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def send(prepared: PreparedRequest, ctx: ToolCallContext, *, timeout: float) -> Received:
    """Send ``prepared`` and read at most ``ctx.read_limit`` bytes of the decoded body,
    all within ``timeout`` seconds. Raises ToolTimeout, ToolUnreachable (``not_sent``
    when the request surely never left) or ToolResponseInvalid.

    With ``ctx.tap`` the exchange goes through it: recorded, or replayed from a
    recording without touching the network (``tools.calls.CallTap``)."""
    if ctx.tap is not None:
        return ctx.tap.exchange(
            prepared, lambda: _send(prepared, ctx, timeout=timeout), ctx.redactor
        )
    return _send(prepared, ctx, timeout=timeout)


def _send(prepared: PreparedRequest, ctx: ToolCallContext, *, timeout: float) -> Received:
    where = f"{prepared.method} {ctx.redactor.scrub_text(prepared.url)}"
    started = time.monotonic()
    with _Watchdog(timeout) as watchdog:
        try:
            return _exchange(prepared, ctx, timeout, watchdog)
        except httpx.RequestError as exc:
            elapsed = time.monotonic() - started
            raise _transport_error(exc, where, timeout, watchdog.fired, ctx, elapsed) from exc


def _exchange(
    prepared: PreparedRequest, ctx: ToolCallContext, timeout: float, watchdog: _Watchdog
) -> Received:
    request = ctx.http.build_request(
        prepared.method,
        prepared.merged_url,
        headers=prepared.headers,
        timeout=timeout,
        extensions={"trace": watchdog.trace},
        **prepared.body.send_kwargs(),
    )
    response = ctx.http.send(request, stream=True, follow_redirects=False)
    try:
        watchdog.watch(response.extensions.get("network_stream"))
        where = f"{prepared.method} {ctx.redactor.scrub_text(prepared.url)}"
        body, truncated = _read_bounded(response, ctx.read_limit, where=where)
        if watchdog.fired:
            raise httpx.ReadTimeout("deadline passed", request=request)
        encoding = response.charset_encoding or "utf-8"
        return Received(
            response.status_code, response.headers, body, truncated, encoding, str(request.url)
        )
    finally:
        response.close()


def _transport_error(
    exc: httpx.RequestError,
    where: str,
    timeout: float,
    fired: bool,
    ctx: ToolCallContext,
    elapsed: float,
) -> ToolError:
    not_sent = isinstance(exc, _NOT_SENT) and not fired
    if fired or isinstance(exc, httpx.TimeoutException):
        return ToolTimeout(
            f"{where}: no answer within {timeout:g}s (the deadline covers the whole body)",
            not_sent=not_sent,
            elapsed=elapsed,
        )
    if isinstance(exc, httpx.DecodingError):
        return ToolResponseInvalid(
            f"{where}: cannot decode the response body ({exc})", not_sent=not_sent, elapsed=elapsed
        )
    detail = ctx.redactor.scrub_text(str(exc)) or type(exc).__name__
    return ToolUnreachable(
        f"{where}: cannot reach the server ({detail})", not_sent=not_sent, elapsed=elapsed
    )


def _read_bounded(response: httpx.Response, limit: int, *, where: str) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    for chunk in _decoded(response, where):
        if size + len(chunk) > limit:
            chunks.append(chunk[: limit - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def _decoded(response: httpx.Response, where: str) -> Iterator[bytes]:
    """The body, decompressed at most ``_INFLATE_PIECE`` bytes at a time.

    httpx inflates each network chunk whole, so a few kB of gzip become hundreds of MB
    in memory before the limit is checked (a decompression bomb); gzip and deflate are
    inflated here piece by piece instead. Any other coding is refused.
    """
    stream: Iterator[bytes] = response.iter_raw()
    codings = response.headers.get_list("content-encoding", split_commas=True)
    for coding in reversed([c.strip().lower() for c in codings if c.strip()]):
        if coding not in _DECODED:
            raise ToolResponseInvalid(
                f"{where}: the response uses Content-Encoding {coding!r}, which was not "
                "asked for and is not decoded (only gzip, deflate and identity are)"
            )
        if coding != "identity":
            stream = _inflate(stream, gzip=coding != "deflate")
    return stream


def _inflate(stream: Iterator[bytes], *, gzip: bool) -> Iterator[bytes]:
    inflater = None
    try:
        for data in stream:
            if inflater is None:
                if not data:
                    continue
                inflater = zlib.decompressobj(_wbits(data, gzip=gzip))
            while data:
                piece = inflater.decompress(data, _INFLATE_PIECE)
                data = inflater.unconsumed_tail
                if piece:
                    yield piece
        if inflater is not None and (rest := inflater.flush()):
            yield rest
    except zlib.error as exc:
        raise httpx.DecodingError(f"malformed compressed body: {exc}") from exc


def _wbits(first: bytes, *, gzip: bool) -> int:
    """gzip framing, or for deflate the zlib wrapper when present, else raw deflate."""
    if gzip:
        return zlib.MAX_WBITS | 16
    wrapped = len(first) >= 2 and first[0] & 0x0F == 8 and ((first[0] << 8) | first[1]) % 31 == 0
    return zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS
