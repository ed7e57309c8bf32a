"""What a version costs, shown on its review page before anyone approves it (reads only).

Four figures, each from what is recorded, none guessed:

* **the plan**: the planner calls of the session that produced the version (the
  attempt whose plan it is and the repair rounds before it), and of the whole plan
  history of its workflow (questions, failed tries and earlier revisions too), each
  at the price its endpoint had when it answered (``PlanAttempt.cost_pico``);
* **the validation run**: its model calls, from the ledger (``runs.costs``), once
  there is one;
* **a month**: that run's cost times the number of times the version's declared
  schedule fires in the next 30 days (counted by the rule beat fires by,
  ``workflows.cron_clock``);
* **the budgets**: every LLM step's and LLM decision's budget (tokens, calls, money),
  with the model it calls and that model's price, and the workflow's own budget.

The template only formats what ``version_costs`` returns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter
from django.utils import timezone

from review.models import Approval
from runs.costs import SHOWN_DECIMALS, Cost, run_cost
from runs.models import Run, RunStatus
from tools.llm.endpoints import DEFAULT_ENDPOINT, LLMEndpointError, llm_endpoint
from tools.llm.prices import pico_of_usd, usd_text
from workflows.cron import cron_between
from workflows.models import PlanAttempt, Workflow
from workflows.planner.selectors import plan_attempts_for_lineage
from workflows.schema import DecisionStep, LLMStep, WorkflowSpec
from workflows.schema_llm import MoneyBudget
from workflows.schema_triggers import ScheduleSpec

MONTH_DAYS = 30
# A bound on the fires counted: a five-field expression fires at most 43,200 times in
# 30 days (``* * * * *``: every minute of real time, whatever the wall clock does).
MAX_FIRES = 50_000
# The decimals of a run's cost in the month's line: a run of a cheap model costs
# fractions of a cent, which the page's usual four decimals would round up many-fold.
RUN_DECIMALS = 6
_ONE_DAY = timedelta(days=1)
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class BudgetRow:
    """One budget: an LLM step's or LLM decision's, or the workflow's (``kind`` "workflow").
    Every limit is text, blank when it is not set."""

    scope: str  # the step id; "" for the workflow
    kind: str  # llm | decision | workflow
    endpoint: str = ""
    model: str = ""
    model_from_endpoint: bool = False  # the step names none: the endpoint's own
    price: str = ""  # "$0.15 / $0.6" per million tokens (input / output); "no price"
    max_tokens: str = ""
    max_calls: str = ""
    max_tool_calls: str = ""
    usd_per_run: str = ""
    usd_per_month: str = ""


@dataclass(frozen=True)
class ValidationCost:
    """The model calls of a validation run of the version, so far."""

    run: Run
    cost: Cost

    @property
    def finished(self) -> bool:
        return self.run.finished_at is not None

    @property
    def complete(self) -> bool:
        """Whether the run went all the way (succeeded): a failed or unfinished one may
        not have made every call a run makes."""
        return self.run.status == RunStatus.SUCCEEDED

    def text(self) -> str:
        spent = self.cost.text() or "no model calls"
        return spent if self.finished else f"so far {spent}"

    def caveat(self) -> str:
        """Why its cost may be less than a run's ("" for a run that succeeded)."""
        if self.complete:
            return ""
        if not self.finished:
            return "it is still running: a run may make more model calls than it has yet"
        return "it did not succeed: a run that does may make more model calls"


