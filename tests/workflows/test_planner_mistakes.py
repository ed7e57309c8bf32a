"""The planner-mistakes corpus: well-formed, every mistake caught at its location, with the fix."""

from __future__ import annotations

import pytest

from tests.workflows.planner_mistakes import (
    CORPUS,
    READ_CODES,
    Expected,
    _outcome,
    corpus_files,
    example_registry,
    format_gaps,
    format_table,
    known_codes,
    load_case,
    plan_tool_names,
    rates,
    read_plan,
    run_corpus,
    tally,
)

FILES = corpus_files()


@pytest.fixture(scope="module")
def results():
    found = run_corpus()
    print("\n" + format_table(found) + "\n" + format_gaps(found))
    return found


def test_corpus_size():
    cases = [load_case(path) for path in FILES]
    assert sum(not c.valid for c in cases) >= 150
    assert sum(c.valid for c in cases) >= 15
    sidecars = {p.name for p in CORPUS.rglob("*.expect.yaml")}
    orphans = sidecars - {p.stem + ".expect.yaml" for p in FILES if p.suffix == ".json"}
    assert not orphans, f"sidecars without a JSON plan: {sorted(orphans)}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(CORPUS).as_posix())
def test_corpus_file_is_well_formed(path):
    """Parses (unless unreadable is the mistake), states its outcome, names real tools."""
    case = load_case(path)
    codes = {code for expected in case.expected for code in expected.codes}
    for expected in case.expected:
        unknown = set(expected.codes) - known_codes()
        assert not unknown or expected.new, f"{unknown} is no code today: mark it `new: true`"
    data, read_issue = read_plan(path)
    if read_issue is not None:
        assert codes == {READ_CODES[path.suffix]}, read_issue.message
        return
    assert isinstance(data, dict), "a plan is a mapping"
    assert data.get("steps"), "a plan has steps"
    registry = example_registry()
    missing = sorted({n for n in plan_tool_names(data) if registry.get(n) is None})
    if not codes & {"unknown_tool", "tool_not_allowed"}:
        assert not missing, f"names tools that do not exist: {missing}"


def test_valid_plans_draw_no_issue(results):
    """Every correct plan validates with no error and no warning."""
    noisy = {
        r.case.name: [f"{i.path} [{i.code}] {i.message}" for i in r.false_positives]
        for r in results
        if r.false_positives
    }
    assert sum(r.case.valid for r in results) >= 15
    assert not noisy


def test_harness_scores_a_caught_mistake(results):
    """The scoring itself: a mistake today's validator reports, with its fix, counts."""
    by_name = {r.case.name: r for r in results}
    known = by_name["missing_longitude.yaml"].outcomes[0]
    assert (known.caught, known.fix_given, known.reason) == (True, True, "")
    result = by_name["ref_forecast_temperature.yaml"]
    unreported = Expected(("no_such_code",), "steps[0]", ("x",))
    assert _outcome(unreported, result.issues).reason == "not reported"
    elsewhere = Expected(result.outcomes[0].expected.codes, "steps[9]", ("x",))
    assert _outcome(elsewhere, result.issues).reason.startswith("elsewhere: ")


def test_every_mistake_is_caught_at_its_location(results):
    missed = [
        f"{r.case.name}: {o.expected.label} at {o.expected.path}: {o.reason}"
        for r in results
        for o in r.outcomes
        if not o.caught
    ]
    assert not missed, "\n".join(missed)


def test_messages_give_the_fix(results):
    caught, fixed = rates(tally(results)["TOTAL"])
    print(f"\ncaught {caught:.0%} of the mistakes; {fixed:.0%} of their messages give the fix")
    assert caught == 1.0
    assert fixed >= 0.9, f"{fixed:.0%} of the caught mistakes' messages give the fix"
