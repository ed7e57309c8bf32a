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
    raise LLMReplyInvalid(
        f"the reply is not valid JSON ({first_error.msg} at line {first_error.lineno} "
        f"column {first_error.colno}): {shown!r}"
    ) from first_error


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
