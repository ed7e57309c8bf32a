"""`transform` steps: a JMESPath expression over the mapped values; no side effects."""

from __future__ import annotations

from typing import Any

from runs.engine.kinds.base import Attempt


def execute_transform_step(ctx, step, args: dict[str, Any]) -> Attempt:
    return Attempt(output=ctx.compiled[(step.id, "expression")].apply(args))
