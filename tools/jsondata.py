"""One set of rules for JSON-shaped user data: what can be stored, copied and accepted.

- **Text a database cannot hold.** PostgreSQL refuses the NUL character (``\\u0000``)
  in ``jsonb`` and ``text``; SQLite takes it. Neither can encode a lone UTF-16
  surrogate (``"\\ud800"`` in JSON). So the same value behaved differently per
  database, or crashed both. The rule, the same on both: values handed between steps
  keep these characters; *stored* copies are escaped reversibly with
  :func:`store_escape` and read back with :func:`store_unescape`. The escape uses
  ``␀`` (U+2400, SYMBOL FOR NULL): a NUL is stored as ``␀0``, a lone surrogate as
  ``␀u`` and its four hex digits (``␀ud800``), a literal ``␀`` as ``␀␀`` — in keys and
  in values. Configuration (workflow and tool files, JSON edits, run inputs) is not
  escaped but refused: :func:`storage_problem` names where such a character (or a NaN
  or infinite number, which JSON columns cannot hold either) is.
- **Copies.** :func:`json_snapshot` is the one deep copy of a step's data: iterative
  (a 600-deep value is fine), and strict — anything that is not JSON (a ``set``,
  ``bytes``, an object, a non-finite float) is refused with :class:`NotJSON` naming
  the type and where it is.
- **Duplicate keys.** :func:`loads_strict` is ``json.loads`` refusing a key given twice
  in one object (``json`` would silently keep the last one).

Every walk here is iterative, so no depth of user data overflows the stack.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

NUL = "\x00"
ESCAPE = "\u2400"  # ␀
_UNSTORABLE = re.compile("[\x00\u2400\ud800-\udfff]")
_UNESCAPE = re.compile(ESCAPE + "(?:u([0-9a-f]{4})|(.))", re.DOTALL)
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")


class NotJSON(ValueError):
    """A value that is not JSON data; ``type_name`` and ``where`` say what and where."""

    def __init__(self, type_name: str, where: str) -> None:
        super().__init__(f"a value of type `{type_name}` at `{where}` is not JSON data")
        self.type_name = type_name
        self.where = where


class DuplicateKey(ValueError):
    """A JSON object names a key twice."""


def _escaped(match: re.Match[str]) -> str:
    char = match.group(0)
    if char == NUL:
        return ESCAPE + "0"
    if char == ESCAPE:
        return ESCAPE + ESCAPE
    return f"{ESCAPE}u{ord(char):04x}"


def _unescaped(match: re.Match[str]) -> str:
    if match.group(1) is not None:
        return chr(int(match.group(1), 16))
    return NUL if match.group(2) == "0" else match.group(2)


def _escape_text(text: str) -> str:
    return _UNSTORABLE.sub(_escaped, text)


def _unescape_text(text: str) -> str:
    if ESCAPE not in text:
        return text
    return _UNESCAPE.sub(_unescaped, text)


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """``value`` rebuilt with ``fn`` applied to every string (keys too); iterative."""
    if isinstance(value, str):
        return fn(value)
    if not isinstance(value, dict | list | tuple):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]  # (source, parent, key in parent)
    while stack:
        node, parent, slot = stack.pop()
        if isinstance(node, dict):
            copy: dict[Any, Any] = {}
            for key, item in node.items():
                new_key = fn(key) if isinstance(key, str) else key
                copy[new_key] = None
                stack.append((item, copy, new_key))
            parent[slot] = copy
        elif isinstance(node, list | tuple):
            items: list[Any] = [None] * len(node)
            stack.extend((item, items, i) for i, item in enumerate(node))
            parent[slot] = items
        else:
            parent[slot] = fn(node) if isinstance(node, str) else node
    return root[0]


def store_escape(value: Any) -> Any:
    """The copy of ``value`` to store: NUL as ``␀0``, a lone surrogate as ``␀uXXXX``,
    ``␀`` as ``␀␀`` (reversible)."""
    return _map_strings(value, _escape_text)


def store_unescape(value: Any) -> Any:
    """A stored value as it was before :func:`store_escape`."""
    return _map_strings(value, _unescape_text)


def _child(where: str, key: Any) -> str:
    return f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}"


def _text_problem(text: str) -> str | None:
    found = _NOT_TEXT.search(text)
    if found is None:
        return None
    if found.group(0) == NUL:
        return "a NUL character (\\u0000)"
    return f"a lone surrogate (\\u{ord(found.group(0)):04x})"


def storage_problem(value: Any, where: str = "$") -> str | None:
    """Why ``value`` cannot be stored as configuration, naming the place, or None.

    Refused: a NUL character or a lone surrogate in a string or key, a NaN or infinite
    number. The first found (depth first, in document order) is named.
    """
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        node, at = stack.pop()
        problem = None
        if isinstance(node, str):
            problem = _text_problem(node)
        elif isinstance(node, float) and not math.isfinite(node):
            problem = f"the number {node}, which JSON cannot hold"
        elif isinstance(node, dict):
            for key in node:
                if isinstance(key, str) and (bad := _text_problem(key)):
                    return f"a key at `{at}` ({key!r}) holds {bad}, which cannot be stored"
            stack.extend((node[k], _child(at, k)) for k in reversed(list(node)))
        elif isinstance(node, list | tuple):
            stack.extend((item, _child(at, i)) for i, item in reversed(list(enumerate(node))))
        if problem is not None:
            if problem.startswith("the number"):
                return f"`{at}` is {problem}"
            return f"the text at `{at}` holds {problem}, which cannot be stored"
    return None


_SCALARS = (str, bool, int, type(None))


def json_snapshot(value: Any, where: str = "$") -> Any:
    """A deep copy of ``value``, which must be JSON data (tuples become lists).

    Raises :class:`NotJSON` naming the first value that is not (a ``set``, ``bytes``,
    an object, a NaN or infinite float, a dict key that is not a string).
    """
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, str]] = [(value, root, 0, where)]
    while stack:
        node, parent, slot, at = stack.pop()
        if isinstance(node, _SCALARS):
            parent[slot] = node
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise NotJSON(f"float ({node})", at)
            parent[slot] = node
        elif isinstance(node, dict):
            copy: dict[str, Any] = {}
            for key, item in node.items():
                if not isinstance(key, str):
                    raise NotJSON(f"{type(key).__name__} (a dict key)", _child(at, key))
                copy[key] = None
                stack.append((item, copy, key, _child(at, key)))
            parent[slot] = copy
        elif isinstance(node, list | tuple):
            items: list[Any] = [None] * len(node)
            stack.extend((item, items, i, _child(at, i)) for i, item in enumerate(node))
            parent[slot] = items
        else:
            raise NotJSON(type(node).__name__, at)
    return root[0]


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKey(f"the key {key!r} appears twice in one object")
        seen[key] = value
    return seen


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` that refuses a key given twice in one object.

    Raises :class:`DuplicateKey`, or ``json.JSONDecodeError`` (which has the line and
    column) for text that is not JSON.
    """
    return json.loads(text, object_pairs_hook=_no_duplicates)


