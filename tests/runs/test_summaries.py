"""One-line summaries of stored run data (runs/summaries.py)."""

import pytest

from runs.summaries import error_origin, human_size, truncation_note, value_summary


@pytest.mark.parametrize(
    ("value", "summary"),
    [
        (None, "no output"),
        ({}, "empty object"),
        ({"a": 1}, "object with 1 key: a"),
        (dict.fromkeys("abcdefgh", 1), "object with 8 keys: a, b, c, d, e, f (+2 more)"),
        ([1], "list of 1 item"),
        ([1, 2], "list of 2 items"),
        ([{}, {}], "list of 2 items"),
        ([{"a": 1}, {"b": 2}], "list of 2 objects (a, b)"),
        ([dict.fromkeys("abcdefg", 1)], "list of 1 object (a, b, c, d, e, f, …)"),
        ("short", '"short"'),
        ("x" * 100, '"' + "x" * 79 + '…"'),
        (3.5, "3.5"),
        (True, "true"),
        ({"_truncated": True, "preview": "{", "_stored_limit_bytes": 5 * 1024 * 1024},
         "over the 5.0 MB storage limit: a preview is stored"),
        ({"_truncated": True, "preview": "{"}, "over the storage limit: a preview is stored"),
    ],
)
def test_value_summary(value, summary):
    assert value_summary(value) == summary


def test_human_size():
    assert [human_size(n) for n in (0, 1023, 1024, 1536, 3 * 1024 * 1024)] == [
        "0 B", "1023 B", "1.0 KB", "1.5 KB", "3.0 MB",
    ]  # fmt: skip


def test_truncation_note_is_empty_for_a_whole_output():
    assert truncation_note(output={"a": 1}, output_truncated=False) == ""


def test_error_origin_names_the_step_the_try_and_the_cause():
    assert error_origin(step_id="s", kind="tool", tool="t", error=None, attempts=1) == ""
    breaker = {"type": "circuit_open", "retryable": True, "host": "api.example.com"}
    assert error_origin(step_id="s", kind="tool", tool="t", error=breaker, attempts=3) == (
        "step `s` (tool `t`), try 3: circuit_open (host api.example.com, retryable)"
    )
    early = {"type": "reference_error", "retryable": False}
    assert error_origin(step_id="s", kind="transform", tool="", error=early, attempts=0) == (
        "step `s` (transform), before any call (its inputs could not be resolved): "
        "reference_error (not retryable)"
    )
