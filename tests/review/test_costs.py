"""review/costs.py: what a version costs, on its review page before approval — the
planner calls that made it, its validation run's model calls, a month of its schedule,
and its LLM budgets as a table."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from django.test import Client
from django.urls import reverse

from review.costs import (
    MAX_FIRES,
    MONTH_DAYS,
    attempts_cost,
    fires_between,
    session_attempts,
    version_costs,
)
from runs.models import LLMCall, RunStatus, RunTrigger
from tests.factories import (
    DIGEST_GOAL,
    PASSWORD,
    ApprovalFactory,
    PlanAttemptFactory,
    RunFactory,
    digest_plan,
    pending_version,
    sales_report_data,
)
from tools.llm.prices import Price, usd_text
from workflows.cron import cron_between
from workflows.models import PlanAttempt, Workflow, WorkflowStatus
from workflows.planner import PlanFailed
from workflows.planner.selectors import plan_attempts_for_lineage
from workflows.planner.services import plan_create, plan_revise
from workflows.services import workflow_spec

pytestmark = pytest.mark.django_db

SCHEDULE = {"cron": "0 9 * * 1-5", "timezone": "Europe/Paris"}
# gpt-4o-mini's shipped price: $0.15 / $0.60 per million tokens, in pico-dollars per token
MINI_INPUT, MINI_OUTPUT = 150_000, 600_000
TIMES = "\N{MULTIPLICATION SIGN}"
# The fake server's model, priced by the installation for these tests: $2.50 / $10.
FAKE_PRICE = Price.per_million("2.5", "10")


def budget_flow(budget: dict | None = None) -> dict:
    """The offline example plus an LLM step and an LLM decision, both under budgets, a
    workflow budget and a schedule on weekday mornings."""
    data = sales_report_data(
        name="priced_report",
        schedule=SCHEDULE,
        budget=budget or {"usd_per_run": "0.50", "usd_per_month": "20"},
    )
    data["steps"] += [
        {
            "id": "summary",
            "kind": "llm",
            "model": "gpt-4o-mini",
            "prompt": "Summarise these totals: {{groups}}",
            "input_mapping": {"groups": "by_region.groups"},
            "budget": {
                "max_tokens": 4000,
                "max_calls": 3,
                "max_tool_calls": 0,
                "usd_per_run": "0.05",
                "usd_per_month": "2.5",
            },
        },
        {
            "id": "large",
            "kind": "decision",
            "branches": ["yes", "no"],
            "decision_prompt": "Is a revenue of {{total}} large?",
            "input_mapping": {"total": "by_region.total"},
            "budget": {"max_tokens": 500},
        },
    ]
    return data


def call(run, step: str, prompt: int, completion: int, **fields) -> LLMCall:
    """A settled model call of ``run`` at gpt-4o-mini's price."""
    values = {
        "run": run,
        "workflow_name": run.workflow.name,
        "step_id": step,
        "kind": "llm",
        "endpoint": "default",
        "model": "gpt-4o-mini",
        "state": "answered",
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cost_pico": prompt * MINI_INPUT + completion * MINI_OUTPUT,
        "created_at": datetime.now(UTC),
    }
    return LLMCall.objects.create(**{**values, **fields})


def validated(version: Workflow, status: str = RunStatus.SUCCEEDED):
    """An approval of ``version`` with its validation run (nothing executes)."""
    run = RunFactory(workflow=version, trigger=RunTrigger.VALIDATION, status=status)
    ApprovalFactory(workflow=version, validation_run=run)
    return run


def weekday_mornings(start: datetime) -> int:
    """``0 9 * * 1-5`` in Paris after ``start`` for 30 days, counted one by one."""
    fires = croniter("0 9 * * 1-5", start.astimezone(ZoneInfo("Europe/Paris")))
    end = start + timedelta(days=MONTH_DAYS)
    count = 0
    while fires.get_next(datetime) < end:
        count += 1
    return count


def review_page(version: Workflow, user) -> str:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    response = client.get(reverse("admin:workflows_workflow_change", args=[version.pk]))
    assert response.status_code == 200
    return response.content.decode()


