"""runs.forms: the restart form offers the trigger and each step of the run, in order,
and refuses a step the run does not have."""

from __future__ import annotations

from runs.forms import FROM_TRIGGER, RestartForm


def test_the_choices_are_the_trigger_then_each_step_in_order():
    form = RestartForm(steps=("fetch", "report"))
    assert [value for value, _ in form.fields["from_step"].choices] == [
        FROM_TRIGGER,
        "fetch",
        "report",
    ]


def test_a_step_of_the_run_is_chosen_and_the_trigger_means_none():
    chosen = RestartForm({"from_step": "report"}, steps=("fetch", "report"))
    assert chosen.is_valid()
    assert chosen.step() == "report"
    assert not chosen.cleaned_data["confirm_non_idempotent"]
    trigger = RestartForm(
        {"from_step": FROM_TRIGGER, "confirm_non_idempotent": "on"}, steps=("fetch",)
    )
    assert trigger.is_valid()
    assert trigger.step() is None
    assert trigger.cleaned_data["confirm_non_idempotent"]


def test_a_step_the_run_does_not_have_is_refused():
    form = RestartForm({"from_step": "ghost"}, steps=("fetch",))
    assert not form.is_valid()
    assert "from_step" in form.errors
