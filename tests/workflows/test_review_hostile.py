"""Hostile JSON typed into the admin forms and ``--input`` (review findings)."""

from __future__ import annotations

import pytest

from review.forms import NewPlanForm
from workflows.inputs import coerce_text
from workflows.revisions import DefinitionInvalid, _parse_json
from workflows.schema import InputSpec

DEEP = "[" * 100_000 + "]" * 100_000


def test_deep_sample_inputs_are_a_form_error():
    form = NewPlanForm({"goal": "g", "sample_inputs": '{"a": ' + DEEP + "}"})
    assert not form.is_valid()
    assert "nests too deeply" in str(form.errors["sample_inputs"])


def test_deep_input_value_is_left_as_text_for_the_type_check():
    assert coerce_text(DEEP, InputSpec(type="array")) == DEEP


def test_deep_edited_definition_is_invalid_not_a_crash():
    with pytest.raises(DefinitionInvalid) as caught:
        _parse_json('{"name": "x", "steps": ' + DEEP + "}")
    assert "nests too deeply" in caught.value.issues[0].message