def section(body: str, element_id: str) -> str:
    """The text of the element with ``element_id`` (tags dropped, spaces collapsed)."""
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</(li|table|p|div)>', body, re.S)
    assert found, f"no #{element_id} on the page"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())


def budget_cells(body: str) -> list[list[str]]:
    """The budget table's rows, each as its cells' text."""
    table = re.search(r'<table[^>]*id="fp-llm-budgets".*?<tbody>(.*?)</tbody>', body, re.S)
    assert table, "no budget table"
    return [
        [" ".join(re.sub(r"<[^>]+>", " ", cell).split()) for cell in cells]
        for cells in (
            re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(1), re.S)
        )
    ]


# --- the plan's own cost ----------------------------------------------------------------


def test_the_plan_costs_its_attempts_usage_at_the_price_to_the_pico_dollar(
    planner_llm, settings, approver
):
    settings.FLOWPILOT_LLM_PRICES = {"fake-model": FAKE_PRICE}
    broken = digest_plan()
    broken["steps"][1]["tool"] = "no_such_tool"
    planner_llm.reply_json(broken, usage={"prompt_tokens": 1234, "completion_tokens": 321})
    planner_llm.reply_json(digest_plan(), usage={"prompt_tokens": 1500, "completion_tokens": 407})
    version = plan_create(goal=DIGEST_GOAL, owner=approver)

    first, second = PlanAttempt.objects.order_by("id")
    assert (first.repair_round, second.repair_round, second.workflow) == (0, 1, version)
    assert first.cost_pico == 1234 * 2_500_000 + 321 * 10_000_000
    assert second.cost_pico == 1500 * 2_500_000 + 407 * 10_000_000

    costs = version_costs(workflow=version, spec=workflow_spec(version))
    expected = (1234 + 1500) * 2_500_000 + (321 + 407) * 10_000_000  # 14,115,000,000
    assert costs.plan.cost_pico == expected
    assert (costs.plan.calls, costs.plan.prompt_tokens, costs.plan.completion_tokens) == (
        2,
        2734,
        728,
    )
    assert costs.plan_text() == (
        "$0.0142 over 2 planner calls (2,734 prompt + 728 completion tokens)"
    )
    assert not costs.history_differs

    # A revision: its own session is its plan's cost; the history holds all three calls.
    planner_llm.reply_json(
        digest_plan(with_products=True), usage={"prompt_tokens": 2000, "completion_tokens": 500}
    )
    revised = plan_revise(workflow=version, feedback="Also total by product", user=approver)
    costs = version_costs(workflow=revised, spec=workflow_spec(revised))
    assert costs.plan.cost_pico == 2000 * 2_500_000 + 500 * 10_000_000
    assert costs.history.cost_pico == expected + costs.plan.cost_pico
    assert costs.history_differs


def test_an_attempt_with_no_price_is_unpriced_and_an_unanswered_one_costs_nothing(
    planner_llm, settings, approver
):
    settings.FLOWPILOT_LLM_PRICES = {}  # the fake model has no price
    planner_llm.reply_json(digest_plan(), usage={"prompt_tokens": 900, "completion_tokens": 80})
    version = plan_create(goal=DIGEST_GOAL, owner=approver)
    (attempt,) = PlanAttempt.objects.all()
    assert attempt.cost_pico is None

    costs = version_costs(workflow=version, spec=workflow_spec(version))
    assert costs.plan.unpriced_calls == 1
    assert costs.plan_text() == (
        "unpriced: 1 planner call (900 prompt + 80 completion tokens) at a model with no price"
    )

    planner_llm.fail(500, times=5)
    with pytest.raises(PlanFailed, match="LLM call failed"):
        plan_create(goal="Another goal", owner=approver)
    failed = PlanAttempt.objects.get(goal="Another goal")
    assert (failed.status, failed.cost_pico) == ("error", 0)