@dataclass(frozen=True)
class MonthEstimate:
    """The declared schedule's fires in the next ``MONTH_DAYS`` days, and what they cost
    at the validation run's cost (``per_run`` None: no validation run yet)."""

    schedule: ScheduleSpec
    fires: int
    per_run: ValidationCost | None = None

    @property
    def capped(self) -> bool:
        return self.fires >= MAX_FIRES

    @property
    def cost_pico(self) -> int | None:
        return None if self.per_run is None else self.per_run.cost.cost_pico * self.fires

    def usd_text(self) -> str:
        """``$1.2345`` (rounded up), or "" before the validation run."""
        pico = self.cost_pico
        return "" if pico is None else f"${usd_text(pico, SHOWN_DECIMALS)}"

    def per_run_text(self) -> str:
        """The run's cost with the decimals a product of small amounts needs: ``$0.000423``
        (rounded up to ``RUN_DECIMALS``), or "" before the validation run."""
        run = self.per_run
        return "" if run is None else f"${usd_text(run.cost.cost_pico, RUN_DECIMALS)}"

    def fires_text(self) -> str:
        """``22 fires of `0 9 * * 1-5` (Europe/Paris) in the next 30 days``."""
        count = f"at least {self.fires:,}" if self.capped else f"{self.fires:,}"
        plural = "" if self.fires == 1 else "s"
        where = f"`{self.schedule.cron}` ({self.schedule.timezone})"
        return f"{count} fire{plural} of {where} in the next {MONTH_DAYS} days"


@dataclass(frozen=True)
class VersionCosts:
    plan: Cost  # the session that produced this version
    history: Cost  # every planner call of its workflow's plan history
    validation: ValidationCost | None
    schedule: ScheduleSpec | None
    month: MonthEstimate | None  # None: no schedule declared
    budgets: tuple[BudgetRow, ...]  # LLM steps and LLM decisions, in step order
    workflow_budget: BudgetRow | None  # None: the workflow sets no budget in money
    over_month_budget: bool = False  # the month's estimate passes the workflow's budget
    definition_read: bool = True  # False: it no longer parses (no budgets, no schedule)

    @property
    def planned(self) -> bool:
        """Whether the planner made it (a version from a file or an edit has no calls)."""
        return self.plan.calls > 0

    @property
    def history_differs(self) -> bool:
        return self.history.calls > self.plan.calls

    @property
    def repair_rounds(self) -> int:
        return max(self.plan.calls - 1, 0)

    def plan_text(self) -> str:
        return calls_text(self.plan, "planner call")

    def history_text(self) -> str:
        return calls_text(self.history, "planner call")


def calls_text(cost: Cost, noun: str) -> str:
    """``$0.0123 over 3 planner calls (9,000 prompt + 800 completion tokens); 1 unpriced
    (a model with no price), not in the total``; "" for no calls."""
    if not cost.calls:
        return ""
    count = f"{cost.calls} {noun}{'s' if cost.calls != 1 else ''}"
    tokens = f"{cost.prompt_tokens:,} prompt + {cost.completion_tokens:,} completion tokens"
    if cost.unpriced_calls == cost.calls:
        return f"unpriced: {count} ({tokens}) at a model with no price"
    line = f"{cost.usd_text()} over {count} ({tokens})"
    if cost.unpriced_calls:
        line += f"; {cost.unpriced_calls} unpriced (a model with no price), not in the total"
    return line


def version_costs(
    *,
    workflow: Workflow,
    spec: WorkflowSpec | None,
    history: Sequence[PlanAttempt] | None = None,
    now: datetime | None = None,
) -> VersionCosts:
    """The cost figures of ``workflow`` (``spec``: its definition read, None when it no
    longer parses). ``history``: its plan history, oldest first, when the caller has
    read it already (``plan_attempts_for_lineage``); ``now``: from when the next
    ``MONTH_DAYS`` days are counted."""
    if history is None:
        history = list(plan_attempts_for_lineage(workflow=workflow))
    validation = validation_cost(workflow)
    schedule = spec.declared_schedule() if spec is not None else None
    month = None
    if schedule is not None:
        start = now or timezone.now()
        fires = fires_between(
            schedule.cron, schedule.timezone, start, start + timedelta(days=MONTH_DAYS)
        )
        month = MonthEstimate(schedule, fires, validation)
    return VersionCosts(
        plan=attempts_cost(session_attempts(history, workflow)),
        history=attempts_cost(history),
        validation=validation,
        schedule=schedule,
        month=month,
        budgets=budget_rows(spec),
        workflow_budget=workflow_budget_row(spec),
        over_month_budget=_over(month, spec.budget if spec is not None else None),
        definition_read=spec is not None,
    )


