"""runs.engine.kinds.llm_history: an llm step's conversation fitted to its context budget —
older results truncated first, then whole old turns dropped with a note, then the latest
turn truncated; the head never touched, the recorded conversation never changed."""

from __future__ import annotations

import copy

from runs.engine.kinds.llm_history import KEEP_CHARS, HistoryTrim, fit_history, size

HEAD = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "the task"}]


def turn(n: int, result_chars: int) -> list[dict]:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{n}"}]}
    return [call, {"role": "tool", "tool_call_id": f"c{n}", "content": str(n) * result_chars}]


def conversation(*result_sizes: int) -> list[dict]:
    return [*HEAD, *(m for n, chars in enumerate(result_sizes) for m in turn(n, chars))]


def test_a_conversation_that_fits_is_sent_as_it_is():
    messages = conversation(100, 100)
    trim = HistoryTrim(budget_chars=10_000)
    assert fit_history(messages, trim) is messages
    assert trim.as_dict() == {
        "budget_chars": 10_000, "truncated": 0, "dropped": 0, "largest_chars": size(messages),
    }  # fmt: skip


def test_older_results_are_truncated_first_and_the_recorded_conversation_is_untouched():
    messages = conversation(3_000, 3_000, 3_000)
    kept = copy.deepcopy(messages)
    trim = HistoryTrim(budget_chars=size(messages) - 2_000)

    view = fit_history(messages, trim)

    assert messages == kept
    assert view[:2] == HEAD
    assert view[3]["content"].startswith("0" * KEEP_CHARS + "… [trimmed to fit")
    assert "3000 characters in all" in view[3]["content"]
    assert view[-1] == messages[-1]  # the latest result is whole
    assert (trim.truncated, trim.dropped) == (1, 0)
    assert size(view) <= trim.budget_chars


def test_old_turns_are_dropped_whole_with_a_note_when_truncating_is_not_enough():
    messages = conversation(*([600] * 30), 600)
    trim = HistoryTrim(budget_chars=size(HEAD) + 3_000)

    view = fit_history(messages, trim)

    assert view[:2] == HEAD
    assert view[2]["role"] == "user"
    assert (
        "earlier tool result(s) and the calls that asked for them were left out"
        in view[2]["content"]
    )
    calls = {m["tool_calls"][0]["id"] for m in view if m.get("tool_calls")}
    answers = {m["tool_call_id"] for m in view if m.get("role") == "tool"}
    assert calls == answers  # every call kept still has its answer
    assert trim.dropped > 0
    assert size(view) <= trim.budget_chars


def test_the_latest_turn_is_truncated_last_and_an_unfittable_view_is_sent_anyway():
    messages = conversation(20_000)
    trim = HistoryTrim(budget_chars=size(HEAD) + 1_000)

    view = fit_history(messages, trim)

    assert len(view[-1]["content"]) < 1_000
    assert trim.truncated == 1
    tiny = HistoryTrim(budget_chars=10)
    assert fit_history(conversation(20_000), tiny)[:2] == HEAD  # still sent, head whole


def test_counts_are_over_the_whole_step_not_per_call():
    messages = conversation(3_000, 3_000)
    trim = HistoryTrim(budget_chars=size(messages) - 2_000)
    fit_history(messages, trim)
    fit_history(messages, trim)  # the same results trimmed again are counted once
    assert trim.truncated == 1
    assert trim.largest_chars == size(messages)
