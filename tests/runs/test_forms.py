"""runs.forms: the restart form offers the trigger and each step of the run, in order,
and the versions to run, and refuses a step or a version it does not offer."""

from __future__ import annotations

from runs.forms import FROM_TRIGGER, RestartForm

VERSIONS = {"versions": [(1, "v1 (the run's own, active)")], "own": 1}


def test_the_choices_are_the_trigger_then_each_step_in_order():
    form = RestartForm(steps=("fetch", "report"), **VERSIONS)
    assert [value for value, _ in form.fields["from_step"].choices] == [
        FROM_TRIGGER,
        "fetch",
        "report",
    ]


def test_a_step_of_the_run_is_chosen_and_the_trigger_means_none():
    chosen = RestartForm({"from_step": "report"}, steps=("fetch", "report"), **VERSIONS)
    assert chosen.is_valid()
    assert chosen.step() == "report"
    assert not chosen.cleaned_data["confirm_non_idempotent"]
    trigger = RestartForm(
        {"from_step": FROM_TRIGGER, "confirm_non_idempotent": "on"}, steps=("fetch",), **VERSIONS
    )
    assert trigger.is_valid()
    assert trigger.step() is None
    assert trigger.cleaned_data["confirm_non_idempotent"]


def test_a_step_the_run_does_not_have_is_refused():
    form = RestartForm({"from_step": "ghost"}, steps=("fetch",), **VERSIONS)
    assert not form.is_valid()
    assert "from_step" in form.errors


def test_the_versions_offered_are_chosen_by_number_and_none_means_the_runs_own():
    versions = [(1, "v1 (the run's own, archived)"), (3, "v3 (active)")]
    form = RestartForm(steps=("fetch",), versions=versions, own=1)
    assert form.fields["flow_version"].choices == versions
    assert form.fields["flow_version"].initial == 1

    onto = RestartForm({"from_step": "fetch", "flow_version": "3"}, steps=("fetch",),
                       versions=versions, own=1)  # fmt: skip
    assert onto.is_valid(), onto.errors
    assert onto.version() == 3
    own = RestartForm({"from_step": "fetch"}, steps=("fetch",), versions=versions, own=1)
    assert own.is_valid()
    assert own.version() is None
    other = RestartForm({"flow_version": "2"}, steps=("fetch",), versions=versions, own=1)
    assert not other.is_valid()
    assert "flow_version" in other.errors
