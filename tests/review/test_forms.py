"""review.forms: the admin forms' own checks of what a reviewer types."""

from review.forms import NewPlanForm

DEEP = "[" * 100_000 + "]" * 100_000


def test_deep_sample_inputs_are_a_form_error():
    form = NewPlanForm({"goal": "g", "sample_inputs": '{"a": ' + DEEP + "}"})
    assert not form.is_valid()
    assert "nests too deeply" in str(form.errors["sample_inputs"])
