"""Built-in providers: the MCP shape and the offline data tools."""

import json
import os
import re
from pathlib import Path

import pytest

from tools.builtin import BuiltinProvider, load_providers
from tools.builtin.data import DataToolsProvider, convert_cell, render_report
from tools.errors import (
    ToolCallFailed,
    ToolConfigError,
    ToolInputError,
    ToolNotFound,
    ToolResponseTooLarge,
)
from tools.registry import ToolRegistry

SALES = Path(__file__).resolve().parents[2] / "examples" / "data" / "sales.csv"


@pytest.fixture
def registry():
    return ToolRegistry([], [DataToolsProvider()])


@pytest.fixture
def data_ctx(make_ctx, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "people.csv").write_text("name,age,score,zip\nAda,36,1.5,007\nBob,,2,10115\n")
    (data / "list.json").write_text(json.dumps([{"a": 1}, {"a": 2}]))
    (data / "obj.json").write_text(json.dumps({"a": {"b": 1}}))
    (tmp_path / "outside.csv").write_text("x\n1\n")
    return make_ctx()


def test_list_tools_mcp_shape_and_specs():
    provider = DataToolsProvider()
    listed = provider.list_tools()
    assert [t["name"] for t in listed] == [
        "csv_read", "json_read", "aggregate", "write_report", "write_json",
    ]  # fmt: skip
    assert set(listed[0]) == {
        "name", "description", "inputSchema", "outputs", "outputSchema", "annotations",
    }  # fmt: skip
    assert "outputSchema" not in listed[1]  # json_read's shape is the file's
    assert listed[0]["outputSchema"]["properties"]["count"] == {"type": "integer", "minimum": 0}
    specs = provider.specs()
    assert all(s.kind == "builtin" for s in specs)
    assert specs[0].outputs == ["rows", "count", "columns"]
    # The MCP-shaped output schema becomes the spec's output types, field by field.
    assert specs[0].output_type("rows") == {"type": "array", "items": {"type": "object"}}
    assert specs[0].output_type("columns") == {"type": "array", "items": {"type": "string"}}
    assert specs[1].output_types is None
    assert specs[1].output_type("items") is None
    assert specs[3].output_type("path") == {"type": "string"}


def test_load_providers_from_setting_and_errors():
    assert isinstance(load_providers()[0], DataToolsProvider)
    with pytest.raises(ToolConfigError, match="cannot import"):
        load_providers(["tools.builtin.data.Missing"])
    with pytest.raises(ToolConfigError, match="not a BuiltinProvider"):
        load_providers(["pathlib.PurePath"])


def test_csv_read_converts_numbers(registry, data_ctx):
    result = registry.call("csv_read", {"path": "people.csv"}, data_ctx)
    assert result.output == {
        "rows": [
            {"name": "Ada", "age": 36, "score": 1.5, "zip": "007"},
            {"name": "Bob", "age": None, "score": 2, "zip": 10115},
        ],
        "count": 2,
        "columns": ["name", "age", "score", "zip"],
    }


def test_csv_read_example_sales(registry, make_ctx):
    ctx = make_ctx(data_dirs=(SALES.parent.parent,))
    out = registry.call("csv_read", {"path": "data/sales.csv"}, ctx).output
    assert out["columns"] == ["date", "region", "product", "units", "amount"]
    assert 30 <= out["count"] <= 50
    assert all(isinstance(r["amount"], float) for r in out["rows"])


def test_json_read_wraps_lists(registry, data_ctx):
    assert registry.call("json_read", {"path": "list.json"}, data_ctx).output == {
        "items": [{"a": 1}, {"a": 2}],
        "count": 2,
    }
    assert registry.call("json_read", {"path": "obj.json"}, data_ctx).output == {"a": {"b": 1}}


@pytest.mark.parametrize("path", ["../outside.csv", "/etc/passwd", "sub/../../outside.csv"])
def test_read_escapes_refused(registry, data_ctx, path):
    with pytest.raises(ToolInputError) as info:
        registry.call("csv_read", {"path": path}, data_ctx)
    assert path in info.value.message


