"""Reading a document and expanding its references: a ``$ref`` "billion laughs" (a few
kilobytes whose schemas each refer to the next twice) stops at the bounds with a clear
error — on the command line and on the admin's import page — instead of growing
without bound; references nested too deep and expansion that takes too long too."""

from __future__ import annotations

import pytest
import yaml

from tools.openapi.document import OpenAPIError, ResolveBudget, resolve

pytestmark = pytest.mark.django_db


def laughs(levels: int = 40) -> dict:
    """Schema ``s0`` refers to ``s1`` twice, ``s1`` to ``s2`` twice...: 2**levels values."""
    schemas = {
        f"s{i}": {
            "type": "object",
            "properties": {
                "a": {"$ref": f"#/components/schemas/s{i + 1}"},
                "b": {"$ref": f"#/components/schemas/s{i + 1}"},
            },
        }
        for i in range(levels)
    }
    schemas[f"s{levels}"] = {"type": "string"}
    ok = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/s0"}}}}
    return {
        "openapi": "3.0.3",
        "servers": [{"url": "https://api.example.com"}],
        "paths": {"/laugh": {"get": {"operationId": "laugh", "responses": {"200": ok}}}},
        "components": {"schemas": schemas},
    }


def test_a_ref_billion_laughs_stops_at_the_bound_with_a_clear_error(cli, tmp_path):
    source = tmp_path / "laughs.yaml"
    source.write_text(yaml.safe_dump(laughs()), encoding="utf-8")
    assert source.stat().st_size < 8000
    result = cli("importopenapi", str(source), "--out", str(tmp_path / "out"), "--prefix", "x")
    assert result.code != 0
    assert "paths./laugh: expanding the document's $ref references produces more than" in (
        result.err
    )
    assert not (tmp_path / "out").exists()


def test_references_nested_too_deep_and_expansion_too_slow_are_refused():
    chain = {f"s{i}": {"$ref": f"#/components/schemas/s{i + 1}"} for i in range(100)}
    chain["s100"] = {"type": "string"}
    document = {"components": {"schemas": chain}}
    with pytest.raises(OpenAPIError, match="nest more than 64 deep"):
        resolve(document, {"$ref": "#/components/schemas/s0"}, [], where="x")
    ticks = iter(range(0, 10**6, 5))
    slow = ResolveBudget(seconds=20, clock=lambda: float(next(ticks)))
    with pytest.raises(OpenAPIError, match="took more than 20s"):
        resolve(laughs(16), laughs(16)["paths"], [], where="paths", budget=slow)
    problems: list[str] = []
    fine = resolve(laughs(3), {"$ref": "#/components/schemas/s0"}, problems, where="x")
    assert fine["properties"]["b"]["properties"]["a"]["properties"]["b"] == {"type": "string"}
    assert problems == []
