"""Calling an http tool with httpx: one request per call, bounded, with secrets masked.

One call: render the request from the spec's templates → send it streaming →
read at most ``ctx.max_response_bytes`` → classify the status → parse JSON
(a list is wrapped as ``{"items": [...], "count": N}``) → apply
``response_extract``.

Secrets: every non-empty env value rendered into the path, query, headers, body
or auth, and every credential sent, is added to ``ctx.redactor``. Env values in
``base_url`` are added too unless they are a bare origin (``scheme://host[:port]``),
which is configuration, not a credential — masking it would also mangle every
API URL inside responses. Error messages, the recorded request and the output
are scrubbed with ``ctx.redactor``.

Every raised error carries ``.request`` (``{method, url, status, elapsed_ms}``,
redacted) for failure reports.
"""

from __future__ import annotations

import base64
import json
import re
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from tools.breaker.core import breaker_guard
from tools.calls import ToolCallContext, ToolResult
from tools.errors import (
    FlowpilotError,
    TemplateError,
    ToolAuthFailed,
    ToolConfigError,
    ToolHTTPError,
    ToolRateLimited,
    ToolResponseInvalid,
    ToolResponseTooLarge,
    ToolTimeout,
    ToolUnreachable,
)
from tools.paths import get, parse_path
from tools.redaction import Redactor, redact_headers
from tools.spec import HttpConfig, ToolSpec
from tools.templating import render, render_text, render_url_path, to_text

_BAD_HEADER_CHARS = re.compile(r"[\r\n\0]")
_BARE_ORIGIN = re.compile(r"^https?://[^/?#@\s]+/?$", re.IGNORECASE)
ERROR_BODY_CHARS = 500


@dataclass
class PreparedRequest:
    """The rendered request, before sending. ``json`` is None when there is no body."""

    method: str
    url: str
    params: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    json: Any = None


@dataclass(frozen=True)
class _Received:
    status: int
    headers: httpx.Headers
    body: bytes
    truncated: bool
    encoding: str


def call_http_tool(spec: ToolSpec, arguments: dict, ctx: ToolCallContext) -> ToolResult:
    """Call ``spec`` (an http tool) with validated ``arguments``; see the module doc."""
    prepared = prepare_request(spec, arguments, ctx)
    timeout = ctx.timeout or (spec.http.timeout if spec.http else spec.timeout)
    started = time.perf_counter()
    breaker = spec.http.breaker if spec.http else None
    with breaker_guard(ctx.breakers, prepared.url, breaker):
        received = _send(prepared, ctx, timeout=timeout, started=started)
        info = _request_info(prepared, ctx, received.status, started)
        text = _decode(received.body, received.encoding)
        try:
            _raise_for_status(info, received, text, ctx.redactor)
            output, truncated = _output(spec.http, received, text, info, ctx.max_response_bytes)
        except FlowpilotError as exc:
            exc.request = info  # type: ignore[attr-defined]
            raise
    return ToolResult(output=ctx.redactor.scrub(output), truncated=truncated, request=info)


def prepare_request(spec: ToolSpec, arguments: dict, ctx: ToolCallContext) -> PreparedRequest:
    """Render URL, query, headers, body and auth; register the secrets used."""
    http = spec.http
    if http is None:
        raise ToolConfigError(f"tool {spec.name!r} is not an http tool")
    secrets: set[str] = set()
    request = http.request
    url = _build_url(spec.name, http, arguments, ctx, secrets)
    prepared = PreparedRequest(method=request.method, url=url)
    prepared.params = _render_query(request.query, arguments, ctx, secrets)
    for name, template in request.headers.items():
        value = render_text(template, arguments, env=ctx.env, secrets=secrets)
        if value:
            prepared.headers[name] = value
    if request.body is not None:
        prepared.json = render(request.body, arguments, env=ctx.env, secrets=secrets)
    if request.idempotency_header and ctx.idempotency_key:
        prepared.headers[request.idempotency_header] = ctx.idempotency_key
    _apply_auth(http, prepared, arguments, ctx, secrets)
    for secret in secrets:
        ctx.redactor.add(secret)
    for name, value in prepared.headers.items():
        if _BAD_HEADER_CHARS.search(name) or _BAD_HEADER_CHARS.search(value):
            raise TemplateError(
                f"tool {spec.name!r}: header {name!r} renders to a value with a line break "
                "or NUL character; a value cannot add headers"
            )
    return prepared