def test_the_session_is_the_linked_attempt_and_its_repair_rounds_only():
    version = pending_version(sales_report_data(name="sessions"))
    goal = version.goal

    def attempt(repair_round, *, workflow=None, cost=1, **fields):
        return PlanAttemptFactory(
            goal=goal,
            workflow=workflow,
            repair_round=repair_round,
            cost_pico=cost,
            usage={"prompt_tokens": 10, "completion_tokens": 1},
            **fields,
        )

    earlier = attempt(0, status="error", cost=0)  # an earlier session's failed call
    first = attempt(0, status="invalid", cost=100)
    repair = attempt(1, status="invalid", cost=None)  # recorded before costs were
    made = attempt(2, workflow=version, cost=1000)

    history = list(plan_attempts_for_lineage(workflow=Workflow.objects.get(pk=version.pk)))
    assert history == [earlier, first, repair, made]  # the goal ties the failures to it
    assert session_attempts(history, version) == [first, repair, made]
    assert session_attempts(history, pending_version(sales_report_data(name="other"))) == []
    total = attempts_cost(session_attempts(history, version))
    assert (total.calls, total.cost_pico, total.unpriced_calls) == (3, 1100, 1)
    assert (total.prompt_tokens, total.completion_tokens) == (30, 3)


# --- the schedule's month ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "tz", "start"),
    [
        ("0 9 * * 1-5", "Europe/Paris", datetime(2026, 3, 20, 13, 37, tzinfo=UTC)),
        ("30 2 * * *", "Europe/Paris", datetime(2026, 3, 20, tzinfo=UTC)),  # spring skip
        ("*/7 * * * *", "America/New_York", datetime(2026, 10, 20, 3, 1, tzinfo=UTC)),
        ("0 * * * *", "Australia/Lord_Howe", datetime(2026, 3, 25, tzinfo=UTC)),  # 30 min
        ("0 0 * * *", "America/Santiago", datetime(2026, 3, 25, tzinfo=UTC)),  # at midnight
        ("15 */2 1,15 * 0", "Asia/Kolkata", datetime(2026, 2, 10, 18, 30, tzinfo=UTC)),
        ("0 0 L * *", "UTC", datetime(2027, 2, 15, 23, tzinfo=UTC)),
        ("0 9 * * 1#2", "Europe/Paris", datetime(2026, 4, 1, 12, tzinfo=UTC)),
    ],
)
def test_fires_are_counted_by_the_rule_beat_fires_by(cron, tz, start):
    end = start + timedelta(days=MONTH_DAYS)
    one_by_one = len(cron_between(cron, tz, start, end, limit=10**6))
    assert fires_between(cron, tz, start, end) == one_by_one


def test_every_minute_counts_fast_a_day_of_25_hours_included_and_stops_at_the_cap():
    # Every minute of real time fires, whatever the wall clock does: Paris goes back an
    # hour on 25 October, and 30 days are still 43,200 minutes (the start's excluded).
    autumn = datetime(2026, 10, 10, 12, 30, tzinfo=UTC)
    assert fires_between("* * * * *", "Europe/Paris", autumn, autumn + timedelta(30)) == 43_199
    summer = datetime(2026, 6, 1, 8, 15, 30, tzinfo=UTC)
    assert fires_between("* * * * *", "UTC", summer, summer + timedelta(30)) == 43_200
    assert fires_between("* * * * *", "UTC", summer, summer + timedelta(30), cap=1000) == 1000
    assert MAX_FIRES > 43_200


def test_the_month_is_the_validation_runs_cost_times_the_fires_from_now():
    version = pending_version(budget_flow())
    now = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday; 30 days to 1 April

    before = version_costs(workflow=version, spec=workflow_spec(version), now=now)
    assert before.validation is None
    assert before.month is not None
    assert before.month.fires == 22 == weekday_mornings(now)
    assert before.month.cost_pico is None

    run = validated(version)
    call(run, "summary", 1200, 300)
    call(run, "large", 400, 5, kind="decision")
    per_run = 1200 * MINI_INPUT + 300 * MINI_OUTPUT + 400 * MINI_INPUT + 5 * MINI_OUTPUT
    after = version_costs(workflow=version, spec=workflow_spec(version), now=now)
    assert after.validation is not None
    assert after.validation.run == run
    assert after.validation.cost.cost_pico == per_run
    assert after.month is not None
    assert after.month.cost_pico == per_run * 22
    assert after.month.usd_text() == f"${usd_text(per_run * 22, 4)}"
    assert after.month.fires_text() == (
        "22 fires of `0 9 * * 1-5` (Europe/Paris) in the next 30 days"
    )
    assert not after.over_month_budget  # $0.0094 a month under the workflow's $20


