"""The side-effect preview of an ``approval`` step: the exact requests the next steps
that change something will send, rendered with the data the run holds now.

"The next steps that change something": the tool steps after the approval step (its
descendants in the graph) whose tool is not idempotent (a POST, or a tool marked
``idempotent: false``). Each is rendered as the step would call it now: its
arguments resolved from the run's inputs and the outputs its steps have so far (a
value a step not yet run would give is null, and named under ``unknown``), then the
tool called with a tap that keeps the prepared request — method, URL, headers and
body, masked like every record — and sends nothing. An MCP tool shows the call it
would make; a tool that cannot be rendered yet shows why.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from runs.engine.context import RunContext
from runs.engine.resolve import DONE_KEY, EACH_KEY, resolve_step_call, step_view_value
from runs.models import Run, StepResult
from runs.state import StepStatus
from tools.calls import ToolCallContext
from tools.errors import FlowpilotError
from tools.http.bodies import body_text
from tools.jsondata import store_unescape
from tools.redaction import Redactor, redact_headers
from workflows.references import StepRef, iter_refs
from workflows.schema import ForeachStep, ToolStep

# Requests shown at most (a wide fan-out after an approval shows its first ones).
MAX_SHOWN = 10
# Characters of one body shown at most.
MAX_BODY_CHARS = 20_000


class _Captured(Exception):
    """Raised by the tap once the request is kept: nothing is sent."""

    def __init__(self, request: dict[str, Any]) -> None:
        super().__init__("captured")
        self.request = request


class _PreviewTap:
    """Keeps the first request of a call, masked, and sends nothing (a ``CallTap``)."""

    def exchange(self, prepared: Any, send: Callable[[], Any], redactor: Redactor) -> Any:
        raise _Captured(
            {
                "method": prepared.method.upper(),
                "url": redactor.scrub_text(str(prepared.merged_url)),
                "headers": redactor.scrub(redact_headers(prepared.headers)),
                "body": _body(redactor.scrub_text(body_text(prepared.body))),
            }
        )

    def mcp_exchange(
        self, request: dict[str, Any], send: Callable[[], Any], redactor: Redactor
    ) -> Any:
        shown = redactor.scrub(request)
        raise _Captured(
            {
                "method": "MCP",
                "url": f"{shown.get('server')}/{shown.get('tool')}",
                "headers": {},
                "body": shown.get("arguments"),
            }
        )

    def file_write(self, path: str, data: bytes, write: Callable[[], None]) -> None:
        raise _Captured({"method": "WRITE", "url": path, "headers": {}, "body": None})


def _body(text: str) -> Any:
    """A body as shown: its JSON when it is JSON, else its text (cut when long)."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text if len(text) <= MAX_BODY_CHARS else text[:MAX_BODY_CHARS] + "…"


def side_effect_preview(ctx: RunContext, run: Run, step_id: str) -> list[dict[str, Any]]:
    """The requests the steps after ``step_id`` that change something will send (at
    most ``MAX_SHOWN``), each ``{step, tool, method, url, headers, body, unknown}`` (a
    foreach: its first item's, and ``item_count``), or ``{step, tool, error}`` when it
    cannot be rendered now."""
    results = {r.step_id: r for r in run.step_results.all()}
    views = {
        sid: store_unescape(step_view_value(r.status, r.output, r.error))
        for sid, r in results.items()
        if r.status == StepStatus.SUCCEEDED
    }
    after = _descendants(ctx, step_id)
    shown: list[dict[str, Any]] = []
    for sid in ctx.graph.order:
        if sid not in after or len(shown) >= MAX_SHOWN:
            continue
        step = ctx.spec.step(sid)
        if not isinstance(step, ToolStep | ForeachStep):
            continue
        tool = ctx.registry.get(step.tool)
        if tool is None or tool.idempotent:
            continue
        shown.append(_render(ctx, run, step, views, results))
    return shown


def _descendants(ctx: RunContext, step_id: str) -> set[str]:
    seen: set[str] = set()
    todo = list(ctx.graph.children[step_id])
    while todo:
        sid = todo.pop()
        if sid not in seen:
            seen.add(sid)
            todo.extend(ctx.graph.children[sid])
    return seen


def _render(
    ctx: RunContext,
    run: Run,
    step: ToolStep | ForeachStep,
    views: Mapping[str, Any],
    results: Mapping[str, StepResult],
) -> dict[str, Any]:
    entry: dict[str, Any] = {"step": step.id, "tool": step.tool}
    unknown = sorted(
        {
            str(ref)
            for ref in iter_refs(dict(ctx.parsed[step.id]))
            if isinstance(ref, StepRef) and ref.step_id not in views
        }
    )
    if unknown:
        entry["unknown"] = unknown  # read as null now: those steps have not run yet
    try:
        args, _ = resolve_step_call(ctx, step, inputs=run.inputs, step_value=views.get)
        if isinstance(step, ForeachStep):
            each = args.get(EACH_KEY) or []
            entry["item_count"] = len(each)
            if not each:
                return {**entry, "error": "no items to send yet"}
            shared = {k: v for k, v in args.items() if k not in {"items", EACH_KEY, DONE_KEY}}
            args = {**shared, **each[0]}  # the first item's call stands for the others
        call = ToolCallContext(
            env=ctx.env,
            redactor=ctx.redactor,
            http=ctx.http,
            max_response_bytes=ctx.limits.max_response_bytes,
            output_dir=ctx.output_dir,
            data_dirs=ctx.data_dirs,
            tap=_PreviewTap(),
            run_id=ctx.run_id,
        )
        ctx.registry.call(step.tool, args, call)
    except _Captured as captured:
        return {**entry, **captured.request}
    except FlowpilotError as exc:
        return {**entry, "error": ctx.redactor.scrub_text(str(exc))}
    return {**entry, "error": "the tool sends nothing this preview can show"}


def preview_hash(preview: list[dict[str, Any]]) -> str:
    """What a decision records as what its author saw."""
    text = json.dumps(preview, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
