"""workflows.graph: merged edges, deterministic order, levels, cycles, large graphs."""

from __future__ import annotations

import pytest

from workflows.graph import (
    BadReference,
    EdgeInfo,
    FlowGraph,
    GraphCycleError,
    GraphError,
    QuotedLiteral,
    build_graph,
    find_cycles,
    parse_leniently,
    step_references,
)
from workflows.references import InputRef, ItemRef, Literal, ReferenceError_, StepRef
from workflows.schema import WorkflowSpec


def tool(step_id: str, **mapping) -> dict:
    return {"id": step_id, "kind": "tool", "tool": "fetch", "input_mapping": mapping}


def flow(steps: list[dict], edges: list[dict] | None = None) -> WorkflowSpec:
    return WorkflowSpec.model_validate({"name": "g", "steps": steps, "edges": edges or []})


def diamond() -> WorkflowSpec:
    return flow(
        [
            tool("start"),
            tool("right", a="start.x"),
            tool("left", a="start.y"),
            tool("join", l="left.v", r="right.v"),
        ]
    )


def test_order_is_kahn_with_sorted_ties():
    graph = build_graph(diamond())
    assert graph.step_ids == ("start", "right", "left", "join")
    assert graph.order == ("start", "left", "right", "join")


def test_order_does_not_depend_on_file_order():
    steps = [tool("c"), tool("b"), tool("a"), tool("z", x="c.v")]
    shuffled = [steps[3], steps[1], steps[0], steps[2]]
    assert (
        build_graph(flow(steps)).order
        == build_graph(flow(shuffled)).order
        == (
            "a",
            "b",
            "c",
            "z",
        )
    )


def test_levels_group_by_longest_path_depth():
    spec = flow([*diamond().to_data()["steps"], tool("late", a="join.v", b="start.v")])
    graph = build_graph(spec)
    assert graph.levels == (("start",), ("left", "right"), ("join",), ("late",))


def test_parents_children_and_edge_views_are_sorted():
    graph = build_graph(diamond())
    assert graph.parents["join"] == ("left", "right")
    assert graph.children["start"] == ("left", "right")
    assert graph.parents["start"] == ()
    assert [e.source for e in graph.incoming("join")] == ["left", "right"]
    assert [e.target for e in graph.outgoing("start")] == ["left", "right"]
    assert graph.edges == tuple(sorted(graph.edges, key=lambda e: (e.source, e.target)))


def test_inferred_edges_carry_the_references():
    graph = build_graph(flow([tool("geo"), tool("w", lat="geo.lat", lon="geo.lon", n=3)]))
    assert graph.edges == (EdgeInfo("geo", "w", None, True, ("geo.lat", "geo.lon")),)


def test_explicit_edge_absorbs_inferred_duplicate():
    spec = flow([tool("geo"), tool("w", lat="geo.lat")], [{"from": "geo", "to": "w"}])
    assert build_graph(spec).edges == (EdgeInfo("geo", "w", None, False, ("geo.lat",)),)


def test_conditional_edge_absorbs_inferred_edge_and_keeps_its_when():
    decision = {"id": "d", "kind": "decision", "branches": ["yes", "no"]}
    spec = flow([decision, tool("a", choice="d.branch")], [{"from": "d", "to": "a", "when": "yes"}])
    assert build_graph(spec).edges == (EdgeInfo("d", "a", "yes", False, ("d.branch",)),)


def test_repeated_explicit_edges_collapse():
    spec = flow([tool("a"), tool("b")], [{"from": "a", "to": "b"}, {"from": "a", "to": "b"}])
    assert len(build_graph(spec).edges) == 1


def test_references_inside_lists_and_dicts_infer_edges():
    spec = flow([tool("a"), tool("b"), tool("c", body={"x": ["a.v", {"y": "b.w"}]})])
    assert build_graph(spec).parents["c"] == ("a", "b")


def test_foreach_item_mapping_infers_edges():
    foreach = {
        "id": "each",
        "kind": "foreach",
        "tool": "fetch",
        "input_mapping": {"items": "src.list"},
        "item_mapping": {"url": "$item.url", "auth": "login.token"},
    }
    graph = build_graph(flow([tool("src"), tool("login"), foreach]))
    assert graph.parents["each"] == ("login", "src")


def test_ancestors_are_transitive_and_cached():
    graph = build_graph(diamond())
    assert graph.ancestors("join") == {"start", "left", "right"}
    assert graph.ancestors("start") == frozenset()
    assert graph.ancestors("join") is graph.ancestors("join")


