"""`tool` steps: call one tool with the mapped inputs."""

from __future__ import annotations

from typing import Any

from runs.engine.kinds.base import Attempt, call_tool


def execute_tool_step(ctx, step, args: dict[str, Any]) -> Attempt:
    result = call_tool(ctx, step, step.tool, args)
    return Attempt(output=result.output, truncated=result.truncated)