# --- the plan ----------------------------------------------------------------------------


def session_attempts(history: Sequence[PlanAttempt], workflow: Workflow) -> list[PlanAttempt]:
    """The planner calls of the session that produced ``workflow``, oldest first: the
    attempt linked to it, and before it the repair rounds of the same session (same
    revision, same version revised, repair rounds counting down to 0, none linked to a
    version). ``history``: the plan history of its workflow, oldest first."""
    produced = [a for a in history if a.workflow_id == workflow.pk]
    if not produced:
        return []
    last = produced[-1]
    found = [last]
    wanted = last.repair_round - 1
    for attempt in reversed(history[: history.index(last)]):
        if wanted < 0:
            break
        if (
            attempt.workflow_id is None
            and attempt.revision == last.revision
            and attempt.based_on_id == last.based_on_id
            and attempt.repair_round == wanted
        ):
            found.append(attempt)
            wanted -= 1
    return found[::-1]


def attempts_cost(attempts: Iterable[PlanAttempt]) -> Cost:
    """Planner calls summed as ``runs.costs.Cost``: an attempt with no cost recorded (its
    model has no price, or it was stored before costs were) counts as unpriced."""
    calls = prompt = completion = pico = unpriced = 0
    for attempt in attempts:
        usage = attempt.usage if isinstance(attempt.usage, dict) else {}
        calls += 1
        prompt += _tokens(usage.get("prompt_tokens"))
        completion += _tokens(usage.get("completion_tokens"))
        if attempt.cost_pico is None:
            unpriced += 1
        else:
            pico += attempt.cost_pico
    return Cost(
        calls=calls,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_pico=pico,
        unpriced_calls=unpriced,
    )


