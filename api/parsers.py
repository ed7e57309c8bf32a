"""The API's JSON parser: refuses what the docs say configuration may not hold.

A body is refused with a 400 ``parse_error`` naming the problem, before any view
reads it, when it is not JSON in the request's charset; when one object names a key
twice (``json`` would silently keep the last value, while the same definition sent
as text is refused: ``tools.jsondata.loads_strict``); when it nests deeper than
``tools.data_limits.MAX_DEPTH`` levels (a body 10,000 levels deep overflowed the
decoder's stack: a 500); and when it holds text no database column can hold.

JSON may carry ``\\u0000`` and lone surrogates (``\\ud800``); Python reads them, but
PostgreSQL stores neither (not in ``text``, not in ``jsonb``) and UTF-8 cannot encode
a lone surrogate. Such a body is a 400 naming where the text is, instead of a
database error later. A NaN or infinite number is refused the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework.parsers import JSONParser

from api.exceptions import ApiError
from tools.data_limits import MAX_DEPTH, data_limit_problem
from tools.jsondata import DuplicateKey, duplicate_key_location, loads_strict, storage_problem
from workflows.validation.report import format_path


def unstorable_text(value: Any, path: tuple = ()) -> str | None:
    """The JSON path of the first key or string with a NUL or a lone surrogate, else None."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if _bad(item):
                return format_path(where) or "(body)"
        elif isinstance(item, dict):
            for key, sub in item.items():
                if isinstance(key, str) and _bad(key):
                    return format_path((*where, key)) or "(body)"
                stack.append((sub, (*where, key)))
        elif isinstance(item, list):
            stack.extend((sub, (*where, index)) for index, sub in enumerate(item))
    return None


def _bad(text: str) -> bool:
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _refused(message: str, code: str, path: str = "") -> ApiError:
    detail = {"path": path, "code": code, "message": message}
    where = f"{path}: " if path else ""
    return ApiError(f"{where}{message}", code="parse_error", status_code=400, details=[detail])


def parse_json_body(raw: bytes, encoding: str) -> Any:
    """The JSON value of a request body, or an :class:`ApiError` 400 saying what is wrong."""
    try:
        text = raw.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise _refused(f"the body is not {encoding} text", "not_text") from exc
    too_deep = f"the document nests deeper than {MAX_DEPTH} levels"
    try:
        data = loads_strict(text)
    except DuplicateKey as exc:
        where = duplicate_key_location(text) or str(exc)
        raise _refused(where, "duplicate_key") from exc
    except RecursionError as exc:
        raise _refused(too_deep, "too_deep") from exc
    except json.JSONDecodeError as exc:
        raise _refused(f"JSON parse error - {exc}", "not_json") from exc
    problem = data_limit_problem(data)
    if problem is not None:
        raise _refused(problem, "too_deep")
    at = unstorable_text(data)
    if at is not None:
        message = "text with a NUL character or a lone surrogate cannot be stored"
        raise _refused(message, "text_unstorable", at)
    problem = storage_problem(data)  # what is left: a NaN or infinite number
    if problem is not None:
        raise _refused(problem, "not_json")
    return data


class StorableJSONParser(JSONParser):
    """DRF's JSON parser with the refusals above (``parse_json_body``)."""

    def parse(
        self,
        stream: IO[bytes],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        return parse_json_body(stream.read() if stream is not None else b"", encoding)
