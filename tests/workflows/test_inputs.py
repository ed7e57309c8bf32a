"""workflows.inputs: run inputs typed as text (``--input k=v``) and their coercion."""

from workflows.inputs import coerce_text
from workflows.schema import InputSpec

DEEP = "[" * 100_000 + "]" * 100_000


def test_deep_input_value_is_left_as_text_for_the_type_check():
    assert coerce_text(DEEP, InputSpec(type="array")) == DEEP
