"""The replay's taps: answers from a validation run's recordings, never the network.

Every call a replayed step makes — an HTTP request of a tool, an MCP tool call, a
model call of an ``llm`` step or LLM decision — is matched against the recordings of
the same step (and item: the foreach item or llm tool-call index) and kind, in the
order they were recorded: the first unused one with the same request (masked forms,
``runs.replay.exchange``) answers it — with its recorded response, or by raising its
recorded error. A call that matches none is refused (``replay_unrecorded``, fatal):
the step fails and its error names what was recorded and what the replay sent (for
MCP and LLM calls, also the first places where the two requests differ). A recording
whose response was cut at the recording cap cannot stand for it (``replay_incomplete``).

Nothing here sends: HTTP requests never reach the network, no MCP server is started
or reached, no LLM endpoint is called, and the built-in tools that write a file write
nothing (they return the path and size they would have). Responses are served as recorded, i.e.
masked: a secret the API (server, model) returned reads ``***``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from runs.models import RecordingKind, Run, ToolCallRecording
from runs.replay.exchange import (
    CallKey,
    RequestKey,
    call_key,
    chat_request,
    reply_from_record,
    request_key,
)
from runs.replay.recorder import MCP_ERROR, SESSION_FAILED
from runs.replay.report import value_differences
from tools.errors import (
    FlowpilotError,
    ToolCallFailed,
    ToolError,
    ToolInputError,
    ToolOutcomeUnknown,
    ToolResponseInvalid,
    ToolResponseTooLarge,
    ToolTimeout,
    ToolUnreachable,
)
from tools.http.request import PreparedRequest
from tools.http.transport import Received
from tools.jsondata import store_unescape
from tools.llm import (
    LLMAuthFailed,
    LLMError,
    LLMRateLimited,
    LLMReply,
    LLMReplyInvalid,
    LLMTimeout,
    LLMUnavailable,
)
from tools.redaction import Redactor

if TYPE_CHECKING:  # the SDK loads only when an MCP call is replayed
    import mcp_types as types

TOOL_ERRORS: dict[str, type[ToolError]] = {
    cls.code: cls
    for cls in (
        ToolTimeout,
        ToolUnreachable,
        ToolResponseInvalid,
        ToolCallFailed,
        ToolInputError,
        ToolOutcomeUnknown,
        ToolResponseTooLarge,
    )
}
LLM_ERRORS: dict[str, type[LLMError]] = {
    cls.code: cls for cls in (LLMError, LLMAuthFailed, LLMReplyInvalid, LLMTimeout, LLMUnavailable)
}
MAX_REQUEST_DIFFERENCES = 3
NOT_SENT = "not sent (replays never use the network)"

Key = RequestKey | CallKey


class ReplayUnrecorded(FlowpilotError):
    """A replayed call made a request the validation run did not record."""

    code = "replay_unrecorded"
    retryable = False


class ReplayIncomplete(FlowpilotError):
    code = "replay_incomplete"
    retryable = False


class RecordedSessionFailure(Exception):
    """An MCP session that broke during the recorded call, raised again as it was."""


@dataclass
class _Recorded:
    row: ToolCallRecording
    key: Key
    used: bool = False


def _key_of(row: ToolCallRecording) -> Key:
    if row.kind == RecordingKind.HTTP:
        return RequestKey(row.method, store_unescape(row.url), store_unescape(row.request_body))
    return CallKey(row.kind, row.request_hash, store_unescape(row.request))


@dataclass
class RecordedCalls:
    """A validation run's recordings by step, handing out taps for a replay run."""

    by_step: dict[str, list[_Recorded]]
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, run: Run) -> RecordedCalls:
        rows = ToolCallRecording.objects.filter(step_result__run=run).select_related("step_result")
        by_step: dict[str, list[_Recorded]] = {}
        for row in rows.order_by("id"):
            by_step.setdefault(row.step_result.step_id, []).append(_Recorded(row, _key_of(row)))
        return cls(by_step)

    def tap_for(self, step_id: str, item: int | None, tool: str) -> _ReplayTap:
        return _ReplayTap(self, step_id, item)

    def chat_tap_for(
        self, step_id: str, *, endpoint: str, model: str | None, redactor: Redactor
    ) -> _ReplayChatTap:
        return _ReplayChatTap(self, step_id, endpoint, model, redactor)

    @property
    def offline(self) -> bool:
        """A replay answers every call from the recordings and sends nothing."""
        return True

    def flush(self) -> None:
        """Nothing to store: a replay records nothing."""

    def close(self) -> None:
        """Nothing to store: a replay records nothing."""

    def take(self, step_id: str, item: int | None, key: Key) -> _Recorded:
        with self._lock:
            left = [
                r
                for r in self.by_step.get(step_id, [])
                if not r.used and r.row.item == item and r.key.kind == key.kind
            ]
            for recorded in left:
                if recorded.key == key:
                    recorded.used = True
                    return recorded
        where = f"step `{step_id}`" + ("" if item is None else f" (item {item})")
        if not left:
            raise ReplayUnrecorded(
                f"{where} sent {key.describe()}, but the validation run recorded no "
                f"further {_call_name(key.kind)} of this step; {NOT_SENT}"
            )
        raise ReplayUnrecorded(
            f"{where}: request differs — recorded {left[0].key.describe()}, replay sent "
            f"{key.describe()}{_where_differs(left[0].key, key)}; {NOT_SENT}"
        )

    def unused(self) -> dict[str, list[str]]:
        """Recorded calls the replay never made, by step."""
        return {
            step: [r.key.describe() for r in recorded if not r.used]
            for step, recorded in sorted(self.by_step.items())
            if any(not r.used for r in recorded)
        }


