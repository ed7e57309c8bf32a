"""Walking the pages of a list endpoint (``pagination:`` on the tool).

Each page is fetched by the caller's ``fetch`` (the same request, credentials and
checks as a single call); the lists found at ``pagination.items`` are concatenated into
``{"items": [...], "count": N, "pages": P, "more": bool}`` — ``more`` is true when a
cap (``max_pages`` / ``max_items``) stopped the walk while a next page was announced.

A ``Link: rel="next"`` URL must stay on the first request's origin: following it
elsewhere would hand the credentials to another host.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx

from tools.errors import ToolResponseInvalid
from tools.http.request import PreparedRequest
from tools.http.transport import Received
from tools.paths import get, parse_path
from tools.sizes import OutputTooLarge
from tools.spec_http import Pagination

_LINK = re.compile(r"<([^>]*)>((?:\s*;\s*[^;,]+)*)")
_REL = re.compile(r"""rel\s*=\s*"?([^";]+)"?""", re.IGNORECASE)


@dataclass(frozen=True)
class Page:
    value: Any
    received: Received
    truncated: bool = False
    sent: PreparedRequest | None = None  # the request as sent (credentials, redirects)
    replaced: bool = False  # some bytes of the body were not valid text (now U+FFFD)


def next_link(headers: httpx.Headers) -> str | None:
    """The ``rel="next"`` target of the ``Link`` headers, or None."""
    for header in headers.get_list("link"):
        for match in _LINK.finditer(header):
            rel = _REL.search(match.group(2))
            if rel and "next" in rel.group(1).lower().split():
                return match.group(1).strip()
    return None


def collect_pages(
    pagination: Pagination,
    first: PreparedRequest,
    fetch: Callable[[PreparedRequest, int], Page],
    *,
    max_bytes: int | None = None,
) -> tuple[dict[str, Any], Page]:
    """Fetch pages until the last one or a cap; returns the combined output and the
    last page (whose status and headers ``$status`` / ``$headers`` read). The bodies
    of all pages together are bounded by ``max_bytes`` (the step's size cap):
    ``OutputTooLarge`` as soon as the pages read pass it."""
    items: list[Any] = []
    received_total = 0
    body_bytes = 0
    page_size: int | None = None
    request = _start(pagination, first)
    number = 0
    while True:
        number += 1
        page = fetch(request, number)
        body_bytes += len(page.received.body)
        if max_bytes is not None and body_bytes > max_bytes:
            raise OutputTooLarge(step="", what=f"response ({number} pages)", size=body_bytes,
                                 cap=max_bytes, at_least=True)  # fmt: skip
        batch = _batch(pagination, page, number)
        received_total += len(batch)
        room = len(batch) if pagination.max_items is None else pagination.max_items - len(items)
        items.extend(batch[: max(room, 0)])
        following = None
        short = pagination.style in ("page", "offset") and len(batch) < (page_size or 0)
        if batch and not short:
            following = _next(pagination, first, request, page, received_total, number)
        page_size = page_size or len(batch)
        capped = number >= pagination.max_pages or (
            pagination.max_items is not None and len(items) >= pagination.max_items
        )
        if following is None or capped:
            more = following is not None or room < len(batch)
            return {"items": items, "count": len(items), "pages": number, "more": more}, page
        request = following


def _batch(pagination: Pagination, page: Page, number: int) -> list[Any]:
    found = get(page.value, parse_path(pagination.items))
    if found is None:
        return []
    if not isinstance(found, list):
        raise ToolResponseInvalid(
            f"page {number}: {pagination.items!r} is a {type(found).__name__}, not a list"
        )
    return found


def _start(pagination: Pagination, first: PreparedRequest) -> PreparedRequest:
    if pagination.style == "page":
        return _with_param(first, pagination.page_param, pagination.first)
    if pagination.style == "offset":
        return _with_param(first, pagination.offset_param, pagination.first)
    return first


def _next(
    pagination: Pagination,
    first: PreparedRequest,
    current: PreparedRequest,
    page: Page,
    received_total: int,
    number: int,
) -> PreparedRequest | None:
    if pagination.style == "page":
        return _with_param(current, pagination.page_param, pagination.first + number)
    if pagination.style == "offset":
        return _with_param(current, pagination.offset_param, pagination.first + received_total)
    if pagination.style == "cursor":
        cursor = get(page.value, parse_path(pagination.cursor_path or ""))
        if cursor in (None, "", False):
            return None
        return _with_param(current, pagination.cursor_param or "", cursor)
    link = next_link(page.received.headers)
    if link is None:
        return None
    target = httpx.URL(page.received.url).join(link)
    if _origin(target) != _origin(httpx.URL(first.url)):
        raise ToolResponseInvalid(
            f"page {number}: the next-page link points to another origin "
            f"({target.scheme}://{target.netloc.decode()}); it is not followed"
        )
    params = [(k, v) for k, v in first.params if k in first.credential_params]
    return replace(current, url=str(target), params=params)


def _with_param(request: PreparedRequest, name: str, value: Any) -> PreparedRequest:
    params = [(k, v) for k, v in request.params if k != name]
    return replace(request, params=[*params, (name, str(value))])


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port
