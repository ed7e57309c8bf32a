"""Malformed documents: whatever part of a valid document is replaced by whatever JSON
value, the import either succeeds, skips operations naming where (a JSON pointer), or
refuses with its own error — through the service, the command and the admin page,
never with any other exception."""

from __future__ import annotations

import copy
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tools.openapi.test_admin_import import URL, import_dir, importer, read, upload
from tools.openapi.document import OpenAPIError, ShapeError, child, expect, kind, openapi_parse
from tools.openapi.generate import openapi_tools
from tools.openapi.services import openapi_write

__all__ = ["import_dir", "importer"]  # fixtures of the admin page's tests, used below

pytestmark = pytest.mark.django_db

SCHEMAS = "#/components/schemas"

# A small petstore: path and operation parameters (one by reference), query, header,
# path and cookie places, JSON and form bodies, responses by reference, servers with
# variables at three levels, and bearer, API key, basic and OAuth2 security.
VALID: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "Pets", "version": "1.0.0"},
    "servers": [{"url": "https://pets.example/{v}", "variables": {"v": {"default": "v1"}}}],
    "security": [{"key": []}],
    "paths": {
        "/pets": {
            "parameters": [{"$ref": "#/components/parameters/Trace"}],
            "get": {
                "operationId": "listPets",
                "summary": "List pets",
                "tags": ["pets"],
                "parameters": [
                    {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                    {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                ],
                "responses": {"200": {"$ref": "#/components/responses/Pets"}},
            },
            "post": {
                "operationId": "createPet",
                "security": [{"bearer": []}],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": f"{SCHEMAS}/Pet"}}},
                },
                "responses": {"201": {"description": "made"}},
            },
        },
        "/pets/{petId}": {
            "servers": [{"url": "https://other.example"}],
            "get": {
                "operationId": "showPet",
                "description": "One pet",
                "parameters": [
                    {"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "X-Id", "in": "header", "description": "id", "schema": {}},
                ],
                "responses": {
                    "200": {
                        "description": "ok",
                        "content": {"application/json": {"schema": {"$ref": f"{SCHEMAS}/Pet"}}},
                    }
                },
            },
            "put": {
                "operationId": "renamePet",
                "servers": [{"url": "https://third.example"}],
                "security": [{"oauth": ["pets:write"]}, {"basic": []}],
                "requestBody": {
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "properties": {"name": {"type": "string"}},
                                "required": ["name"],
                            }
                        }
                    }
                },
                "responses": {"2XX": {"description": "done"}},
            },
        },
    },
    "components": {
        "parameters": {"Trace": {"name": "trace", "in": "header", "schema": {"type": "string"}}},
        "responses": {
            "Pets": {
                "description": "pets",
                "content": {"application/json": {"schema": {"type": "array", "items": {}}}},
            }
        },
        "schemas": {
            "Pet": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "tag": {"$ref": f"{SCHEMAS}/Tag"}},
            },
            "Tag": {"type": "string"},
        },
        "securitySchemes": {
            "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
            "bearer": {"type": "http", "scheme": "bearer"},
            "basic": {"type": "http", "scheme": "basic"},
            "oauth": {
                "type": "oauth2",
                "flows": {"clientCredentials": {"tokenUrl": "https://pets.example/token"}},
            },
        },
    },
}


def places(value: Any, at: tuple = ()) -> list[tuple]:
    """The path (keys and indexes) of every value inside ``value``, itself excepted."""
    found = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(
        value, list) else ()  # fmt: skip
    for key, inner in items:
        found.append((*at, key))
        found.extend(places(inner, (*at, key)))
    return found


PLACES = places(VALID)
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-3, 300)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
    | st.sampled_from([f"{SCHEMAS}/Pet", "#/paths", "#/nowhere", "query", "path", "array", "2"])
)
JSON = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.text(max_size=3) | st.sampled_from(["$ref", "type", "properties", "name", "in"]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=8,
)
CHANGES = st.lists(st.tuples(st.sampled_from(PLACES), JSON), min_size=1, max_size=3)


def changed(changes: list[tuple[tuple, Any]]) -> dict[str, Any]:
    """``VALID`` with the value at each place replaced (a place gone by then is passed)."""
    document = copy.deepcopy(VALID)
    for place, value in changes:
        owner: Any = document
        for key in place[:-1]:
            try:
                owner = owner[key]
            except (KeyError, IndexError, TypeError):
                break
        else:
            last = place[-1]
            if isinstance(owner, dict) or (
                isinstance(owner, list) and isinstance(last, int) and last < len(owner)
            ):
                owner[last] = value
    return document


