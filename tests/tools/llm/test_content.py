"""tools.llm.content: the JSON in a model's reply — plain, fenced or wrapped in a
sentence — or an invalid reply saying where and why (a cut-off reply says so; a key
given twice, too deep a nesting are refused)."""

from __future__ import annotations

import pytest

from tools.llm import LLMReplyInvalid
from tools.llm.content import parse_json_reply


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("  [1, 2]\n", [1, 2]),
        ('Here it is:\n```json\n{"a": 1}\n```\nDone.', {"a": 1}),
        ('```\n{"b": [true]}\n```', {"b": [True]}),
        ('Sure! {"a": {"b": 2}} hope this helps', {"a": {"b": 2}}),
    ],
)
def test_parse_json_reply_accepts_plain_fenced_and_wrapped(text, expected):
    assert parse_json_reply(text) == expected


@pytest.mark.parametrize("text", [None, "", "   ", '{"a": 1', "not json at all"])
def test_parse_json_reply_rejects_with_a_located_message(text):
    with pytest.raises(LLMReplyInvalid) as caught:
        parse_json_reply(text)
    if text and text.strip():
        assert "line 1 column" in caught.value.message


# --- hostile replies ----------------------------------------------------------------------


@pytest.mark.parametrize("depth", [500, 100_000])
def test_deeply_nested_llm_reply_is_an_invalid_reply_not_a_crash(depth):
    text = '{"steps": ' + "[" * depth + "]" * depth + "}"
    with pytest.raises(LLMReplyInvalid, match="nest"):
        parse_json_reply(text)
    with pytest.raises(LLMReplyInvalid, match="nest"):
        parse_json_reply("Here it is:\n```json\n" + text + "\n```")


def test_a_reply_with_a_key_given_twice_is_an_invalid_reply():
    text = '{"name": "safe", "steps": [],\n "steps": [{"id": "post_token"}]}'
    with pytest.raises(LLMReplyInvalid, match="line 2, column 2: the key 'steps' appears twice"):
        parse_json_reply(text)
    with pytest.raises(LLMReplyInvalid, match="appears twice"):
        parse_json_reply("Plan:\n```json\n" + text + "\n```")


def test_a_cut_off_reply_is_told_apart_from_a_syntax_error():
    with pytest.raises(LLMReplyInvalid, match=r"truncated at line 1 column \d+, with 3 bracket"):
        parse_json_reply('{"steps": [{"id": "a"')
    with pytest.raises(LLMReplyInvalid, match="Expecting") as caught:
        parse_json_reply('{"a": 1,, "b": 2}')
    assert "truncated" not in caught.value.message


def test_a_fence_of_another_language_is_not_read_as_json():
    with pytest.raises(LLMReplyInvalid):
        parse_json_reply("```python\n[1, 2]\n```")


def test_a_long_invalid_reply_is_shown_shortened():
    with pytest.raises(LLMReplyInvalid) as caught:
        parse_json_reply("x" * 1000)
    assert "x" * 200 + "…" in caught.value.message
    assert "x" * 201 not in caught.value.message