def duplicate_key_location(text: str) -> str | None:
    """Where the first duplicate key of a JSON document is (``line L, column C: …``)."""
    decoder = json.JSONDecoder(object_pairs_hook=_no_duplicates)
    try:
        decoder.decode(text)
    except DuplicateKey as exc:
        return _locate_duplicate(text, str(exc))
    except ValueError:
        return None
    return None


def _locate_duplicate(text: str, message: str) -> str:
    key = message.split("'")[1] if "'" in message else ""
    needle = json.dumps(key)
    hits = [m.start() for m in re.finditer(re.escape(needle) + r"\s*:", text)]
    if len(hits) < 2:
        return message
    line = text.count("\n", 0, hits[-1]) + 1
    column = hits[-1] - (text.rfind("\n", 0, hits[-1]) + 1) + 1
    return f"line {line}, column {column}: {message}"


PREVIEW_CHARS = 20_000  # the most of one value an admin page shows


def json_preview(value: Any, *, limit: int = PREVIEW_CHARS, indent: int | None = 2) -> str:
    """``value`` as JSON text for a page, cut at ``limit`` characters with a note.

    A value nested too deep for the indenting encoder is shown compact instead.
    """
    try:
        text = json.dumps(value, indent=indent, ensure_ascii=False, default=str)
    except RecursionError:
        text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… [preview: {limit} of {len(text)} characters shown]"
