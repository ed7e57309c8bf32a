"""Offline data tools: read CSV/JSON, aggregate rows, write HTML/JSON reports.

Files are read only inside ``ctx.data_dirs`` or ``ctx.output_dir`` and written
only inside ``ctx.output_dir``. A path that leaves them — absolute elsewhere,
``..``, or a symlink pointing out — is refused with ``ToolInputError``. Reads are
bounded by ``ctx.max_response_bytes``.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from tools.builtin.base import BuiltinProvider, BuiltinTool
from tools.calls import ToolCallContext
from tools.data_paths import inside as _inside
from tools.data_paths import resolve_read_path
from tools.errors import ToolCallFailed, ToolInputError, ToolResponseTooLarge
from tools.http_client import wrap

_INT = re.compile(r"^-?(0|[1-9]\d*)$")
_FLOAT = re.compile(r"^-?(0|[1-9]\d*)?\.\d+([eE][-+]?\d+)?$|^-?(0|[1-9]\d*)[eE][-+]?\d+$")
_PATH = {"type": "string", "minLength": 1, "description": "Relative to a data dir."}
_ROWS = {"type": "array", "items": {"type": "object"}}
_INTEGER = {"type": "integer", "minimum": 0}
_WRITTEN: dict[str, dict[str, Any]] = {"path": {"type": "string"}, "bytes": _INTEGER}


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def resolve_write_path(raw: str, ctx: ToolCallContext) -> Path:
    """Where ``raw`` lands inside the output dir (parents created)."""
    if ctx.output_dir is None:
        raise ToolCallFailed("no output directory is configured for this run")
    base = ctx.output_dir.resolve()
    candidate = (base / raw).resolve()
    if not _inside(candidate, base) or candidate == base:
        raise ToolInputError(f"path {raw!r} is outside the output directory")
    candidate.parent.mkdir(parents=True, exist_ok=True)
    return candidate


def _read_text(path: Path, raw: str, ctx: ToolCallContext) -> str:
    size = path.stat().st_size
    if size > ctx.max_response_bytes:
        raise ToolResponseTooLarge(
            f"{raw!r} is {size} bytes, above the {ctx.max_response_bytes} byte limit"
        )
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ToolCallFailed(f"{raw!r} is not UTF-8 text") from exc


def _write(path: Path, data: bytes, ctx: ToolCallContext) -> None:
    """Write the file; through ``ctx.tap`` when there is one (a replay writes nothing)."""
    if ctx.tap is None:
        _write_atomic(path, data)
    else:
        ctx.tap.file_write(str(path), data, lambda: _write_atomic(path, data))


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def convert_cell(text: str) -> Any:
    """``"12"`` → 12, ``"1.5"`` → 1.5, ``""`` → None; other text (``"007"``) unchanged."""
    value = text.strip()
    if value == "":
        return None
    if _INT.match(value):
        return int(value)
    if _FLOAT.match(value):
        return float(value)
    return text


def _number(value: Any, where: str) -> int | float:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolInputError(f"{where}: {value!r} is not a number")
    return value


def _total(values: list[int | float]) -> int | float:
    if all(isinstance(v, int) for v in values):
        return sum(values)
    return round(math.fsum(values), 10)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _table(rows: list[dict[str, Any]]) -> str:
    columns: list[str] = []
    for row in rows:
        columns.extend(str(k) for k in row if str(k) not in columns)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(row.get(c)))}</td>" for c in columns) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_report(title: str, sections: list[dict[str, Any]]) -> str:
    """A standalone HTML page. Every value is escaped: text can never become markup."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}</style>",
        f"</head><body><h1>{html.escape(title)}</h1>",
    ]
    for section in sections:
        parts.append(f"<section><h2>{html.escape(str(section.get('heading', '')))}</h2>")
        if section.get("text") is not None:
            for paragraph in str(section["text"]).split("\n\n"):
                parts.append(f"<p>{html.escape(paragraph)}</p>")
        if section.get("rows") is not None:
            parts.append(_table(section["rows"]))
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