def _build_url(
    name: str, http: HttpConfig, arguments: dict, ctx: ToolCallContext, secrets: set[str]
) -> str:
    base_secrets: set[str] = set()
    base = render_text(http.base_url, {}, env=ctx.env, secrets=base_secrets)
    for value in base_secrets:
        if not _BARE_ORIGIN.match(value):
            ctx.redactor.add(value)
    path = render_url_path(http.request.url, arguments, ctx.env, secrets=secrets)
    if not path:
        url = base
    elif path.startswith(("?", "#")):
        url = base.rstrip("/") + path
    else:
        url = base.rstrip("/") + "/" + path.lstrip("/")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ToolConfigError(_bad_base(name, http, ctx, url)) from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ToolConfigError(_bad_base(name, http, ctx, url))
    return url


def _bad_base(name: str, http: HttpConfig, ctx: ToolCallContext, url: str) -> str:
    shown = ctx.redactor.scrub_text(url)
    return (
        f"tool {name!r}: base_url {http.base_url!r} renders to {shown!r}, "
        "not an http(s) URL (is its environment variable set?)"
    )


def _render_query(
    query: dict[str, Any], arguments: dict, ctx: ToolCallContext, secrets: set[str]
) -> list[tuple[str, str]]:
    """Query params; a value rendering ``None`` drops the param, a list repeats it."""
    params: list[tuple[str, str]] = []
    for name, template in query.items():
        value = render(template, arguments, env=ctx.env, secrets=secrets)
        items = value if isinstance(value, list) else [value]
        params.extend((name, to_text(item)) for item in items if item is not None)
    return params


def _apply_auth(
    http: HttpConfig,
    prepared: PreparedRequest,
    arguments: dict,
    ctx: ToolCallContext,
    secrets: set[str],
) -> None:
    """Add the credential; skipped when it renders empty. The credential is a secret."""
    auth = http.auth

    def text(template: str | None) -> str:
        return render_text(template or "", arguments, env=ctx.env, secrets=secrets)

    if auth.type == "bearer":
        token = text(auth.token)
        if token:
            ctx.redactor.add(token)
            prepared.headers["Authorization"] = f"Bearer {token}"
    elif auth.type == "api_key":
        key = text(auth.value)
        if key:
            ctx.redactor.add(key)
            if auth.in_ == "query":
                prepared.params.append((auth.name or "", key))
            else:
                prepared.headers[auth.name or ""] = key
    elif auth.type == "basic":
        user, password = text(auth.username), text(auth.password)
        if user or password:
            ctx.redactor.add_basic_auth(user, password)
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            prepared.headers["Authorization"] = f"Basic {token}"


def _send(
    prepared: PreparedRequest, ctx: ToolCallContext, *, timeout: float, started: float
) -> _Received:
    """Send and read at most ``ctx.max_response_bytes`` of the body (memory bounded)."""
    where = f"{prepared.method} {ctx.redactor.scrub_text(prepared.url)}"
    try:
        with ctx.http.stream(
            prepared.method,
            prepared.url,
            params=prepared.params or None,
            headers=prepared.headers,
            json=prepared.json,
            timeout=timeout,
        ) as response:
            body, truncated = _read_bounded(response, ctx.max_response_bytes)
            encoding = response.charset_encoding or "utf-8"
            return _Received(response.status_code, response.headers, body, truncated, encoding)
    except httpx.TimeoutException as exc:
        error: FlowpilotError = ToolTimeout(f"{where}: no answer within {timeout:g}s")
        cause: Exception = exc
    except httpx.DecodingError as exc:
        error, cause = ToolResponseInvalid(f"{where}: cannot decode the response body"), exc
    except httpx.RequestError as exc:
        detail = ctx.redactor.scrub_text(str(exc)) or type(exc).__name__
        error, cause = ToolUnreachable(f"{where}: cannot reach the server ({detail})"), exc
    error.request = _request_info(prepared, ctx, None, started)  # type: ignore[attr-defined]
    raise error from cause


