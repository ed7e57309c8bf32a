"""Clarifying questions: the planner asks, the answers come back (service, `planflow`
with --answer and on a terminal through a pty), rounds are bounded; over the loopback
OpenAI-compatible server."""

from __future__ import annotations

import os
import sys

import pytest

from tests.workflows.test_planner import (
    CSV_PLAN,
    GOAL,
    VALID_PLAN,
    client,  # noqa: F401 - fixture
    llm,  # noqa: F401 - fixture
    llm_settings,  # noqa: F401 - fixture
    make_registry,
    sleeps,  # noqa: F401 - fixture
)
from workflows.models import PlanAttempt
from workflows.planner import PlanError, PlanQuestions
from workflows.planner.questions import read_questions, resolve_answers
from workflows.planner.services import plan_answer, plan_create

pytestmark = pytest.mark.django_db

QUESTIONS = {
    "answer": "questions",
    "questions": [
        {"id": "city", "question": "Which city?", "options": ["Oslo", "Bergen"]},
        {"id": "days", "question": "How many days ahead?", "options": ["1", "3", "7"]},
    ],
}


def attempts() -> list[PlanAttempt]:
    return list(PlanAttempt.objects.order_by("id"))


def test_the_planner_may_ask_and_the_answers_reach_the_next_round(llm, client):  # noqa: F811
    llm.reply_json(QUESTIONS)
    with pytest.raises(PlanQuestions) as asked:
        plan_create(goal=GOAL, sample_inputs={"unit": "C"}, registry=make_registry(), client=client)

    attempt = asked.value.attempt
    assert asked.value.code == "plan_questions"
    assert "[city] Which city?" in asked.value.message
    assert (attempt.status, attempt.outcome) == ("questions", "questions_asked")
    assert attempt.questions == QUESTIONS["questions"]
    assert attempt.sample_inputs == {"unit": "C"}
    assert (
        "you may instead answer with at most 5 clarifying questions"
        in (llm.requests[0].messages[1]["content"])
    )

    llm.reply_json(VALID_PLAN)
    workflow = plan_answer(
        attempt=attempt, answers=["city=Bergen"], registry=make_registry(), client=client
    )

    assert workflow.status == "pending_review"
    text = llm.requests[1].messages[1]["content"]
    assert "- Which city? -> Bergen" in text
    assert "- How many days ahead? -> (no preference: choose a sensible default)" in text
    assert '{"unit": "C"}' in text
    final = attempts()[-1]
    assert final.workflow == workflow
    assert final.clarifications == [
        {"questions": QUESTIONS["questions"], "answers": {"city": "Bergen", "days": ""}}
    ]


def test_question_rounds_are_bounded(settings, llm, client):  # noqa: F811
    settings.FLOWPILOT_PLANNER_QUESTION_ROUNDS = 1
    llm.reply_json(QUESTIONS)
    with pytest.raises(PlanQuestions) as asked:
        plan_create(goal=GOAL, registry=make_registry(), client=client)
    # The round is used: the model is told to plan, and questions are sent back.
    llm.reply_json(QUESTIONS).reply_json(VALID_PLAN)
    workflow = plan_answer(
        attempt=asked.value.attempt,
        answers={"1": "Oslo", "days": "3"},
        registry=make_registry(),
        client=client,
    )

    assert workflow.name == "city_weather"
    second, third = llm.requests[1:]
    assert second.body["response_format"]["json_schema"]["name"] == "workflow"
    assert "Do not ask more questions" in second.messages[1]["content"]
    refused = attempts()[1]
    assert refused.status == "invalid"
    assert [i["code"] for i in refused.validator_report] == ["questions_not_allowed"]
    assert "questions are not possible now" in third.messages[-1]["content"]


