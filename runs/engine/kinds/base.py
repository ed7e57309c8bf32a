"""What a step kind is to the engine, what every kind returns, and the tool-call context
built from a run context.

Facts about a kind's definition (retries, time limit, branch, tools, mappings) live on
its schema class (``workflows.schema``); what the engine does with it lives in its
module here, as one ``StepKind`` registered in ``runs.engine.kinds.KINDS``.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from runs.engine.context import RunContext
from runs.summaries import human_size, json_size, value_summary
from tools.calls import ToolCallContext, ToolResult
from tools.errors import FlowpilotError, ToolError, ToolNotAllowed
from workflows.graph import FlowGraph
from workflows.schema import AnyStep

# ``--log-level debug``: one line per tool call: its arguments, its request, a summary and
# a preview of the result (masked, bounded).
logger = logging.getLogger("flowpilot.engine.tool")


class StepKindUnsupported(FlowpilotError):
    code = "step_kind_unsupported"


class StepFailedWithProgress(FlowpilotError):
    """A step that failed after part of its work succeeded (a `foreach` whose items did
    not all succeed). ``progress`` is stored as the failed step's output (its
    checkpoint, masked and capped like any output; a later step still reads the failed
    step as ``{"error": …}``), and handed back to the kind's ``carry`` when the step is
    started again, so the work done is not done twice."""

    def __init__(self, message: str, *, progress: Any, retryable: bool | None = None) -> None:
        super().__init__(message, retryable=retryable)
        self.progress = progress


@dataclass(frozen=True)
class Attempt:
    """What one try of a step returned: its output, whether it was cut at the size
    limit, the branch a decision took, and the HTTP request a tool step sent (``{method,
    url, status, elapsed_ms, headers}``, masked: ``tools.calls.ToolResult.request``)."""

    output: Any
    truncated: bool = False
    branch: str | None = None  # set by decision steps
    request: dict[str, Any] | None = None  # set by tool steps calling an http tool
    size: int | None = None  # the output's size as JSON, measured by ``execute_attempt``
    # The step now waits for a person (an ``approval`` step): no output yet; the step's
    # outcome is ``waiting`` and its decision settles it later (``runs.approvals``).
    waiting: bool = False


class Describe(Protocol):
    """How the dry run shows a mapping value (``runs.dryrun``).

    Called, it gives the known value as JSON text or the reference it will read;
    ``known(value)`` gives the value itself when known before the run (run inputs,
    literals), else a placeholder text such as ``<geo.lat>`` (for rendering a prompt).
    """

    def __call__(self, value: Any) -> str: ...

    def known(self, value: Any) -> Any: ...


def _nothing_compiled(step: Any) -> dict[str, Any]:
    return {}


def _no_plan_lines(step: Any, graph: FlowGraph, describe: Describe) -> list[str]:
    return []


def _nothing_carried(step: Any, progress: Any, args: dict[str, Any]) -> dict[str, Any]:
    return args


def _no_progress(progress: Any) -> tuple[int, int] | None:
    return None


@dataclass(frozen=True)
class StepKind:
    """One kind of step: its schema class and what the engine does with it.

    ``execute(ctx, step, args)`` makes one try and returns an ``Attempt`` or raises a
    ``FlowpilotError``. ``compile(step)`` returns what is compiled once per run, by key
    (a branch label, ``"expression"``); the executor reads it from ``ctx.compiled`` at
    ``(step.id, key)``. ``plan(step, graph, describe)`` gives the dry run's lines shown
    after the step's input mapping. ``carry(step, progress, args)`` gives the arguments
    of a step started again (a resume, a restart) whose checkpoint holds the
    ``progress`` of an earlier try (``StepFailedWithProgress``, or the output of the
    run it restarts: ``runs.restart``); by default nothing is carried.
    """

    model: type[AnyStep]
    execute: Callable[[RunContext, Any, dict[str, Any]], Attempt]
    compile: Callable[[Any], Mapping[str, Any]] = _nothing_compiled
    plan: Callable[[Any, FlowGraph, Describe], list[str]] = _no_plan_lines
    carry: Callable[[Any, Any, dict[str, Any]], dict[str, Any]] = _nothing_carried
    progress: Callable[[Any], tuple[int, int] | None] = _no_progress

    @property
    def carries(self) -> bool:
        """Whether a step of this kind can carry progress (``carry``) into a new try."""
        return self.carry is not _nothing_carried

    @property
    def name(self) -> str:
        return str(self.model.model_fields["kind"].default)


def check_allowed(ctx: RunContext, step: AnyStep, tool: str) -> None:
    if tool not in ctx.allowed_tools:
        raise ToolNotAllowed(
            f"step `{step.id}` may not call tool `{tool}`: it is not in the workflow's "
            f"tool allowlist ({', '.join(sorted(ctx.allowed_tools)) or 'empty'})"
        )


def call_tool(
    ctx: RunContext,
    step: AnyStep,
    tool: str,
    args: dict[str, Any],
    *,
    item: int | None = None,
    http: httpx.Client | None = None,
) -> ToolResult:
    """Call a tool for a step, enforcing the flow's allowlist at execution time.

    The validator checks the allowlist before every run; this check holds even when
    a definition was edited by hand between validation and execution. The idempotency
    key is the run's UUID and the step id (and, for a foreach item, its index): stable
    across retries, resumes and Celery redelivery, distinct for every different call and
    across installations (a database reset cannot make two runs send the same key).
    ``http`` is the client of the caller's cookie session
    (``runs.engine.http.tool_session``); by default the run's client, which keeps no
    cookies.
    """
    check_allowed(ctx, step, tool)
    call_ctx = ToolCallContext(
        env=ctx.env,
        redactor=ctx.redactor,
        http=ctx.http if http is None else http,
        timeout=step.timeout,
        idempotency_key=f"{ctx.run_uuid}:{step.id}" + ("" if item is None else f":{item}"),
        max_response_bytes=ctx.limits.max_response_bytes,
        max_output_bytes=ctx.limits.step_output_cap(step.max_output_bytes),
        output_dir=ctx.output_dir,
        data_dirs=ctx.data_dirs,
        breakers=ctx.breakers,
        pacer=ctx.pacer,
        mcp=ctx.mcp,
        tap=None if ctx.taps is None else ctx.taps.tap_for(step.id, item, tool),
        run_id=ctx.run_id if ctx.shown_run_id is None else ctx.shown_run_id,
    )
    if ctx.tracer is not None or ctx.metrics is not None:
        return _observed_call(ctx, tool, args, call_ctx, step.id, item)
    if not logger.isEnabledFor(logging.DEBUG):
        return ctx.registry.call(tool, args, call_ctx)
    where = f"run {ctx.run_id} step {step.id}" + ("" if item is None else f" item {item}")
    return _logged_call(ctx, tool, args, call_ctx, where)


def _observed_call(
    ctx: RunContext,
    tool: str,
    args: dict[str, Any],
    call_ctx: ToolCallContext,
    step_id: str,
    item: int | None,
) -> ToolResult:
    """``registry.call`` inside its span (``runs.engine.tracing``) and counted
    (``runs.engine.metrics``), each when on: the tool, its kind, the request as its
    record stores it (masked), or the error's type."""
    spec = ctx.registry.get(tool)
    kind = spec.kind if spec is not None else ""
    span = None
    if ctx.tracer is not None:
        attributes: dict[str, Any] = {"flowpilot.tool": tool, "flowpilot.tool_kind": kind}
        if item is not None:
            attributes["flowpilot.item"] = item
        span = ctx.tracer.call(f"tool {tool}", attributes)
    with span if span is not None else contextlib.nullcontext():
        try:
            if logger.isEnabledFor(logging.DEBUG):
                where = f"run {ctx.run_id} step {step_id}" + (
                    "" if item is None else f" item {item}"
                )
                result = _logged_call(ctx, tool, args, call_ctx, where)
            else:
                result = ctx.registry.call(tool, args, call_ctx)
        except FlowpilotError as exc:
            request = exc.request if isinstance(exc, ToolError) else None
            failure = exc.as_dict()
            if span is not None:
                span.tracer.call_ended(span, request=request, error=failure)
            if ctx.metrics is not None:
                ctx.metrics.tool_call(
                    tool=tool, kind=kind, request=request, error_type=str(failure["type"])
                )
            raise
        if span is not None:
            span.tracer.call_ended(span, request=result.request)
        if ctx.metrics is not None:
            ctx.metrics.tool_call(tool=tool, kind=kind, request=result.request, error_type="")
    return result