def _tokens(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- the validation run ----------------------------------------------------------------


def validation_cost(workflow: Workflow) -> ValidationCost | None:
    """The model calls of the version's newest validation run that succeeded, else of its
    newest one (failed, or still running); None before the first."""
    runs = [
        approval.validation_run
        for approval in Approval.objects.filter(workflow=workflow, validation_run__isnull=False)
        .select_related("validation_run")
        .order_by("-created_at", "-id")
    ]
    chosen = _validation_run([run for run in runs if run is not None])
    return None if chosen is None else ValidationCost(chosen, run_cost(chosen.pk))


def _validation_run(runs: Sequence[Run]) -> Run | None:
    """The first run that succeeded, else the first (``runs``: newest first)."""
    for run in runs:
        if run.status == RunStatus.SUCCEEDED:
            return run
    return runs[0] if runs else None


# --- a month of the schedule -----------------------------------------------------------


def fires_between(
    cron: str, tz: str, start: datetime, end: datetime, *, cap: int = MAX_FIRES
) -> int:
    """How many times ``cron`` (in zone ``tz``) fires after ``start`` and before ``end``,
    at most ``cap``, by the rule beat fires by (``workflows.cron.cron_between``).

    One at a time, ``* * * * *`` takes about a second for 30 days; so whole days are
    counted at once: a day of 24 hours whose date the expression matches fires once per
    (hour, minute) it names. The partial days at either end, and a day the clocks
    change on, are counted one fire at a time.
    """
    zone = ZoneInfo(tz)
    first = start.astimezone(zone).date() + _ONE_DAY
    last = end.astimezone(zone).date()
    if first >= last:
        return _counted(cron, tz, start, end, cap)
    total = _counted(cron, tz, start, _midnight(first, zone), cap)
    total += _counted(cron, tz, _midnight(last, zone) - _TICK, end, cap)
    matching = _matching_dates(cron, first, last)
    per_day = _fires_per_day(cron)
    day = first
    while day < last and total < cap:
        begins, ends = _midnight(day, zone), _midnight(day + _ONE_DAY, zone)
        if ends - begins != _ONE_DAY:  # the clocks change: 23 or 25 hours
            total += _counted(cron, tz, begins - _TICK, ends, cap)
        elif day in matching:
            total += per_day
        day += _ONE_DAY
    return min(total, cap)


def _counted(cron: str, tz: str, after: datetime, until: datetime, cap: int) -> int:
    """Fires strictly after ``after`` and before ``until``, one at a time."""
    return len(cron_between(cron, tz, after, until, limit=cap))


def _midnight(day: date, zone: ZoneInfo) -> datetime:
    """The instant ``day`` begins in ``zone`` (in UTC, so that differences are real time)."""
    return datetime.combine(day, time(), tzinfo=zone).astimezone(UTC)


def _matching_dates(cron: str, first: date, last: date) -> set[date]:
    """The dates from ``first`` to before ``last`` whose day of month, month and day of
    week the expression matches (its own last three fields, read by croniter)."""
    fields = cron.split()
    days = croniter(" ".join(["0", "0", *fields[2:]]), datetime.combine(first, time()) - _TICK)
    found: set[date] = set()
    while True:
        match = days.get_next(datetime).date()
        if match >= last:
            return found
        found.add(match)


def _fires_per_day(cron: str) -> int:
    """The (hour, minute) pairs the expression names: its fires on a matching 24-hour day."""
    minutes, hours = croniter(cron).expanded[:2]
    return (60 if minutes == ["*"] else len(minutes)) * (24 if hours == ["*"] else len(hours))


def _over(month: MonthEstimate | None, budget: MoneyBudget | None) -> bool:
    if month is None or budget is None or budget.usd_per_month is None:
        return False
    pico = month.cost_pico
    return pico is not None and pico > pico_of_usd(budget.usd_per_month)


# --- the budgets -----------------------------------------------------------------------


def budget_rows(spec: WorkflowSpec | None) -> tuple[BudgetRow, ...]:
    """A row per ``llm`` step and LLM decision (``decision_prompt``), in step order."""
    if spec is None:
        return ()
    return tuple(
        _step_row(step)
        for step in spec.steps
        if isinstance(step, LLMStep | DecisionStep) and step.needs_llm()
    )


def _step_row(step: LLMStep | DecisionStep) -> BudgetRow:
    budget = step.budget
    return BudgetRow(
        scope=step.id,
        kind=step.kind,
        **_model(step),
        max_tokens=_number(budget.max_tokens),
        max_calls=_number(getattr(budget, "max_calls", None)),  # a decision makes one call
        max_tool_calls=_number(getattr(budget, "max_tool_calls", None)),
        usd_per_run=money_text(budget.usd_per_run),
        usd_per_month=money_text(budget.usd_per_month),
    )


def _model(step: LLMStep | DecisionStep) -> dict[str, Any]:
    """The endpoint and model a step calls, and the model's price per million tokens."""
    name = step.endpoint or DEFAULT_ENDPOINT
    try:
        endpoint = llm_endpoint(step.endpoint)
    except LLMEndpointError:
        return {"endpoint": f"{name} (not configured)", "model": step.model or "?"}
    model = step.model or endpoint.model
    price = endpoint.prices.price_for(model)
    shown = "no price" if price is None else "${input} / ${output}".format(**price.as_dict())
    return {
        "endpoint": name,
        "model": model,
        "model_from_endpoint": step.model is None,
        "price": shown,
    }


def workflow_budget_row(spec: WorkflowSpec | None) -> BudgetRow | None:
    """The workflow's own budget in money (over every step's calls), None when unset."""
    if spec is None or not spec.budget.in_money():
        return None
    return BudgetRow(
        scope="",
        kind="workflow",
        usd_per_run=money_text(spec.budget.usd_per_run),
        usd_per_month=money_text(spec.budget.usd_per_month),
    )


def _number(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


def money_text(value: Decimal | None) -> str:
    """``$0.50`` as the definition writes it; "" when unset."""
    return "" if value is None else f"${value:f}"
