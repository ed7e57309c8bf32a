"""tools.sizes: the size of a value as compact JSON, measured by reference, and its error."""

from __future__ import annotations

import json

import pytest

from tools.sizes import OutputTooLarge, check_size, json_bytes, text_bytes


def _dumped(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -12345678901234567890,
        1.5,
        1e300,
        "",
        "plain",
        "é ü 漢字 🙂",
        {"a": [1, 2.5, None, True, False, "x"], "b": {}, "c": []},
        [[], {}, [[]], {"": ""}],
        {"ключ": {"nested": ["ü", {"k": "v"}]}},
    ],
)
def test_the_measure_is_the_size_of_compact_json(value):
    assert json_bytes(value) == _dumped(value)


def test_nul_and_escapes_count_as_written():
    assert text_bytes("\x00") == 2 + 6  # "\u0000"
    assert text_bytes('"') == 2 + 2
    assert text_bytes("\\") == 2 + 2
    assert text_bytes("\n\t") == 2 + 4
    assert text_bytes("\x01") == 2 + 6
    assert text_bytes("\ud800") == 2 + 6  # a lone surrogate, escaped like NUL
    value = {"k\x00": ["a\x00b", '"q"', "line\nbreak"]}
    assert json_bytes(value) == _dumped(value)


def test_a_long_string_is_measured_in_pieces_with_the_same_result():
    text = ("é\x00" * 700_000) + "x"
    assert text_bytes(text) == len(json.dumps(text, ensure_ascii=False).encode())


def test_shared_references_count_each_time_but_are_walked_once():
    """Eight references to one 1 MB object weigh 8 MB, measured in far less than a copy."""
    inner = {"rows": [{"id": i, "name": f"n{i}"} for i in range(20_000)]}
    layer: object = inner
    for _ in range(4):
        layer = {f"k{i}": layer for i in range(8)}  # 8**4 references to `inner`
    memo: dict = {}
    size = json_bytes(layer, memo)
    assert size > 8**4 * json_bytes(inner)
    # Each container measured once: 20,000 rows, their list, `inner` and the 4 layers
    # (a walk of the 8**4 copies would have measured 8**4 times as many).
    assert len(memo) == 20_000 + 1 + 1 + 4


def test_a_memo_keeps_sizes_across_measures():
    inner = ["x" * 100] * 10
    memo: dict = {}
    first = json_bytes([inner], memo)
    assert id(inner) in memo
    assert json_bytes([inner, inner], memo) == 2 * (first - 2) + 3


def test_deep_nesting_is_measured_iteratively():
    value: object = "end"
    for _ in range(200_000):
        value = [value]
    assert json_bytes(value) == 200_000 * 2 + 5


def test_a_cycle_is_refused_not_looped_on():
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="contains itself"):
        json_bytes(loop)


def test_check_size_refuses_over_the_cap_naming_step_size_and_cap():
    assert check_size({"a": 1}, cap=7, step="s", what="output") == 7
    with pytest.raises(OutputTooLarge) as caught:
        check_size({"a": 12}, cap=7, step="shape", what="output")
    error = caught.value
    assert (error.step, error.what, error.size, error.cap) == ("shape", "output", 8, 7)
    assert error.code == "output_too_large"
    assert not error.retryable
    assert "step `shape`: the output is 8 bytes, over the 7 byte cap" in error.message
    assert error.as_dict() == {
        "type": "output_too_large",
        "message": error.message,
        "retryable": False,
        "step": "shape",
        "what": "output",
        "size": 8,
        "cap": 7,
    }


def test_a_refusal_without_a_step_is_named_by_the_engine():
    anonymous = OutputTooLarge(step="", what="response", size=10, cap=5, at_least=True)
    named = anonymous.for_step("fetch")
    assert named.step == "fetch"
    assert "step `fetch`: the response is more than 10 bytes" in named.message
    assert named.for_step("other") is named
