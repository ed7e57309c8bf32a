"""One call as recorded and compared: the request's masked, comparable form.

**HTTP.** A request is compared by method, full URL (query included) and body text,
each masked with the run's redactor: secret values read ``***`` on both sides, so a
secret that changed since the validation run still matches, and no secret is ever
stored. Headers are recorded (masked) but not compared: the idempotency key in them
is the run's own.

**MCP and LLM.** The request is a JSON value — an MCP call's ``{server, tool,
arguments}``, an LLM call's ``{endpoint, model, messages, tools, response_format,
temperature, max_tokens, seed}`` — masked the same way and compared by the SHA-256
of its canonical JSON (``CallKey``). The LLM ``model`` compared is the one the step
names (None when it uses its endpoint's default, so a changed ``PLANNER_MODEL`` is
not a difference; the model that answered is in the recorded reply).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tools.http.bodies import body_text
from tools.http.request import PreparedRequest
from tools.llm import LLMReply, ToolCall, Usage
from tools.redaction import Redactor, redact_headers

DESCRIBE_CHARS = 200


@dataclass(frozen=True)
class RequestKey:
    kind: ClassVar[str] = "http"

    method: str
    url: str
    body: str

    def describe(self) -> str:
        body = f" {self.body[:200]}" if self.body else ""
        return f"{self.method} {self.url}{body}"


def request_key(prepared: PreparedRequest, redactor: Redactor) -> RequestKey:
    return RequestKey(
        method=prepared.method.upper(),
        url=redactor.scrub_text(str(prepared.merged_url)),
        body=redactor.scrub_text(body_text(prepared.body)),
    )


def request_headers(prepared: PreparedRequest, redactor: Redactor) -> dict[str, Any]:
    scrubbed: dict[str, Any] = redactor.scrub(redact_headers(prepared.headers))
    return scrubbed


@dataclass(frozen=True)
class CallKey:
    """An MCP or LLM request: equal when the kind and the masked request's hash are."""

    kind: str  # "mcp" | "llm"
    digest: str
    request: Any = field(compare=False)  # the masked request (as stored: maybe a preview)

    def describe(self) -> str:
        request = self.request if isinstance(self.request, dict) else {}
        if "preview" in request:
            return f"{self.kind} request (over the recording cap) {request['preview'][:80]}…"
        if self.kind == "mcp":
            arguments = _json(request.get("arguments"))
            return f"MCP {request.get('server')}/{request.get('tool')} {_cut(arguments)}"
        messages = request.get("messages") or []
        last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
        said = last.get("content") if isinstance(last.get("content"), str) else _json(last)
        model = request.get("model") or "the endpoint's default model"
        return (
            f"LLM chat on `{request.get('endpoint')}` ({model}, {len(messages)} messages, "
            f"the last {last.get('role', '?')}: {_cut(str(said))})"
        )


def call_key(kind: str, request: Any, redactor: Redactor) -> CallKey:
    masked = redactor.scrub(request)
    canonical = json.dumps(masked, sort_keys=True, default=str)  # ASCII: any text hashes
    return CallKey(kind, hashlib.sha256(canonical.encode()).hexdigest(), masked)


def chat_request(request: Mapping[str, Any], *, endpoint: str, model: str | None) -> dict:
    """An LLM request as compared: the body sent, with the endpoint's name and the model
    the step names in place of the model sent."""
    return {**request, "endpoint": endpoint, "model": model}


def mcp_target(request: Mapping[str, Any]) -> str:
    return f"mcp:{request.get('server')}/{request.get('tool')}"


def reply_record(reply: LLMReply) -> dict[str, Any]:
    """What a replay needs to give the step the same reply (``reply_from_record``)."""
    return {
        "content": reply.content,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls
        ],
        "finish_reason": reply.finish_reason,
        "usage": reply.usage.as_dict(),
        "model": reply.model,
        "attempts": list(reply.attempts),
    }


def reply_from_record(data: Mapping[str, Any]) -> LLMReply:
    usage = data.get("usage") or {}
    return LLMReply(
        content=data.get("content"),
        tool_calls=tuple(
            ToolCall(str(c.get("id")), str(c.get("name")), str(c.get("arguments") or ""))
            for c in data.get("tool_calls") or ()
        ),
        usage=Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            total_tokens=int(usage.get("total_tokens") or 0),
        ),
        raw=dict(data),
        model=str(data.get("model") or ""),
        finish_reason=data.get("finish_reason"),
        attempts=tuple(data.get("attempts") or ()),
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _cut(text: str) -> str:
    """``text`` on one line (whitespace runs collapsed), cut at ``DESCRIBE_CHARS``."""
    text = " ".join(text.split())
    return text if len(text) <= DESCRIBE_CHARS else text[: DESCRIBE_CHARS - 1] + "…"
