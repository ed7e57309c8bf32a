"""The validation run's recorder: every call its steps make, kept masked.

A ``CallRecorder`` is the run context's ``taps`` for a validation run and for every
child run under it (``call_recorder_for``: a `workflow` step's child run, its own
children, …; their calls are stored with the child run's steps). Each tool call gets
a tap bound to its step and item (``tap_for``), each model call of an ``llm`` step or
LLM decision one bound to its step (``chat_tap_for``). A tap makes the call (the
network, the MCP server, the LLM endpoint are untouched) and keeps a copy of it:

- an **HTTP** exchange: the request's masked key and headers, the status, the
  response headers and body — or the transport error;
- an **MCP** call: ``{server, tool, arguments}`` and the server's result — or the
  error (a protocol error keeps its JSON-RPC code);
- an **LLM** call: the request as compared (``runs.replay.exchange.chat_request``) and
  the reply (content, tool calls, finish reason, usage, model, HTTP tries) — or the
  typed error.

Everything is masked by value with the run's redactor and capped at
``FLOWPILOT_MAX_STORED_OUTPUT_BYTES``. Taps run on the steps' threads and only
buffer; the context's ``close()`` writes the rows (``ToolCallRecording``) from the
thread that owns the database connection.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from django.conf import settings

from runs.models import RecordingKind, Run, StepResult, ToolCallRecording
from runs.replay.exchange import (
    CallKey,
    call_key,
    chat_request,
    mcp_target,
    reply_record,
    request_headers,
    request_key,
)
from runs.state import RunTrigger
from tools.errors import FlowpilotError, ToolError
from tools.http.request import PreparedRequest
from tools.http.response import decode_text
from tools.http.transport import Received
from tools.jsondata import store_escape
from tools.llm import LLMError, LLMRateLimited, LLMReply
from tools.redaction import Redactor
from workflows.validation.subworkflows import max_depth

if TYPE_CHECKING:  # the SDK is not loaded to record a call (_is_mcp_error)
    from mcp.shared.exceptions import MCPError

MAX_ERROR_CHARS = 4000
MCP_ERROR = "mcp_error"  # a JSON-RPC error answer; ``code`` is kept
SESSION_FAILED = "mcp_session_failed"  # the MCP transport broke during the call


@dataclass
class _Pending:
    step_id: str
    item: int | None
    fields: dict[str, Any]  # as stored: escaped for the database (``store_escape``)


@dataclass
class CallRecorder:
    """Records a run's calls; ``flush()`` and ``close()`` store them."""

    run_id: int
    max_bytes: int
    _kept: list[_Pending] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def tap_for(self, step_id: str, item: int | None, tool: str) -> _RecordingTap:
        return _RecordingTap(self, step_id, item, tool)

    def chat_tap_for(
        self, step_id: str, *, endpoint: str, model: str | None, redactor: Redactor
    ) -> _RecordingChatTap:
        return _RecordingChatTap(self, step_id, endpoint, model, redactor)

    @property
    def offline(self) -> bool:
        """A validation run sends every call; this only records them."""
        return False

    def keep(self, pending: _Pending) -> None:
        with self._lock:
            self._kept.append(pending)

    def flush(self) -> None:
        """Store the calls kept so far. When the write fails, they are kept for the
        next ``flush`` or ``close`` (a settle retried on a new connection stores them)."""
        with self._lock:
            kept, self._kept = self._kept, []
        if not kept:
            return
        try:
            ids = dict(StepResult.objects.filter(run_id=self.run_id).values_list("step_id", "pk"))
            ToolCallRecording.objects.bulk_create(
                ToolCallRecording(step_result_id=ids[p.step_id], item=p.item, **p.fields)
                for p in kept
                if p.step_id in ids
            )
        except BaseException:
            with self._lock:
                self._kept[:0] = kept
            raise

    def close(self) -> None:
        self.flush()

    # --- shared by the taps ---------------------------------------------------------

    def capped(self, text: str) -> tuple[str, bool]:
        data = text.encode("utf-8", "surrogatepass")  # a lone surrogate is data too
        if len(data) <= self.max_bytes:
            return text, False
        return data[: self.max_bytes].decode(errors="ignore"), True

    def capped_json(self, value: Any) -> tuple[Any, bool]:
        """``value`` when its JSON fits the cap, else ``{preview, truncated}``."""
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        preview, cut = self.capped(text)
        return ({"preview": preview, "truncated": True}, True) if cut else (value, False)

    def json_call(self, key: CallKey, **fields: Any) -> dict[str, Any]:
        """The request fields of an MCP or LLM recording."""
        request, _ = self.capped_json(key.request)
        return {"kind": key.kind, "request": request, "request_hash": key.digest, **fields}

    def store(self, step_id: str, item: int | None, fields: dict[str, Any], started: float) -> None:
        fields["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 1)
        self.keep(_Pending(step_id, item, store_escape(fields)))


def error_record(exc: BaseException, redactor: Redactor) -> dict[str, Any]:
    """A failed call's error as recorded: its type (code), its masked message, and what
    a replay needs to raise it again."""
    if isinstance(exc, FlowpilotError):
        record: dict[str, Any] = {"type": exc.code, "message": exc.message}
        if isinstance(exc, ToolError) and exc.not_sent:
            record["not_sent"] = True
        if isinstance(exc, LLMError):
            record.update(status=exc.status, attempts=list(exc.attempts))
        if isinstance(exc, LLMRateLimited):
            record["retry_after"] = exc.retry_after
    elif _is_mcp_error(exc):
        record = {"type": MCP_ERROR, "code": exc.code, "message": exc.message}
    else:
        record = {"type": SESSION_FAILED, "message": f"{exc}" or type(exc).__name__}
    record["message"] = redactor.scrub_text(str(record["message"]))[:MAX_ERROR_CHARS]
    return record


def _is_mcp_error(exc: BaseException) -> TypeGuard[MCPError]:
    """Whether ``exc`` is the ``mcp`` SDK's protocol error, without loading the SDK for
    the question: an ``MCPError`` can only exist once its module has been imported."""
    module = sys.modules.get("mcp.shared.exceptions")
    return module is not None and isinstance(exc, module.MCPError)


@dataclass(frozen=True)
class _RecordingTap:
    """One tool call's tap: its HTTP exchanges, or its MCP call."""

    recorder: CallRecorder
    step_id: str
    item: int | None
    tool: str

    def exchange(
        self, prepared: PreparedRequest, send: Callable[[], Received], redactor: Redactor
    ) -> Received:
        key = request_key(prepared, redactor)
        fields: dict[str, Any] = {
            "kind": RecordingKind.HTTP,
            "tool": self.tool,
            "method": key.method,
            "url": key.url,
            "request_body": self.recorder.capped(key.body)[0],
            "request_headers": request_headers(prepared, redactor),
        }
        started = time.perf_counter()
        try:
            received = send()
        except FlowpilotError as exc:
            fields["error"] = error_record(exc, redactor)
            self._keep(fields, started)
            raise
        text = redactor.scrub_text(decode_text(received.body, received.encoding))
        body, cut = self.recorder.capped(text)
        fields.update(
            status=received.status,
            response_headers=redactor.scrub(dict(received.headers.items())),
            response_body=body,
            response_encoding=received.encoding,
            body_truncated=cut or received.truncated,
        )
        self._keep(fields, started)
        return received

    def mcp_exchange(
        self, request: dict[str, Any], send: Callable[[], Any], redactor: Redactor
    ) -> Any:
        key = call_key(RecordingKind.MCP, request, redactor)
        fields = self.recorder.json_call(
            key, tool=self.tool, method="tools/call", url=mcp_target(key.request)
        )
        started = time.perf_counter()
        try:
            result = send()
        except Exception as exc:
            fields["error"] = error_record(exc, redactor)
            self._keep(fields, started)
            raise
        dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        fields["response"], fields["body_truncated"] = self.recorder.capped_json(
            redactor.scrub(dumped)
        )
        self._keep(fields, started)
        return result

    def file_write(self, path: str, data: bytes, write: Callable[[], None]) -> None:
        write()  # a validation run writes its files (not recorded: a replay writes none)

    def _keep(self, fields: dict[str, Any], started: float) -> None:
        self.recorder.store(self.step_id, self.item, fields, started)


@dataclass(frozen=True)
class _RecordingChatTap:
    """One model call's tap (an ``llm`` step's turn, or an LLM decision)."""

    recorder: CallRecorder
    step_id: str
    endpoint: str
    model: str | None
    redactor: Redactor

    def chat(self, request: dict[str, Any], send: Callable[[], LLMReply]) -> LLMReply:
        comparable = chat_request(request, endpoint=self.endpoint, model=self.model)
        key = call_key(RecordingKind.LLM, comparable, self.redactor)
        target = self.redactor.scrub_text(f"llm:{self.endpoint}/{request.get('model')}")
        fields = self.recorder.json_call(key, tool=self.endpoint, method="chat", url=target)
        started = time.perf_counter()
        try:
            reply = send()
        except LLMError as exc:
            fields.update(error=error_record(exc, self.redactor), status=exc.status)
            self.recorder.store(self.step_id, None, fields, started)
            raise
        fields["response"], fields["body_truncated"] = self.recorder.capped_json(
            self.redactor.scrub(reply_record(reply))
        )
        fields["status"] = 200
        self.recorder.store(self.step_id, None, fields, started)
        return reply


def call_recorder_for(run: Run) -> CallRecorder | None:
    """The recorder of a validation run, or of a child run whose chain of parent runs
    leads to one; None for any other run (nothing is recorded).

    Only a child run (trigger ``workflow``) reads its ancestors (one query per level),
    so an ordinary run costs no query. Both drivers build their contexts through this:
    in process (``runs.services.run_execute``) and each step task on the Celery workers
    (``runs.engine.celery.run.run_context``, handed this function by ``runs.tasks``).
    """
    if run.trigger == RunTrigger.WORKFLOW:
        if not under_validation(run):
            return None
    elif run.trigger != RunTrigger.VALIDATION:
        return None
    return CallRecorder(run_id=run.pk, max_bytes=settings.FLOWPILOT_MAX_STORED_OUTPUT_BYTES)


def under_validation(run: Run) -> bool:
    """Whether child run ``run`` serves, through its parent runs, a validation run."""
    parent_id = run.parent_run_id
    for _ in range(max_depth() + 1):  # a chain is never deeper (the bound stops a loop)
        if parent_id is None:
            return False
        found = Run.objects.filter(pk=parent_id).values_list("trigger", "parent_run_id").first()
        if found is None:
            return False
        trigger, parent_id = found
        if trigger != RunTrigger.WORKFLOW:
            return trigger == RunTrigger.VALIDATION
    return False
