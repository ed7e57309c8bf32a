"""runs/costs.py: what model calls cost, summed from the ledger per run, step and month."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from runs.costs import (
    Cost,
    cost_of,
    monthly_costs,
    run_cost,
    run_costs,
    step_costs,
    workflow_month_cost,
)
from runs.models import LLMCall
from tests.factories import RunFactory
from tools.llm.prices import PICO

pytestmark = pytest.mark.django_db


def call(workflow="w", step="s", when=datetime(2026, 11, 5, tzinfo=UTC), **fields):
    values = {
        "workflow_name": workflow,
        "step_id": step,
        "kind": "llm",
        "endpoint": "default",
        "model": "m",
        "state": "answered",
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "cost_pico": PICO // 100,  # $0.01
        "created_at": when,
    }
    return LLMCall.objects.create(**{**values, **fields})


def test_sums_per_run_step_and_month():
    run = RunFactory()
    call(run=run, step="a")
    call(run=run, step="a", prompt_tokens=7, completion_tokens=3, cost_pico=None)
    call(run=run, step="b", state="reserved", prompt_tokens=0, completion_tokens=0)
    call(when=datetime(2026, 10, 31, 23, 59, tzinfo=UTC))  # last month, no run

    total = run_cost(run.pk)
    assert total == Cost(
        calls=3,
        prompt_tokens=107,
        completion_tokens=13,
        cost_pico=2 * PICO // 100,
        unpriced_calls=1,
        in_flight=1,
    )
    assert set(step_costs(run.pk)) == {"a", "b"}
    assert step_costs(run.pk)["a"].calls == 2
    november = workflow_month_cost("w", datetime(2026, 11, 20, tzinfo=UTC))
    assert november.calls == 3
    assert "1 in flight" in total.text()
    assert total.as_dict()["usd"] == "0.02"


def test_each_run_of_a_page_in_one_query(django_assert_num_queries):
    first, second, quiet = RunFactory(), RunFactory(), RunFactory()
    call(run=first, step="a")
    call(run=first, step="b", prompt_tokens=5)
    call(run=second, step="a", cost_pico=None)
    call()  # no run

    with django_assert_num_queries(1):
        costs = run_costs(r.pk for r in (first, second, quiet))

    assert set(costs) == {first.pk, second.pk}
    assert costs[first.pk] == run_cost(first.pk)
    assert costs[first.pk].usd_text(None) == "$0.02"
    assert costs[first.pk].prompt_tokens == 105
    assert costs[second.pk] == Cost(
        calls=1, prompt_tokens=100, completion_tokens=10, unpriced_calls=1
    )
    assert run_costs([]) == {}


def test_months_per_workflow_newest_first():
    call(workflow="b", when=datetime(2026, 11, 2, tzinfo=UTC))
    call(workflow="a", when=datetime(2026, 11, 3, tzinfo=UTC))
    call(workflow="a", when=datetime(2026, 10, 3, tzinfo=UTC))
    call(workflow="a", when=datetime(2026, 10, 4, tzinfo=UTC))

    rows = [(r.month, r.workflow, r.cost.calls) for r in monthly_costs()]
    assert rows == [
        (date(2026, 11, 1), "a", 1),
        (date(2026, 11, 1), "b", 1),
        (date(2026, 10, 1), "a", 2),
    ]
    assert [r.workflow for r in monthly_costs(workflow="b")] == ["b"]
    since = datetime(2026, 11, 1, tzinfo=UTC)
    assert len(monthly_costs(since=since)) == 2


def test_nothing_called_is_zero():
    empty = cost_of(LLMCall.objects.none())
    assert empty == Cost()
    assert empty.text() == ""
    assert empty.usd_text() == "$0.0000"
