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
from datetime import UTC, datetime
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


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def number_text(value: int | float, *, decimals: bool) -> str:
    """``12345.6`` as ``12,345.60`` (``decimals``), ``1234`` as ``1,234``."""
    if decimals or isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}"


def _table(rows: list[dict[str, Any]], labels: dict[str, str] | None = None) -> str:
    """Rows as a table: numbers right-aligned, a column holding any decimal number shown
    with two decimals throughout; ``labels`` names (and picks, in order) the columns."""
    columns: list[str] = list(labels or {})
    if not columns:
        for row in rows:
            columns.extend(str(k) for k in row if str(k) not in columns)
    decimal_columns = {c for c in columns if any(isinstance(row.get(c), float) for row in rows)}
    numeric = {
        c
        for c in columns
        if any(_is_number(row.get(c)) for row in rows)
        and all(_is_number(row.get(c)) or row.get(c) is None for row in rows)
    }
    head = "".join(
        f"<th{' class=num' if c in numeric else ''}>{html.escape((labels or {}).get(c, c))}</th>"
        for c in columns
    )
    body = []
    for row in rows:
        cells = []
        for c in columns:
            value = row.get(c)
            if c in numeric and value is not None:
                text = number_text(value, decimals=c in decimal_columns)
                cells.append(f'<td class="num">{html.escape(text)}</td>')
            else:
                cells.append(f"<td>{html.escape(_cell(value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _summary(summary: list[dict[str, Any]]) -> str:
    """The headline figures (``[{"label": "Total revenue", "value": 12345.6}]``) as a
    small table, in their order (a list: stored JSON objects may reorder their keys)."""
    rows = []
    for item in summary:
        label, value = item.get("label", ""), item.get("value")
        if isinstance(value, int | float) and not isinstance(value, bool):
            text, klass = number_text(value, decimals=isinstance(value, float)), ' class="num"'
        else:
            text, klass = _cell(value), ""
        rows.append(
            f"<tr><th>{html.escape(str(label))}</th><td{klass}>{html.escape(text)}</td></tr>"
        )
    return f'<table class="summary"><tbody>{"".join(rows)}</tbody></table>'


REPORT_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:60em;padding:0 1em;"
    "color:#1f2d3d}h1{margin-bottom:.2em}.meta{color:#666;margin-top:0}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "th,td{border:1px solid #ccd;padding:.35em .8em;text-align:left}"
    "thead th{background:#f3f5f8}.num{text-align:right;font-variant-numeric:tabular-nums}"
    ".summary th{background:#f3f5f8}.summary td{font-size:1.15em;font-weight:600}"
)


def render_report(
    title: str,
    sections: list[dict[str, Any]],
    *,
    summary: list[dict[str, Any]] | None = None,
    stamp: str = "",
) -> str:
    """A standalone HTML page. Every value is escaped: text can never become markup.

    ``summary`` holds the headline figures shown under the title; ``stamp`` says which
    run wrote it and when (``run 12 · 2026-01-05 09:00 UTC``)."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{REPORT_STYLE}</style>",
        f"</head><body><h1>{html.escape(title)}</h1>",
    ]
    if stamp:
        parts.append(f'<p class="meta">{html.escape(stamp)}</p>')
    if summary:
        parts.append(_summary(summary))
    for section in sections:
        parts.append(f"<section><h2>{html.escape(str(section.get('heading', '')))}</h2>")
        if section.get("text") is not None:
            for paragraph in str(section["text"]).split("\n\n"):
                parts.append(f"<p>{html.escape(paragraph)}</p>")
        if section.get("rows") is not None:
            columns = section.get("columns")
            labels = {str(c["field"]): str(c["heading"]) for c in columns} if columns else None
            parts.append(_table(section["rows"], labels))
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
            description="Write an HTML report (title, headline figures, sections of text or "
            "tables with numbers aligned) to the output directory, stamped with the run and "
            "the time it was written.",
            input_schema=_schema(
                {
                    "path": _PATH,
                    "title": {"type": "string"},
                    "summary": {
                        "type": "array",
                        "description": "Headline figures shown under the title, in order "
                        "(numbers formatted).",
                        "items": {
                            "type": "object",
                            "properties": {"label": {"type": "string"}, "value": {}},
                            "required": ["label", "value"],
                            "additionalProperties": False,
                        },
                    },
                    "sections": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "heading": {"type": "string"},
                                "rows": _ROWS,
                                "text": {"type": ["string", "null"]},
                                "columns": {
                                    "type": "array",
                                    "description": "The columns, in order: a row field and "
                                    "its heading (omitted: every field, named as it is).",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "field": {"type": "string"},
                                            "heading": {"type": "string"},
                                        },
                                        "required": ["field", "heading"],
                                        "additionalProperties": False,
                                    },
                                },
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
        written = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        stamp = f"run {ctx.run_id} · {written}" if ctx.run_id is not None else written
        page = render_report(
            arguments["title"],
            arguments["sections"],
            summary=arguments.get("summary"),
            stamp=stamp,
        ).encode("utf-8")
        _write(path, page, ctx)
        return {"path": str(path), "bytes": len(page)}

    def write_json(self, arguments: dict[str, Any], ctx: ToolCallContext) -> dict[str, Any]:
        path = resolve_write_path(arguments["path"], ctx)
        data = json.dumps(arguments["data"], indent=2, ensure_ascii=False, default=str)
        encoded = (data + "\n").encode("utf-8")
        _write(path, encoded, ctx)
        return {"path": str(path), "bytes": len(encoded)}