def test_no_questions_when_the_setting_is_zero(settings, llm, client):  # noqa: F811
    settings.FLOWPILOT_PLANNER_QUESTION_ROUNDS = 0
    llm.reply_json(VALID_PLAN)
    plan_create(goal=GOAL, registry=make_registry(), client=client)
    assert llm.requests[0].body["response_format"]["json_schema"]["name"] == "workflow"
    assert "clarifying questions" not in llm.requests[0].messages[1]["content"]


def test_malformed_questions_are_sent_back_for_a_repair(llm, client):  # noqa: F811
    too_many = {
        "answer": "questions",
        "questions": [{"question": f"Q{n}?", "options": ["a"]} for n in range(6)],
    }
    llm.reply_json(too_many).reply_json(VALID_PLAN)

    plan_create(goal=GOAL, registry=make_registry(), client=client)

    first = attempts()[0]
    assert first.status == "invalid"
    assert "at most 5 questions" in first.validator_report[0]["message"]


@pytest.mark.parametrize(
    ("questions", "words"),
    [
        ([], "non-empty list"),
        (["Which?"], "each question is an object"),
        ([{"question": "", "options": ["a"]}], "`question` must be text"),
        ([{"question": "Which?", "options": []}], "`options` must be 1 to 6"),
        ([{"question": "Which?", "options": ["a", 3]}], "`options` must be 1 to 6"),
        (
            [
                {"id": "a", "question": "One?", "options": ["x"]},
                {"id": "a", "question": "Two?", "options": ["y"]},
            ],
            "its own `id`",
        ),
    ],
)
def test_read_questions_refuses_malformed_ones(questions, words):
    found, issues = read_questions({"answer": "questions", "questions": questions})
    assert found == []
    assert words in issues[0].message


def test_read_questions_makes_up_missing_ids():
    found, issues = read_questions({"questions": [{"question": " Which? ", "options": [" a "]}]})
    assert issues == []
    assert found == [{"id": "q1", "question": "Which?", "options": ["a"]}]


def test_resolve_answers_by_id_number_and_order():
    questions = QUESTIONS["questions"]
    assert resolve_answers(questions, ["Bergen", "7"]) == {"city": "Bergen", "days": "7"}
    assert resolve_answers(questions, ["2=3", "city=Oslo"]) == {"city": "Oslo", "days": "3"}
    assert resolve_answers(questions, ["more than 3 = busy"]) == {
        "city": "more than 3 = busy",
        "days": "",
    }
    with pytest.raises(PlanError, match="no question `weather`"):
        resolve_answers(questions, ["weather=rain"])
    with pytest.raises(PlanError, match="no question `3`"):
        resolve_answers(questions, ["3=x"])
    with pytest.raises(PlanError, match="more answers than questions"):
        resolve_answers(questions, ["a", "b", "c"])
    with pytest.raises(PlanError, match="over 1000 characters"):
        resolve_answers(questions, ["x" * 1001])


def test_an_attempt_without_questions_cannot_be_answered(llm, client):  # noqa: F811
    llm.reply_json(VALID_PLAN)
    plan_create(goal=GOAL, registry=make_registry(), client=client)
    with pytest.raises(PlanError, match="asked no questions"):
        plan_answer(attempt=attempts()[0], answers=[], client=client)


# --- planflow ---------------------------------------------------------------------------------


def test_planflow_answers_questions_from_the_command_line(llm, llm_settings, cli):  # noqa: F811
    llm.reply_json(QUESTIONS).reply_json(CSV_PLAN)

    result = cli("planflow", GOAL, "--answer", "city=Bergen", "--answer", "2=3")

    assert result.code == 0, result.out + result.err
    assert "the planner asks 2 question(s)" in result.out
    assert "1. [city] Which city?" in result.out
    assert "2) Bergen" in result.out
    assert "stored sales_by_region v1 (pending_review)" in result.out
    text = llm.requests[1].messages[1]["content"]
    assert "- Which city? -> Bergen" in text
    assert "- How many days ahead? -> 3" in text


