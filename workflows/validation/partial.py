"""What parsed, kept for the cross checks: one schema error must not hide the rest.

A planner that gets one field wrong usually gets other things wrong too; reporting
only the schema error costs a repair round per layer of mistakes. ``salvage``
builds a spec from a definition that failed the schema: a bad field of a step,
an input or the workflow is dropped (its default applies), and a step or edge
that still cannot be read becomes a *placeholder* whose own issues are not
reported (its schema issue says what is wrong). The cross checks then run on
the rest; their warnings are left out, because a dropped part can cause them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from workflows.schema import Edge, TransformStep, WorkflowSpec
from workflows.validation.report import ValidationIssue, format_path
from workflows.validation.schema_errors import clean_loc

_ROUNDS = 8  # each round fixes every error pydantic reported; nesting needs a few


def salvage(data: Any) -> tuple[WorkflowSpec | None, frozenset[str]]:
    """A spec of what parsed, and the paths (``steps[2]``) of the placeholders."""
    if not isinstance(data, Mapping):
        return None, frozenset()
    work = copy.deepcopy(dict(data))
    placeholders: set[str] = set()
    for _ in range(_ROUNDS):
        try:
            return WorkflowSpec.model_validate(work), frozenset(placeholders)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
        for err in errors:
            if not _repair(work, clean_loc(err["loc"]), err["type"], placeholders):
                return None, frozenset()
    return None, frozenset()


def outside(issues: Iterable[ValidationIssue], placeholders: frozenset[str]) -> list:
    """The errors that are not about a placeholder (nor any warning)."""
    return [
        issue
        for issue in issues
        if issue.severity == "error" and not any(_within(issue.path, p) for p in placeholders)
    ]


def _within(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((prefix + ".", prefix + "["))


def _repair(work: dict, loc: tuple, kind: str, placeholders: set[str]) -> bool:
    """Make one error go away; ``False`` when the definition cannot be salvaged."""
    if not loc:
        return False
    head = loc[0]
    if head in ("steps", "edges") and len(loc) >= 2 and isinstance(loc[1], int):
        items = work.get(head)
        if not isinstance(items, list) or not 0 <= loc[1] < len(items):
            return False
        element = items[loc[1]]
        if len(loc) == 2 or kind == "missing" or not isinstance(element, dict):
            items[loc[1]] = _placeholder(head, element, loc[1])
            placeholders.add(format_path(loc[:2]))
        elif loc[2] in element:
            del element[loc[2]]
        return True
    if head == "inputs" and len(loc) >= 2 and isinstance(work.get("inputs"), dict):
        spec = work["inputs"].get(loc[1])
        if len(loc) >= 3 and isinstance(spec, dict) and loc[2] in spec:
            del spec[loc[2]]
        else:
            work["inputs"][loc[1]] = {}
        return True
    if head == "name":
        work["name"] = "salvaged"
        return True
    if head in work and head not in ("steps",):
        del work[head]
        return True
    return False


def _placeholder(kind: str, element: Any, index: int) -> Any:
    """A stand-in that parses: the step keeps its id, so references to it still resolve."""
    if kind == "edges":
        return Edge.model_construct(from_="", to="")
    raw_id = element.get("id") if isinstance(element, Mapping) else None
    step_id = raw_id if isinstance(raw_id, str) and raw_id else f"step_{index}"
    return TransformStep.model_construct(id=step_id, expression="@")
