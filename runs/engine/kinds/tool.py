"""`tool` steps: call one tool with the mapped inputs."""

from __future__ import annotations

from typing import Any

from runs.engine.context import RunContext
from runs.engine.http import tool_session
from runs.engine.kinds.base import Attempt, StepKind, call_tool
from workflows.schema import ToolStep


def execute_tool_step(ctx: RunContext, step: ToolStep, args: dict[str, Any]) -> Attempt:
    with tool_session(ctx.http, ctx.registry, step.tool) as http:  # cookies: one attempt
        result = call_tool(ctx, step, step.tool, args, http=http)  # logs the call at debug
    return Attempt(output=result.output, truncated=result.truncated, request=result.request)


KIND = StepKind(model=ToolStep, execute=execute_tool_step)
