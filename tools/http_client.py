"""Calling an http tool with httpx: render → send (under a deadline) → check → output.

One call: render the request from the spec's templates (:mod:`tools.http.request`,
:mod:`tools.http.bodies`), add an OAuth2 token when the tool uses one
(:mod:`tools.http.oauth2`), send it and read at most ``ctx.max_response_bytes``
within the attempt's deadline (:mod:`tools.http.transport`), follow redirects only
when the tool opts in, classify the status, read the body by its declared format,
check the tool's success condition and apply ``response_extract``
(:mod:`tools.http.response`) — for every page when the tool paginates
(:mod:`tools.http.pagination`).

Secrets are what the tool declares (docs/security.md), registered with
``ctx.redactor`` when the request is rendered. Error messages and the recorded
request are scrubbed; the output is returned exactly as received — the engine masks
only the copies it stores or shows. Every raised error carries ``.request``
(``{method, url, status, elapsed_ms, headers}``, redacted) for failure reports.

A tool that is not idempotent is never repeated blindly: a failure after which the
server may have acted on the request (a timeout, a dropped connection, a 5xx) becomes
``outcome_unknown`` (fatal, for review); only failures known to happen before the
request left, or answers saying it was not processed (429, 503 with Retry-After),
stay retryable.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import httpx

from tools.breaker.core import breaker_guard
from tools.calls import ToolCallContext, ToolResult
from tools.errors import ToolError, ToolHTTPError, ToolOutcomeUnknown
from tools.http.oauth2 import apply_oauth2, drop_token
from tools.http.pacing import Paced, paced_call
from tools.http.pagination import Page, collect_pages
from tools.http.request import PreparedRequest, prepare_request
from tools.http.response import (
    check_success,
    decode_checked,
    extract,
    parse_body,
    raise_for_status,
    read_body,
    response_meta,
    retry_after_seconds,
    wrap,
)
from tools.http.shared_token import apply_shared_token
from tools.http.transport import Received, send
from tools.redaction import redact_headers
from tools.spec import HttpConfig, ToolSpec

__all__ = [
    "call_http_tool",
    "extract",
    "parse_body",
    "prepare_request",
    "retry_after_seconds",
    "wrap",
]

_REDIRECTS = (301, 302, 303, 307, 308)


def call_http_tool(spec: ToolSpec, arguments: dict, ctx: ToolCallContext) -> ToolResult:
    """Call ``spec`` (an http tool) with validated ``arguments``; see the module doc."""
    prepared = prepare_request(spec, arguments, ctx)
    http = spec.http
    assert http is not None  # prepare_request refused a tool without http config
    timeout = ctx.timeout or http.timeout
    started = time.perf_counter()
    paced = paced_call(spec, prepared, arguments, ctx)
    try:
        if http.pagination is not None:
            replaced: list[bool] = []  # each page's flag (its body was not valid text)
            value, last = collect_pages(
                http.pagination, prepared,
                lambda req, _n: _flagged(replaced, _fetch(spec, req, ctx, timeout, paced)),
                max_bytes=ctx.max_output_bytes,
            )  # fmt: skip
            last = replace(last, replaced=any(replaced))
            truncated = False
        else:
            last = _fetch(spec, prepared, ctx, timeout, paced)
            value, truncated = last.value, last.truncated
        output = value
        if http.response_extract:
            output = extract(value, http.response_extract, response_meta(last.received))
    except ToolError as exc:
        status = exc.status if isinstance(exc, ToolHTTPError) else None  # what came back
        exc.attach_request(_info(prepared, ctx, status, started), replace=False)
        if paced.waited and exc.request is not None:
            exc.request["rate_limit_wait"] = round(paced.waited, 3)
        guarded = _guard_non_idempotent(spec, exc)
        if guarded is exc:
            raise
        raise guarded from exc
    info = _info(last.sent or prepared, ctx, last.received.status, started)
    if last.replaced:
        info["replaced_text"] = True  # bytes not valid in the body's charset became U+FFFD
    if paced.waited:
        info["rate_limit_wait"] = round(paced.waited, 3)  # seconds slept for the rate limit
    return ToolResult(output=output, truncated=truncated, request=info)


def _flagged(replaced: list[bool], page: Page) -> Page:
    replaced.append(page.replaced)
    return page


def _fetch(
    spec: ToolSpec, prepared: PreparedRequest, ctx: ToolCallContext, timeout: float, paced: Paced
) -> Page:
    """One page, in its rate-limit slot (``tools.http.pacing``: a long wait raises
    ``rate_limit_wait``, nothing sent), behind the host's circuit breaker: an open breaker
    refuses it before anything is sent (``circuit_open``); a retryable failure counts
    against the host. The wait comes first, so waiting never counts as a failure."""
    http = spec.http
    assert http is not None
    paced.admit()
    with breaker_guard(ctx.breakers, prepared.merged_url, http.breaker):
        return _fetch_page(http, prepared, ctx, timeout, paced)


def _fetch_page(
    http: HttpConfig, prepared: PreparedRequest, ctx: ToolCallContext, timeout: float, paced: Paced
) -> Page:
    """One page: send (with the OAuth2 token, refreshed once on 401), check, read."""
    token = None
    client, stored = prepared.oauth2, prepared.stored_oauth2
    if client is not None:
        prepared = replace(prepared, headers=dict(prepared.headers))
        if stored is not None:
            token = apply_shared_token(stored, client, prepared, ctx, timeout=timeout)
        else:
            token = apply_oauth2(client, prepared, ctx, timeout=timeout)
    received, final = _send_following(http, prepared, ctx, timeout)
    paced.observe(received)  # the API's rate headers pause every caller of the key
    refused = received.status == 401 and final.url == prepared.url
    if refused and client is not None and token is not None:
        if stored is not None:  # one shared refresh, unless another worker did it
            apply_shared_token(stored, client, prepared, ctx, timeout=timeout, refused=token)
        else:
            drop_token(client, token)
            apply_oauth2(client, prepared, ctx, timeout=timeout, fresh=True)
        received, final = _send_following(http, prepared, ctx, timeout)
    where = _where(final, ctx)
    text, replaced = decode_checked(received.body, received.encoding)
    try:
        raise_for_status(where, received, text, ctx.redactor)
        value, truncated = read_body(
            http, received, text, where, ctx.read_limit, ctx.redactor, cut_fails=ctx.cut_fails
        )
        check_success(http.response, value, where, ctx.redactor)  # every page
    except ToolError as exc:
        exc.attach_request(_info(final, ctx, received.status, None))
        raise
    return Page(value, received, truncated, sent=final, replaced=replaced)


def _send_following(
    http: HttpConfig, prepared: PreparedRequest, ctx: ToolCallContext, timeout: float
) -> tuple[Received, PreparedRequest]:
    """Send; with ``follow_redirects``, follow up to ``max_redirects`` 3xx answers.

    A redirect to another origin drops every credential (auth headers, OAuth2 token,
    API-key query parameters). 303 — and 301/302 after a POST — continue as a GET
    without a body, as browsers do; 307/308 repeat the method and body.
    """
    current = prepared
    for _ in range(http.max_redirects + 1):
        received = send(current, ctx, timeout=timeout)
        location = received.headers.get("location")
        if not http.follow_redirects or received.status not in _REDIRECTS or not location:
            return received, current
        current = _redirected(current, received, location)
    raise ToolHTTPError(
        f"{_where(current, ctx)}: more than {http.max_redirects} redirects",
        status=received.status,
    )


def _redirected(current: PreparedRequest, received: Received, location: str) -> PreparedRequest:
    target = httpx.URL(received.url).join(location)
    origin = httpx.URL(current.url)
    headers, params = dict(current.headers), list(current.params)
    if (target.scheme, target.host, target.port) != (origin.scheme, origin.host, origin.port):
        headers = {k: v for k, v in headers.items() if k.lower() not in current.credential_headers}
        params = [(k, v) for k, v in params if k not in current.credential_params]
    method, body = current.method, current.body
    if received.status == 303 or (received.status in (301, 302) and method == "POST"):
        method, body = "GET", type(current.body)()
    # The target URL already carries the query it wants; only credentials would be re-added.
    params = [(k, v) for k, v in params if k in current.credential_params]
    return replace(
        current, method=method, url=str(target), headers=headers, params=params, body=body
    )


def _guard_non_idempotent(spec: ToolSpec, exc: ToolError) -> ToolError:
    """For a non-idempotent tool, a retryable failure the server may have acted on
    becomes ``outcome_unknown`` (fatal): repeating it could do the call twice."""
    if spec.idempotent or not exc.retryable:
        return exc
    if exc.not_sent or exc.not_processed:
        return exc
    return ToolOutcomeUnknown(
        f"{exc.message}. Tool {spec.name!r} is not idempotent and the server may have "
        "acted on the request, so it was not sent again: check the target system, then "
        "restart from this step.",
        request=exc.request,
    )


def _where(prepared: PreparedRequest, ctx: ToolCallContext) -> str:
    return f"{prepared.method} {ctx.redactor.scrub_text(_full_url(prepared))}"


def _full_url(prepared: PreparedRequest) -> str:
    return str(prepared.merged_url)


def _info(
    prepared: PreparedRequest, ctx: ToolCallContext, status: int | None, started: float | None
) -> dict[str, Any]:
    elapsed = None if started is None else round((time.perf_counter() - started) * 1000, 1)
    return {
        "method": prepared.method,
        "url": ctx.redactor.scrub_text(_full_url(prepared)),
        "status": status,
        "elapsed_ms": elapsed,
        "headers": ctx.redactor.scrub(redact_headers(prepared.headers)),
    }
