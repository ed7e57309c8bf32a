"""Fitting an ``llm`` step's conversation into its context budget (pure: no I/O).

A tool-calling loop grows by one assistant message and its tool results per turn.
Before each model call the conversation is measured (characters of its JSON form,
a stable, model-independent stand-in for tokens: roughly four characters a token)
and, when it is over the step's ``context_budget_chars``, the *view sent* is made to
fit; the step's recorded ``conversation`` keeps every message in full.

The strategy, in order, stopping as soon as the view fits:

1. **truncate** the oldest tool results (every turn but the latest) to their first
   ``KEEP_CHARS`` characters and a note of the full length, oldest first;
2. **drop** the oldest whole turns (the assistant's tool calls with their results, so
   every call still has its answer), oldest first, replaced by one note saying how
   many results were left out;
3. **truncate** the latest turn's results the same way.

The system message and the task are never touched. A view that still does not fit
is sent as it is (the model's own context limit is the last word). What was done is
counted in ``HistoryTrim`` and reported in the step output as ``history_trimmed``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

KEEP_CHARS = 500
HEAD = 2  # the system message and the task


@dataclass
class HistoryTrim:
    """What fitting did over the whole step: results truncated and dropped, and the
    largest view it had to fit."""

    budget_chars: int
    largest_chars: int = 0
    # The results (by position in the append-only conversation) ever truncated or
    # dropped from a view; each model call fits the whole conversation anew.
    truncated_ids: set[int] = field(default_factory=set)
    dropped_ids: set[int] = field(default_factory=set)
    positions: dict[int, int] = field(default_factory=dict, repr=False)  # id(message) -> index

    @property
    def truncated(self) -> int:
        return len(self.truncated_ids)

    @property
    def dropped(self) -> int:
        return len(self.dropped_ids)

    def as_dict(self) -> dict[str, int]:
        return {
            "budget_chars": self.budget_chars,
            "truncated": self.truncated,
            "dropped": self.dropped,
            "largest_chars": self.largest_chars,
        }


def size(messages: list[dict[str, Any]]) -> int:
    return sum(len(json.dumps(m, ensure_ascii=False, default=str)) for m in messages)


def fit_history(messages: list[dict[str, Any]], trim: HistoryTrim) -> list[dict[str, Any]]:
    """The messages to send: ``messages`` when they fit, else a trimmed copy."""
    total = size(messages)
    trim.largest_chars = max(trim.largest_chars, total)
    if total <= trim.budget_chars:
        return messages
    trim.positions = {id(m): i for i, m in enumerate(messages)}
    head, turns = messages[:HEAD], _turns(messages[HEAD:])
    older, latest = turns[:-1], turns[-1:]
    if _truncate(older, head, turns, trim):
        return _flatten(head, turns, 0)
    dropped_results = 0
    while older:
        results = [m for m in older.pop(0) if m.get("role") == "tool"]
        trim.dropped_ids |= {trim.positions[id(m)] for m in results}
        dropped_results += len(results)
        turns.pop(0)
        if size(_flatten(head, turns, dropped_results)) <= trim.budget_chars:
            break
    _truncate(latest, head, turns, trim, dropped=dropped_results)
    return _flatten(head, turns, dropped_results)


def _turns(rest: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The messages after the head, grouped: each assistant message with its tool results."""
    turns: list[list[dict[str, Any]]] = []
    for message in rest:
        if message.get("role") == "tool" and turns:
            turns[-1].append(message)
        else:
            turns.append([message])
    return turns


def _truncate(
    group: list[list[dict[str, Any]]],
    head: list[dict[str, Any]],
    turns: list[list[dict[str, Any]]],
    trim: HistoryTrim,
    *,
    dropped: int = 0,
) -> bool:
    """Truncate the tool results of ``group`` (in place, oldest first) until the view
    fits; whether it fits."""
    for turn in group:
        for index, message in enumerate(turn):
            if size(_flatten(head, turns, dropped)) <= trim.budget_chars:
                return True
            content = message.get("content")
            if message.get("role") != "tool" or not isinstance(content, str):
                continue
            if len(content) <= KEEP_CHARS:
                continue
            note = f"… [trimmed to fit the context budget: {len(content)} characters in all]"
            turn[index] = {**message, "content": content[:KEEP_CHARS] + note}
            trim.positions[id(turn[index])] = trim.positions[id(message)]
            trim.truncated_ids.add(trim.positions[id(message)])
    return size(_flatten(head, turns, dropped)) <= trim.budget_chars


def _flatten(
    head: list[dict[str, Any]], turns: list[list[dict[str, Any]]], dropped: int
) -> list[dict[str, Any]]:
    note = []
    if dropped:
        text = (
            f"({dropped} earlier tool result(s) and the calls that asked for them were left "
            "out to fit the context budget; call a tool again if you need one.)"
        )
        note = [{"role": "user", "content": text}]
    return [*head, *note, *(m for turn in turns for m in turn)]