def _call_name(kind: str) -> str:
    return {"http": "call", "mcp": "MCP call", "llm": "LLM call"}.get(kind, "call")


def _where_differs(recorded: Key, sent: Key) -> str:
    """The first places where two MCP or LLM requests differ (``messages.3.content: …``)."""
    if not isinstance(recorded, CallKey) or not isinstance(sent, CallKey):
        return ""
    if isinstance(recorded.request, dict) and "preview" in recorded.request:
        return " (the recorded request is over the recording cap: compared by its hash)"
    lines = value_differences(recorded.request, sent.request, "request")
    if not lines:
        return ""
    shown = "; ".join(lines[:MAX_REQUEST_DIFFERENCES])
    more = len(lines) - MAX_REQUEST_DIFFERENCES
    return f"; where they differ: {shown}" + (f" (and {more} more)" if more > 0 else "")


def _incomplete(step_id: str, recorded: _Recorded) -> ReplayIncomplete:
    return ReplayIncomplete(
        f"step `{step_id}`: the recorded answer to {recorded.key.describe()} was cut at the "
        "recording cap (FLOWPILOT_MAX_STORED_OUTPUT_BYTES); it cannot be replayed"
    )


def _message(error: dict[str, Any], default: str) -> str:
    return str(store_unescape(error.get("message") or default))


@dataclass(frozen=True)
class _ReplayTap:
    """One tool call's tap in a replay: its HTTP exchanges or its MCP call."""

    calls: RecordedCalls
    step_id: str
    item: int | None

    def exchange(
        self, prepared: PreparedRequest, send: Callable[[], Received], redactor: Redactor
    ) -> Received:
        """The recorded answer; ``send`` is never called."""
        recorded = self.calls.take(self.step_id, self.item, request_key(prepared, redactor))
        row = recorded.row
        if row.error:
            cls = TOOL_ERRORS.get(row.error.get("type"), ToolUnreachable)
            raise cls(
                _message(row.error, "recorded transport error"),
                not_sent=bool(row.error.get("not_sent")),
            )
        if row.body_truncated:
            raise _incomplete(self.step_id, recorded)
        headers: dict[str, Any] = store_unescape(row.response_headers or {})
        headers.pop("content-encoding", None)  # stored decoded
        headers.pop("content-length", None)
        return Received(
            status=row.status or 0,
            headers=httpx.Headers(headers),
            body=store_unescape(row.response_body).encode(),
            truncated=False,
            encoding="utf-8",
            url=str(prepared.merged_url),
        )

    def mcp_exchange(
        self, request: dict[str, Any], send: Callable[[], Any], redactor: Redactor
    ) -> types.CallToolResult:
        """The recorded result, or the recorded error raised again; ``send`` (which would
        start or reach the server) is never called."""
        import mcp_types as types  # the SDK, on the MCP replay path only
        from mcp.shared.exceptions import MCPError

        key = call_key(RecordingKind.MCP, request, redactor)
        recorded = self.calls.take(self.step_id, self.item, key)
        row = recorded.row
        if row.error:
            kind = row.error.get("type")
            message = _message(row.error, "recorded MCP error")
            if kind == MCP_ERROR:
                raise MCPError(int(row.error.get("code") or 0), message)
            if kind == SESSION_FAILED:
                raise RecordedSessionFailure(message)
            raise TOOL_ERRORS.get(kind, ToolCallFailed)(message)
        if row.body_truncated:
            raise _incomplete(self.step_id, recorded)
        return types.CallToolResult.model_validate(store_unescape(row.response))

    def file_write(self, path: str, data: bytes, write: Callable[[], None]) -> None:
        """Nothing is written: the tool returns its path and size as it would."""


@dataclass(frozen=True)
class _ReplayChatTap:
    """One model call's tap in a replay: the recorded reply, never the endpoint."""

    calls: RecordedCalls
    step_id: str
    endpoint: str
    model: str | None
    redactor: Redactor

    def chat(self, request: dict[str, Any], send: Callable[[], LLMReply]) -> LLMReply:
        comparable = chat_request(request, endpoint=self.endpoint, model=self.model)
        key = call_key(RecordingKind.LLM, comparable, self.redactor)
        recorded = self.calls.take(self.step_id, None, key)
        row = recorded.row
        if row.error:
            raise _llm_error(row.error)
        if row.body_truncated:
            raise _incomplete(self.step_id, recorded)
        return reply_from_record(store_unescape(row.response))


def _llm_error(error: dict[str, Any]) -> LLMError:
    message = _message(error, "recorded LLM error")
    raised: LLMError
    if error.get("type") == LLMRateLimited.code:
        raised = LLMRateLimited(message, retry_after=error.get("retry_after"))
    else:
        cls = LLM_ERRORS.get(error.get("type") or "", LLMError)
        raised = cls(message, status=error.get("status"))
    raised.attempts = list(error.get("attempts") or [])
    return raised
