"""The pure readiness core: ``next_actions(graph, states)`` on graphs from ``build_graph``."""

from __future__ import annotations

import pytest

from runs.engine.readiness import StepState, next_actions
from runs.state import StepStatus
from workflows.graph import build_graph
from workflows.schema import WorkflowSpec

PENDING, QUEUED, RUNNING = StepStatus.PENDING, StepStatus.QUEUED, StepStatus.RUNNING
SUCCEEDED, FAILED, SKIPPED = StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.SKIPPED


def tool(step_id: str, **mapping) -> dict:
    return {"id": step_id, "kind": "tool", "tool": "t", "input_mapping": mapping}


def decision(step_id: str, *branches: str, **mapping) -> dict:
    return {
        "id": step_id,
        "kind": "decision",
        "branches": list(branches),
        "default": branches[0],
        "input_mapping": mapping,
    }


def graph(*steps: dict, edges: tuple = ()):
    spec = WorkflowSpec.model_validate(
        {"name": "g", "steps": list(steps), "edges": [dict(e) for e in edges]}
    )
    return build_graph(spec)


def states(g, **given) -> dict[str, StepState]:
    """Every step pending, except the ones given (a status or a StepState)."""
    found = {}
    for step_id in g.step_ids:
        value = given.get(step_id, PENDING)
        found[step_id] = value if isinstance(value, StepState) else StepState(value)
    return found


def test_roots_start_together_in_sorted_order():
    g = graph(tool("c"), tool("a"), tool("b"), tool("d", x="a.value"))

    actions = next_actions(g, states(g))

    assert actions.start == ("a", "b", "c")
    assert actions.skip == ()
    assert actions.in_flight == ()
    assert actions.fatal == ()
    assert actions.done is False


def test_a_child_starts_once_its_parent_succeeded():
    g = graph(tool("a"), tool("b", x="a.value"))

    assert next_actions(g, states(g, a=RUNNING)).start == ()
    assert next_actions(g, states(g, a=SUCCEEDED)).start == ("b",)


def test_a_join_waits_for_every_parent():
    g = graph(tool("a"), tool("b", x="a.v"), tool("c", x="a.v"), tool("d", x="b.v", y="c.v"))

    waiting = next_actions(g, states(g, a=SUCCEEDED, b=SUCCEEDED, c=RUNNING))
    ready = next_actions(g, states(g, a=SUCCEEDED, b=SUCCEEDED, c=SUCCEEDED))

    assert waiting.start == ()
    assert waiting.in_flight == ("c",)
    assert waiting.done is False
    assert ready.start == ("d",)


@pytest.mark.parametrize("status", [QUEUED, RUNNING])
def test_steps_in_flight_are_not_started_again(status):
    g = graph(tool("a"), tool("b"))

    actions = next_actions(g, states(g, a=status))

    assert actions.start == ("b",)
    assert actions.in_flight == ("a",)
    assert actions.done is False


def branching_graph():
    return graph(
        decision("route", "yes", "no"),
        tool("on_yes"),
        tool("on_no"),
        tool("after_no", x="on_no.v"),
        tool("join", a="on_yes.v", b="on_no.v"),
        edges=(
            {"from": "route", "to": "on_yes", "when": "yes"},
            {"from": "route", "to": "on_no", "when": "no"},
        ),
    )


def test_a_branch_not_taken_is_skipped_and_the_skip_cascades():
    g = branching_graph()

    actions = next_actions(g, states(g, route=StepState(SUCCEEDED, branch="yes")))

    assert actions.start == ("on_yes",)
    assert actions.skip == ("on_no", "after_no")  # in Kahn order, cascaded in one call
    assert "join" not in actions.skip  # it still waits for on_yes


def test_a_join_runs_when_at_least_one_incoming_edge_is_active():
    g = branching_graph()

    actions = next_actions(
        g,
        states(
            g,
            route=StepState(SUCCEEDED, branch="yes"),
            on_yes=SUCCEEDED,
            on_no=SKIPPED,
            after_no=SKIPPED,
        ),
    )

    assert actions.start == ("join",)
    assert actions.skip == ()


def test_a_step_whose_parents_were_all_skipped_is_skipped():
    g = graph(tool("a"), tool("b", x="a.v"), tool("c", x="b.v"))

    actions = next_actions(g, states(g, a=SKIPPED))

    assert actions.skip == ("b", "c")
    assert actions.start == ()
    assert actions.done is True


def test_a_fatal_failure_stops_new_starts_and_finishes_once_nothing_is_in_flight():
    g = graph(tool("a"), tool("b", x="a.v"), tool("c"), tool("slow"))

    while_running = next_actions(g, states(g, a=FAILED, slow=RUNNING))
    after = next_actions(g, states(g, a=FAILED, slow=SUCCEEDED, b=SKIPPED))

    assert while_running.fatal == ("a",)
    assert while_running.start == ()  # `c` is a root, but nothing new starts
    assert while_running.skip == ("b",)
    assert while_running.done is False
    assert after.done is True
    assert after.succeeded is False


def test_continue_on_error_keeps_the_edges_active():
    g = graph(tool("a"), tool("b", x="a.error"), tool("c"))

    actions = next_actions(g, states(g, a=StepState(FAILED, continued=True)))

    assert actions.fatal == ()
    assert actions.start == ("b", "c")


def test_a_continued_decision_failure_takes_no_branch():
    g = branching_graph()

    actions = next_actions(g, states(g, route=StepState(FAILED, continued=True)))

    assert actions.fatal == ()
    assert set(actions.skip) == {"on_yes", "on_no", "after_no", "join"}
    assert actions.done is True
    assert actions.succeeded is True


def test_all_succeeded_is_done_and_succeeded():
    g = graph(tool("a"), tool("b", x="a.v"))

    actions = next_actions(g, states(g, a=SUCCEEDED, b=SUCCEEDED))

    assert actions.start == ()
    assert actions.done is True
    assert actions.succeeded is True


def test_the_same_states_give_the_same_answer_whatever_the_file_order():
    steps = [tool("m"), tool("z"), tool("a"), tool("k", x="z.v"), tool("b", x="a.v")]
    forward, backward = graph(*steps), graph(*reversed(steps))

    first = next_actions(forward, states(forward))
    again = next_actions(forward, states(forward))
    reversed_file = next_actions(backward, states(backward))
    later = next_actions(forward, states(forward, a=SUCCEEDED, m=SUCCEEDED, z=SUCCEEDED))

    assert first == again == reversed_file
    assert first.start == ("a", "m", "z")
    assert later.start == ("b", "k")


def test_the_input_states_are_not_modified():
    g = branching_graph()
    given = states(g, route=StepState(SUCCEEDED, branch="no"))
    before = dict(given)

    next_actions(g, given)

    assert given == before
