"""One HTTP exchange as recorded and compared: the request's masked, comparable form.

A request is compared by method, full URL (query included) and body text, each
masked with the run's redactor: secret values read ``***`` on both sides, so a
secret that changed since the validation run still matches, and no secret is ever
stored. Headers are recorded (masked) but not compared: the idempotency key in them
is the run's own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx

from tools.http.bodies import Body
from tools.http.request import PreparedRequest
from tools.redaction import Redactor, redact_headers


@dataclass(frozen=True)
class RequestKey:
    method: str
    url: str
    body: str

    def describe(self) -> str:
        body = f" {self.body[:200]}" if self.body else ""
        return f"{self.method} {self.url}{body}"


def full_url(prepared: PreparedRequest) -> str:
    params: list[tuple[str, str | int | float | bool | None]] = list(prepared.params)
    return str(httpx.URL(prepared.url).copy_merge_params(params))


def body_text(body: Body) -> str:
    """The body as comparable text (JSON with sorted keys; form data as sent)."""
    if body.files:
        files = [(name, part[0], len(part[1])) for name, part in body.files]
        return json.dumps({"data": body.data, "files": files}, ensure_ascii=False)
    if body.data:
        return urlencode(body.data)
    if body.content is not None:
        return body.content.decode("utf-8", errors="replace")
    if body.json is None:
        return ""
    return json.dumps(body.json, ensure_ascii=False, sort_keys=True, default=str)


def request_key(prepared: PreparedRequest, redactor: Redactor) -> RequestKey:
    return RequestKey(
        method=prepared.method.upper(),
        url=redactor.scrub_text(full_url(prepared)),
        body=redactor.scrub_text(body_text(prepared.body)),
    )


def request_headers(prepared: PreparedRequest, redactor: Redactor) -> dict[str, Any]:
    scrubbed: dict[str, Any] = redactor.scrub(redact_headers(prepared.headers))
    return scrubbed
