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


# --- the incremental core gives the answers of a full pass ---------------------------


def full_pass(g, given: dict[str, StepState]):
    """The former O(N)-per-call algorithm, kept here as the reference."""
    from runs.engine.readiness import _runs
    from runs.state import STEP_IN_FLIGHT, STEP_TERMINAL

    current = dict(given)
    fatal = tuple(s for s in g.order if current[s].status == FAILED and not current[s].continued)
    in_flight = tuple(s for s in g.order if current[s].status in STEP_IN_FLIGHT)
    start, skip = [], []
    for sid in g.order:
        if current[sid].status != PENDING:
            continue
        incoming = g.incoming(sid)
        if any(current[e.source].status not in STEP_TERMINAL for e in incoming):
            continue
        if incoming and not _runs(g, incoming, current):
            current[sid] = StepState(SKIPPED)
            skip.append(sid)
        elif not fatal:
            start.append(sid)
    return tuple(start), tuple(skip), in_flight, fatal, not in_flight and not start


def random_flow(rand) -> dict:
    steps, edges = [], []
    count = rand.randint(2, 14)
    for i in range(count):
        sid = f"s{i:02d}"
        earlier = [f"s{j:02d}" for j in range(i)]
        reads = rand.sample(earlier, min(len(earlier), rand.randint(0, 3)))
        mapping = {f"p{k}": f"{r}.v" for k, r in enumerate(reads)}
        if rand.random() < 0.3:
            steps.append(decision(sid, "a", "b", **mapping))
        else:
            steps.append(tool(sid, **mapping))
        if earlier and rand.random() < 0.3:
            edges.append({"from": rand.choice(earlier), "to": sid})
    deciders = {s["id"] for s in steps if s["kind"] == "decision"}
    for edge in edges:
        if edge["from"] in deciders:
            edge["when"] = rand.choice(["a", "b"])
    return {"steps": steps, "edges": edges}


def outcome(rand, step_id: str, g) -> StepState:
    roll = rand.random()
    if roll < 0.15:
        return StepState(FAILED)
    if roll < 0.25:
        return StepState(FAILED, continued=True)
    return StepState(SUCCEEDED, branch=rand.choice(["a", "b"]))


@pytest.mark.parametrize("seed", range(60))
def test_a_run_followed_step_by_step_matches_a_full_pass_every_turn(seed):
    import random

    from runs.engine.readiness import Readiness, ReadyPlan

    rand = random.Random(seed)
    flow = random_flow(rand)
    try:
        g = graph(*flow["steps"], edges=tuple(flow["edges"]))
    except Exception:  # a random edge can duplicate an inferred one with another label
        pytest.skip("not a valid graph")
    given = states(g)
    tracker = Readiness(ReadyPlan.of(g), given)
    for _ in range(100):
        actions = tracker.next()
        expected = full_pass(g, given)
        assert (actions.start, actions.skip, actions.in_flight, actions.fatal, actions.done) == (
            expected
        )
        for sid in actions.skip:
            given[sid] = StepState(SKIPPED)
        for sid in actions.start:
            given[sid] = StepState(RUNNING)
            tracker.settle(sid, given[sid])
        running = sorted(s for s, st in given.items() if st.status == RUNNING)
        if not running:
            break
        finished = rand.choice(running)
        given[finished] = outcome(rand, finished, g)
        tracker.settle(finished, given[finished])
    assert tracker.next().done


def test_ready_children_reads_only_the_children_and_their_parents():
    from runs.engine.readiness import ReadyPlan, children_parents, ready_children

    g = graph(
        decision("d", "yes", "no"),
        tool("y", x="d.v"),
        tool("n", x="d.v"),
        tool("after", a="y.v", b="other.v"),
        tool("other"),
        edges=({"from": "d", "to": "y", "when": "yes"}, {"from": "d", "to": "n", "when": "no"}),
    )
    plan = ReadyPlan.of(g)

    assert children_parents(plan, "d") == {"y", "n", "d"}
    chose = {"d": StepState(SUCCEEDED, branch="yes"), "y": StepState(), "n": StepState()}
    assert ready_children(plan, "d", chose) == type(ready_children(plan, "d", chose))(
        ("y",), ("n",)
    )
    assert ready_children(plan, "d", chose, blocked=True).start == ()
    waiting = {"y": StepState(SUCCEEDED), "other": StepState(RUNNING), "after": StepState()}
    assert ready_children(plan, "y", waiting).start == ()


def test_a_finished_step_cannot_go_back():
    from runs.engine.readiness import Readiness, ReadyPlan

    g = graph(tool("a"))
    tracker = Readiness(ReadyPlan.of(g), states(g, a=SUCCEEDED))
    with pytest.raises(ValueError, match="cannot go back"):
        tracker.settle("a", StepState(PENDING))
    assert tracker.state("a").status == SUCCEEDED
