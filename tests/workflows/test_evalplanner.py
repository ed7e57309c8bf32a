"""`evalplanner` over the shipped goals, against the loopback OpenAI-compatible server
answering as a scripted planner (tests/fakes/planner_script.py)."""

from __future__ import annotations

import json

import pytest

from tests.fakes.openai_server import FakeLLM
from tests.fakes.planner_script import REPAIR_EVERY, ScriptedPlanner
from tools.services import tools_load_dir
from workflows.models import PlanAttempt, Workflow
from workflows.planner.evaluation import DEFAULT_GOALS, GoalsFileInvalid, load_goal_cases

# Its subject is not the database: the PostgreSQL pass leaves it to the SQLite pass.
pytestmark = [pytest.mark.django_db, pytest.mark.one_database]

CASES = load_goal_cases(DEFAULT_GOALS)


@pytest.fixture
def planner(settings):
    with FakeLLM() as server:
        settings.OPENAI_BASE_URL = server.base_url
        settings.OPENAI_API_KEY = "sk-eval"
        settings.PLANNER_MODEL = "eval-model"
        settings.LLM_MAX_RETRIES = 0
        tools_load_dir(directory=str(DEFAULT_GOALS.parents[1] / "tools"))
        server.always(ScriptedPlanner(CASES))
        yield server


def test_the_shipped_goals_are_at_least_30_over_the_example_and_builtin_tools():
    assert len(CASES) >= 30
    used = {t for case in CASES for t in case.tools}
    assert {"geocode_city", "weather_current", "post_json", "csv_read", "aggregate"} <= used
    assert sum(bool(case.answers) for case in CASES) >= 2


def test_evalplanner_measures_every_goal_and_stores_nothing(planner, cli):
    result = cli("evalplanner", "--json")

    assert result.code == 0, result.err
    report = json.loads(result.out)
    goals, totals = report["goals"], report["totals"]
    assert report["model"] == "eval-model"
    assert report["stored"] is False
    assert [g["goal"] for g in goals] == [c.goal for c in CASES]
    assert all(g["valid"] for g in goals), [g for g in goals if not g["valid"]]
    assert all(g["tools_used"] == sorted(g["tools_expected"]) for g in goals)
    repaired = [g["goal"] for g in goals if g["repair_rounds"]]
    asked = [c.goal for c in CASES if c.answers]
    assert len(repaired) == len(CASES) // REPAIR_EVERY
    assert [g["goal"] for g in goals if g["questions"]] == asked
    busy = next(g for g in goals if g["goal"] == "Tell me when the repo gets busy")
    assert (busy["question_rounds"], busy["questions"], busy["attempts"]) == (1, 2, 2)
    assert all(g["total_tokens"] > 0 and g["seconds"] >= 0 for g in goals)
    assert totals["goals"] == len(CASES)
    assert totals["valid"] == len(CASES)
    assert totals["valid_rate"] == 1.0
    assert totals["repair_rounds"] == len(repaired)
    assert totals["questions"] == sum(len(c.answers) for c in CASES)
    assert totals["total_tokens"] == sum(g["total_tokens"] for g in goals)
    # The catalog here is small enough to be shown whole: every expected tool offered.
    assert all(g["tools_missed"] == [] for g in goals)
    assert all(g["retrieval_recall"] == 1.0 for g in goals if g["tools_expected"])
    assert all(set(g["tools_expected"]) <= set(g["tools_offered"]) for g in goals)
    assert totals["retrieval_recall"] == 1.0
    assert totals["retrieval_goals"] == sum(bool(c.tools) for c in CASES)
    assert not Workflow.objects.exists()
    assert not PlanAttempt.objects.exists()
    # The answers in the goals file reached the planner.
    answered = [r for r in planner.requests if "earlier questions" in r.messages[1]["content"]]
    assert any(
        "Which busy? -> more than 50 open issues" in r.messages[1]["content"] for r in answered
    )


