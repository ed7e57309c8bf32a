"""The one dot-path rule: how ``geo.results.0.lat`` is parsed and how it walks a value.

Every reader of a dotted path uses this module: ``{{key.path}}`` templates,
``STEP_ID.path`` / ``$input.NAME.path`` / ``$item.path`` references, condition
paths (``geo.count > 0``), ``response_extract`` of http tools, and the graph's
reference edges. So a path means the same thing wherever it is written.

Parsing
    A path is one or more *segments* joined by ``.``. A segment is 1+ ASCII
    letters, digits, ``_`` or ``-`` (:data:`SEGMENT`). Anything else — an empty
    segment (``a..b``, a leading or trailing dot), a space, ``+``, ``$``,
    a non-ASCII letter or digit — is refused with :class:`PathError`.

Walking, one segment at a time
    * a dict (any mapping) is indexed by the segment as a key — always, even
      when the segment looks like a number: ``{"0": x}`` at ``0`` is ``x``;
    * a list (or tuple) is indexed only when the whole segment matches
      ``-?[0-9]+`` (:data:`INDEX`): ASCII digits, an optional leading minus.
      Negative indexes count from the end (``-1`` is the last item), as in
      Python. Leading zeros are allowed and mean nothing (``007`` is ``7``;
      ``-0`` is ``0``, the first item). ``1_0`` (which Python's ``int`` reads as
      10), ``+1``, `` 1`` and non-ASCII digits such as U+0661 (Arabic-Indic one)
      are never indexes, so they miss on a list;
    * anything else (a string, a number, null, a boolean) has no parts: the
      walk misses. Strings are not indexed by character.

A walk that misses returns :data:`MISSING`, which is distinct from a present
``null``; :func:`get` turns it into ``None`` for the callers that read a
missing value as null (templates, references, conditions, extraction all do).
Only mapping and sequence access is used — never ``getattr`` — so a path can
never reach a Python object's attributes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

SEGMENT: Final = r"[A-Za-z0-9_-]+"
"""The regular expression of one segment, for composing into larger patterns."""

INDEX: Final = r"-?[0-9]+"
"""The regular expression of a segment that indexes a list."""

_SEGMENT_RE = re.compile(SEGMENT)
_INDEX_RE = re.compile(INDEX)
# An index with more significant digits than this cannot be in range of any list in
# memory; refusing it early (and dropping leading zeros) keeps int() away from its
# 4300-digit conversion limit, so a hostile segment is a miss, not a crash.
_MAX_INDEX_DIGITS = 18


class PathError(ValueError):
    """A dotted path that breaks the segment rule; the message names the path and why."""


class _Missing:
    """The type of :data:`MISSING`: a falsy, self-describing sentinel."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()
"""What :func:`walk` returns when a segment is not there (not the same as ``None``)."""


def is_segment(text: object) -> bool:
    """Whether ``text`` is one valid segment."""
    return isinstance(text, str) and _SEGMENT_RE.fullmatch(text) is not None


def parse_path(text: str) -> tuple[str, ...]:
    """``"results.0.lat"`` → ``("results", "0", "lat")``; raises :class:`PathError`."""
    if not isinstance(text, str):
        raise PathError(f"a dot-path must be text, got {type(text).__name__}")
    segments = tuple(text.split("."))
    for segment in segments:
        if not is_segment(segment):
            raise PathError(f"dot-path {_shown(text, 80)} {_why(segment)}")
    return segments


def _why(segment: str) -> str:
    if not segment:
        return "has an empty segment (two dots in a row, or a dot at an end)"
    return (
        f"has the segment {_shown(segment, 40)}: a segment uses only ASCII letters, "
        "digits, `_` and `-`"
    )


def _shown(text: str, limit: int) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def list_index(segment: str) -> int | None:
    """The list index a segment names (``"-1"`` → ``-1``), or ``None`` if it is no index."""
    if not isinstance(segment, str) or _INDEX_RE.fullmatch(segment) is None:
        return None
    negative = segment.startswith("-")
    digits = segment.lstrip("-").lstrip("0") or "0"
    if len(digits) > _MAX_INDEX_DIGITS:
        return None  # no list is that long: a miss, like any index out of range
    return -int(digits) if negative else int(digits)


def step_into(value: Any, segment: str) -> Any:
    """One segment of a walk: the part of ``value`` named ``segment``, or :data:`MISSING`."""
    if isinstance(value, Mapping):
        return value.get(segment, MISSING)
    if isinstance(value, list | tuple):
        index = list_index(segment)
        if index is None or not -len(value) <= index < len(value):
            return MISSING
        return value[index]
    return MISSING


def walk(value: Any, segments: Iterable[str]) -> Any:
    """Follow ``segments`` into ``value``; :data:`MISSING` as soon as one is not there."""
    current = value
    for segment in segments:
        current = step_into(current, segment)
        if current is MISSING:
            return MISSING
    return current


def get(value: Any, segments: Iterable[str]) -> Any:
    """Like :func:`walk`, but a missing part reads as ``None`` (null)."""
    found = walk(value, segments)
    return None if found is MISSING else found
