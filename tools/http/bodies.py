"""Request bodies by ``request.body_type``.

* ``json`` (default): the rendered template as JSON; ``null`` sends no body.
* ``form``: ``application/x-www-form-urlencoded`` from a mapping (a ``null`` value drops
  the field, a list repeats it, other values are sent as text).
* ``multipart``: ``multipart/form-data``: the mapping's fields, plus ``files`` (field →
  path). A file is read only from ``FLOWPILOT_DATA_DIRS``; a path leaving them
  (``..``, absolute elsewhere, a symlink out) is a ``tool_input_invalid`` error.
* ``text``: the rendered string, with ``content_type`` (default ``text/plain;
  charset=utf-8``), encoded as UTF-8.
"""

from __future__ import annotations

import json
import mimetypes
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from tools.calls import ToolCallContext
from tools.data_paths import resolve_read_path
from tools.errors import TemplateError, ToolInputError
from tools.spec import HttpRequest
from tools.templating import render, render_text, to_text

FileField = tuple[str, tuple[str, bytes, str]]


@dataclass
class Body:
    """What httpx is given: at most one of ``json``, ``content``, ``data``/``files``."""

    json: Any = None
    content: bytes | None = None
    data: list[tuple[str, str]] = field(default_factory=list)
    files: list[FileField] = field(default_factory=list)
    content_type: str | None = None

    def send_kwargs(self) -> dict[str, Any]:
        if self.files:
            return {"data": _as_mapping(self.data), "files": self.files}
        if self.data:
            return {"data": _as_mapping(self.data)}
        if self.content is not None:
            return {"content": self.content}
        return {"json": self.json}


def body_text(body: Body) -> str:
    """The body as comparable text (JSON with sorted keys; form data as sent): what a
    recording compares and an approval's preview shows."""
    if body.files:
        files = [(name, part[0], len(part[1])) for name, part in body.files]
        return json.dumps({"data": body.data, "files": files}, ensure_ascii=False)
    if body.data:
        return urlencode(body.data)
    if body.content is not None:
        return body.content.decode("utf-8", errors="replace")
    if body.json is None:
        return ""
    return json.dumps(body.json, ensure_ascii=False, sort_keys=True, default=str)


def _as_mapping(pairs: list[tuple[str, str]]) -> dict[str, str | list[str]]:
    result: dict[str, str | list[str]] = {}
    for name, value in pairs:
        if name in result:
            previous = result[name]
            result[name] = [*(previous if isinstance(previous, list) else [previous]), value]
        else:
            result[name] = value
    return result


def render_body(request: HttpRequest, arguments: dict, ctx: ToolCallContext) -> Body:
    """The body of ``request`` rendered with ``arguments``."""
    kind = request.body_type
    if kind == "json":
        if request.body is None:
            return Body()
        return Body(
            json=render(request.body, arguments, env=ctx.env, max_bytes=ctx.max_output_bytes)
        )
    if kind == "text":
        text = render_text(
            request.body or "", arguments, env=ctx.env, max_bytes=ctx.max_output_bytes
        )
        content_type = request.content_type or "text/plain; charset=utf-8"
        return Body(content=text.encode("utf-8"), content_type=content_type)
    fields = _form_fields(request, arguments, ctx)
    if kind == "form":
        return Body(data=fields, content_type="application/x-www-form-urlencoded")
    files = [_file(name, template, arguments, ctx) for name, template in request.files.items()]
    return Body(data=fields, files=files)


def _form_fields(
    request: HttpRequest, arguments: dict, ctx: ToolCallContext
) -> list[tuple[str, str]]:
    value = render(request.body, arguments, env=ctx.env, max_bytes=ctx.max_output_bytes)
    if value is None:
        return []
    if not isinstance(value, dict):
        raise TemplateError(
            f"body_type {request.body_type!r} needs the body to render to a mapping, "
            f"got {type(value).__name__}"
        )
    pairs: list[tuple[str, str]] = []
    for name, item in value.items():
        items = item if isinstance(item, list) else [item]
        pairs.extend((str(name), to_text(v)) for v in items if v is not None)
    return pairs


def _file(name: str, template: str, arguments: dict, ctx: ToolCallContext) -> FileField:
    raw = render_text(template, arguments, env=ctx.env)
    if not raw:
        raise ToolInputError(f"multipart file {name!r}: the path renders empty")
    # Files come from the data directories only, never from the output directory.
    path = resolve_read_path(raw, replace(ctx, output_dir=None))
    size = path.stat().st_size
    if size > ctx.max_response_bytes:
        raise ToolInputError(
            f"multipart file {name!r} ({raw!r}) is {size} bytes, more than the "
            f"{ctx.max_response_bytes} byte limit"
        )
    content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return name, (path.name, path.read_bytes(), content_type)
