"""workflows.validation.structure: the graph's shape — duplicate ids, edges to unknown
steps, self loops, duplicate edges, reads of a step that runs later, and cycles located
at the edge or reference that closes them."""

from __future__ import annotations

from tools.registry import ToolRegistry
from workflows.validator import validate_workflow


def transform(step_id: str, **mapping) -> dict:
    return {
        "id": step_id,
        "kind": "transform",
        "expression": "@",
        "input_mapping": mapping or {"x": 1},
    }


def found(steps: list[dict], edges: list[dict] | None = None) -> dict[tuple[str, str], str]:
    data = {"name": "s", "steps": steps, "edges": edges or []}
    report = validate_workflow(data, registry=ToolRegistry([]))
    return {(i.code, i.path): i.message for i in report.errors}


def test_a_sound_graph_has_no_issue():
    assert found([transform("a"), transform("b", v="a.x")], [{"from": "a", "to": "b"}]) == {}


def test_a_step_id_given_twice_is_located_at_the_second():
    assert ("duplicate_step_id", "steps[1].id") in found([transform("a"), transform("a")])


def test_edges_to_unknown_steps_self_loops_and_duplicates():
    issues = found(
        [transform("a"), transform("b")],
        [
            {"from": "a", "to": "ghost"},
            {"from": "b", "to": "b"},
            {"from": "a", "to": "b"},
            {"from": "a", "to": "b"},
        ],
    )
    assert ("edge_unknown_step", "edges[0].to") in issues
    assert ("self_loop", "edges[1]") in issues
    assert ("duplicate_edge", "edges[3]") in issues


def test_a_step_reading_its_own_output_is_told_to_write_a_literal():
    issues = found([transform("a", v="a.x")])
    assert '{"$literal": "a.x"}' in issues[("self_loop", "steps[0].input_mapping.v")]


def test_a_read_of_a_step_that_runs_after_is_not_ancestor():
    issues = found([transform("a", v="b.x"), transform("b")], [{"from": "a", "to": "b"}])
    assert issues[("not_ancestor", "steps[0].input_mapping.v")] == (
        "step `a` reads `b.x`, but `b` runs after `a` (the edges lead from `a` to `b`); "
        "drop the edge that makes `b` wait for `a`, or read a step that runs before `a`"
    )


def test_a_cycle_of_explicit_edges_is_located_at_its_closing_edge():
    issues = found(
        [transform("a"), transform("b"), transform("c")],
        [{"from": "a", "to": "b"}, {"from": "b", "to": "c"}, {"from": "c", "to": "a"}],
    )
    cycles = {path: message for (code, path), message in issues.items() if code == "cycle"}
    assert len(cycles) == 1
    assert "steps form a cycle: `" in next(iter(cycles.values()))


def test_a_decision_looping_back_is_told_to_use_a_retry_policy():
    decision = {
        "id": "ok",
        "kind": "decision",
        "branches": ["yes", "retry"],
        "conditions": {"yes": "v == 1"},
        "default": "retry",
        "input_mapping": {"v": "fetch.x"},
    }
    issues = found(
        [transform("fetch"), decision, transform("done")],
        [
            {"from": "ok", "to": "done", "when": "yes"},
            {"from": "ok", "to": "fetch", "when": "retry"},
        ],
    )
    message = issues[("cycle", "edges[1]")]
    assert message.startswith("edge `ok` → `fetch` (`when: retry`) loops back")
    assert "give `fetch` a `retry` policy" in message
