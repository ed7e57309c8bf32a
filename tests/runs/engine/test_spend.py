"""The money ledger of model calls (runs/engine/spend.py), through the engine, against the
OpenAI-compatible server on loopback: every call counted at its price to the token, and
budgets in money kept before the call that would pass them."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection

from runs.costs import run_cost, step_costs, workflow_month_cost
from runs.engine import spend as spend_module
from runs.engine.build import build_run_context
from runs.engine.spend import MoneyBudgetExceeded, Spend, estimate_prompt_tokens
from runs.models import LLMCall
from runs.services import run_create, run_execute
from tests.fakes.openai_server import FakeLLM, completion, tool_call
from tests.runs.test_llm_steps import GeoProvider, execute, result
from tools.llm import LLMClient
from tools.llm.errors import LLMAuthFailed, LLMTimeout
from tools.llm.prices import PICO, Price, parse_prices, price_table
from tools.registry import ToolRegistry
from workflows.schema import LLMStep
from workflows.schema_llm import MoneyBudget
from workflows.services import workflow_import, workflow_spec

pytestmark = pytest.mark.django_db(transaction=True)

PRICES = {"step-model": ["2", "8"], "fake-model": ["1.5", "4"]}  # USD per million tokens


@pytest.fixture
def llm():
    with FakeLLM() as server:
        yield server


@pytest.fixture
def priced(settings):
    settings.FLOWPILOT_LLM_PRICES = parse_prices(PRICES, "test")
    return settings


@pytest.fixture
def client(llm, priced):
    with LLMClient(llm.base_url, "sk-test", "step-model", 5.0, 0, sleep=lambda s: None) as c:
        yield c


def flow(budget: dict | None = None, *, step_budget: dict | None = None, name: str = "ask"):
    step = {
        "id": "ask",
        "kind": "llm",
        "prompt": "What is the weather in {{city}}?",
        "input_mapping": {"city": "$input.city"},
        "tools": ["lookup_city", "forecast"],
        "max_output_tokens": 100,
    }
    if step_budget:
        step["budget"] = step_budget
    data = {"name": name, "inputs": {"city": {"type": "string"}}, "steps": [step]}
    if budget:
        data["budget"] = budget
    return data


def usage(prompt: int, completion: int) -> dict:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def run_flow(data, client, provider=None):
    registry = ToolRegistry([], [provider or GeoProvider()])
    return execute(data, client=client, registry=registry, inputs={"city": "Oslo"})


def test_every_call_is_counted_at_the_answering_models_price_to_the_token(llm, client):
    llm.reply(tool_calls=[tool_call("lookup_city", {"city": "Oslo"})], usage=usage(1234, 56))
    llm.reply("Mild.", usage=usage(1401, 7))

    run = run_flow(flow(), client)

    assert run.status == "succeeded", result(run, "ask").error
    calls = list(LLMCall.objects.filter(run=run))
    assert [(c.state, c.model, c.prompt_tokens, c.completion_tokens) for c in calls] == [
        ("answered", "fake-model", 1234, 56),
        ("answered", "fake-model", 1401, 7),
    ]
    # fake-model answered: 1.5 and 4 USD per million tokens, not step-model's 2 and 8.
    expected = Decimal(1234 + 1401) * Decimal("1.5") / 10**6 + Decimal(56 + 7) * 4 / 10**6
    total = run_cost(run.pk)
    assert total.usd == expected == Decimal("0.0042045")
    assert (total.calls, total.prompt_tokens, total.completion_tokens) == (2, 2635, 63)
    assert step_costs(run.pk)["ask"] == total
    assert all(c.estimate_pico and c.estimate_pico > 0 for c in calls)  # reserved first
    assert total.as_dict()["usd"] == "0.0042045"
    assert total.text().startswith("$0.0043 over 2 model calls (2,635 prompt + 63 completion")


def test_a_model_with_no_price_is_counted_in_tokens_and_shown_unpriced(llm, settings):
    settings.FLOWPILOT_LLM_PRICES = {}
    llm.reply("Mild.", usage=usage(50, 5))
    with LLMClient(llm.base_url, "k", "house-model", 5.0, 0) as client:
        run = run_flow(flow(), client)

    assert run.status == "succeeded"
    total = run_cost(run.pk)
    assert (total.calls, total.cost_pico, total.unpriced_calls) == (1, 0, 1)
    assert "1 at a model with no price" in total.text()


def test_a_call_that_passes_the_run_budget_fails_the_step_and_no_further_call_is_made(llm, client):
    # The first call's estimate fits $0.01; its answer costs $0.0150015 (10,001 prompt
    # tokens at $1.5 per million): the step fails at once, the tool call is not followed.
    llm.reply(tool_calls=[tool_call("lookup_city", {"city": "Oslo"})], usage=usage(10_001, 0))
    llm.reply("never asked")

    run = run_flow(flow({"usd_per_run": "0.01"}), client)

    assert run.status == "failed"
    error = result(run, "ask").error
    assert error["type"] == "money_budget_exceeded"
    assert "the workflow's budget.usd_per_run of $0.01" in error["message"]
    assert len(llm.requests) == 1
    assert llm.pending == 1
    assert run_cost(run.pk).usd == Decimal("0.0150015")


def test_a_call_whose_estimate_does_not_fit_is_never_sent(llm, client):
    llm.reply("never asked")

    run = run_flow(flow(step_budget={"usd_per_run": "0.000001"}), client)

    assert run.status == "failed"
    error = result(run, "ask").error
    assert error["type"] == "money_budget_exceeded"
    assert "step `ask`'s budget.usd_per_run" in error["message"]
    assert "the call was not made" in error["message"]
    assert llm.requests == []
    assert not LLMCall.objects.exists()  # the reservation was rolled back


def test_a_monthly_budget_spans_runs_and_outlives_deleted_runs(llm, client):
    data = flow({"usd_per_month": "0.002"})
    llm.reply("Mild.", usage=usage(1000, 0))  # $0.0015
    first = run_flow(data, client)
    assert first.status == "succeeded"
    first.delete()  # retention: the month keeps what it spent

    llm.reply("never asked")
    second = run_flow(data, client)

    assert second.status == "failed"
    assert result(second, "ask").error["type"] == "money_budget_exceeded"
    assert len(llm.requests) == 1
    month = workflow_month_cost("ask", datetime.now(UTC))
    assert month.usd == Decimal("0.0015")
    assert month.calls == 1


def test_an_llm_decision_takes_a_budget(llm, client):
    data = {
        "name": "route",
        "inputs": {"temp": {"type": "number"}},
        "steps": [
            {
                "id": "choose",
                "kind": "decision",
                "branches": ["hot", "cold"],
                "decision_prompt": "Is {{temp}} hot?",
                "input_mapping": {"temp": "$input.temp"},
                "budget": {"usd_per_run": "0.000001"},
            },
            {"id": "hot", "kind": "transform", "expression": "`1`"},
            {"id": "cold", "kind": "transform", "expression": "`0`"},
        ],
        "edges": [
            {"from": "choose", "to": "hot", "when": "hot"},
            {"from": "choose", "to": "cold", "when": "cold"},
        ],
    }
    llm.reply_json({"branch": "hot", "reason": "warm"})
    run = execute(data, client=client, registry=ToolRegistry([]), inputs={"temp": 30})

    assert run.status == "failed"
    assert result(run, "choose").error["type"] == "money_budget_exceeded"
    assert llm.requests == []


def test_a_call_with_no_answer_is_settled_at_no_cost(llm, client):
    llm.fail(400, message="bad request")

    run = run_flow(flow(), client)

    assert run.status == "failed"
    (call,) = LLMCall.objects.filter(run=run)
    assert (call.state, call.cost_pico, call.prompt_tokens) == ("failed", 0, 0)


def test_the_estimate_grows_with_the_prompt():
    small = estimate_prompt_tokens([{"role": "user", "content": "hi"}], None)
    large = estimate_prompt_tokens([{"role": "user", "content": "x" * 4000}], None)
    assert large - small >= 999


def test_two_runs_racing_for_the_last_dollar_of_a_month_only_one_reserves(priced, monkeypatch):
    """Reservations of one workflow are serialized: of two calls that each fit the
    month alone but not together, exactly one is reserved. The reserved call is held
    open (its body waits) until the other has tried: a call that ends without an answer
    gives its reservation back, and a fast first call ending before the second even
    asked would let both reserve one after the other, rightly."""
    if connection.vendor != "postgresql":
        pytest.skip("two connections reserving at once need PostgreSQL")
    step = LLMStep(id="ask", prompt="x", max_output_tokens=1000)
    prices = price_table({"m": Price.per_million("0", "1")})  # a call's estimate: $0.001
    outcomes: list[str] = []
    start = threading.Barrier(2)
    tried = threading.Barrier(2, timeout=60)  # both have asked; the reserved one still holds
    totals = spend_module._spent

    def slow_totals(rows):
        spent = totals(rows)
        time.sleep(0.3)  # between reading the totals and committing: where a race would be
        return spent

    monkeypatch.setattr(spend_module, "_spent", slow_totals)

    def reserve() -> None:
        spend = Spend(
            run_id=None,
            workflow="race",
            budget=MoneyBudget(usd_per_month=Decimal("0.0015")),
            now=lambda: datetime.now(UTC),
            output_tokens_guess=1000,
        )
        start.wait()
        try:
            with spend.call(step, endpoint="default", model="m", prices=prices, messages=[]):
                outcomes.append("reserved")
                tried.wait()
        except MoneyBudgetExceeded:
            outcomes.append("refused")
            tried.wait()
        finally:
            connection.close()

    threads = [threading.Thread(target=reserve) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["refused", "reserved"]


def test_last_months_calls_do_not_count_against_this_month(priced):
    prices = price_table({"m": Price.per_million("0", "1")})
    step = LLMStep(id="ask", prompt="x", max_output_tokens=1000)
    now = datetime(2026, 11, 1, 0, 0, 5, tzinfo=UTC)
    LLMCall.objects.create(
        workflow_name="monthly",
        step_id="ask",
        kind="llm",
        endpoint="default",
        model="m",
        state="answered",
        cost_pico=10 * PICO,
        created_at=now - timedelta(seconds=10),
    )
    spend = Spend(
        run_id=None,
        workflow="monthly",
        budget=MoneyBudget(usd_per_month=Decimal("1")),
        now=lambda: now,
        output_tokens_guess=1000,
    )
    with spend.call(step, endpoint="default", model="m", prices=prices, messages=[]):
        pass  # no answer: settled as failed, at no cost
    assert LLMCall.objects.filter(workflow_name="monthly").count() == 2


def test_a_step_on_a_named_endpoint_is_counted_and_kept_to_its_budget(llm, settings):
    settings.FLOWPILOT_LLM_ENDPOINTS = {
        "hosted": {"base_url": llm.base_url, "api_key": "k", "model": "dear-model", "prices": {}}
    }
    settings.FLOWPILOT_LLM_PRICES = parse_prices({"dear-model": [1000, 1000]}, "test")
    data = flow({"usd_per_run": "0.5"})
    data["steps"][0]["endpoint"] = "hosted"
    llm.reply(tool_calls=[tool_call("lookup_city", {"city": "Oslo"})], usage=usage(300, 300))
    llm.reply("never asked")
    registry = ToolRegistry([], [GeoProvider()])
    workflow, _ = workflow_import(data=data)
    run = run_create(
        workflow=workflow, trigger="manual", inputs={"city": "Oslo"}, registry=registry
    )
    ctx = build_run_context(
        run_id=run.pk, run_uuid=str(run.uuid), spec=workflow_spec(workflow), registry=registry,
        env={}, sleep=lambda s: None,
    )  # fmt: skip
    with ctx:
        run = run_execute(run=run, context=ctx)

    assert run.status == "failed"
    assert result(run, "ask").error["type"] == "money_budget_exceeded"
    assert len(llm.requests) == 1  # $0.60 spent on the first call: no second
    (call,) = LLMCall.objects.filter(run=run)
    assert (call.endpoint, call.cost_pico) == ("hosted", 600 * 1000 * 10**6)


def test_an_answer_without_usage_is_charged_at_its_estimate(llm, client):
    def no_usage(request):
        return {**completion("Mild."), "usage": None}

    llm.reply(handler=no_usage)
    run = run_flow(flow(), client)

    assert run.status == "succeeded"
    (call,) = LLMCall.objects.filter(run=run)
    assert call.usage_reported is False
    assert call.cost_pico == call.estimate_pico > 0
    assert run_cost(run.pk).estimated_calls == 1
    assert "charged at their estimate" in run_cost(run.pk).text()


@pytest.mark.parametrize(
    ("failure", "charged"),
    [(LLMTimeout("late"), True), (KeyboardInterrupt(), True), (LLMAuthFailed("401"), False)],
)
def test_a_call_with_no_answer_is_charged_only_when_it_may_have_been_processed(
    priced, failure, charged
):
    step = LLMStep(id="ask", prompt="x", max_output_tokens=10)
    spend = Spend(
        run_id=None, workflow="w", budget=MoneyBudget(), now=lambda: datetime.now(UTC),
        output_tokens_guess=10,
    )  # fmt: skip
    prices = price_table({"m": Price.per_million("1", "1")})
    call = spend.call(step, endpoint="default", model="m", prices=prices, messages=[])
    with pytest.raises(type(failure)), call:
        raise failure
    (call,) = LLMCall.objects.filter(workflow_name="w")
    assert call.state == "failed"
    assert call.cost_pico == (call.estimate_pico if charged else 0)
