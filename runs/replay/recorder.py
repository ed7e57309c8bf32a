"""The validation run's recorder: every HTTP exchange of its tool calls, kept masked.

A ``CallRecorder`` is the run context's ``taps`` for a validation run
(``call_recorder_for``); each tool call gets a tap bound to its step and item, which
sends the request (the network is untouched) and keeps a copy of the exchange: the
request's masked key and headers, the status, the response headers and body — masked
by value with the run's redactor and capped at ``FLOWPILOT_MAX_STORED_OUTPUT_BYTES``
— or the transport error. Taps run on the steps' threads and only buffer; the
context's ``close()`` writes the rows (``ToolCallRecording``) from the thread that
owns the database connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from runs.models import Run, StepResult, ToolCallRecording
from runs.replay.exchange import request_headers, request_key
from runs.state import RunTrigger
from tools.errors import FlowpilotError
from tools.http.request import PreparedRequest
from tools.http.response import decode_text
from tools.http.transport import Received
from tools.jsondata import store_escape
from tools.redaction import Redactor


@dataclass
class _Pending:
    step_id: str
    item: int | None
    fields: dict[str, Any]  # as stored: escaped for the database (``store_escape``)


@dataclass
class CallRecorder:
    """Records a run's HTTP exchanges; ``close()`` stores them."""

    run_id: int
    max_bytes: int
    _kept: list[_Pending] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def tap_for(self, step_id: str, item: int | None, tool: str) -> _RecordingTap:
        return _RecordingTap(self, step_id, item, tool)

    def keep(self, pending: _Pending) -> None:
        with self._lock:
            self._kept.append(pending)

    def close(self) -> None:
        with self._lock:
            kept, self._kept = self._kept, []
        if not kept:
            return
        ids = dict(StepResult.objects.filter(run_id=self.run_id).values_list("step_id", "pk"))
        ToolCallRecording.objects.bulk_create(
            ToolCallRecording(step_result_id=ids[p.step_id], item=p.item, **p.fields)
            for p in kept
            if p.step_id in ids
        )


@dataclass(frozen=True)
class _RecordingTap:
    recorder: CallRecorder
    step_id: str
    item: int | None
    tool: str

    def exchange(
        self, prepared: PreparedRequest, send: Callable[[], Received], redactor: Redactor
    ) -> Received:
        key = request_key(prepared, redactor)
        fields: dict[str, Any] = {
            "tool": self.tool,
            "method": key.method,
            "url": key.url,
            "request_body": self._capped(key.body)[0],
            "request_headers": request_headers(prepared, redactor),
        }
        started = time.perf_counter()
        try:
            received = send()
        except FlowpilotError as exc:
            fields["error"] = {
                "type": exc.code,
                "message": redactor.scrub_text(exc.message)[:4000],
                "not_sent": bool(getattr(exc, "not_sent", False)),
            }
            self._keep(fields, started)
            raise
        body, cut = self._capped(redactor.scrub_text(decode_text(received.body, received.encoding)))
        fields.update(
            status=received.status,
            response_headers=redactor.scrub(dict(received.headers.items())),
            response_body=body,
            response_encoding=received.encoding,
            body_truncated=cut or received.truncated,
        )
        self._keep(fields, started)
        return received

    def _capped(self, text: str) -> tuple[str, bool]:
        data = text.encode()
        if len(data) <= self.recorder.max_bytes:
            return text, False
        return data[: self.recorder.max_bytes].decode(errors="ignore"), True

    def _keep(self, fields: dict[str, Any], started: float) -> None:
        fields["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 1)
        self.recorder.keep(_Pending(self.step_id, self.item, store_escape(fields)))


def call_recorder_for(run: Run) -> CallRecorder | None:
    """The recorder of a validation run; None for any other run (nothing is recorded)."""
    if run.trigger != RunTrigger.VALIDATION:
        return None
    return CallRecorder(run_id=run.pk, max_bytes=settings.FLOWPILOT_MAX_STORED_OUTPUT_BYTES)
