"""What every step kind returns, and the tool-call context built from a run context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tools.errors import FlowpilotError, ToolNotAllowed
from tools.registry import ToolCallContext, ToolResult


class StepKindUnsupported(FlowpilotError):
    code = "step_kind_unsupported"


@dataclass(frozen=True)
class Attempt:
    output: Any
    truncated: bool = False
    branch: str | None = None  # set by decision steps


def check_allowed(ctx, step, tool: str) -> None:
    if tool not in ctx.allowed_tools:
        raise ToolNotAllowed(
            f"step `{step.id}` may not call tool `{tool}`: it is not in the workflow's "
            f"tool allowlist ({', '.join(sorted(ctx.allowed_tools)) or 'empty'})"
        )


def call_tool(ctx, step, tool: str, args: dict[str, Any], *, item: int | None = None) -> ToolResult:
    """Call a tool for a step, enforcing the flow's allowlist at execution time.

    The validator checks the allowlist before every run; this check holds even when
    a definition was edited by hand between validation and execution. The idempotency
    key is the run and step (and, for a foreach item, its index): stable across retries
    and resumes, distinct for every different call.
    """
    check_allowed(ctx, step, tool)
    call_ctx = ToolCallContext(
        env=ctx.env,
        redactor=ctx.redactor,
        http=ctx.http,
        timeout=step.timeout,
        idempotency_key=f"{ctx.run_id}:{step.id}" + ("" if item is None else f":{item}"),
        max_response_bytes=ctx.limits.max_response_bytes,
        output_dir=ctx.output_dir,
        data_dirs=ctx.data_dirs,
    )
    return ctx.registry.call(tool, args, call_ctx)
