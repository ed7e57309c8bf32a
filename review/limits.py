"""What a version's rate limits imply, shown on the review page before approval.

For every step that calls a tool with a ``rate_limit`` (``tool`` and ``foreach`` steps),
one note: the limit, and the least time its calls take at that rate: a ``foreach`` over
1,000 items on a tool limited to 10 a second takes at least 100 s, however many workers
run it. The item count is known when the step's ``items`` is a literal list or a run
input whose sample value (the last approval's inputs, else the input's default) is a
list; otherwise the note gives the rate per item. Best effort by design: a reviewer
learns what the limit costs, not a schedule (other runs calling the same key share it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tools.ratelimit.config import RateLimitConfig
from tools.registry import ToolRegistry
from workflows.schema import WorkflowSpec

_INPUT_REF = re.compile(r"^\$input\.([A-Za-z_][A-Za-z0-9_-]*)$")


@dataclass(frozen=True)
class LimitNote:
    """One step's rate limit as the review page says it."""

    step_id: str
    tool: str
    limit: str  # "10 per 1 s by host"
    implies: str  # "1,000 items at 10/s: at least 100 s"


def rate_limit_notes(
    *, spec: WorkflowSpec, registry: ToolRegistry, inputs: Mapping[str, Any]
) -> tuple[LimitNote, ...]:
    """A note per step calling a rate-limited tool, in the order of the steps."""
    notes = []
    for step in spec.steps:
        tool = getattr(step, "tool", None)
        if step.kind not in ("tool", "foreach") or not isinstance(tool, str):
            continue
        found = registry.get(tool)
        if found is None or found.rate_limit is None:
            continue
        limit = found.rate_limit
        if step.kind == "foreach":
            count = _item_count(getattr(step, "input_mapping", {}).get("items"), inputs)
            implies = _foreach_implies(limit, count)
        else:
            implies = f"one call, at most {_rate(limit)}"
        notes.append(LimitNote(step.id, tool, limit.describe(), implies))
    return tuple(notes)


def _item_count(items: Any, inputs: Mapping[str, Any]) -> int | None:
    if isinstance(items, list):
        return len(items)
    found = _INPUT_REF.match(items) if isinstance(items, str) else None
    value = inputs.get(found.group(1)) if found else None
    return len(value) if isinstance(value, list) else None


def _foreach_implies(limit: RateLimitConfig, count: int | None) -> str:
    if count is None:
        return f"one call per item at {_rate(limit)}: N items take at least N / {limit.rate:g} s"
    least = max(0, count - (limit.burst or 1)) / limit.rate
    noun = "item" if count == 1 else "items"
    return f"{count:,} {noun} at {_rate(limit)}: at least {duration(math.ceil(least))}"


def _rate(limit: RateLimitConfig) -> str:
    if limit.per == 1:
        return f"{limit.requests:,}/s"
    return f"{limit.requests:,} per {duration(limit.per)}"


def duration(seconds: float) -> str:
    """``100 s``, ``25 min``, ``2.5 h`` (at most one decimal)."""
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{round(seconds / 60, 1):g} min"
    return f"{round(seconds / 3600, 1):g} h"
