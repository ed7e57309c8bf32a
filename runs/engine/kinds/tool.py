"""`tool` steps: call one tool with the mapped inputs."""

from __future__ import annotations

import logging
from typing import Any

from runs.engine.kinds.base import Attempt, call_tool

logger = logging.getLogger("flowpilot.engine.tool")


def execute_tool_step(ctx, step, args: dict[str, Any]) -> Attempt:
    result = call_tool(ctx, step, step.tool, args)
    if result.request:  # already redacted by the HTTP client
        logger.debug("run %s step %s: %s", ctx.run_id, step.id, result.request)
    return Attempt(output=result.output, truncated=result.truncated)