def test_read_symlink_out_refused(registry, data_ctx, tmp_path):
    os.symlink(tmp_path / "outside.csv", tmp_path / "data" / "link.csv")
    with pytest.raises(ToolInputError, match=r"link\.csv"):
        registry.call("csv_read", {"path": "link.csv"}, data_ctx)


def test_read_missing_bad_and_large_files(registry, data_ctx, make_ctx, tmp_path):
    with pytest.raises(ToolCallFailed, match="not found"):
        registry.call("csv_read", {"path": "nope.csv"}, data_ctx)
    (tmp_path / "data" / "bad.json").write_text("{nope")
    with pytest.raises(ToolCallFailed, match="not valid JSON"):
        registry.call("json_read", {"path": "bad.json"}, data_ctx)
    (tmp_path / "data" / "latin.csv").write_bytes(b"a\n\xe9\n")
    with pytest.raises(ToolCallFailed, match="UTF-8"):
        registry.call("csv_read", {"path": "latin.csv"}, data_ctx)
    small = make_ctx(max_response_bytes=10)
    with pytest.raises(ToolResponseTooLarge):
        registry.call("csv_read", {"path": "people.csv"}, small)


def test_read_from_output_dir(registry, data_ctx, tmp_path):
    registry.call("write_json", {"path": "r/x.json", "data": [1]}, data_ctx)
    assert registry.call("json_read", {"path": "r/x.json"}, data_ctx).output["count"] == 1


def test_aggregate(registry, data_ctx):
    rows = [
        {"region": "N", "amount": 10},
        {"region": "S", "amount": 5.5},
        {"region": "N", "amount": 2},
        {"region": "E", "amount": 5.5},
        {"region": "W", "amount": None},
    ]
    out = registry.call(
        "aggregate", {"rows": rows, "group_by": "region", "sum": "amount"}, data_ctx
    ).output
    assert out["groups"] == [
        {"key": "N", "total": 12, "count": 2},
        {"key": "E", "total": 5.5, "count": 1},
        {"key": "S", "total": 5.5, "count": 1},
        {"key": "W", "total": 0, "count": 1},
    ]
    assert out["total"] == 23.0
    assert out["count"] == 5
    asc = registry.call(
        "aggregate",
        {"rows": rows, "group_by": "region", "sum": "amount", "order": "asc", "top": 2},
        data_ctx,
    ).output
    assert [g["key"] for g in asc["groups"]] == ["W", "E"]


def test_aggregate_rejects_non_numbers(registry, data_ctx):
    rows = [{"k": "a", "v": 1}, {"k": "b", "v": "lots"}]
    with pytest.raises(ToolInputError, match=r"rows\[1\]\.v"):
        registry.call("aggregate", {"rows": rows, "group_by": "k", "sum": "v"}, data_ctx)


def test_aggregate_sales_example(registry, make_ctx):
    ctx = make_ctx(data_dirs=(SALES.parent,))
    rows = registry.call("csv_read", {"path": "sales.csv"}, ctx).output["rows"]
    out = registry.call(
        "aggregate", {"rows": rows, "group_by": "region", "sum": "amount", "top": 3}, ctx
    ).output
    assert len(out["groups"]) == 3
    totals = [g["total"] for g in out["groups"]]
    assert totals == sorted(totals, reverse=True)


HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_write_report_escapes_everything(registry, data_ctx, tmp_path):
    args = {
        "path": "reports/r.html",
        "title": HOSTILE,
        "sections": [
            {"heading": HOSTILE, "text": f"para one {HOSTILE}\n\npara two"},
            {"heading": "Table", "rows": [{HOSTILE: HOSTILE, "n": 1, "d": {"k": "<b>"}}]},
        ],
    }
    out = registry.call("write_report", args, data_ctx).output
    path = Path(out["path"])
    assert path == (tmp_path / "out" / "reports" / "r.html").resolve()
    page = path.read_text()
    assert out["bytes"] == len(page.encode())
    assert "<script>" not in page
    assert "<img" not in page
    assert "&lt;script&gt;" in page
    assert "<p>para two</p>" in page
    assert '<td class="num">1</td>' in page
    assert "&lt;b&gt;" in page


