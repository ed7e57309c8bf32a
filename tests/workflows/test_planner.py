"""workflows.planner: goal → plan → validator → repairs → a version pending review.

Every test drives the real openai SDK against the OpenAI-compatible fake on
loopback (tests/fakes/openai_server.py) and reads what it received.
"""

from __future__ import annotations

import copy
import json
import logging
import random
import re

import pytest
from django.contrib.auth import get_user_model

from tests.fakes.openai_server import FakeLLM
from tools.llm import LLMClient
from tools.llm.prices import Price, PriceTable
from tools.registry import ToolRegistry
from tools.spec import ToolSpec
from workflows.models import PlanAttempt, Workflow
from workflows.planner import PlanError, PlanFailed, PlanNotRevisable, PlanRoundsExhausted
from workflows.planner.catalog import catalog_entries, rank_tools, select_tools, tokenize
from workflows.planner.selectors import plan_attempts_for_lineage, plan_attempts_for_version
from workflows.planner.services import MAX_REVISION_ROUNDS, plan_create, plan_revise
from workflows.services import workflow_import, workflow_spec, workflow_transition

pytestmark = pytest.mark.django_db

SECRET = "sk-live-planner-secret-0123456789"
GOAL = "Tell me the weather forecast for a city"


def _schema(props: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": props, "required": required}


def base_specs() -> list[ToolSpec]:
    return [
        ToolSpec(
            name="geocode_city",
            kind="builtin",
            description="Find the latitude and longitude of a city by name.\nUses a gazetteer.",
            input_schema=_schema(
                {
                    "city": {"type": "string", "description": "City name"},
                    "country": {"type": "string"},
                },
                ["city"],
            ),
            outputs=["lat", "lon", "name"],
            output_types={"lat": {"type": "number"}, "lon": {"type": "number"}},
        ),
        ToolSpec(
            name="weather_forecast",
            kind="builtin",
            description="Daily weather forecast (temperature, summary) at a latitude/longitude.",
            input_schema=_schema(
                {
                    "lat": {"type": "number"},
                    "lon": {"type": "number"},
                    "days": {"type": "integer", "minimum": 1, "maximum": 16},
                },
                ["lat", "lon"],
            ),
            outputs=["temperature", "summary"],
        ),
        ToolSpec.model_validate(
            {
                "name": "github_issues",
                "kind": "http",
                "description": "Open issues of a GitHub repository.",
                "input_schema": _schema(
                    {"owner": {"type": "string"}, "repo": {"type": "string"}}, ["owner", "repo"]
                ),
                "http": {
                    "base_url": "{{env.PLANNER_GH_BASE:-https://api.github.com}}",
                    "request": {"url": "/repos/{{owner}}/{{repo}}/issues"},
                    "auth": {"type": "bearer", "token": "{{env.PLANNER_TEST_TOKEN}}"},
                    "response_extract": {"count": "count"},
                },
            }
        ),
    ]


def make_registry(extra: list[ToolSpec] = ()) -> ToolRegistry:
    return ToolRegistry([*base_specs(), *extra])


VALID_PLAN = {
    "name": "city_weather",
    "description": "The forecast for a city.",
    "inputs": {"city": {"type": "string", "default": "Oslo"}},
    "tools": ["geocode_city", "weather_forecast"],
    "steps": [
        {
            "id": "geo",
            "kind": "tool",
            "tool": "geocode_city",
            "input_mapping": {"city": "$input.city"},
        },
        {
            "id": "weather",
            "kind": "tool",
            "tool": "weather_forecast",
            "input_mapping": {"lat": "geo.lat", "lon": "geo.lon"},
        },
    ],
    "outputs": {"temperature": "weather.temperature"},
}


def plan(**changes) -> dict:
    data = copy.deepcopy(VALID_PLAN)
    data.update(changes)
    return data


def invalid_plan() -> dict:
    """`weather` maps `latitude` (unknown) and misses `lat` (required)."""
    data = plan()
    data["steps"][1]["input_mapping"] = {"latitude": "geo.lat", "lon": "geo.lon"}
    return data


def revised_plan(days: int) -> dict:
    data = plan()
    data["steps"][1]["input_mapping"] = {"lat": "geo.lat", "lon": "geo.lon", "days": days}
    return data


@pytest.fixture
def llm():
    with FakeLLM() as server:
        yield server


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def client(llm, sleeps):
    with LLMClient(
        llm.base_url, "sk-test", "planner-model", 5.0, 2, sleep=sleeps.append, rand=random.Random(1)
    ) as c:
        yield c


@pytest.fixture
def user():
    return get_user_model().objects.create_user("planner-user")


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv("PLANNER_TEST_TOKEN", SECRET)
    monkeypatch.setenv("PLANNER_GH_BASE", "https://gh.internal.example")


def attempts() -> list[PlanAttempt]:
    return list(PlanAttempt.objects.order_by("id"))


# --- happy path ---------------------------------------------------------------------


def test_plan_create_stores_a_pending_review_version_and_its_attempt(llm, client, user):
    llm.reply_json(
        VALID_PLAN, usage={"prompt_tokens": 900, "completion_tokens": 80, "total_tokens": 980}
    )

    workflow = plan_create(
        goal=GOAL,
        sample_inputs={"city": "Oslo"},
        owner=user,
        registry=make_registry(),
        client=client,
    )

    assert (workflow.name, workflow.version, workflow.status) == (
        "city_weather",
        1,
        "pending_review",
    )
    assert workflow.owner == user
    assert workflow.goal == GOAL
    assert [s.step_id for s in workflow.steps.order_by("position")] == ["geo", "weather"]
    (attempt,) = attempts()
    assert attempt.status == "valid"
    assert attempt.workflow == workflow
    assert (attempt.revision, attempt.repair_round, attempt.model) == (1, 0, "planner-model")
    assert attempt.usage["total_tokens"] == 980
    assert attempt.cost_pico is None  # the fake server's model has no price
    assert [a["status"] for a in attempt.usage["http_attempts"]] == [200]
    assert json.loads(attempt.raw_reply) == VALID_PLAN
    assert attempt.validator_report == []
    assert attempt.created_by == user
    assert attempt.goal == GOAL

    (request,) = llm.requests
    assert request.body["response_format"]["type"] == "json_schema"
    # A first plan may ask questions: the answer is a workflow or questions.
    assert request.body["response_format"]["json_schema"]["name"] == "plan_or_questions"
    plan_branch, questions_branch = request.body["response_format"]["json_schema"]["schema"][
        "oneOf"
    ]
    assert "steps" in plan_branch["properties"]
    assert questions_branch["properties"]["questions"]["maxItems"] == 5
    assert attempt.prompt == request.messages
    system, user_message = request.messages
    assert system["role"] == "system"
    assert GOAL in user_message["content"]
    assert '{"city": "Oslo"}' in user_message["content"]
    for name in ("geocode_city", "weather_forecast", "github_issues"):
        assert f'"name":"{name}"' in user_message["content"]
    assert "Uses a gazetteer" not in user_message["content"]  # one-line descriptions
    assert list(plan_attempts_for_version(workflow=workflow)) == [attempt]


def test_plan_create_accepts_fenced_json_and_normalises_the_name(llm, client):
    data = plan(name="City Weather Report!")
    llm.reply("Here is the workflow:\n```json\n" + json.dumps(data) + "\n```\n")

    workflow = plan_create(goal=GOAL, registry=make_registry(), client=client)

    assert workflow.name == "city_weather_report"
    assert workflow.definition["name"] == "city_weather_report"


def test_a_name_clash_with_an_unrelated_workflow_is_suffixed(llm, client):
    other = plan(description="someone else's")
    other["steps"] = other["steps"][:1]
    other["outputs"] = {"lat": "geo.lat"}
    workflow_import(data=other)
    workflow_import(data={**other, "name": "city_weather-2"})
    llm.reply_json(VALID_PLAN)

    workflow = plan_create(goal=GOAL, registry=make_registry(), client=client)

    assert (workflow.name, workflow.version) == ("city_weather-3", 1)
    assert Workflow.objects.filter(name="city_weather").count() == 1


# --- repairs -----------------------------------------------------------------------


def test_malformed_json_then_a_repair(llm, client):
    llm.reply('Sure! {"name": "city_weather", "steps": [')
    llm.reply_json(VALID_PLAN)

    workflow = plan_create(goal=GOAL, registry=make_registry(), client=client)

    assert workflow.status == "pending_review"
    first, second = attempts()
    assert (first.status, first.repair_round, first.workflow) == ("invalid", 0, None)
    assert [i["code"] for i in first.validator_report] == ["reply_invalid"]
    assert "not valid JSON" in first.validator_report[0]["message"]
    assert (second.status, second.repair_round, second.workflow) == ("valid", 1, workflow)
    repair_request = llm.requests[1].messages
    assert repair_request[:2] == llm.requests[0].messages
    assert repair_request[2] == {
        "role": "assistant",
        "content": 'Sure! {"name": "city_weather", "steps": [',
    }
    assert repair_request[3]["role"] == "user"
    assert "could not be used" in repair_request[3]["content"]
    assert "[reply_invalid]" in repair_request[3]["content"]


def test_validator_errors_are_fed_back_and_repaired(llm, client):
    llm.reply_json(invalid_plan())
    llm.reply_json(VALID_PLAN)

    workflow = plan_create(goal=GOAL, registry=make_registry(), client=client)

    assert workflow.definition["steps"][1]["input_mapping"] == {"lat": "geo.lat", "lon": "geo.lon"}
    first, second = attempts()
    assert first.status == "invalid"
    assert sorted(i["code"] for i in first.validator_report) == [
        "missing_required_param",
        "unknown_param",
    ]
    feedback = llm.requests[1].messages[-1]["content"]
    assert "2 problem(s)" in feedback
    assert "steps[1].input_mapping.latitude [unknown_param]" in feedback
    assert "[missing_required_param]" in feedback
    assert "`lat`" in feedback
    assert second.status == "valid"
    assert [(a.repair_budget, a.outcome) for a in (first, second)] == [
        (2, "repair_requested"),
        (2, "accepted"),
    ]


def test_a_repair_round_passes_the_warnings_on_with_the_errors(llm, client):
    data = invalid_plan()
    data["inputs"]["unused"] = {"type": "string"}
    llm.reply_json(data)
    llm.reply_json(VALID_PLAN)

    plan_create(goal=GOAL, registry=make_registry(), client=client)

    feedback = llm.requests[1].messages[-1]["content"]
    assert "2 problem(s)" in feedback
    assert "Also fix these 1 warning(s):" in feedback
    assert "- inputs.unused [unused_input]: input `unused` is declared but never read" in feedback


def test_warnings_do_not_block_a_plan(llm, client):
    data = plan(inputs={"city": {"type": "string"}, "unused": {"type": "string"}})
    llm.reply_json(data)

    workflow = plan_create(goal=GOAL, registry=make_registry(), client=client)

    (attempt,) = attempts()
    assert attempt.status == "valid"
    assert [i["code"] for i in attempt.validator_report] == ["unused_input"]
    assert workflow.status == "pending_review"


def test_exhausted_repairs_raise_plan_failed_with_the_attempts_stored(llm, client):
    for _ in range(3):
        llm.reply_json(invalid_plan())

    with pytest.raises(PlanFailed) as caught:
        plan_create(goal=GOAL, registry=make_registry(), client=client)

    error = caught.value
    assert "3 attempts" in error.message
    assert "2 repair rounds" in error.message
    assert "[unknown_param]" in error.message
    assert "[missing_required_param]" in error.message
    assert [a.status for a in attempts()] == ["invalid", "invalid", "invalid"]
    assert [a.repair_round for a in attempts()] == [0, 1, 2]
    assert [a.outcome for a in attempts()] == [
        "repair_requested",
        "repair_requested",
        "budget_exhausted",
    ]
    assert [a.pk for a in error.attempts] == [a.pk for a in attempts()]
    assert {i.code for i in error.issues} == {"unknown_param", "missing_required_param"}
    assert Workflow.objects.count() == 0
    assert len(llm.requests) == 3
    assert len(llm.requests[2].messages) == 6  # system, user, then two (reply, repair) pairs


def test_replies_cut_off_mid_json_fail_saying_how_to_fix_it(llm, client):
    cut = '{"name": "sales", "steps": [{"id": "load", "kind": "tool", "tool": "csv_re'
    for _ in range(3):
        llm.reply(cut)

    with pytest.raises(PlanFailed) as caught:
        plan_create(goal=GOAL, registry=make_registry(), client=client)

    message = caught.value.message
    assert "return the whole JSON again, shorter" in message  # what the model was told
    assert "a model with a larger output limit (PLANNER_MODEL)" in message  # the person's fix
    assert "split the goal" in message


def test_a_reply_that_is_json_but_not_an_object_is_repaired(llm, client):
    llm.reply("[1, 2, 3]")
    llm.reply_json(VALID_PLAN)

    plan_create(goal=GOAL, registry=make_registry(), client=client)

    assert "not a workflow object" in attempts()[0].validator_report[0]["message"]


# --- transport ------------------------------------------------------------------------


def test_429_then_success_is_retried_and_recorded(llm, client, sleeps):
    llm.fail(429, headers={"Retry-After": "0"})
    llm.reply_json(VALID_PLAN)

    workflow = plan_create(goal=GOAL, registry=make_registry(), client=client)

    assert workflow.status == "pending_review"
    (attempt,) = attempts()
    assert [a["status"] for a in attempt.usage["http_attempts"]] == [429, 200]
    assert attempt.usage["http_attempts"][0]["error"] == "llm_rate_limited"
    assert sleeps == [0.0]
    assert len(llm.requests) == 2


def test_an_unavailable_llm_fails_the_plan_with_an_error_attempt(llm, client):
    llm.fail(503, message="overloaded", times=3)

    with pytest.raises(PlanFailed, match="HTTP 503: overloaded"):
        plan_create(goal=GOAL, registry=make_registry(), client=client)

    (attempt,) = attempts()
    assert attempt.status == "error"
    assert attempt.outcome == "failed"
    assert "overloaded" in attempt.error
    assert [a["status"] for a in attempt.usage["http_attempts"]] == [503, 503, 503]
    assert attempt.cost_pico == 0  # no answer, no cost
    assert Workflow.objects.count() == 0


def test_every_attempt_records_its_cost_at_the_endpoints_price_for_the_model_that_answered(
    llm, sleeps
):
    # The reply names the model that answered ("fake-model"); the one asked has no price.
    prices = PriceTable({"fake-model": Price.per_million("1.25", "10")})
    llm.reply_json(invalid_plan(), usage={"prompt_tokens": 700, "completion_tokens": 90})
    llm.reply_json(VALID_PLAN, usage={"prompt_tokens": 1100, "completion_tokens": 85})
    with LLMClient(
        llm.base_url, "sk-test", "planner-model", 5.0, 0, sleep=sleeps.append, prices=prices
    ) as priced:
        plan_create(goal=GOAL, registry=make_registry(), client=priced)

    first, second = attempts()
    assert first.cost_pico == 700 * 1_250_000 + 90 * 10_000_000  # $0.001775
    assert second.cost_pico == 1100 * 1_250_000 + 85 * 10_000_000  # $0.002225


def test_an_empty_goal_is_refused_before_any_call(llm, client):
    with pytest.raises(PlanError, match="goal is needed"):
        plan_create(goal="   ", registry=make_registry(), client=client)
    assert llm.requests == []


# --- revisions ------------------------------------------------------------------------


def test_plan_revise_makes_the_next_version_and_rejects_the_previous(llm, client, user):
    llm.reply_json(VALID_PLAN)
    first = plan_create(goal=GOAL, owner=user, registry=make_registry(), client=client)
    llm.reply_json({**revised_plan(3), "name": "a_new_name_the_model_chose"})

    second = plan_revise(
        workflow=first,
        feedback="Forecast three days, not one.",
        user=user,
        registry=make_registry(),
        client=client,
    )

    first.refresh_from_db()
    assert first.status == "rejected"
    assert (second.name, second.version, second.status) == ("city_weather", 2, "pending_review")
    assert second.owner == user
    assert second.goal == GOAL
    assert second.definition["steps"][1]["input_mapping"]["days"] == 3
    revision = attempts()[-1]
    assert (revision.revision, revision.based_on, revision.workflow) == (2, first, second)
    assert revision.feedback == "Forecast three days, not one."
    prompt = llm.requests[-1].messages[-1]["content"]
    assert "Forecast three days, not one." in prompt
    assert "`city_weather` version 1" in prompt
    assert json.dumps(workflow_spec(first).to_data(), ensure_ascii=False, indent=1) in prompt
    assert 'Keep "name": "city_weather"' in prompt
    assert [a.workflow_id for a in plan_attempts_for_lineage(workflow=second)] == [
        first.pk,
        second.pk,
    ]


def test_an_unchanged_revision_is_sent_back_for_repair(llm, client):
    llm.reply_json(VALID_PLAN)
    first = plan_create(goal=GOAL, registry=make_registry(), client=client)
    llm.reply_json(VALID_PLAN)  # the model ignores the feedback …
    llm.reply_json(revised_plan(2))  # … and then follows it

    second = plan_revise(
        workflow=first, feedback="Two days please.", registry=make_registry(), client=client
    )

    assert second.version == 2
    unchanged = attempts()[1]
    assert unchanged.status == "invalid"
    assert [i["code"] for i in unchanged.validator_report] == ["plan_unchanged"]
    assert "identical" in llm.requests[2].messages[-1]["content"]


def test_at_most_five_revision_rounds_then_the_planner_says_so(llm, client):
    llm.reply_json(VALID_PLAN)
    current = plan_create(goal=GOAL, registry=make_registry(), client=client)
    for days in range(1, MAX_REVISION_ROUNDS + 1):
        llm.reply_json(revised_plan(days))
        current = plan_revise(
            workflow=current, feedback=f"{days} days", registry=make_registry(), client=client
        )
    assert current.version == 1 + MAX_REVISION_ROUNDS
    sent = len(llm.requests)

    with pytest.raises(PlanRoundsExhausted) as caught:
        plan_revise(workflow=current, feedback="again", registry=make_registry(), client=client)

    assert "5 revision rounds" in caught.value.message
    assert "will not revise it again" in caught.value.message
    assert isinstance(caught.value, PlanFailed)
    assert len(llm.requests) == sent  # no call was made
    current.refresh_from_db()
    assert current.status == "pending_review"
    assert sorted({a.revision for a in attempts()}) == [1, 2, 3, 4, 5, 6]


def test_a_failed_llm_call_does_not_use_up_a_revision_round(llm, client):
    llm.reply_json(VALID_PLAN)
    first = plan_create(goal=GOAL, registry=make_registry(), client=client)
    llm.fail(500, times=3)
    with pytest.raises(PlanFailed):
        plan_revise(workflow=first, feedback="3 days", registry=make_registry(), client=client)
    first.refresh_from_db()
    assert first.status == "pending_review"  # nothing replaced it
    llm.reply_json(revised_plan(3))

    second = plan_revise(workflow=first, feedback="3 days", registry=make_registry(), client=client)

    assert attempts()[-1].revision == 2
    assert second.version == 2


def test_only_versions_in_review_are_revised(llm, client):
    llm.reply_json(VALID_PLAN)
    workflow = plan_create(goal=GOAL, registry=make_registry(), client=client)
    workflow_transition(workflow=workflow, to="validating")

    with pytest.raises(PlanNotRevisable, match="validating"):
        plan_revise(workflow=workflow, feedback="x", registry=make_registry(), client=client)
    with pytest.raises(PlanError, match="feedback is needed"):
        plan_revise(workflow=workflow, feedback=" ", registry=make_registry(), client=client)


# --- catalog: BM25 selection, bounded prompts ------------------------------------------

_NOUNS = (  # noqa: SIM905 - a word list reads better as text
    "invoice customer ticket shipment payroll inventory calendar playlist recipe vehicle "
    "patient contract lead campaign warehouse"
).split()
_VERBS = ["list", "create", "update", "delete", "archive", "export", "sync", "audit"]


def generated_specs(count: int) -> list[ToolSpec]:
    specs = []
    for i in range(count):
        noun, verb = _NOUNS[i % len(_NOUNS)], _VERBS[(i // len(_NOUNS)) % len(_VERBS)]
        specs.append(
            ToolSpec(
                name=f"{noun}_{verb}_{i}",
                kind="builtin",
                description=f"{verb.title()} {noun} records in system {i}. " + "Detail. " * 12,
                input_schema=_schema(
                    {f"{noun}_id": {"type": "string"}, "limit": {"type": "integer"}},
                    [f"{noun}_id"],
                ),
                outputs=["items", "count"],
            )
        )
    return specs


def prompt_chars(request) -> int:
    return sum(len(m["content"]) for m in request.messages)


@pytest.mark.parametrize("count", [300, 1000])
def test_a_large_registry_shows_only_relevant_tools_and_the_prompt_stays_bounded(
    llm, client, count
):
    registry = make_registry(generated_specs(count))
    llm.reply_json(VALID_PLAN)

    plan_create(goal=GOAL, sample_inputs={"city": "Oslo"}, registry=registry, client=client)

    (request,) = llm.requests
    catalog = request.messages[1]["content"]
    assert '"name":"geocode_city"' in catalog
    assert '"name":"weather_forecast"' in catalog
    assert catalog.count('"name":') <= 25
    assert prompt_chars(request) < 16_000


def test_a_small_registry_is_shown_whole():
    registry = make_registry(generated_specs(40))
    assert select_tools(registry, "weather") == registry.names()


def test_bm25_ranks_by_name_description_and_parameter_names():
    registry = make_registry(generated_specs(300))

    assert select_tools(registry, "repository issues on GitHub", limit=1) == ["github_issues"]
    by_param = select_tools(registry, "look up a place by its latitude", limit=3)
    assert "weather_forecast" in by_param or "geocode_city" in by_param
    assert "invoice_list_0" in select_tools(registry, "please run invoice_list_0 nightly")
    pinned = select_tools(registry, "weather", pinned=["payroll_audit_109"])
    assert "payroll_audit_109" in pinned
    assert tokenize("getWeatherForecasts for_cities") == ["weather", "forecast", "citie"]


def test_the_offered_tools_say_why_each_was_shown_and_its_score_best_first():
    small = make_registry(generated_specs(40))
    assert {t.why for t in rank_tools(small, "weather")} == {"all"}
    assert {t.score for t in rank_tools(small, "weather")} == {None}

    registry = make_registry(generated_specs(300))
    offered = rank_tools(
        registry,
        "repository issues on GitHub, then run invoice_list_0",
        pinned=["payroll_audit_109"],
        limit=2,
    )
    why = {t.name: t.why for t in offered}
    assert why["github_issues"] == "matched"
    assert why["invoice_list_0"] == "named"
    assert why["payroll_audit_109"] == "pinned"
    scores = [t.score for t in offered]
    assert scores == sorted(scores, reverse=True)  # best first
    assert offered[0].name == "github_issues"
    assert offered[0].score > 0
    assert sorted(t.name for t in offered) == select_tools(
        registry,
        "repository issues on GitHub, then run invoice_list_0",
        pinned=["payroll_audit_109"],
        limit=2,
    )
    assert offered[0].as_dict() == {
        "name": "github_issues",
        "why": "matched",
        "score": round(offered[0].score, 4),
    }


def test_the_plan_attempt_records_the_tools_offered(llm, client):
    registry = make_registry(generated_specs(300))
    llm.reply_json(VALID_PLAN)

    plan_create(goal=GOAL, sample_inputs={"city": "Oslo"}, registry=registry, client=client)

    attempt = PlanAttempt.objects.get()
    offered = {t["name"]: t for t in attempt.offered_tools}
    assert offered["weather_forecast"]["why"] == "matched"
    assert offered["weather_forecast"]["score"] > 0
    catalog = llm.requests[0].messages[1]["content"]
    assert sorted(offered) == sorted(re.findall(r'"name":"([^"]+)"', catalog))


# --- secrets -----------------------------------------------------------------------------


def test_no_env_secret_reaches_the_planner_prompt(llm, client, secret_env):
    registry = make_registry()
    data = plan(tools=["geocode_city", "weather_forecast", "github_issues"])
    data["inputs"]["owner"] = {"type": "string", "default": "octo"}
    data["steps"].append(
        {
            "id": "issues",
            "kind": "tool",
            "tool": "github_issues",
            "input_mapping": {"owner": "$input.owner", "repo": "widgets"},
        }
    )
    llm.reply("not json")  # a repair round: the prompt grows with the reply and the issues
    llm.reply_json(data)

    plan_create(
        goal=f"{GOAL}, and count GitHub issues (my token is {SECRET})",
        registry=registry,
        client=client,
    )

    received = llm.all_text()
    assert "github_issues" in received
    assert SECRET not in received
    assert "gh.internal.example" not in received
    assert "***" in received  # the pasted token was masked
    for attempt in attempts():
        assert SECRET not in json.dumps(attempt.prompt)
    entries = json.dumps(catalog_entries(registry, registry.names()))
    assert SECRET not in entries
    assert "PLANNER_TEST_TOKEN" not in entries


def test_a_plan_reading_an_undeclared_variable_is_repaired_and_config_is_not_masked(
    llm, client, secret_env
):
    leaky = plan()
    leaky["steps"][0]["input_mapping"]["city"] = "$env.DJANGO_SECRET_KEY"
    llm.reply_json(leaky)
    fixed = plan()  # a non-secret configuration value written as a literal stays as written
    fixed["description"] = "Weather near https://gh.internal.example"
    llm.reply_json(fixed)

    workflow = plan_create(goal=GOAL, registry=make_registry(), client=client)

    first, second = attempts()
    assert "env_not_allowed" in [i["code"] for i in first.validator_report]
    feedback = llm.requests[1].messages[-1]["content"]
    assert "`$env.DJANGO_SECRET_KEY`" in feedback
    assert "FLOWPILOT_ENV_ALLOW" in feedback
    assert second.status == "valid"
    assert workflow.definition["description"] == "Weather near https://gh.internal.example"


def leaking_plan() -> dict:
    """The issue's leak, planned: the token github_issues takes as its bearer credential
    mapped into a transform whose output an llm prompt reads."""
    data = plan(tools=["geocode_city", "weather_forecast", "github_issues"])
    data["steps"] += [
        {"id": "issues", "kind": "tool", "tool": "github_issues",
         "input_mapping": {"owner": "octo", "repo": "widgets"}},
        {"id": "shape", "kind": "transform", "expression": "{token: tok, n: n}",
         "input_mapping": {"tok": "$env.PLANNER_TEST_TOKEN", "n": "issues.count"}},
        {"id": "ask", "kind": "llm", "prompt": "Comment on {{n}} issues ({{token}})",
         "input_mapping": {"n": "shape.n", "token": "shape.token"}},
    ]  # fmt: skip
    return data


def test_a_plan_mapping_a_credential_out_of_its_tool_is_refused_with_the_fix(
    llm, client, secret_env
):
    llm.reply_json(leaking_plan())
    fixed = leaking_plan()
    del fixed["steps"][3]["input_mapping"]["tok"]
    fixed["steps"][3]["expression"] = "{n: n}"
    fixed["steps"][4]["prompt"] = "Comment on {{n}} issues"
    del fixed["steps"][4]["input_mapping"]["token"]
    llm.reply_json(fixed)

    workflow = plan_create(goal=GOAL, registry=make_registry(), client=client)

    first, second = attempts()
    report = [(i["code"], i["path"]) for i in first.validator_report if i["severity"] == "error"]
    assert report == [("credential_leak", "steps[3].input_mapping.tok")]
    feedback = llm.requests[1].messages[-1]["content"]
    assert "credential_leak" in feedback
    assert "steps[3].input_mapping.tok" in feedback
    assert "`$env.PLANNER_TEST_TOKEN`, the credential of tool `github_issues`" in feedback
    assert "give the tool the credential through its auth" in feedback
    assert second.status == "valid"
    assert "$env" not in json.dumps(workflow.definition)
    assert SECRET not in llm.all_text()


def test_a_planner_that_keeps_leaking_a_credential_fails_naming_the_fix(llm, client, secret_env):
    for _ in range(3):
        llm.reply_json(leaking_plan())

    with pytest.raises(PlanFailed) as caught:
        plan_create(goal=GOAL, registry=make_registry(), client=client)

    assert "[credential_leak]" in caught.value.message
    assert "through its auth" in caught.value.message
    assert Workflow.objects.count() == 0


# --- free text: a credential a person typed is masked before it is stored or sent -------

TYPED_TOKEN = "ghp_" + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9Oo8"
TYPED_JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib3QifQ.c2lnbmF0dXJlLXZhbHVl"


def test_a_goal_holding_a_credential_is_masked_before_it_is_stored_or_sent(
    llm, client, secret_env, user
):
    llm.reply_json(plan())
    goal = f"{GOAL}; use my token {TYPED_TOKEN} (or {SECRET})"
    inputs = {"city": "Oslo", "auth": f"Bearer {TYPED_JWT}"}

    workflow = plan_create(
        goal=goal, sample_inputs=inputs, owner=user, registry=make_registry(), client=client
    )

    masked = f"{GOAL}; use my token *** (or ***)"
    (attempt,) = attempts()
    assert workflow.goal == masked
    assert workflow.definition["goal"] == masked
    assert attempt.goal == masked
    assert attempt.sample_inputs == {"city": "Oslo", "auth": "Bearer ***"}
    sent = llm.all_text()
    for secret in (TYPED_TOKEN, TYPED_JWT, SECRET):
        assert secret not in sent
        assert secret not in json.dumps(attempt.prompt)
    assert "Oslo" in sent
    assert "use my token ***" in sent


def test_answers_and_feedback_holding_a_credential_are_masked_too(llm, client, secret_env):
    rounds = [{"questions": [{"id": "key", "question": "Which key?", "options": []}],
               "answers": {"key": f"this one: {TYPED_TOKEN}"}}]  # fmt: skip
    llm.reply_json(plan())
    workflow = plan_create(
        goal=GOAL, registry=make_registry(), client=client, clarifications=rounds
    )
    llm.reply_json(revised_plan(days=3))

    plan_revise(
        workflow=workflow,
        feedback=f"three days; the key is {TYPED_JWT}",
        registry=make_registry(),
        client=client,
    )

    first, revision = attempts()
    assert first.clarifications[0]["answers"] == {"key": "this one: ***"}
    assert revision.feedback == "three days; the key is ***"
    stored = json.dumps([first.prompt, revision.prompt, revision.feedback])
    for secret in (TYPED_TOKEN, TYPED_JWT):
        assert secret not in llm.all_text()
        assert secret not in stored


# --- planflow -----------------------------------------------------------------------------


CSV_PLAN = {
    "name": "sales_by_region",
    "inputs": {"path": {"type": "string", "default": "data/sales.csv"}},
    "steps": [
        {
            "id": "read",
            "kind": "tool",
            "tool": "csv_read",
            "input_mapping": {"path": "$input.path"},
        },
        {
            "id": "totals",
            "kind": "tool",
            "tool": "aggregate",
            "input_mapping": {"rows": "read.rows", "group_by": "region", "sum": "amount"},
        },
    ],
    "outputs": {"groups": "totals.groups"},
}


@pytest.fixture
def llm_settings(settings, llm):
    settings.OPENAI_BASE_URL = llm.base_url
    settings.OPENAI_API_KEY = "sk-cli"
    settings.PLANNER_MODEL = "cli-model"
    settings.LLM_MAX_RETRIES = 0
    return settings


def test_planflow_prints_the_attempts_and_the_stored_workflow(llm, llm_settings, cli):
    bad = copy.deepcopy(CSV_PLAN)
    del bad["steps"][1]["input_mapping"]["sum"]
    llm.reply_json(bad)
    llm.reply_json(CSV_PLAN)

    result = cli(
        "planflow",
        "Total sales by region",
        "--input",
        "path=data/sales.csv",
        "--model",
        "other-model",
    )

    assert result.code == 0, result.out + result.err
    assert "planning with other-model" in result.out
    assert "attempt 1 (round 0 of 2): invalid, sent back for a repair" in result.out
    assert "[missing_required_param]" in result.out
    assert "attempt 2 (round 1 of 2): valid, plan accepted" in result.out
    assert "stored sales_by_region v1 (pending_review)" in result.out
    assert "csv_read" in result.out
    assert llm.requests[0].body["model"] == "other-model"
    assert '{"path": "data/sales.csv"}' in llm.requests[0].messages[1]["content"]


def test_planflow_never_prints_a_credential_typed_into_the_goal_or_the_inputs(
    llm, llm_settings, cli, caplog
):
    caplog.set_level(logging.DEBUG)
    llm.reply_json(CSV_PLAN)

    result = cli(
        "planflow", f"Total sales by region, key {TYPED_TOKEN}",
        "--input", "path=data/sales.csv", "--input", f"token={TYPED_JWT}",
    )  # fmt: skip

    assert result.code == 0, result.out + result.err
    assert caplog.records  # the LLM call was logged at DEBUG
    for secret in (TYPED_TOKEN, TYPED_JWT):
        assert secret not in caplog.text
    assert "planning with cli-model: Total sales by region, key ***" in result.out
    for secret in (TYPED_TOKEN, TYPED_JWT):
        assert secret not in result.out + result.err
        assert secret not in llm.all_text()
    (attempt,) = attempts()
    assert attempt.sample_inputs == {"path": "data/sales.csv", "token": "***"}


def test_planflow_exits_1_when_planning_fails(llm, llm_settings, cli):
    llm.fail(400, message="model not found")

    result = cli("planflow", "Total sales by region")

    assert result.code == 1
    assert "planning failed" in result.err
    assert "model not found" in result.err
    assert "attempt 1 (round 0 of 2): error, llm or transport error" in result.out


def test_planflow_warns_when_the_tool_catalog_may_be_out_of_date(llm, llm_settings, cli):
    from tools.models import ToolSource

    ToolSource.objects.create(kind="mcp", name="files", location="/srv/files.yaml")  # never read
    llm.fail(400, message="model not found")  # the warning comes before the call

    result = cli("planflow", "Total sales by region")

    assert (
        "warning: the tool catalog may be out of date: mcp source files (/srv/files.yaml) "
        "is stale: never read"
    ) in result.err