class DataToolsProvider(BuiltinProvider):
    """Real, offline tools for reading, summarizing and reporting tabular data."""

    tools = (
        BuiltinTool(
            name="csv_read",
            description="Read a CSV file (header row) from the data directories; "
            "numbers are converted.",
            input_schema=_schema({"path": _PATH, "delimiter": {"type": "string"}}, ["path"]),
            outputs=("rows", "count", "columns"),
            output_types={
                "rows": _ROWS,
                "count": _INTEGER,
                "columns": {"type": "array", "items": {"type": "string"}},
            },
            handler="csv_read",
        ),
        BuiltinTool(
            name="json_read",
            description="Read a JSON file from the data directories (a list becomes items/count).",
            input_schema=_schema({"path": _PATH}, ["path"]),
            handler="json_read",
        ),
        BuiltinTool(
            name="aggregate",
            description="Group rows by a field and sum another; groups sorted by total.",
            input_schema=_schema(
                {
                    "rows": _ROWS,
                    "group_by": {"type": "string", "minLength": 1},
                    "sum": {"type": "string", "minLength": 1},
                    "top": {"type": "integer", "minimum": 1},
                    "order": {"enum": ["desc", "asc"]},
                },
                ["rows", "group_by", "sum"],
            ),
            outputs=("groups", "total", "count"),
            output_types={
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"key": {}, "total": {"type": "number"}, "count": _INTEGER},
                    },
                },
                "total": {"type": "number"},
                "count": _INTEGER,
            },
            handler="aggregate",
        ),
        BuiltinTool(
            name="write_report",
            description="Write an HTML report (title, sections of text or tables) "
            "to the output directory.",
            input_schema=_schema(
                {
                    "path": _PATH,
                    "title": {"type": "string"},
                    "sections": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "heading": {"type": "string"},
                                "rows": _ROWS,
                                "text": {"type": ["string", "null"]},
                            },
                            "required": ["heading"],
                            "additionalProperties": False,
                        },
                    },
                },
                ["path", "title", "sections"],
            ),
            outputs=("path", "bytes"),
            output_types=_WRITTEN,
            handler="write_report",
        ),
        BuiltinTool(
            name="write_json",
            description="Write data as a JSON file to the output directory.",
            input_schema=_schema({"path": _PATH, "data": {}}, ["path", "data"]),
            outputs=("path", "bytes"),
            output_types=_WRITTEN,
            handler="write_json",
        ),
    )

    def csv_read(self, arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
        path = resolve_read_path(arguments["path"], ctx)
        text = _read_text(path, arguments["path"], ctx)
        try:
            reader = csv.DictReader(io.StringIO(text), delimiter=arguments.get("delimiter", ","))
            rows = [
                {k: convert_cell(v or "") for k, v in row.items() if k is not None}
                for row in reader
            ]
        except (csv.Error, TypeError) as exc:
            raise ToolCallFailed(f"{arguments['path']!r} is not valid CSV: {exc}") from exc
        return {"rows": rows, "count": len(rows), "columns": list(reader.fieldnames or [])}

    def json_read(self, arguments: dict[str, Any], ctx: ToolCallContext) -> Any:
        path = resolve_read_path(arguments["path"], ctx)
        text = _read_text(path, arguments["path"], ctx)
        try:
            return wrap(json.loads(text))
        except json.JSONDecodeError as exc:
            raise ToolCallFailed(f"{arguments['path']!r} is not valid JSON: {exc}") from exc

    def aggregate(self, arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
        key_field, sum_field = arguments["group_by"], arguments["sum"]
        groups: dict[str, tuple[Any, list[int | float]]] = {}
        for index, row in enumerate(arguments["rows"]):
            value = _number(row.get(sum_field), f"rows[{index}].{sum_field}")
            key = row.get(key_field)
            groups.setdefault(json.dumps(key, sort_keys=True, default=str), (key, []))[1].append(
                value
            )
        result = [
            {"key": key, "total": _total(values), "count": len(values)}
            for key, values in groups.values()
        ]
        sign = 1 if arguments.get("order") == "asc" else -1
        result.sort(key=lambda g: (sign * g["total"], str(g["key"])))
        totals = [v for _key, values in groups.values() for v in values]
        top = arguments.get("top")
        return {
            "groups": result[:top] if top else result,
            "total": _total(totals),
            "count": len(arguments["rows"]),
        }

    def write_report(self, arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
        path = resolve_write_path(arguments["path"], ctx)
        page = render_report(arguments["title"], arguments["sections"]).encode("utf-8")
        _write(path, page, ctx)
        return {"path": str(path), "bytes": len(page)}

    def write_json(self, arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
        path = resolve_write_path(arguments["path"], ctx)
        data = json.dumps(arguments["data"], indent=2, ensure_ascii=False, default=str)
        encoded = (data + "\n").encode("utf-8")
        _write(path, encoded, ctx)
        return {"path": str(path), "bytes": len(encoded)}