def _logged_call(
    ctx: RunContext, tool: str, args: dict[str, Any], call_ctx: ToolCallContext, where: str
) -> ToolResult:
    """``registry.call`` with its debug line: the arguments, the HTTP request (when the
    tool is an http one), a summary of the result and a preview of it — whatever the
    kind of tool (http, built-in, MCP). Arguments and preview are masked by value with
    the run's redactor (``tools.secrets``) and cut at ``DEBUG_TEXT_CHARS``."""
    arguments = _scrubbed(ctx, args)
    try:
        result = ctx.registry.call(tool, args, call_ctx)
    except FlowpilotError as exc:
        failure = _scrubbed(ctx, exc.as_dict())
        logger.debug("%s: tool %s arguments %s failed: %s", where, tool, arguments, failure)
        raise
    request = _scrubbed(ctx, result.request) if result.request else "(no HTTP request)"
    output = ctx.redactor.scrub(result.output)
    logger.debug(
        "%s: tool %s arguments %s request %s -> response %s (%s)%s preview %s",
        where,
        tool,
        arguments,
        request,
        value_summary(output),
        human_size(json_size(output)),
        " [truncated]" if result.truncated else "",
        debug_text(json.dumps(output, ensure_ascii=False, default=str)),
    )
    return result


DEBUG_TEXT_CHARS = 500  # what one debug line quotes of a prompt, a reply or a record


def debug_text(text: str) -> str:
    """``text`` cut for a debug line (after scrubbing, so a cut never exposes a secret)."""
    if len(text) <= DEBUG_TEXT_CHARS:
        return text
    return f"{text[:DEBUG_TEXT_CHARS]}… [{len(text)} characters]"


def _scrubbed(ctx: RunContext, value: Any) -> str:
    return debug_text(json.dumps(ctx.redactor.scrub(value), ensure_ascii=False, default=str))
