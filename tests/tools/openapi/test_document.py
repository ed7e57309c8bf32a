"""Reading a document and expanding its references: a ``$ref`` "billion laughs" (a few
kilobytes whose schemas each refer to the next twice) stops at the bounds with a clear
error — on the command line and on the admin's import page — instead of growing
without bound; references nested too deep and expansion that takes too long too."""

from __future__ import annotations

import json

import pytest
import yaml

from tools.openapi.document import (
    OpenAPIError,
    ResolveBudget,
    ResolveLimit,
    Resolver,
    openapi_parse,
    resolve,
)

pytestmark = pytest.mark.django_db


def laughs(levels: int = 40) -> dict:
    """Schema ``s0`` refers to ``s1`` twice, ``s1`` to ``s2`` twice...: 2**levels values,
    in a request body (which a tool file holds in full)."""
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
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/s0"}}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": {"/laugh": {"post": {"operationId": "laugh", "requestBody": body}}},
        "components": {"schemas": schemas},
    }


def test_a_ref_billion_laughs_stops_at_the_bound_with_a_clear_error(cli, tmp_path):
    source = tmp_path / "laughs.yaml"
    source.write_text(yaml.safe_dump(laughs()), encoding="utf-8")
    assert source.stat().st_size < 8000
    result = cli("importopenapi", str(source), "--out", str(tmp_path / "out"), "--prefix", "x")
    assert result.code != 0
    assert result.err.startswith(
        f"CommandError: {source}: no operation of the selection can be written: POST /laugh "
        "(laugh): expanding the document's $ref references produces more than 500000 values "
        "(references that multiply) at #/components/schemas/s"
    )
    assert result.err.endswith(", reached from #/paths/~1laugh/post/requestBody\n")
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


def naive(doc: dict, value, problems: list, seen: tuple = ()):
    """Every reference expanded afresh, cut where it repeats: what ``Resolver`` shares."""
    if isinstance(value, list):
        return [naive(doc, v, problems, seen) for v in value]
    if not isinstance(value, dict):
        return value
    ref = value.get("$ref")
    if isinstance(ref, str):
        if ref in seen:
            problems.append(f"x: recursive reference {ref} is cut (any value)")
            return {}
        name = ref.rsplit("/", 1)[1]
        return naive(doc, doc["components"]["schemas"][name], problems, (*seen, ref))
    return {k: naive(doc, v, problems, seen) for k, v in value.items()}


@pytest.mark.parametrize("seed", range(6))
def test_sharing_expansions_gives_what_expanding_every_reference_afresh_gives(seed):
    import random

    rng = random.Random(seed)
    names = [f"s{i}" for i in range(7)]
    schemas = {
        name: {
            "type": "object",
            "properties": {
                f"p{j}": {"$ref": f"#/components/schemas/{rng.choice(names)}"}
                for j in range(rng.randint(0, 2))
            },
        }
        for name in names
    }
    document = {"components": {"schemas": schemas}}
    value = [{"$ref": f"#/components/schemas/{name}"} for name in names * 2]
    resolver = Resolver(document)
    problems: list[str] = []

    shared = resolver.resolve(value, problems, where="x")

    expected_problems: list[str] = []
    assert shared == naive(document, value, expected_problems)
    assert problems == expected_problems
    again: list[str] = []
    assert resolver.resolve(value, again, where="x") == shared  # from the memo
    assert again == expected_problems


def test_a_circular_reference_is_cut_and_listed_where_it_repeats():
    schemas = {
        "node": {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/node"},
                                                  "value": {"type": "string"}}},
    }  # fmt: skip
    document = {"components": {"schemas": schemas}}
    problems: list[str] = []

    node = resolve(document, {"$ref": "#/components/schemas/node"}, problems, where="paths./n")

    assert node == {"type": "object", "properties": {"next": {}, "value": {"type": "string"}}}
    assert problems == [
        "paths./n: recursive reference #/components/schemas/node is cut (any value)"
    ]


def test_a_billion_laughs_is_refused_after_a_few_expansions_not_billions():
    budget = ResolveBudget()
    resolver = Resolver(laughs(40), budget)

    with pytest.raises(OpenAPIError, match="produces more than 500000 values"):
        resolver.resolve({"$ref": "#/components/schemas/s0"}, [], where="paths./laugh")

    # Each schema was expanded once and then counted as the values it stands for.
    assert budget.nodes_left < 0
    assert 0 < len(resolver._memo) <= 40


def test_a_billion_laughs_used_by_many_operations_costs_its_work_once():
    budget = ResolveBudget()
    resolver = Resolver(laughs(40), budget)
    refusals = []

    for _ in range(1000):
        with pytest.raises(ResolveLimit) as refused, budget.operation():
            resolver.resolve({"$ref": "#/components/schemas/s0"}, [], where="paths./laugh")
        refusals.append(refused.value)

    assert {exc.whole_import for exc in refusals} == {False}  # each operation's own bound
    assert budget.nodes_left == budget.nodes  # nothing of them is written: given back
    # The work is not given back, and each operation did little of it: the first
    # expanded each schema once; every later one walks down the twenty-odd schemas
    # whose expansion passed the bound (not kept) to the parts that were kept, and is
    # refused there. So the values produced for all of them stay within the import's
    # bound: a thousand operations cost a fifth of it, not a thousand times it.
    assert budget.nodes - budget.distinct_left < 1000 * 200 < budget.nodes
    assert 0 < len(resolver._memo) <= 40


def test_the_bounds_of_the_whole_import_stop_it_and_are_not_given_back():
    schemas = {"big": {"type": "object", "properties": {f"p{i}": {"type": "string"}
                                                         for i in range(20)}}}  # fmt: skip
    document = {"components": {"schemas": schemas}}
    budget = ResolveBudget(nodes=100)
    resolver = Resolver(document, budget)
    with budget.operation():
        resolver.resolve({"$ref": "#/components/schemas/big"}, [], where="a")
    with budget.operation():
        resolver.resolve({"$ref": "#/components/schemas/big"}, [], where="b")

    with pytest.raises(ResolveLimit, match="for the operations together produces more than 100"
                       ) as refused, budget.operation():  # fmt: skip
        resolver.resolve({"$ref": "#/components/schemas/big"}, [], where="c")

    assert refused.value.whole_import
    assert refused.value.ref == "#/components/schemas/big"
    assert budget.nodes_left < 0


def test_json_is_read_as_yaml_would_read_it():
    document = laughs(3)
    as_json = openapi_parse(json.dumps(document, indent=2), source="laughs.json")
    as_yaml = openapi_parse(yaml.safe_dump(document), source="laughs.yaml")
    assert as_json == as_yaml == document
    flow = openapi_parse("{openapi: 3.1.0, info: {}, paths: {}}", source="flow.yaml")  # YAML
    assert flow == {"openapi": "3.1.0", "info": {}, "paths": {}}
    with pytest.raises(OpenAPIError, match="neither YAML nor JSON"):
        openapi_parse('{"openapi": "3.1.0", "paths": {', source="cut.json")
