"""Turning an answer into a tool output or a typed error.

Order: the status (non-2xx → a typed error) → the body by ``response.format`` →
the ``success`` condition → ``response_extract``, which may also read ``$status`` and
``$headers.<name>`` (names case-insensitive).
"""

from __future__ import annotations

import base64
import json
import time
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from tools.errors import (
    ToolAuthFailed,
    ToolHTTPError,
    ToolRateLimited,
    ToolResponseInvalid,
    ToolResponseTooLarge,
)
from tools.http.transport import Received
from tools.paths import get
from tools.redaction import Redactor
from tools.sizes import OutputTooLarge
from tools.spec import HttpConfig
from tools.spec_http import RESPONSE_META, ResponseConfig, parse_extract_path

ERROR_BODY_CHARS = 500


def decode_text(body: bytes, encoding: str) -> str:
    return decode_checked(body, encoding)[0]


def decode_checked(body: bytes, encoding: str) -> tuple[str, bool]:
    """``body`` as text in its charset (UTF-8 when unknown), and whether some bytes were
    not valid in it and were replaced with U+FFFD (flagged on the step, never silent)."""
    try:
        return body.decode(encoding), False
    except LookupError:
        return decode_checked(body, "utf-8")
    except UnicodeDecodeError:
        return body.decode(encoding, errors="replace"), True


def raise_for_status(where: str, received: Received, text: str, redactor: Redactor) -> None:
    """Non-2xx → a typed error with method, redacted URL, status and ≤500 chars of body.

    A 429, and a 503 with ``Retry-After``, say the request was not processed
    (``not_processed``): even a non-idempotent call may be tried again.
    """
    status = received.status
    if 200 <= status < 300:
        return
    message = f"{where} returned HTTP {status}"
    body = _snippet(text, redactor)
    if body:
        message += f": {body}"
    retry_after = retry_after_seconds(received.headers)
    if status == 429:
        error: ToolHTTPError = ToolRateLimited(message, retry_after=retry_after)
    elif status in (401, 403):
        error = ToolAuthFailed(message, status=status)
    else:
        not_processed = status == 503 and received.headers.get("retry-after") is not None
        error = ToolHTTPError(message, status=status, not_processed=not_processed)
    raise error


def _snippet(text: str, redactor: Redactor) -> str:
    # Scrub before cutting, so a secret is never cut in half and left readable.
    return redactor.scrub_text(" ".join(text[: ERROR_BODY_CHARS * 4].split()))[:ERROR_BODY_CHARS]


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


def read_body(
    http: HttpConfig,
    received: Received,
    text: str,
    where: str,
    limit: int,
    redactor: Redactor,
    *,
    cut_fails: bool = False,
) -> tuple[Any, bool]:
    """The page's body by ``response.format`` (wrapped), and whether it was cut.
    ``redactor`` masks the snippet an error quotes before it is cut. A body cut at
    the step's size cap (``cut_fails``) is refused whatever the format: ``OutputTooLarge``
    (a decompression bomb fails the step, it does not succeed as a truncated text)."""
    config = http.response
    if received.truncated and cut_fails:
        raise OutputTooLarge(step="", what=f"response of {where}", size=limit, cap=limit,
                             at_least=True)  # fmt: skip
    if received.truncated:
        if http.response_extract or http.pagination or config.format in ("json", "jsonl"):
            raise ToolResponseTooLarge(
                f"{where}: the response is larger than the {limit} byte limit; "
                "nothing was extracted"
            )
        return {"text": text, "truncated": True, "limit_bytes": limit}, True
    content_type = received.headers.get("content-type", "")
    if config.format == "binary":
        encoded = base64.b64encode(received.body).decode("ascii")
        kind = content_type or "application/octet-stream"
        return {"base64": encoded, "content_type": kind, "size": len(received.body)}, False
    if config.format == "text":
        return {"text": text}, False
    if config.format == "jsonl":
        return _json_lines(text, where), False
    value = parse_body(text, content_type)
    strict = config.format == "json" or http.response_extract or http.pagination
    if strict and not is_json(value, text):
        raise ToolResponseInvalid(
            f"{where}: the response is not JSON (Content-Type {content_type or 'none'!r}: "
            f"{_snippet(text, redactor)[:80]!r}), but JSON fields were declared"
        )
    return value, False


def is_json(value: Any, text: str) -> bool:
    """Whether :func:`parse_body` parsed JSON (rather than falling back to ``{text}``)."""
    return not (isinstance(value, dict) and set(value) == {"text"}) or not text.strip()


def _json_lines(text: str, where: str) -> dict[str, Any]:
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except ValueError as exc:
            raise ToolResponseInvalid(f"{where}: line {number} is not JSON ({exc})") from exc
    return wrap(items)


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


def check_success(config: ResponseConfig, value: Any, where: str, redactor: Redactor) -> None:
    """A 200 whose body fails the ``success`` condition → a fatal ``http_error``."""
    condition = config.success
    if condition is None:
        return
    found = get(value, parse_extract_path(condition.path))
    if condition.accepts(found):
        return
    detail = get(value, parse_extract_path(condition.message)) if condition.message else None
    shown = _snippet(detail if isinstance(detail, str) else json.dumps(detail), redactor)
    raise ToolHTTPError(
        f"{where} answered HTTP 200 but {condition.path} is {json.dumps(found)!s}, "
        f"not a success value" + (f": {shown}" if detail is not None else ""),
        status=200,
        retryable=False,
    )


def extract(value: Any, fields: dict[str, str], meta: dict[str, Any] | None = None) -> dict:
    """Read each output key's path from ``value`` (missing paths give None); ``$status``
    and ``$headers.<name>`` read ``meta``."""
    result: dict[str, Any] = {}
    for key, path in fields.items():
        segments = parse_extract_path(path)
        source = (meta or {}) if segments[0] in RESPONSE_META else value
        result[key] = get(source, segments)
    return result


def response_meta(received: Received) -> dict[str, Any]:
    """``$status`` and ``$headers`` (lower-case names; repeated headers joined by ", ")."""
    headers: dict[str, str] = {}
    for name, value in received.headers.multi_items():
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return {"$status": received.status, "$headers": headers}