def test_cycle_raises_with_the_cycle_path():
    spec = flow([tool("a", x="c.v"), tool("b", x="a.v"), tool("c", x="b.v")])
    with pytest.raises(GraphCycleError) as caught:
        build_graph(spec)
    assert caught.value.cycle == ["a", "b", "c", "a"]
    assert caught.value.code == "graph_cycle"
    assert "a → b → c → a" in str(caught.value)


def test_step_reading_itself_is_a_cycle():
    with pytest.raises(GraphCycleError) as caught:
        build_graph(flow([tool("a", x="a.v")]))
    assert caught.value.cycle == ["a", "a"]


@pytest.mark.parametrize(
    ("steps", "edges"),
    [
        ([tool("a"), tool("a")], []),
        ([tool("a")], [{"from": "a", "to": "ghost"}]),
    ],
    ids=["duplicate-id", "unknown-endpoint"],
)
def test_structural_problems_raise_graph_error(steps, edges):
    with pytest.raises(GraphError) as caught:
        build_graph(flow(steps, edges))
    assert isinstance(caught.value, ValueError)


def test_find_cycles_reports_one_cycle_per_component():
    edges = [
        EdgeInfo("a", "b"),
        EdgeInfo("b", "a"),
        EdgeInfo("b", "c"),
        EdgeInfo("c", "a"),  # same component as a, b
        EdgeInfo("x", "y"),
        EdgeInfo("y", "x"),
        EdgeInfo("q", "a"),  # not on a cycle
    ]
    cycles = find_cycles(["a", "b", "c", "q", "x", "y"], edges)
    assert [[e.source for e in cycle] for cycle in cycles] == [["a", "b"], ["x", "y"]]


def test_step_references_parses_each_mapping():
    foreach = {
        "id": "each",
        "kind": "foreach",
        "tool": "fetch",
        "input_mapping": {"items": "$input.urls", "mode": "fast"},
        "item_mapping": {"url": "$item.url", "n": "$index"},
    }
    spec = flow([foreach])
    refs = step_references(spec.steps[0], ["each"])
    assert refs == {
        "input_mapping": {"items": InputRef("urls"), "mode": Literal("fast")},
        "item_mapping": {"url": ItemRef(("url",)), "n": ItemRef(index=True)},
    }
    assert step_references(flow([tool("a", x="b.c")]).steps[0], ["a", "b"]) == {
        "input_mapping": {"x": StepRef("b", ("c",))}
    }


def test_step_references_raises_on_malformed_reference():
    with pytest.raises(ReferenceError_):
        step_references(flow([tool("a", x="$nope")]).steps[0], ["a"])


def test_parse_leniently_keeps_bad_references_and_quoted_literals():
    parsed = parse_leniently({"a": ["$nope", {"$literal": "geo.lat"}], "b": "geo.lat"}, {"geo"})
    assert isinstance(parsed["a"][0], BadReference)
    assert parsed["a"][1] == QuotedLiteral("geo.lat")
    assert isinstance(parsed["a"][1], Literal)
    assert parsed["b"] == StepRef("geo", ("lat",))


def test_malformed_references_infer_nothing():
    graph = build_graph(flow([tool("a"), tool("b", x="$bad", y="a.v")]))
    assert graph.parents["b"] == ("a",)


def chain(n: int) -> WorkflowSpec:
    steps = [tool("s00000", url="$input.url")]
    for i in range(1, n):
        back = f"s{max(i - 2, 0):05d}"
        steps.append(tool(f"s{i:05d}", prev=f"s{i - 1:05d}.body", older=f"{back}.status"))
    return WorkflowSpec.model_validate({"name": "chain", "inputs": {"url": {}}, "steps": steps})


def fan_out(n: int) -> WorkflowSpec:
    steps = [tool("root", url="$input.url"), tool("aux", url="root.next")]
    steps += [tool(f"leaf{i:05d}", a="root.body", b="aux.body") for i in range(n - 2)]
    return WorkflowSpec.model_validate({"name": "fan", "inputs": {"url": {}}, "steps": steps})


def test_five_thousand_step_chain():
    graph = build_graph(chain(5000))
    assert graph.order == tuple(f"s{i:05d}" for i in range(5000))
    assert len(graph.levels) == 5000
    assert len(graph.edges) == 2 * 5000 - 3


def test_five_thousand_step_fan_out():
    graph = build_graph(fan_out(5000))
    assert graph.order[:2] == ("root", "aux")
    assert graph.levels[0] == ("root",)
    assert graph.levels[1] == ("aux",)
    assert len(graph.levels[2]) == 4998
    assert len(graph.ancestors("leaf04997")) == 2


def test_graph_from_edges_rejects_cycles_directly():
    with pytest.raises(GraphCycleError):
        FlowGraph.from_edges(["a", "b"], [EdgeInfo("a", "b"), EdgeInfo("b", "a")])
