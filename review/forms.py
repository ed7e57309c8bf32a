"""Forms of the review pages: they parse what a reviewer typed; services do the rest."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django import forms

from tools.jsondata import DuplicateKey, duplicate_key_location, loads_strict, storage_problem
from workflows.inputs import coerce_text
from workflows.schema import InputSpec

_MONO = {"class": "vLargeTextField fp-mono", "spellcheck": "false"}


def _as_text(value: Any, spec: InputSpec) -> str:
    if value is None:
        return ""
    if spec.type == "string" and isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


class InputsForm(forms.Form):
    """One field per declared input, prefilled; values typed as text and coerced.

    Strings are taken as typed; numbers, booleans, lists and objects as JSON
    (``true``, ``42``, ``["a", "b"]``). A blank field is left out, so the
    declared default applies. The declared types are checked by the service.
    """

    def __init__(
        self,
        *args: Any,
        declared: Mapping[str, InputSpec],
        values: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.declared = dict(declared)
        values = values or {}
        for name, spec in self.declared.items():
            self.fields[self.field_name(name)] = self._field(name, spec, values.get(name))

    @staticmethod
    def field_name(name: str) -> str:
        return f"input__{name}"

    def _field(self, name: str, spec: InputSpec, value: Any) -> forms.Field:
        hint = spec.type + (" (required)" if spec.is_required else "")
        if spec.enum is not None:
            hint += " — one of " + ", ".join(json.dumps(v) for v in spec.enum)
        if spec.description:
            hint += f" — {spec.description}"
        widget: forms.Widget
        if spec.type in {"object", "array"}:
            widget = forms.Textarea(attrs={**_MONO, "rows": 3})
        else:
            widget = forms.TextInput(attrs={"class": "vTextField", "data-input-type": spec.type})
        return forms.CharField(
            label=name,
            required=False,
            strip=False,
            initial=_as_text(value, spec),
            help_text=hint,
            widget=widget,
        )

    def inputs(self) -> dict[str, Any]:
        """The typed values (call after ``is_valid()``)."""
        values: dict[str, Any] = {}
        for name, spec in self.declared.items():
            text = self.cleaned_data.get(self.field_name(name), "")
            if text == "":
                continue
            values[name] = coerce_text(text, spec)
        return values


class RejectForm(forms.Form):
    feedback = forms.CharField(
        label="Feedback for the planner",
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 4, "class": "vLargeTextField"}),
        help_text="What should change. The planner revises the plan from this and the "
        "previous version.",
    )


class EditJSONForm(forms.Form):
    definition = forms.CharField(
        label="Definition (JSON)",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={**_MONO, "rows": 30}),
        help_text="Saved as a new version pending review; this version is not changed.",
    )


class NewPlanForm(forms.Form):
    goal = forms.CharField(
        label="Goal",
        max_length=5000,
        widget=forms.Textarea(attrs={"rows": 5, "class": "vLargeTextField"}),
        help_text="What the workflow should achieve, in plain words.",
    )
    sample_inputs = forms.CharField(
        label="Sample inputs (JSON, optional)",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={**_MONO, "rows": 4}),
        help_text='An object such as {"city": "Lisbon"}: values the planner may use as '
        "defaults and for the validation run.",
    )

    def clean_sample_inputs(self) -> dict[str, Any] | None:
        text = self.cleaned_data["sample_inputs"]
        if not text.strip():
            return None
        try:
            value = loads_strict(text)
        except DuplicateKey as exc:
            raise forms.ValidationError(f"not accepted: {duplicate_key_location(text)}") from exc
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from exc
        except RecursionError as exc:
            raise forms.ValidationError("not accepted: the JSON nests too deeply") from exc
        if not isinstance(value, dict):
            raise forms.ValidationError("sample inputs must be a JSON object")
        problem = storage_problem(value, "sample_inputs")
        if problem is not None:
            raise forms.ValidationError(f"not accepted: {problem}")
        return value


OTHER = "__other__"


class QuestionsForm(forms.Form):
    """The planner's clarifying questions: one choice per question among its suggested
    answers, or "something else" with a text. Nothing chosen means "no preference".

    ``attempt`` is the plan attempt that asked (hidden); ``answers()`` gives
    ``{question id: text}`` for ``plan_answer``.
    """

    attempt = forms.IntegerField(widget=forms.HiddenInput)

    def __init__(self, *args: Any, questions: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.questions = list(questions)
        for number, question in enumerate(self.questions, start=1):
            qid = question["id"]
            choices = [(option, option) for option in question["options"]]
            self.fields[f"answer__{qid}"] = forms.ChoiceField(
                label=f"{number}. {question['question']}",
                required=False,
                choices=[*choices, (OTHER, "Something else:")],
                widget=forms.RadioSelect(attrs={"class": "fp-question"}),
            )
            self.fields[f"other__{qid}"] = forms.CharField(
                label=f"Your own answer to {number}",
                required=False,
                max_length=1000,
                widget=forms.TextInput(attrs={"class": "vTextField fp-other"}),
                help_text="Used when “Something else” is chosen. Leave the question "
                "open to let the planner choose.",
            )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for question in self.questions:
            qid = question["id"]
            if cleaned.get(f"answer__{qid}") == OTHER and not cleaned.get(f"other__{qid}"):
                self.add_error(f"other__{qid}", "say what, or choose one of the suggestions")
        return cleaned

    def answers(self) -> dict[str, str]:
        """The answer to each question by id (call after ``is_valid()``)."""
        answers = {}
        for question in self.questions:
            qid = question["id"]
            choice = self.cleaned_data.get(f"answer__{qid}") or ""
            answers[qid] = self.cleaned_data.get(f"other__{qid}", "") if choice == OTHER else choice
        return answers
