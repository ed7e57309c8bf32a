"""Input-mapping references, parsed once into typed values.

==================  =====================================  ==========================
form                meaning                                example
==================  =====================================  ==========================
``$input.X``        a run input (deep paths allowed)        ``"$input.email"``
``STEP_ID.path``    output of an upstream step              ``"geo.results.0.lat"``
``$step.STEP_ID``   the whole output of an upstream step    ``"$step.weather"``
``$env.NAME``       an environment variable                 ``"$env.GITHUB_TOKEN"``
anything else       a literal constant                      ``"us-east-1"``, ``42``
==================  =====================================  ==========================

``$step.STEP_ID`` names a step's whole output (``$step.weather.temperature`` is
``weather.temperature``); a plain string equal to a step id is a literal, which the
validator refuses. A dotted string is a step reference only when its head is the id of a step of
the same workflow; otherwise it stays a literal (``"api.example.com"``), and the
validator warns when such a literal looks like a mistyped reference. Lists and
dicts are walked: every string leaf is parsed the same way. ``{"$literal": x}``
passes ``x`` through untouched.

Paths after the head follow the one dot-path rule of :mod:`tools.paths`: the same
segments, and ``-?[0-9]+`` segments index lists. A reference to absent data
resolves to null.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tools.paths import SEGMENT, PathError, parse_path

_DOTTED = re.compile(rf"([A-Za-z_][A-Za-z0-9_-]*)((?:\.{SEGMENT})+)")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ReferenceError_(ValueError):
    """A string starting with ``$`` that is not a valid reference."""


@dataclass(frozen=True, slots=True)
class InputRef:
    name: str
    path: tuple[str, ...] = ()

    def __str__(self) -> str:
        return ".".join(("$input", self.name, *self.path))


@dataclass(frozen=True, slots=True)
class StepRef:
    step_id: str
    path: tuple[str, ...] = ()

    def __str__(self) -> str:
        if not self.path:
            return f"$step.{self.step_id}"  # the whole output
        return ".".join((self.step_id, *self.path))


@dataclass(frozen=True, slots=True)
class EnvRef:
    name: str

    def __str__(self) -> str:
        return f"$env.{self.name}"


@dataclass(frozen=True, slots=True)
class ItemRef:
    """``$item`` / ``$item.path`` / ``$index`` inside a foreach step's item mapping."""

    path: tuple[str, ...] = ()
    index: bool = False

    def __str__(self) -> str:
        return "$index" if self.index else ".".join(("$item", *self.path))


@dataclass(frozen=True, slots=True)
class Literal:
    value: Any


Reference = InputRef | StepRef | EnvRef | ItemRef


def parse_value(value: Any, step_ids: frozenset[str] | set[str]) -> Any:
    """Parse one mapping value into references, literals, and containers of them.

    Returns a ``Reference``, a ``Literal``, or a list/dict whose leaves are those.
    Raises ``ReferenceError_`` for a malformed ``$`` reference.
    """
    if isinstance(value, Mapping):
        if set(value) == {"$literal"}:
            return Literal(value["$literal"])
        return {k: parse_value(v, step_ids) for k, v in value.items()}
    if isinstance(value, list):
        return [parse_value(v, step_ids) for v in value]
    if not isinstance(value, str):
        return Literal(value)
    if value.startswith("$"):
        return _parse_dollar(value, step_ids)
    shape = looks_like_reference(value)
    if shape is not None and shape[0] in step_ids:
        return StepRef(*shape)
    return Literal(value)


def _parse_dollar(value: str, step_ids: frozenset[str] | set[str]) -> Reference:
    head, dot, rest = value.partition(".")
    parts = _parts(rest) if dot else ()
    if head == "$step":
        if not parts:
            raise ReferenceError_(f"`{value}` must look like `$step.STEP_ID`")
        if parts[0] not in step_ids:
            raise ReferenceError_(f"`{value}` reads `{parts[0]}`, which is not a step")
        return StepRef(parts[0], parts[1:])
    if head == "$input":
        if not parts:
            raise ReferenceError_(f"`{value}` must look like `$input.NAME` or `$input.NAME.path`")
        return InputRef(parts[0], parts[1:])
    if head == "$env":
        if len(parts) != 1 or not _ENV_NAME.match(parts[0]):
            raise ReferenceError_(f"`{value}` must look like `$env.NAME`")
        return EnvRef(parts[0])
    if head == "$item":
        if dot and not parts:
            raise ReferenceError_(f"`{value}` must look like `$item` or `$item.path`")
        return ItemRef(parts)
    if value == "$index":
        return ItemRef(index=True)
    raise ReferenceError_(
        f"`{value}` is not a reference: use `$input.NAME`, `$env.NAME`, `STEP_ID.path` or "
        "`$step.STEP_ID` "
        '(write {"$literal": ...} for a string that starts with `$`)'
    )


def _parts(rest: str) -> tuple[str, ...]:
    """The path after a ``$`` head, or ``()`` when it breaks the dot-path rule."""
    try:
        return parse_path(rest)
    except PathError:
        return ()


def iter_refs(parsed: Any) -> Iterator[Reference]:
    """Every reference inside a parsed value, depth first, in order."""
    if isinstance(parsed, dict):
        for v in parsed.values():
            yield from iter_refs(v)
    elif isinstance(parsed, list):
        for v in parsed:
            yield from iter_refs(v)
    elif not isinstance(parsed, Literal):
        yield parsed


def looks_like_reference(value: Any) -> tuple[str, tuple[str, ...]] | None:
    """For a literal string shaped like ``head.path``, return (head, path)."""
    if isinstance(value, str):
        match = _DOTTED.fullmatch(value)
        if match:
            return match.group(1), parse_path(match.group(2)[1:])
    return None