def test_evalplanner_prints_a_line_per_goal_and_the_totals(planner, cli):
    result = cli("evalplanner", "--limit", "4")

    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == "evaluating 4 goal(s) with eval-model"
    assert lines[1].startswith("valid   repairs 0  questions 0  tokens")
    assert lines[1].endswith("Current weather in a city")
    assert "repairs 1" in lines[4]
    assert lines[-3].startswith("total: 4/4 valid (100%), 1 repair round(s), 0 question(s)")
    expected = sum(len(set(c.tools)) for c in CASES[:4])
    assert lines[-2] == (
        f"retrieval: 100% of the {expected} expected tool(s) of 4 goal(s) were offered to "
        "the planner"
    )
    assert lines[-1] == "nothing was stored (--store keeps the plans)"


def test_evalplanner_store_keeps_the_plans_pending_review(planner, cli):
    result = cli("evalplanner", "--limit", "2", "--store")
    assert result.code == 0, result.err
    assert sorted(Workflow.objects.values_list("status", flat=True)) == ["pending_review"] * 2
    assert "the plans are stored pending review" in result.out


def test_a_user_file_with_a_goal_it_cannot_plan_fails_min_valid(planner, cli, tmp_path):
    goals = tmp_path / "mine.json"
    goals.write_text(json.dumps(["Coordinates of a city", {"goal": "Something no tool does"}]))

    result = cli("evalplanner", str(goals), "--min-valid", "0.9")

    assert result.code == 1
    assert "INVALID repairs 2" in result.out
    assert "1 of 2 goals got a valid plan (50%), below --min-valid 90%" in result.err


def test_a_goal_holding_a_token_is_printed_and_sent_masked(planner, cli, tmp_path):
    token = "github_pat_" + "11AAAAAAA0bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
    goals = tmp_path / "mine.json"
    goals.write_text(json.dumps([f"Coordinates of a city, token {token}"]))

    result = cli("evalplanner", str(goals), "--store")

    assert "Coordinates of a city, token ***" in result.out
    assert token not in result.out + result.err
    assert token not in planner.all_text()
    assert token not in json.dumps(list(PlanAttempt.objects.values("goal", "prompt")))


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[]", "non-empty list"),
        ("goals: [{goal: x, colour: red}]", "unknown field(s) colour"),
        ("- {goal: '  '}", "the goal is empty"),
        ("- {goal: x, answers: [a]}", "`answers` must be a dict"),
        ("- 3", "each goal is a text or an object"),
        ("{: bad", "cannot read goals"),
    ],
)
def test_bad_goals_files_are_refused(tmp_path, cli, content, words):
    path = tmp_path / "goals.yaml"
    path.write_text(content)
    with pytest.raises(GoalsFileInvalid, match=words.replace("(", r"\(").replace(")", r"\)")):
        load_goal_cases(path)
    result = cli("evalplanner", str(path))
    assert result.code == 1
    assert words in result.err


def test_evalplanner_refuses_bad_options(cli, tmp_path):
    assert "--min-valid is a share" in cli("evalplanner", "--min-valid", "2").err
    assert "cannot read goals" in cli("evalplanner", str(tmp_path / "none.yaml")).err
    assert "`far` is not configured" in cli("evalplanner", "--endpoint", "far").err


def test_an_expected_tool_the_planner_was_not_shown_lowers_retrieval_recall(planner, cli, tmp_path):
    """Retrieval is measured whatever the plan: a goal whose tools were not all in the
    catalog it was shown says which were missing, and the total counts them."""
    goals = tmp_path / "mine.json"
    goals.write_text(
        json.dumps(
            [
                {"goal": "Coordinates of a city", "tools": ["geocode_city"]},
                {"goal": "Coordinates of a city", "tools": ["geocode_city", "no_such_tool"]},
            ]
        )
    )

    result = cli("evalplanner", str(goals), "--json")

    report = json.loads(result.out)
    first, second = report["goals"]
    assert (first["tools_missed"], first["retrieval_recall"]) == ([], 1.0)
    assert (second["tools_missed"], second["retrieval_recall"]) == (["no_such_tool"], 0.5)
    assert "no_such_tool" not in second["tools_offered"]
    assert report["totals"]["retrieval_recall"] == round(2 / 3, 3)

    text = cli("evalplanner", str(goals)).out
    assert "not offered to the planner: no_such_tool (retrieval recall 50%)" in text
    assert "retrieval: 67% of the 3 expected tool(s) of 2 goal(s) were offered" in text