def test_a_succeeded_validation_run_is_preferred_and_a_costly_month_passes_the_budget(
    approver,
):
    version = pending_version(budget_flow(budget={"usd_per_month": "0.01"}))
    ok = validated(version)
    call(ok, "summary", 100_000, 0)  # $0.015 a run
    failed = validated(version, status=RunStatus.FAILED)  # newer, but it failed
    call(failed, "summary", 10, 0)

    costs = version_costs(
        workflow=version, spec=workflow_spec(version), now=datetime(2026, 3, 2, tzinfo=UTC)
    )
    assert costs.validation is not None
    assert costs.validation.run == ok
    assert costs.over_month_budget  # 22 fires at $0.015 pass $0.01
    assert section(review_page(version, approver), "fp-cost-over-budget") == (
        "That is more than the workflow's budget of $0.01 a month: model calls past it will "
        "be refused."
    )


def test_a_validation_run_still_running_counts_so_far_and_says_the_month_may_be_low(approver):
    version = pending_version(budget_flow())
    run = validated(version, status=RunStatus.RUNNING)
    call(run, "summary", 1000, 100)

    body = review_page(version, approver)

    assert section(body, "fp-cost-validation") == (
        f"The validation run: run {run.pk} (running): so far $0.0003 over 1 model call "
        "(1,000 prompt + 100 completion tokens) — it is still running: a run may make more "
        "model calls than it has yet"
    )
    assert section(body, "fp-cost-month").endswith(
        "in the next 30 days. It may be low: it is still running: a run may make more model "
        "calls than it has yet."
    )


# --- the budgets ------------------------------------------------------------------------


def test_every_llm_step_and_llm_decision_has_a_budget_row_and_the_workflow_its_own():
    version = pending_version(budget_flow())
    costs = version_costs(workflow=version, spec=workflow_spec(version))

    summary, large = costs.budgets
    assert (summary.scope, summary.kind, summary.model, summary.model_from_endpoint) == (
        "summary",
        "llm",
        "gpt-4o-mini",
        False,
    )
    assert summary.price == "$0.15 / $0.6"
    assert (summary.max_tokens, summary.max_calls, summary.max_tool_calls) == ("4,000", "3", "0")
    assert (summary.usd_per_run, summary.usd_per_month) == ("$0.05", "$2.5")
    assert (large.scope, large.kind, large.endpoint, large.max_tokens) == (
        "large",
        "decision",
        "default",
        "500",
    )
    assert large.model_from_endpoint
    assert (large.max_calls, large.usd_per_run, large.usd_per_month) == ("", "", "")
    assert costs.workflow_budget is not None
    assert (costs.workflow_budget.usd_per_run, costs.workflow_budget.usd_per_month) == (
        "$0.50",
        "$20",
    )


# --- the review page --------------------------------------------------------------------


