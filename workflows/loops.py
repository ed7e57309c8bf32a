"""`loop` steps: the names their condition sees, their iteration references, and the
``STEP#K`` form of a restart from one of their iterations (docs/steps.md).

An iteration's child inputs are the step's ``input_mapping`` (resolved once, like any
step's), overlaid by its ``iteration_mapping``, whose values are:

- ``$loop.previous``: the previous iteration's outputs (the child run's outputs), null
  on the first iteration; ``$loop.previous.PATH`` a field of them (``.``-separated keys,
  a numeric key indexes a list), null when missing;
- ``$loop.iteration``: the number of the iteration being started, from 1.

A null value leaves the input to ``input_mapping``, else to the child's default.
The ``until`` condition sees ``output`` (the iteration's outputs) and ``iteration``
(its number).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tools.errors import FlowpilotError

PREVIOUS = "$loop.previous"
ITERATION = "$loop.iteration"
UNTIL_NAMES = ("output", "iteration")  # what a loop's ``until`` condition may read

_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_POINT = re.compile(r"^(?P<step>[a-z][a-z0-9_]{0,63})#(?P<iteration>[0-9]{1,9})$")


class LoopReferenceError(FlowpilotError):
    code = "loop_reference_invalid"


@dataclass(frozen=True)
class LoopRef:
    """One parsed ``iteration_mapping`` value: the previous outputs (with a path), or
    the iteration's number."""

    previous: bool
    path: tuple[str, ...] = ()

    def resolve(self, *, previous: Any, iteration: int) -> Any:
        if not self.previous:
            return iteration
        value = previous
        for key in self.path:
            if isinstance(value, dict):
                value = value.get(key)
            elif isinstance(value, list) and re.fullmatch(r"-?[0-9]+", key):
                index = int(key)
                value = value[index] if -len(value) <= index < len(value) else None
            else:
                return None
        return value


def parse_loop_reference(value: Any) -> LoopRef:
    """Parse an ``iteration_mapping`` value; ``LoopReferenceError`` says what is wrong."""
    if not isinstance(value, str):
        raise LoopReferenceError(
            f"`{value!r}` is not a loop reference; use `{PREVIOUS}`, `{PREVIOUS}.FIELD` or "
            f"`{ITERATION}`"
        )
    if value == ITERATION:
        return LoopRef(previous=False)
    if value == PREVIOUS:
        return LoopRef(previous=True)
    if value.startswith(PREVIOUS + "."):
        path = tuple(value[len(PREVIOUS) + 1 :].split("."))
        bad = [key for key in path if not _KEY.match(key)]
        if not bad:
            return LoopRef(previous=True, path=path)
        raise LoopReferenceError(
            f"`{value}` has an empty or invalid key `{bad[0]}`; keys are letters, digits, "
            "`_` and `-`, separated by `.`"
        )
    raise LoopReferenceError(
        f"`{value}` is not a loop reference; an iteration_mapping value is `{PREVIOUS}`, "
        f"`{PREVIOUS}.FIELD` or `{ITERATION}` (map run inputs and step outputs in "
        "input_mapping)"
    )


@dataclass(frozen=True)
class RestartPoint:
    """Where a restart starts: a step, and for a `loop` step perhaps an iteration."""

    step: str
    iteration: int | None = None

    def __str__(self) -> str:
        return self.step if self.iteration is None else f"{self.step}#{self.iteration}"


def restart_point(value: str) -> RestartPoint:
    """``"review#2"`` → step ``review``, iteration 2; ``"geo"`` → step ``geo``. A text
    with ``#`` that is not ``STEP#K`` (K from 1) raises ``LoopReferenceError``."""
    if "#" not in value:
        return RestartPoint(value)
    match = _POINT.match(value)
    if match is None or int(match["iteration"]) < 1:
        raise LoopReferenceError(
            f"`{value}` is not a restart point; restart from a step (`STEP`) or from an "
            "iteration of a loop step (`STEP#K`, K from 1)"
        )
    return RestartPoint(match["step"], int(match["iteration"]))
