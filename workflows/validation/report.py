"""Validation issues are data: collected, sorted, raised once, so a user sees every problem
of a definition in one report instead of fixing them one at a time."""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal

from tools.errors import FlowpilotError

if TYPE_CHECKING:
    from workflows.graph import FlowGraph
    from workflows.schema import WorkflowSpec

Severity = Literal["error", "warning"]

_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_$-]+$")
_NUMBERS = re.compile(r"([0-9]+)")


@dataclass(frozen=True)
class ValidationIssue:
    """One problem: a stable ``code``, where it is (``steps[2].input_mapping.lat``), what."""

    code: str
    path: str
    message: str
    severity: Severity = "error"
    step_id: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ValidationReport:
    """Every issue of one workflow, sorted by path then code.

    ``spec`` is ``None`` when the schema check failed (nothing else was checked);
    ``graph`` is ``None`` then too, and when the steps do not form a DAG.
    """

    issues: tuple[ValidationIssue, ...]
    spec: WorkflowSpec | None = None
    graph: FlowGraph | None = None

    @property
    def errors(self) -> tuple[ValidationIssue, ...]:
        return tuple(i for i in self.issues if i.severity == "error")

    @property
    def warnings(self) -> tuple[ValidationIssue, ...]:
        return tuple(i for i in self.issues if i.severity == "warning")

    @property
    def ok(self) -> bool:
        return not self.errors

    def raise_for_errors(self) -> None:
        if not self.ok:
            raise WorkflowInvalid(self)

    def valid_spec(self) -> WorkflowSpec:
        """The checked spec; ``WorkflowInvalid`` when there is an error."""
        self.raise_for_errors()
        assert self.spec is not None  # a failed schema check is an error
        return self.spec


class WorkflowInvalid(FlowpilotError):
    """A workflow failed validation; ``report`` holds every issue."""

    code = "workflow_invalid"

    def __init__(self, report: ValidationReport) -> None:
        errors = report.errors
        summary = f"workflow is invalid ({len(errors)} error{'s' if len(errors) != 1 else ''})"
        if errors:
            first = errors[0]
            summary += f"; first: {first.path or '(workflow)'}: {first.message}"
        super().__init__(summary)
        self.report = report


def error(code: str, path: str, message: str, step_id: str | None = None) -> ValidationIssue:
    return ValidationIssue(code, path, message, "error", step_id)


def warning(code: str, path: str, message: str, step_id: str | None = None) -> ValidationIssue:
    return ValidationIssue(code, path, message, "warning", step_id)


def sort_issues(issues: Iterable[ValidationIssue]) -> tuple[ValidationIssue, ...]:
    """Deterministic order: path (numbers compared as numbers), code, message."""
    return tuple(sorted(set(issues), key=lambda i: (_natural(i.path), i.code, i.message)))


def _natural(path: str) -> tuple:
    # The odd parts of the split are the ASCII digit runs: as ints, `steps[10]` sorts after
    # `steps[9]`; the even parts are the text between them.
    return tuple(int(p) if i % 2 else p for i, p in enumerate(_NUMBERS.split(path)))


def format_path(parts: Iterable[str | int], prefix: str = "") -> str:
    """``("steps", 2, "input_mapping", "lat")`` → ``steps[2].input_mapping.lat``.

    Keys that are not plain names are quoted: ``headers['x y']``.
    """
    out = prefix
    for part in parts:
        segment = _segment(part)
        out += segment[1:] if not out and segment[0] == "." else segment
    return out


@functools.lru_cache(maxsize=4096)
def _segment(part: str | int) -> str:
    if isinstance(part, int):
        return f"[{part}]"
    return f".{part}" if _PLAIN_KEY.match(part) else f"[{part!r}]"


def suggest(name: str, candidates: Iterable[str]) -> str:
    """`` (did you mean `geo`?)`` when difflib finds a close candidate, else ``""``."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


def names(items: Iterable[str], *, limit: int = 25, empty: str = "none") -> str:
    """``"`a`, `b`, `c`"`` (sorted, at most ``limit``, then ``…``), or ``empty``."""
    unique = sorted(set(items))
    if not unique:
        return empty
    shown = ", ".join(f"`{n}`" for n in unique[:limit])
    return shown + (f", … ({len(unique)} in all)" if len(unique) > limit else "")