def test_the_review_page_of_a_proposed_version_shows_its_budgets_and_what_is_known_yet(
    reviewer, settings
):
    settings.PLANNER_MODEL = "gpt-4o"
    version = pending_version(budget_flow())
    PlanAttemptFactory(
        goal=version.goal,
        workflow=version,
        usage={"prompt_tokens": 3000, "completion_tokens": 600},
        cost_pico=3000 * 2_500_000 + 600 * 10_000_000,  # $0.0135
    )

    body = review_page(version, reviewer)

    assert section(body, "fp-cost-plan") == (
        "The plan: $0.0135 over 1 planner call (3,000 prompt + 600 completion tokens) "
        "(the planner call that made this version)"
    )
    assert section(body, "fp-cost-validation") == (
        "The validation run: known after the validation run."
    )
    month = section(body, "fp-cost-month")
    assert month.startswith("A month: ")
    assert month.endswith(
        "fires of `0 9 * * 1-5` (Europe/Paris) in the next 30 days; what they cost is known "
        "after the validation run."
    )
    assert budget_cells(body) == [
        [
            "summary",
            "llm",
            "default",
            "gpt-4o-mini",
            "$0.15 / $0.6",
            "4,000",
            "3",
            "0",
            "$0.05",
            "$2.5",
        ],
        [
            "large",
            "LLM decision",
            "default",
            "gpt-4o (the endpoint's)",
            "$2.5 / $10",
            "500",
            "",
            "",
            "",
            "",
        ],
        ["the whole workflow (every step's model calls together)", "$0.50", "$20"],
    ]


def test_the_review_page_shows_the_validation_runs_cost_and_the_month_it_implies(approver):
    version = pending_version(budget_flow())
    run = validated(version)
    call(run, "summary", 1200, 300)
    call(run, "large", 400, 5, kind="decision")
    call(run, "summary", 50, 7, model="house-model", cost_pico=None)  # no price
    per_run = 1200 * MINI_INPUT + 300 * MINI_OUTPUT + 400 * MINI_INPUT + 5 * MINI_OUTPUT

    before = datetime.now(UTC)
    body = review_page(version, approver)
    after = datetime.now(UTC)

    assert section(body, "fp-cost-validation") == (
        f"The validation run: run {run.pk} (succeeded): $0.0005 over 3 model calls "
        "(1,650 prompt + 312 completion tokens); 1 at a model with no price, not in the total"
    )
    assert f'href="{reverse("admin:runs_run_change", args=[run.pk])}"' in body
    month = section(body, "fp-cost-month")
    shown = re.search(TIMES + r" (\d+) fires of `0 9 \* \* 1-5` \(Europe/Paris\)", month)
    assert shown, month
    fires = int(shown.group(1))
    assert fires in {weekday_mornings(before), weekday_mornings(after)}
    assert month == (
        f"A month: ${usd_text(per_run * fires, 4)} = $0.000423 a run (the validation run's) "
        f"{TIMES} {fires} fires of `0 9 * * 1-5` (Europe/Paris) in the next 30 days; its "
        "calls at a model with no price are not in it."
    )
    assert 'id="fp-cost-over-budget"' not in body


def test_a_version_with_no_llm_step_shows_no_budget_table(reviewer):
    version = pending_version()  # the offline example: tools only, no schedule

    body = review_page(version, reviewer)

    assert 'id="fp-llm-budgets"' not in body
    assert section(body, "fp-llm-budgets-none") == ("No step calls a model: no LLM budget applies.")
    assert section(body, "fp-cost-plan") == (
        "The plan: no planner call made this version (it came from a file, the API or an edit)"
    )
    assert section(body, "fp-cost-month") == (
        "A month: no schedule: it runs only when someone or something starts it."
    )


def test_the_cost_section_escapes_what_the_definition_says(reviewer):
    data = budget_flow()
    data["steps"][-1]["model"] = "<b>bold</b>"
    version = pending_version(data)

    body = review_page(version, reviewer)

    assert "<b>bold</b>" not in body
    assert "&lt;b&gt;bold&lt;/b&gt;" in body


def test_an_active_version_keeps_its_cost_section(approver):
    version = pending_version(budget_flow())
    Workflow.objects.filter(pk=version.pk).update(status=WorkflowStatus.ACTIVE)
    run = validated(version)
    call(run, "summary", 0, 0, cost_pico=0)

    body = review_page(version, approver)

    assert f"run {run.pk} (succeeded): $0.0000 over 1 model call" in section(
        body, "fp-cost-validation"
    )
    assert "A month: $0.0000 = $0.000000 a run" in section(body, "fp-cost-month")
