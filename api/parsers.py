"""The API's JSON parser: refuses text no database column can hold.

JSON may carry ``\\u0000`` and lone surrogates (``\\ud800``); Python reads them, but
PostgreSQL stores neither (not in ``text``, not in ``jsonb``) and UTF-8 cannot encode
a lone surrogate. Such a body is a 400 naming where the text is, instead of a
database error later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework.parsers import JSONParser

from api.exceptions import ApiError
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


class StorableJSONParser(JSONParser):
    def parse(
        self,
        stream: IO[bytes],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        data = super().parse(stream, media_type, parser_context)
        where = unstorable_text(data)
        if where is not None:
            message = "text with a NUL character or a lone surrogate cannot be stored"
            raise ApiError(
                f"{where}: {message}",
                code="parse_error",
                status_code=400,
                details=[{"path": where, "code": "text_unstorable", "message": message}],
            )
        return data
