"""Reading JSON out of a model's text reply.

Models asked for JSON answer with plain JSON, JSON inside a Markdown fence
(```` ```json … ``` ````), or JSON wrapped in a sentence. ``parse_json_reply``
accepts all three, in that order, and raises ``LLMReplyInvalid`` saying what was
wrong (with the parser's line and column) otherwise.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tools.data_limits import data_limit_problem
from tools.jsondata import DuplicateKey, duplicate_key_location, loads_strict
from tools.llm.errors import LLMReplyInvalid

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)
_SHOWN = 200


def parse_json_reply(text: str | None) -> Any:
    """The JSON value in ``text``: plain, fenced, or the outermost ``{…}``."""
    if text is None or not text.strip():
        raise LLMReplyInvalid("the reply is empty; a JSON document was expected")
    stripped = text.strip()
    try:
        return _loads(stripped)
    except json.JSONDecodeError as exc:
        first_error = exc
    for candidate in _candidates(stripped):
        try:
            return _loads(candidate)
        except json.JSONDecodeError as exc:
            first_error = exc
    shown = stripped if len(stripped) <= _SHOWN else stripped[:_SHOWN] + "…"
    where = f"line {first_error.lineno} column {first_error.colno}"
    open_brackets = _unclosed(stripped)
    if open_brackets:
        raise LLMReplyInvalid(
            f"the reply is not valid JSON: it was truncated at {where}, with "
            f"{open_brackets} bracket(s) or a string still open (cut off, likely at the "
            f"output token limit); return the whole JSON again, shorter: {shown!r}"
        ) from first_error
    raise LLMReplyInvalid(
        f"the reply is not valid JSON ({first_error.msg} at line {first_error.lineno} "
        f"column {first_error.colno}): {shown!r}"
    ) from first_error


def _unclosed(text: str) -> int:
    """How many ``{``/``[`` (or a string) are still open where the text stops; 0 when none.

    A reply that ends inside its JSON was cut off, which a model fixes differently
    from a syntax error.
    """
    start = text.find("{")
    if start < 0:
        return 0
    depth, in_string, escaped = 0, False, False
    for char in text[start:]:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return 0  # the outermost value closed: a syntax error, not a cut
    return depth + in_string


def _loads(text: str) -> Any:
    """``json.loads``; a too deeply nested value, or a key given twice in one object (which
    ``json`` would silently resolve to the last), is ``LLMReplyInvalid``."""
    try:
        value = loads_strict(text)
    except DuplicateKey as exc:
        where = duplicate_key_location(text) or str(exc)
        raise LLMReplyInvalid(f"the reply's JSON is refused: {where}") from exc
    except RecursionError as exc:
        raise LLMReplyInvalid("the reply's JSON nests too deeply") from exc
    problem = data_limit_problem(value)
    if problem:
        raise LLMReplyInvalid(f"the reply's JSON is refused: {problem}")
    return value


def _candidates(text: str) -> list[str]:
    found = [m.group(2).strip() for m in _FENCE.finditer(text) if m.group(1) in ("", "json")]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        found.append(text[start : end + 1])
    return found