def check_skipped(lines: list[str]) -> None:
    for line in lines:
        assert ": #/" in line, line  # each names the part of the document that is wrong


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CHANGES)
@pytest.mark.one_database
def test_the_service_imports_skips_naming_where_or_refuses(changes):
    text = json.dumps(changed(changes))
    with tempfile.TemporaryDirectory() as out:
        try:
            document = openapi_parse(text, source="pets.json")
            report = openapi_write(document=document, source="pets.json", out_dir=out, prefix="p")
        except OpenAPIError as exc:
            refused: str | None = exc.message
        else:
            refused = None
        if refused is not None:
            assert refused.startswith("pets.json: ")
            return
        check_skipped([str(s) for s in report.skipped])
        assert report.written
        assert len(report.written) + len(report.skipped) <= 4


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CHANGES)
@pytest.mark.one_database
def test_the_command_imports_skips_naming_where_or_refuses(changes):
    with tempfile.TemporaryDirectory() as work:
        source = Path(work) / "pets.json"
        source.write_text(json.dumps(changed(changes)), encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        refused = ""
        try:
            call_command("importopenapi", str(source), out=Path(work) / "out", prefix="p",
                         stdout=out, stderr=err)  # fmt: skip
        except CommandError as exc:
            refused = str(exc)
        assert not refused or refused.startswith(f"{source}: ")
        assert "Traceback" not in err.getvalue() + out.getvalue()
        check_skipped([line[len("skipped ") :] for line in err.getvalue().splitlines()])


def test_the_issue_example_skips_three_operations_naming_where_and_imports_the_good_one(tmp_path):
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "http://x.test"}],
        "paths": {
            "/a": {"get": {"operationId": "good", "responses": {"200": {"description": "ok"}}}},
            "/b": {"post": {"operationId": "bad", "parameters": [
                {"name": "q", "in": "query", "schema": [1, 2]}]}},
            "/c": {"get": {"operationId": "bad2", "parameters": "notalist"}},
            "/d": {"get": {"operationId": "bad3", "responses": {"200": "x"}}},
            "/e": {"get": {"operationId": "bad4"}, "put": "notanoperation",
                   "parameters": [{"$ref": "#/components/parameters/P"}]},
            "/f": {"$ref": "#/info/title"},
        },
        "components": {"parameters": {"P": {"name": "p", "in": "body"}}},
    }  # fmt: skip

    generated = openapi_tools(document, prefix="t")

    assert [tool["name"] for tool in generated.tools] == ["good"]
    assert [str(s) for s in generated.skipped] == [
        "/f: #/info/title: expected an object, got a string",
        "POST /b (bad): #/paths/~1b/post/parameters/0/schema: expected an object, got an array",
        "GET /c (bad2): #/paths/~1c/get/parameters: expected an array, got a string",
        "GET /d (bad3): #/paths/~1d/get/responses/200: expected an object, got a string",
        "GET /e (bad4): #/components/parameters/P/in: expected one of path, query, header, "
        "cookie, got 'body'",
        "PUT /e: #/paths/~1e/put: expected an object, got a string",
    ]
    strict = tmp_path / "t.json"
    strict.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(
        OpenAPIError,
        match=r"asked for cannot be imported, nothing written: "
        r"GET /c \(bad2\): #/paths/~1c/get/parameters: expected an array",
    ):
        openapi_write(document=document, source="t.json", out_dir=tmp_path / "out",
                      prefix="t", operations=["good", "bad2"])  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_the_reader_names_what_was_expected_and_what_was_found():
    assert expect({"a": 1}, "#/x", dict) == {"a": 1}
    with pytest.raises(ShapeError, match=r"^#/x: expected a string, got a number$") as caught:
        expect(3.5, "#/x", str)
    assert (caught.value.pointer, caught.value.reason) == ("#/x", "expected a string, got a number")
    assert [kind(v) for v in (None, True, 1, [], {}, "")] == [
        "null", "a boolean", "a number", "an array", "an object", "a string"]  # fmt: skip
    assert child("#/paths", "/a/{b}~") == "#/paths/~1a~1{b}~0"


def test_the_admin_page_says_what_is_wrong_with_an_uploaded_document(importer):
    document = copy.deepcopy(VALID)
    document["components"]["securitySchemes"] = ["not", "an", "object"]

    page = read(importer, document=upload("pets.json", json.dumps(document).encode()))

    assert page.status_code == 200
    assert page.context["step"] == "source"
    assert ("pets.json: #/components/securitySchemes: expected an object, got an array; "
            "nothing imported") in page.content.decode()  # fmt: skip

    document = copy.deepcopy(VALID)
    document["paths"]["/pets"]["get"]["parameters"][0]["schema"] = [1, 2]
    page = read(importer, document=upload("pets.json", json.dumps(document).encode()))
    assert page.status_code == 200
    assert page.context["step"] == "choose"
    assert [str(s) for s in page.context["skipped"]] == [
        "GET /pets (listPets): #/paths/~1pets/get/parameters/0/schema: expected an object, "
        "got an array"
    ]
    done = importer.post(URL, {"import": "1", "operations": ["GET /pets", "POST /pets"]})
    assert done.status_code == 200
    assert done.context["step"] == "done"
    assert [tool.name for tool in done.context["report"].loaded] == ["create_pet"]