def test_planflow_without_answers_prints_the_questions_and_exits_2(llm, llm_settings, cli):  # noqa: F811
    llm.reply_json(QUESTIONS)

    result = cli("planflow", GOAL)

    assert result.code == 2
    attempt = attempts()[0]
    assert f"planflow --reply-to {attempt.pk}" in result.err
    assert '--answer "city=…"' in result.err
    assert "1. [city] Which city?" in result.out

    llm.reply_json(CSV_PLAN)
    result = cli("planflow", "--reply-to", str(attempt.pk), "--answer", "Oslo")
    assert result.code == 0, result.out + result.err
    assert "stored sales_by_region v1" in result.out
    assert "- Which city? -> Oslo" in llm.requests[1].messages[1]["content"]


def test_planflow_refuses_bad_arguments(llm, llm_settings, cli):  # noqa: F811
    assert "say the GOAL" in cli("planflow").err
    assert "asked no questions" in cli("planflow", "--reply-to", "999").err
    assert "asked no questions" in cli("planflow", "--reply-to", str(10**30)).err
    result = cli("planflow", GOAL, "--endpoint", "nowhere")
    assert "`nowhere` is not configured" in result.err
    assert llm.requests == []


def test_planflow_uses_the_named_endpoint(llm, llm_settings, cli):  # noqa: F811
    llm_settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"  # the default is not used
    llm_settings.FLOWPILOT_LLM_ENDPOINTS = {
        "local": {"base_url": llm.base_url, "api_key": "sk-local", "model": "local-model"}
    }
    llm.reply_json(CSV_PLAN)
    result = cli("planflow", GOAL, "--endpoint", "local")
    assert result.code == 0, result.err
    assert "planning with local-model" in result.out
    assert llm.requests[0].headers["authorization"] == "Bearer sk-local"


def test_planflow_asks_on_a_terminal(llm, llm_settings, cli, monkeypatch):  # noqa: F811
    """stdin is a real pseudo-terminal: the questions are asked and answered there."""
    llm.reply_json(QUESTIONS).reply_json(CSV_PLAN)
    controller, terminal = os.openpty()
    with os.fdopen(terminal, "r", closefd=True) as tty:
        assert tty.isatty()
        os.write(controller, b"2\nten days\n")  # the second suggestion, then free text
        monkeypatch.setattr(sys, "stdin", tty)
        result = cli("planflow", GOAL)
    os.close(controller)

    assert result.code == 0, result.out + result.err
    assert "1. Which city? (number, text, or Enter: any)" in result.out
    text = llm.requests[1].messages[1]["content"]
    assert "- Which city? -> Bergen" in text
    assert "- How many days ahead? -> ten days" in text


def test_a_plan_marked_answer_plan_is_accepted(llm, client):  # noqa: F811
    llm.reply_json({"answer": "plan", **VALID_PLAN})
    workflow = plan_create(goal=GOAL, registry=make_registry(), client=client)
    assert "answer" not in workflow.definition


def test_planflow_a_second_round_without_answers_exits_2_naming_it(llm, llm_settings, cli):  # noqa: F811
    second = {
        "answer": "questions",
        "questions": [{"question": "Which region?", "options": ["North"]}],
    }
    llm.reply_json(QUESTIONS).reply_json(second)

    result = cli("planflow", GOAL, "--answer", "Bergen")

    assert result.code == 2
    _first, asked_again = attempts()
    assert asked_again.questions[0]["question"] == "Which region?"
    assert f"--reply-to {asked_again.pk}" in result.err
    assert '--answer "q1=…"' in result.err
    assert asked_again.clarifications[0]["answers"] == {"city": "Bergen", "days": ""}


@pytest.mark.django_db
def test_planflow_without_an_llm_says_what_to_set_and_sends_nothing(no_llm, cli):
    result = cli("planflow", GOAL)
    assert result.code != 0
    assert "set OPENAI_API_KEY" in result.err
    assert not PlanAttempt.objects.exists()