def _read_bounded(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    for chunk in _decoded(response):
        if size + len(chunk) > limit:
            chunks.append(chunk[: limit - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


_INFLATE_PIECE = 64 * 1024


def _decoded(response: httpx.Response) -> Iterator[bytes]:
    """The body, decompressed at most ``_INFLATE_PIECE`` bytes at a time.

    httpx inflates each network chunk whole, so a few kB of gzip become hundreds
    of MB in memory before the limit is checked (a decompression bomb). gzip and
    deflate (what httpx asks for) are inflated here piece by piece instead;
    identity and any other coding pass through as received, as httpx does for a
    coding it cannot decode.
    """
    stream: Iterator[bytes] = response.iter_raw()
    codings = response.headers.get_list("content-encoding", split_commas=True)
    for coding in reversed([c.strip().lower() for c in codings]):
        if coding in ("gzip", "x-gzip", "deflate"):
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


def _decode(body: bytes, encoding: str) -> str:
    try:
        return body.decode(encoding, errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


def _request_info(
    prepared: PreparedRequest, ctx: ToolCallContext, status: int | None, started: float
) -> dict[str, Any]:
    url = httpx.URL(prepared.url)
    if prepared.params:
        url = url.copy_merge_params(prepared.params)
    return {
        "method": prepared.method,
        "url": ctx.redactor.scrub_text(str(url)),
        "status": status,
        "elapsed_ms": round((time.perf_counter() - started) * 1000, 1),
        "headers": ctx.redactor.scrub(redact_headers(prepared.headers)),
    }


def _raise_for_status(
    info: dict[str, Any], received: _Received, text: str, redactor: Redactor
) -> None:
    """Non-2xx → a typed error with method, redacted URL, status and ≤500 chars of body."""
    status = received.status
    if 200 <= status < 300:
        return
    # Scrub before cutting, so a secret is never cut in half and left readable.
    body = redactor.scrub_text(" ".join(text[: ERROR_BODY_CHARS * 4].split()))[:ERROR_BODY_CHARS]
    message = f"{info['method']} {info['url']} returned HTTP {status}"
    if body:
        message += f": {body}"
    if status == 429:
        raise ToolRateLimited(message, retry_after=retry_after_seconds(received.headers))
    if status in (401, 403):
        raise ToolAuthFailed(message, status=status)
    raise ToolHTTPError(message, status=status)


def retry_after_seconds(headers: httpx.Headers, *, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or an HTTP date), or None."""
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, moment.timestamp() - current)


def _output(
    http: HttpConfig, received: _Received, text: str, info: dict[str, Any], limit: int
) -> tuple[Any, bool]:
    where = f"{info['method']} {info['url']}"
    if received.truncated:
        if http.response_extract:
            raise ToolResponseTooLarge(
                f"{where}: the response is larger than the {limit} byte limit; "
                "nothing was extracted"
            )
        return {"text": text, "truncated": True, "limit_bytes": limit}, True
    value = parse_body(text, received.headers.get("content-type", ""))
    if http.response_extract:
        if isinstance(value, dict) and set(value) == {"text"} and _looks_json(received, text):
            raise ToolResponseInvalid(f"{where}: the response is not valid JSON")
        return extract(value, http.response_extract), False
    return value, False


def _looks_json(received: _Received, text: str) -> bool:
    return "json" in received.headers.get("content-type", "").lower() or text.lstrip()[:1] in (
        "{",
        "[",
    )


def parse_body(text: str, content_type: str) -> Any:
    """JSON bodies are parsed and wrapped (list → items/count, scalar → value);
    anything else is ``{"text": body}``; an empty body is ``{}``."""
    stripped = text.strip()
    if not stripped:
        return {}
    if "json" in content_type.lower() or stripped[:1] in ("{", "["):
        try:
            return wrap(json.loads(stripped))
        except ValueError:
            return {"text": text}
    return {"text": text}


def wrap(value: Any) -> Any:
    """A JSON list becomes ``{"items": [...], "count": N}``; a scalar ``{"value": v}``."""
    if isinstance(value, list):
        return {"items": value, "count": len(value)}
    if isinstance(value, dict):
        return value
    return {"value": value}


def extract(value: Any, paths: dict[str, str]) -> dict[str, Any]:
    """``{key: value at dot-path}`` by the rule of :mod:`tools.paths`; missing → None.

    The paths were checked when the spec was loaded, so parsing cannot fail here.
    """
    return {key: get(value, parse_path(path)) for key, path in paths.items()}
