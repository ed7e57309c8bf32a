"""The data model conditions see: JSON values, reached only through dict and list lookups.

Nothing here calls ``getattr`` or any method of a value other than mapping and
sequence access, so a condition can never reach a Python object's attributes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tools.paths import get


def kind_of(value: Any) -> str:
    """The JSON kind of a value: null, boolean, number, string, list, object — or unsupported."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping):
        return "object"
    return "unsupported"


def resolve(values: Mapping[str, Any], root: str, segments: Sequence[str]) -> Any:
    """Follow ``root.seg…`` by the one dot-path rule of :mod:`tools.paths`.

    ``-?[0-9]+`` segments index lists (negative from the end), exactly as in
    references and templates; anything missing is ``None`` (null).
    """
    return get(values, (root, *segments))


def equal(a: Any, b: Any) -> bool:
    """Equality without Python's coercions: ``1 != true``, ``[1] != [true]``; ``1 == 1.0``."""
    kind = kind_of(a)
    if kind != kind_of(b):
        return False
    if kind == "list":
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if kind == "object":
        return a.keys() == b.keys() and all(equal(a[key], b[key]) for key in a)
    return bool(a == b)


def a(kind: str) -> str:
    """``kind`` with its article, for messages: "a number", "an object", "null"."""
    if kind == "null":
        return "null"
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def show(value: Any) -> str:
    """A short JSON rendering of a value for error messages."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=lambda v: f"<{type(v).__name__}>")
    except (ValueError, RecursionError):  # circular or absurdly deep
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 40 else text[:39] + "…"