@pytest.mark.parametrize("path", ["../x.html", "/tmp/x.html", "a/../../x.html", "."])
def test_write_escapes_refused(registry, data_ctx, path):
    with pytest.raises(ToolInputError):
        registry.call("write_json", {"path": path, "data": 1}, data_ctx)


def test_write_through_symlink_out_refused(registry, data_ctx, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, out / "link")
    with pytest.raises(ToolInputError):
        registry.call("write_json", {"path": "link/x.json", "data": 1}, data_ctx)
    assert not (elsewhere / "x.json").exists()


def test_write_json(registry, data_ctx):
    out = registry.call("write_json", {"path": "a/b.json", "data": {"ü": [1]}}, data_ctx).output
    assert json.loads(Path(out["path"]).read_text()) == {"ü": [1]}


def test_write_needs_output_dir(registry, make_ctx):
    with pytest.raises(ToolCallFailed, match="no output directory"):
        registry.call("write_json", {"path": "x.json", "data": 1}, make_ctx(output_dir=None))


def test_unknown_tool_in_provider(data_ctx):
    with pytest.raises(ToolNotFound):
        DataToolsProvider().call_tool("nope", {}, data_ctx)


def test_helpers():
    assert convert_cell("1e3") == 1000.0
    assert convert_cell("-2") == -2
    assert convert_cell(" ") is None
    assert convert_cell("12abc") == "12abc"
    assert "<h1>T &amp; C</h1>" in render_report("T & C", [])


def test_a_report_aligns_numbers_with_two_decimals_and_names_its_run(registry, data_ctx):
    rows = [
        {"key": "North", "total": 12345.5, "count": 3},
        {"key": "South", "total": 75, "count": 1200},
    ]
    page = render_report(
        "Sales",
        [
            {
                "heading": "By region",
                "rows": rows,
                "columns": [
                    {"field": "key", "heading": "Region"},
                    {"field": "total", "heading": "Revenue"},
                ],
            }
        ],
        summary=[{"label": "Total revenue", "value": 12420.5}, {"label": "Sales", "value": 1203}],
        stamp="run 7 · 2026-01-05 09:00 UTC",
    )
    assert '<p class="meta">run 7 · 2026-01-05 09:00 UTC</p>' in page
    assert '<tr><th>Total revenue</th><td class="num">12,420.50</td></tr>' in page
    assert '<tr><th>Sales</th><td class="num">1,203</td></tr>' in page
    # a column holding any decimal shows two decimals throughout; `count` is not picked
    assert '<tr><td>North</td><td class="num">12,345.50</td></tr>' in page
    assert '<tr><td>South</td><td class="num">75.00</td></tr>' in page
    assert "<th>Region</th><th class=num>Revenue</th>" in page
    assert ".num{text-align:right" in page

    written = registry.call(
        "write_report", {"path": "r.html", "title": "T", "sections": []}, data_ctx
    ).output
    assert re.search(
        r'<p class="meta">\d{4}-\d\d-\d\d \d\d:\d\d UTC</p>', Path(written["path"]).read_text()
    )


class _Broken(BuiltinProvider):
    def list_tools(self):
        return [{"name": "boom", "description": "", "inputSchema": {"type": "object"}}]

    def call_tool(self, name, arguments, ctx):
        raise RuntimeError("kaboom sk-secret-value")


def test_unexpected_provider_errors_wrapped_and_redacted(make_ctx):
    ctx = make_ctx()
    ctx.redactor.add_secret("sk-secret-value")
    with pytest.raises(ToolCallFailed) as info:
        ToolRegistry([], [_Broken()]).call("boom", {}, ctx)
    assert "kaboom ***" in info.value.message
    assert isinstance(info.value.__cause__, RuntimeError)


def test_absolute_path_inside_a_data_dir_allowed(registry, data_ctx, tmp_path):
    path = str(tmp_path / "data" / "people.csv")
    assert registry.call("csv_read", {"path": path}, data_ctx).output["count"] == 2
