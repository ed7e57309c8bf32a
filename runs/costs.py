"""What model calls cost, read back from the ledger (``runs.LLMCall``): a run's total
and each step's, a workflow's month, and the months of every workflow.

Every figure is a sum over the ledger's rows: tokens as the endpoints reported them,
money in whole pico-dollars (``tools.llm.prices``), so a total is exactly the sum of
its calls. A call still in flight (``reserved``) counts at its estimate; a call whose
model has no price counts its tokens and is reported as unpriced.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncMonth

from runs.models import LLMCall, LLMCallState
from tools.llm.prices import usd, usd_text

SHOWN_DECIMALS = 4  # what a page shows (rounded up); the API gives the exact amount


@dataclass(frozen=True)
class Cost:
    """Model calls summed: how many, their tokens and their money."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_pico: int = 0
    unpriced_calls: int = 0  # answered by a model with no price: tokens only
    in_flight: int = 0  # reserved at their estimate, not answered yet
    estimated_calls: int = 0  # settled at their estimate: no usage reported, or no answer

    @property
    def usd(self) -> Decimal:
        return usd(self.cost_pico) or Decimal(0)

    def usd_text(self, places: int | None = SHOWN_DECIMALS) -> str:
        """``$0.0123``: rounded up to ``places`` (None: exact)."""
        return f"${usd_text(self.cost_pico, places)}"

    def text(self) -> str:
        """One line for a page or a terminal, or "" when nothing was called."""
        if not self.calls:
            return ""
        line = (
            f"{self.usd_text()} over {self.calls} model call{'s' if self.calls != 1 else ''} "
            f"({self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens)"
        )
        if self.unpriced_calls:
            line += f"; {self.unpriced_calls} at a model with no price, not in the total"
        if self.in_flight:
            line += f"; {self.in_flight} in flight, at their estimate"
        if self.estimated_calls:
            line += (
                f"; {self.estimated_calls} charged at their estimate (no usage reported, "
                "or no answer to a call that may have been processed)"
            )
        return line

    def as_dict(self) -> dict[str, Any]:
        """The API's form: the exact amount as decimal text (``"0.00045"``)."""
        return {
            "usd": usd_text(self.cost_pico) or "0",
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "unpriced_calls": self.unpriced_calls,
            "in_flight": self.in_flight,
            "estimated_calls": self.estimated_calls,
        }


# Each of Cost's fields, as an aggregate (named apart from the model's own fields).
_SUMS = {
    "sum_calls": Count("id"),
    "sum_prompt_tokens": Sum("prompt_tokens"),
    "sum_completion_tokens": Sum("completion_tokens"),
    "sum_cost_pico": Sum("cost_pico"),
    "sum_unpriced_calls": Count(
        "id", filter=Q(state=LLMCallState.ANSWERED, cost_pico__isnull=True)
    ),
    "sum_in_flight": Count("id", filter=Q(state=LLMCallState.RESERVED)),
    "sum_estimated_calls": Count(
        "id",
        filter=Q(state=LLMCallState.ANSWERED, usage_reported=False)
        | Q(state=LLMCallState.FAILED, cost_pico__gt=0),
    ),
}


def _cost(values: dict[str, Any]) -> Cost:
    return Cost(**{name[4:]: int(values.get(name) or 0) for name in _SUMS})


def cost_of(calls: QuerySet[LLMCall]) -> Cost:
    return _cost(calls.aggregate(**_SUMS))


def run_cost(run_id: int) -> Cost:
    return cost_of(LLMCall.objects.filter(run_id=run_id))


def step_costs(run_id: int) -> dict[str, Cost]:
    """Each step's calls in the run (steps that called no model are absent)."""
    rows = LLMCall.objects.filter(run_id=run_id).values("step_id").annotate(**_SUMS)
    return {row["step_id"]: _cost(row) for row in rows.order_by("step_id")}


def run_costs(run_ids: Iterable[int]) -> dict[int, Cost]:
    """Each run's total, for a page of runs in one query (runs that called no model are
    absent)."""
    rows = LLMCall.objects.filter(run_id__in=list(run_ids)).values("run_id").annotate(**_SUMS)
    return {row["run_id"]: _cost(row) for row in rows.order_by("run_id")}


def month_start(moment: datetime) -> datetime:
    return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def workflow_month_cost(name: str, moment: datetime) -> Cost:
    """The calls of every run of workflow ``name`` in ``moment``'s month (UTC)."""
    start = month_start(moment)
    end = month_start(start + timedelta(days=32))
    calls = LLMCall.objects.filter(workflow_name=name, created_at__gte=start, created_at__lt=end)
    return cost_of(calls)


@dataclass(frozen=True)
class MonthCost:
    month: date
    workflow: str
    cost: Cost


def monthly_costs(*, workflow: str | None = None, since: datetime | None = None) -> list[MonthCost]:
    """Per month and workflow, newest month first (then by name)."""
    calls = LLMCall.objects.all()
    if workflow:
        calls = calls.filter(workflow_name=workflow)
    if since is not None:
        calls = calls.filter(created_at__gte=since)
    rows = (
        calls.annotate(month=TruncMonth("created_at"))
        .values("month", "workflow_name")
        .annotate(**_SUMS)
        .order_by("-month", "workflow_name")
    )
    return [MonthCost(_as_date(row["month"]), row["workflow_name"], _cost(row)) for row in rows]


def _as_date(value: date | datetime) -> date:
    return value.date() if isinstance(value, datetime) else value
