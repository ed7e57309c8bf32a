"""Step kinds: one module per kind, each a function ``(ctx, step, args) -> Attempt``."""

from __future__ import annotations

from types import MappingProxyType

from runs.engine.kinds.decision import execute_decision_step
from runs.engine.kinds.foreach import execute_foreach_step
from runs.engine.kinds.llm import execute_llm_step
from runs.engine.kinds.tool import execute_tool_step
from runs.engine.kinds.transform import execute_transform_step

EXECUTORS = MappingProxyType(
    {
        "tool": execute_tool_step,
        "llm": execute_llm_step,
        "decision": execute_decision_step,
        "transform": execute_transform_step,
        "foreach": execute_foreach_step,
    }
)
