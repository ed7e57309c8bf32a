"""Clarifying questions: the planner may ask before it plans, a bounded number of times.

When the goal leaves undecided something the plan needs (which repository, how
often, what counts as "busy"), the model may answer ``{"answer": "questions",
"questions": [{"id", "question", "options"}]}`` instead of a workflow: at most
``MAX_QUESTIONS`` questions, each with 1 to ``MAX_OPTIONS`` suggested answers. The
answers come back as text per question id (blank: "no preference, choose"), are
kept on the next attempt's record (``PlanAttempt.clarifications``) and are fed to
the next round. After ``FLOWPILOT_PLANNER_QUESTION_ROUNDS`` rounds (2) the model
is no longer offered questions and must plan.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings

from workflows.planner.errors import PlanError
from workflows.validation.report import ValidationIssue, error

MAX_QUESTIONS = 5
MAX_OPTIONS = 6
MAX_QUESTION_CHARS = 500
MAX_ANSWER_CHARS = 1_000
DEFAULT_QUESTION_ROUNDS = 2
QUESTIONS_INVALID = "questions_invalid"
QUESTIONS_NOT_ALLOWED = "questions_not_allowed"
NO_PREFERENCE = "(no preference: choose a sensible default)"
_ID = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


def question_rounds() -> int:
    """Question rounds a goal may take before the planner must plan."""
    return max(
        0, int(getattr(settings, "FLOWPILOT_PLANNER_QUESTION_ROUNDS", DEFAULT_QUESTION_ROUNDS))
    )


def questions_schema() -> dict[str, Any]:
    """The ``questions`` branch of the planner's structured answer."""
    question = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": _ID.pattern},
            "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
            "options": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "maxItems": MAX_OPTIONS,
            },
        },
        "required": ["id", "question", "options"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "answer": {"const": "questions"},
            "questions": {
                "type": "array",
                "items": question,
                "minItems": 1,
                "maxItems": MAX_QUESTIONS,
            },
        },
        "required": ["answer", "questions"],
        "additionalProperties": False,
    }


def is_questions(data: Mapping[str, Any]) -> bool:
    """Whether a reply is the questions branch (or looks like it: questions, no steps)."""
    return data.get("answer") == "questions" or ("questions" in data and "steps" not in data)


def read_questions(data: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[ValidationIssue]]:
    """The questions of a reply, normalised (an id made up where missing), or the issues
    to send back for a repair."""
    raw = data.get("questions")
    if not isinstance(raw, list) or not raw:
        return [], [_invalid("questions", "`questions` must be a non-empty list")]
    if len(raw) > MAX_QUESTIONS:
        message = (
            f"ask at most {MAX_QUESTIONS} questions (got {len(raw)}); keep the ones that matter"
        )
        return [], [_invalid("questions", message)]
    questions, issues = [], []
    for index, item in enumerate(raw):
        question, problems = _question(item, index)
        issues += problems
        if question is not None:
            questions.append(question)
    ids = [q["id"] for q in questions]
    if len(set(ids)) != len(ids):
        issues.append(_invalid("questions", "each question needs its own `id`"))
    return (questions if not issues else []), issues


def _question(item: Any, index: int) -> tuple[dict[str, Any] | None, list[ValidationIssue]]:
    where = f"questions[{index}]"
    if not isinstance(item, dict):
        return None, [_invalid(where, "each question is an object {id, question, options}")]
    text = item.get("question")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_QUESTION_CHARS:
        message = f"`question` must be text of 1 to {MAX_QUESTION_CHARS} characters"
        return None, [_invalid(f"{where}.question", message)]
    options = item.get("options")
    if (
        not isinstance(options, list)
        or not 1 <= len(options) <= MAX_OPTIONS
        or not all(isinstance(o, str) and o.strip() for o in options)
    ):
        message = f"`options` must be 1 to {MAX_OPTIONS} suggested answers, as text"
        return None, [_invalid(f"{where}.options", message)]
    qid = item.get("id")
    if not isinstance(qid, str) or not _ID.match(qid):
        qid = f"q{index + 1}"
    return {"id": qid, "question": text.strip(), "options": [o.strip() for o in options]}, []


def _invalid(path: str, message: str) -> ValidationIssue:
    return error(QUESTIONS_INVALID, path, message)


def resolve_answers(
    questions: list[dict[str, Any]], given: Mapping[str, str] | Iterable[str]
) -> dict[str, str]:
    """Every question's answer, by id, from what a person gave.

    ``given`` is a mapping ``{id or 1-based number: text}``, or a list of entries
    ``"id=text"``, ``"2=text"`` or a bare ``"text"`` (the next unanswered question, in
    order). A question left unanswered gets ``""``: no preference. An id or number that
    names no question is a ``PlanError`` naming it.
    """
    ids = [q["id"] for q in questions]
    answers: dict[str, str] = dict.fromkeys(ids, "")
    pairs = list(given.items()) if isinstance(given, Mapping) else [_pair(e) for e in given]
    for key, text in pairs:
        qid = _question_id(key, ids) if key is not None else _next_open(answers, ids)
        if len(text) > MAX_ANSWER_CHARS:
            raise PlanError(f"the answer to `{qid}` is over {MAX_ANSWER_CHARS} characters")
        answers[qid] = text.strip()
    return answers


def _pair(entry: str) -> tuple[str | None, str]:
    key, sep, text = entry.partition("=")
    if sep and re.match(r"^\s*([a-z][a-z0-9_]{0,31}|\d+)\s*$", key):
        return key.strip(), text
    return None, entry


def _question_id(key: str, ids: list[str]) -> str:
    if key in ids:
        return key
    if key.isdigit() and 1 <= int(key) <= len(ids):
        return ids[int(key) - 1]
    known = ", ".join(f"`{i}`" for i in ids)
    raise PlanError(f"no question `{key}` to answer (the questions: {known}, or 1 to {len(ids)})")


def _next_open(answers: dict[str, str], ids: list[str]) -> str:
    for qid in ids:
        if not answers[qid]:
            return qid
    raise PlanError(f"more answers than questions ({len(ids)})")


def clarifications_text(clarifications: Iterable[Mapping[str, Any]]) -> str:
    """Every earlier question and its answer, one per line, for the next round's prompt."""
    lines = []
    for round_ in clarifications:
        answers = round_.get("answers") or {}
        for question in round_.get("questions") or []:
            answer = answers.get(question["id"]) or NO_PREFERENCE
            lines.append(f"- {question['question']} -> {answer}")
    return "\n".join(lines)
