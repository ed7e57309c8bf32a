"""Forms of the run admin's operation pages (restart from a step)."""

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
    confirm_non_idempotent = forms.BooleanField(
        label="Run non-idempotent steps again",
        required=False,
        help_text="Needed when a step that runs again calls a tool that is not idempotent: "
        "the target system may act a second time.",
    )

    def __init__(self, *args: Any, steps: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(FROM_TRIGGER, "the trigger (every step again, same inputs)")]
        field = self.fields["from_step"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = choices + [(s, _label(s)) for s in steps]

    def step(self) -> str | None:
        return self.cleaned_data["from_step"] or None


def _label(point: str) -> str:
    """``geo`` → "step geo"; ``review#2`` → "step review, from iteration 2"."""
    step, _, iteration = point.partition("#")
    return f"step {step}, from iteration {iteration}" if iteration else f"step {step}"
