"""Operations → tool files: names that are safe and unique whatever the operation ids
say, and the base URL taken from the nearest ``servers`` (operation, path, document)."""

from __future__ import annotations

import pytest
import yaml

from tools.openapi.generate import openapi_operations, openapi_tools
from tools.services import tools_load_dir

pytestmark = pytest.mark.django_db


def _doc(paths: dict) -> dict:
    return {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": paths,
    }


def _get(op_id: str) -> dict:
    return {"get": {"operationId": op_id, "responses": {"200": {"description": "ok"}}}}


HOSTILE_IDS = _doc(
    {
        "/a": _get("..."),
        "/b": _get("../../etc/passwd"),
        "/c": _get("listThings"),
        "/d": _get("list_things"),
        "/e": _get("list/things"),
        "/f": _get("x" * 80),
        "/g": _get("x" * 80 + "y"),
    }
)


def test_dotted_colliding_and_slashed_operation_ids_become_safe_unique_files(cli, tmp_path):
    source = tmp_path / "hostile.yaml"
    source.write_text(yaml.safe_dump(HOSTILE_IDS), encoding="utf-8")
    out = tmp_path / "out"
    result = cli("importopenapi", str(source), "--out", str(out), "--prefix", "h")
    assert result.code == 0, result.out + result.err
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(
        ["get_a.yaml", "etc_passwd.yaml", "list_things.yaml", "list_things_2.yaml",
         "list_things_3.yaml", "x" * 64 + ".yaml", "x" * 62 + "_2.yaml"]
    )  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.yaml", "out"]
    report = tools_load_dir(directory=out, sync_builtin=False)
    assert report.ok, report.errors
    assert report.created == 7
    listed = {op.key: op.tool_name for op in openapi_operations(HOSTILE_IDS)}
    assert listed["GET /a"] == "get_a"
    assert listed["GET /e"] == "list_things_3"
    tools = openapi_tools(HOSTILE_IDS, prefix="h").tools
    generated = {t["request"]["url"]: t["name"] for t in tools}
    assert generated == {key.split(" ")[1]: name for key, name in listed.items()}


def _forecast(servers: list | None = None) -> dict:
    op: dict = {"operationId": "forecast", "responses": {"200": {"description": "ok"}}}
    if servers is not None:
        op["servers"] = servers
    return op


SPREAD_OVER_HOSTS = {
    "openapi": "3.0.0",
    "info": {"title": "Open-Meteo", "version": "1"},
    "paths": {
        "/v1/forecast": {
            "servers": [{"url": "https://api.open-meteo.com/"}],
            "get": _forecast(),
        },
        "/v1/search": {
            "servers": [{"url": "https://wrong.example.com"}],
            "get": {
                **_forecast(
                    [
                        {
                            "url": "https://{sub}.open-meteo.com",
                            "variables": {"sub": {"default": "geocoding-api"}},
                        }
                    ]
                ),
                "operationId": "search",
            },
        },
        "/v1/elevation": {"get": {**_forecast(), "operationId": "elevation"}},
    },
}


def test_path_and_operation_servers_give_the_base_url(cli, tmp_path):
    generated = openapi_tools(SPREAD_OVER_HOSTS, prefix="meteo")
    base = {t["name"]: t["base_url"] for t in generated.tools}
    assert base == {
        "forecast": "{{env.METEO_FORECAST_BASE_URL:-https://api.open-meteo.com}}",
        "search": "{{env.METEO_SEARCH_BASE_URL:-https://geocoding-api.open-meteo.com}}",
        "elevation": "{{env.METEO_BASE_URL}}",
    }
    assert generated.unsupported == [
        "GET /v1/elevation: server URL '' is not absolute; set METEO_BASE_URL"
    ]
    with_document_servers = {**SPREAD_OVER_HOSTS, "servers": [{"url": "https://x.example"}]}
    tools = openapi_tools(with_document_servers, prefix="meteo").tools
    assert [t["base_url"] for t in tools if t["name"] == "elevation"] == [
        "{{env.METEO_BASE_URL:-https://x.example}}"
    ]
    source = tmp_path / "meteo.yaml"
    source.write_text(yaml.safe_dump(SPREAD_OVER_HOSTS), encoding="utf-8")
    out = tmp_path / "out"
    assert cli("importopenapi", str(source), "--out", str(out), "--prefix", "meteo").code == 0
    assert tools_load_dir(directory=out, sync_builtin=False).ok


def test_path_parameters_that_cannot_be_expanded_skip_every_operation_of_the_path():
    from tests.tools.test_importopenapi import deep_document

    document = deep_document()
    deep = {"name": "filter", "in": "query", "schema": {"$ref": "#/components/schemas/D0"}}
    document["paths"]["/c"]["parameters"] = [deep]
    document["paths"]["/c"]["post"] = {"operationId": "postC", "responses": {}}

    generated = openapi_tools(document, prefix="x")

    assert [tool["name"] for tool in generated.tools] == ["list_a", "list_b"]
    assert [(s.key, s.operation_id) for s in generated.skipped] == [
        ("GET /c", "listC"), ("POST /c", "postC"), ("POST /deep", "makeDeep")]  # fmt: skip
    assert generated.skipped[1].reason == (
        "$ref references nest more than 64 deep at #/components/schemas/D64, "
        "reached from #/paths/~1c/parameters"
    )
    assert generated.unsupported == []
