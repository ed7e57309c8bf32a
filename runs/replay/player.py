"""The replay's taps: answers from a validation run's recordings, never the network.

Every HTTP request a replayed tool call makes is matched against the recordings of
the same step (and item), in the order they were recorded: the first unused one with
the same method, URL and body (masked forms, ``runs.replay.exchange``) answers it —
with its recorded status, headers and body, or by raising its recorded transport
error. A request that matches none is refused (``replay_unrecorded``, fatal): the
step fails and its error says what was recorded instead. A recording whose body was
cut at the recording cap cannot stand for the response (``replay_incomplete``).

Bodies are served as recorded, i.e. masked: a secret the API returned reads ``***``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from runs.models import Run, ToolCallRecording
from runs.replay.exchange import RequestKey, full_url, request_key
from tools.errors import FlowpilotError, ToolResponseInvalid, ToolTimeout, ToolUnreachable
from tools.http.request import PreparedRequest
from tools.http.transport import Received
from tools.jsondata import store_unescape
from tools.redaction import Redactor

TRANSPORT_ERRORS: dict[str, type[FlowpilotError]] = {
    cls.code: cls for cls in (ToolTimeout, ToolUnreachable, ToolResponseInvalid)
}


class ReplayUnrecorded(FlowpilotError):
    """A replayed call made a request the validation run did not record."""

    code = "replay_unrecorded"
    retryable = False


class ReplayIncomplete(FlowpilotError):
    code = "replay_incomplete"
    retryable = False


@dataclass
class _Recorded:
    row: ToolCallRecording
    key: RequestKey
    used: bool = False


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
            key = RequestKey(row.method, store_unescape(row.url), store_unescape(row.request_body))
            by_step.setdefault(row.step_result.step_id, []).append(_Recorded(row, key))
        return cls(by_step)

    def tap_for(self, step_id: str, item: int | None, tool: str) -> _ReplayTap:
        return _ReplayTap(self, step_id, item)

    def close(self) -> None:
        """Nothing to store: a replay records nothing."""

    def take(self, step_id: str, item: int | None, key: RequestKey) -> _Recorded:
        with self._lock:
            left = [r for r in self.by_step.get(step_id, []) if not r.used and r.row.item == item]
            for recorded in left:
                if recorded.key == key:
                    recorded.used = True
                    return recorded
        where = f"step `{step_id}`" + ("" if item is None else f" (item {item})")
        if not left:
            raise ReplayUnrecorded(
                f"{where} sent {key.describe()}, but the validation run recorded no "
                "further call of this step; not sent (replays never use the network)"
            )
        raise ReplayUnrecorded(
            f"{where}: request differs — recorded {left[0].key.describe()}, replay sent "
            f"{key.describe()}; not sent (replays never use the network)"
        )

    def unused(self) -> dict[str, list[str]]:
        """Recorded calls the replay never made, by step."""
        return {
            step: [r.key.describe() for r in recorded if not r.used]
            for step, recorded in sorted(self.by_step.items())
            if any(not r.used for r in recorded)
        }


@dataclass(frozen=True)
class _ReplayTap:
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
            error = TRANSPORT_ERRORS.get(row.error.get("type"), ToolUnreachable)(
                store_unescape(row.error.get("message", "recorded transport error"))
            )
            error.not_sent = bool(row.error.get("not_sent"))  # type: ignore[attr-defined]
            raise error
        if row.body_truncated:
            raise ReplayIncomplete(
                f"step `{self.step_id}`: the recorded answer to {recorded.key.describe()} was "
                "cut at the recording cap (FLOWPILOT_MAX_STORED_OUTPUT_BYTES); it cannot be "
                "replayed"
            )
        headers: dict[str, Any] = store_unescape(row.response_headers or {})
        headers.pop("content-encoding", None)  # stored decoded
        headers.pop("content-length", None)
        return Received(
            status=row.status or 0,
            headers=httpx.Headers(headers),
            body=store_unescape(row.response_body).encode(),
            truncated=False,
            encoding="utf-8",
            url=full_url(prepared),
        )
