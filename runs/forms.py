"""Forms of the run admin's operation pages (restart from a step, onto a version)."""

from __future__ import annotations

from typing import Any

from django import forms

FROM_TRIGGER = ""  # the choice that restarts from the trigger (every step again)


class RestartForm(forms.Form):
    from_step = forms.ChoiceField(
        label="Restart from",
        required=False,
        help_text="The step to run again, with every step downstream of it; every other "
        "step's result is reused, not executed. From the trigger: every step runs again.",
    )
    flow_version = forms.TypedChoiceField(
        label="Onto version",
        coerce=int,
        required=False,
        empty_value=None,
        help_text="The version the new run runs: the run's own, or an active version of its "
        "workflow (steps changed since the run's version run again with their descendants).",
    )
    confirm_non_idempotent = forms.BooleanField(
        label="Run non-idempotent steps again",
        required=False,
        help_text="Needed when a step that runs again calls a tool that is not idempotent: "
        "the target system may act a second time.",
    )

    def __init__(
        self,
        *args: Any,
        steps: tuple[str, ...],
        versions: list[tuple[int, str]],
        own: int,
        **kwargs: Any,
    ) -> None:
        """``steps``: the choices of step (of every version offered); ``versions``:
        ``(number, label)`` of the versions offered, ``own`` the run's (the initial one)."""
        super().__init__(*args, **kwargs)
        choices = [(FROM_TRIGGER, "the trigger (every step again, same inputs)")]
        field = self.fields["from_step"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = choices + [(s, _label(s)) for s in steps]
        version = self.fields["flow_version"]
        assert isinstance(version, forms.ChoiceField)
        version.choices = versions
        version.initial = own

    def step(self) -> str | None:
        return self.cleaned_data["from_step"] or None

    def version(self) -> int | None:
        """The version number chosen; None (not given): the run's own."""
        chosen = self.cleaned_data["flow_version"]
        return None if chosen is None else int(chosen)


def _label(point: str) -> str:
    """``geo`` → "step geo"; ``review#2`` → "step review, from iteration 2"."""
    step, _, iteration = point.partition("#")
    return f"step {step}, from iteration {iteration}" if iteration else f"step {step}"
