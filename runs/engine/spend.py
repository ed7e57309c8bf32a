"""A run's money ledger: every model call counted, and budgets in money kept.

Each model call of an ``llm`` step or an LLM decision goes through ``Spend.call``:

1. **before** it, a ``runs.LLMCall`` row is written ``reserved`` at the call's
   *estimate*: the prompt's tokens guessed from its size (a token is about four bytes
   of text) and the step's ``max_output_tokens`` (or ``FLOWPILOT_LLM_ESTIMATE_OUTPUT_TOKENS``)
   of output, at the model's price. When a budget in money applies, the row is written
   under a lock on the workflow's name (PostgreSQL: an advisory lock for the
   transaction; SQLite: its one writer) and the totals are read after it: when
   what is spent, reservations included, passes a budget, the transaction is rolled
   back and ``MoneyBudgetExceeded`` is raised, so **the call is not made**;
2. **after** it, the row is settled with the tokens the endpoint reported and their
   cost (``answered``; an answer that reports no usage is charged at its estimate), or
   ``failed`` when no answer came: at no cost when the request was surely not
   processed (an error answer, a refused connection), at its estimate when it may have
   been (a timeout, the step stopped while waiting). When the
   settled spend then passes a budget, the step fails with ``MoneyBudgetExceeded``:
   the answer was paid for, and no further call of the run (or, for a monthly
   budget, of the workflow) can fit.

The budgets: the step's own ``budget.usd_per_run`` (its calls in this run, every try)
and ``budget.usd_per_month`` (its calls in every run of the workflow this UTC month),
and the workflow's ``budget.usd_per_run`` (every call of the run) and
``budget.usd_per_month`` (every call of the workflow's runs this month). A
sub-workflow's run keeps its own workflow's budgets. Rows outlive their runs, so
deleting old runs does not refill a month.

A replay makes no model call (its answers are recorded), so it has no ledger. The
ledger writes from the thread that makes the call: a step thread closes its
connection after each write, as the credential and pacing stores do.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import DatabaseError, connections, router, transaction
from django.db.models import Q, Sum

from runs.engine.db_retry import with_db_retries
from runs.models import LLMCall, LLMCallState, Run
from tools.errors import FlowpilotError
from tools.llm.errors import LLMTimeout
from tools.llm.prices import pico_of_usd, usd_text
from tools.shared_cache import shared_cache_retry
from workflows.schema_llm import DecisionBudget, MoneyBudget

if TYPE_CHECKING:
    from tools.llm import LLMReply, PriceTable

T = TypeVar("T")

logger = logging.getLogger("flowpilot.engine.llm")

SETTLED_FIELDS = [
    "state", "model", "prompt_tokens", "completion_tokens", "usage_reported", "cost_pico",
    "settled_at",
]  # fmt: skip
BYTES_PER_TOKEN = 4  # what the estimate assumes of the prompt's text
TOKENS_PER_MESSAGE = 8  # and of each message's envelope


class MoneyBudgetExceeded(FlowpilotError):
    """A model call would pass (or has passed) a budget in money; the message says which
    budget, what was spent and what it allows."""

    code = "money_budget_exceeded"


class LLMPriceUnknown(FlowpilotError):
    """A step under a budget in money calls a model with no price: its spending could
    not be counted, so nothing is sent (the validator says so before approval)."""

    code = "llm_price_unknown"


@dataclass(frozen=True)
class _Limit:
    """One budget that applies to a call: its rows, what it allows, how it is named."""

    name: str
    rows: Q
    allows: int  # pico-dollars


def estimate_prompt_tokens(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> int:
    """The prompt's tokens guessed from its size (no tokenizer: the model's is unknown)."""
    text = json.dumps([messages, tools or []], ensure_ascii=False, default=str)
    return math.ceil(len(text.encode()) / BYTES_PER_TOKEN) + TOKENS_PER_MESSAGE * len(messages)


class Spend:
    """The ledger of one run (see the module doc); built with the run's context."""

    def __init__(
        self,
        *,
        run_id: int | None,
        workflow: str,
        budget: MoneyBudget,
        now: Callable[[], datetime],
        output_tokens_guess: int,
    ) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.budget = budget
        self.now = now
        self.output_tokens_guess = output_tokens_guess
        self._run_checked = False
        self._rows: list[int] = []  # what this ledger reserved (for a run not stored)

    @contextmanager
    def call(
        self,
        step: Any,
        *,
        endpoint: str,
        model: str,
        prices: PriceTable,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
    ) -> Iterator[Callable[[LLMReply], None]]:
        """Around one model call: reserves (or refuses) before, settles after. The body
        calls what it yields with the reply once it has one; a body that raises first
        settles the row as ``failed``."""
        if not self._run_checked:  # a context built without a stored run (tests, benchmarks)
            self._run_checked = True
            run_id = self.run_id
            if run_id is not None and not _released(partial(_run_exists, run_id)):
                self.run_id = None
        budget: DecisionBudget = step.budget
        limits = self._limits(step.id, budget, self.now())
        price = prices.price_for(model)
        if limits and price is None:
            raise LLMPriceUnknown(
                f"step `{step.id}` runs under a budget in money, but model `{model}` has no "
                "price; give it one in FLOWPILOT_LLM_PRICES (US dollars per million tokens)"
            )
        estimate = None
        if price is not None:
            output = step.max_output_tokens or self.output_tokens_guess
            estimate = price.cost(estimate_prompt_tokens(messages, tools), output)
        row = self._reserve(step, endpoint, model, estimate, limits)
        answered: list[LLMReply] = []
        try:
            yield answered.append
        except BaseException as failure:
            self._settled(row, answered[-1] if answered else None, prices, model, failure)
            raise
        self._settled(row, answered[-1] if answered else None, prices, model, None)
        if answered:
            self._check_settled(step.id, limits)

    # --- the budgets -----------------------------------------------------------------

    def _limits(self, step_id: str, own: DecisionBudget, moment: datetime) -> list[_Limit]:
        month = Q(
            workflow_name=self.workflow,
            created_at__gte=moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0),
        )
        # A context with no stored run (tests, benchmarks): "this run" is its own rows.
        this_run = Q(run_id=self.run_id) if self.run_id is not None else Q(pk__in=self._rows)
        step = Q(step_id=step_id)
        candidates = [
            (own.usd_per_run, f"step `{step_id}`'s budget.usd_per_run", this_run & step),
            (own.usd_per_month, f"step `{step_id}`'s budget.usd_per_month", month & step),
            (self.budget.usd_per_run, "the workflow's budget.usd_per_run", this_run),
            (self.budget.usd_per_month, "the workflow's budget.usd_per_month", month),
        ]
        return [
            _Limit(name, rows, pico_of_usd(allows))
            for allows, name, rows in candidates
            if allows is not None
        ]

    def _reserve(
        self,
        step: Any,
        endpoint: str,
        model: str,
        estimate: int | None,
        limits: list[_Limit],
    ) -> LLMCall:
        def reserve() -> LLMCall:
            with transaction.atomic(using=_db()):
                if limits:
                    _lock(self.workflow)
                row = LLMCall.objects.create(
                    run_id=self.run_id,
                    workflow_name=self.workflow,
                    step_id=step.id,
                    kind=step.kind,
                    endpoint=endpoint,
                    model=model[:200],
                    cost_pico=estimate,
                    estimate_pico=estimate,
                    created_at=self.now(),
                )
                if self.run_id is None:
                    self._rows.append(row.pk)
                for limit in limits:
                    spent = _spent(limit.rows)
                    if spent > limit.allows:
                        raise MoneyBudgetExceeded(
                            f"step `{step.id}` needs a model call estimated at "
                            f"${usd_text(estimate, 6)}, but {limit.name} of "
                            f"${usd_text(limit.allows)} has ${usd_text(spent - (estimate or 0), 6)}"
                            " spent or reserved already; the call was not made"
                        )
                return row

        return with_db_retries(
            lambda: _released(lambda: shared_cache_retry(reserve)),
            what=f"reserving a model call of step `{step.id}`",
        )

    def _settled(
        self,
        row: LLMCall,
        reply: LLMReply | None,
        prices: PriceTable,
        asked: str,
        failure: BaseException | None,
    ) -> None:
        """Write what the call cost; through a database blip, tried again on a new
        connection. A write that still fails leaves the row reserved at its estimate
        (what a budget counts is then never less than was spent) and is logged: the
        answer, paid for, is not thrown away for it."""
        if reply is None:
            row.state = LLMCallState.FAILED
            row.cost_pico = row.estimate_pico if _maybe_processed(failure) else 0
        else:
            usage = reply.usage
            row.state = LLMCallState.ANSWERED
            row.model = (reply.model or asked)[:200]
            row.prompt_tokens, row.completion_tokens = usage.prompt_tokens, usage.completion_tokens
            row.usage_reported = usage.reported
            if usage.reported:
                row.cost_pico = prices.charge(
                    reply.model, asked, usage.prompt_tokens, usage.completion_tokens
                )
            else:  # the endpoint said nothing of its tokens: the estimate is the charge
                row.cost_pico = row.estimate_pico
        row.settled_at = self.now()

        def save() -> None:
            shared_cache_retry(lambda: row.save(update_fields=SETTLED_FIELDS))

        try:
            with_db_retries(
                lambda: _released(save), what=f"the cost of a model call of step `{row.step_id}`"
            )
        except DatabaseError:
            logger.exception(
                "run %s step %s: a model call's cost not recorded", self.run_id, row.step_id
            )

    def _check_settled(self, step_id: str, limits: list[_Limit]) -> None:
        settled = ~Q(state=LLMCallState.RESERVED)
        for limit in limits:
            spent = _released(partial(shared_cache_retry, partial(_spent, limit.rows & settled)))
            if spent > limit.allows:
                raise MoneyBudgetExceeded(
                    f"step `{step_id}`'s model calls have spent ${usd_text(spent, 6)}, over "
                    f"{limit.name} of ${usd_text(limit.allows)}; no further call fits it"
                )


def _maybe_processed(failure: BaseException | None) -> bool:
    """Whether a call that got no answer may still have been processed (and billed): a
    timeout, or the step stopped while it waited (cancelled, a worker's time limit). An
    error answer (refused, 401, 429, 5xx) or a connection never made was not."""
    if failure is None:
        return False
    return isinstance(failure, LLMTimeout) or not isinstance(failure, FlowpilotError)


def _run_exists(run_id: int) -> bool:
    return shared_cache_retry(Run.objects.filter(pk=run_id).exists)


def _db() -> str:
    return router.db_for_write(LLMCall)


def _spent(rows: Q) -> int:
    return int(LLMCall.objects.filter(rows).aggregate(total=Sum("cost_pico"))["total"] or 0)


def _lock(workflow: str) -> None:
    """Serialize the reservations of one workflow's calls until the transaction ends."""
    connection = connections[_db()]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"llm-spend:{workflow}"])
    # SQLite: the INSERT that follows takes the database's one write lock, and the
    # totals are read after it, inside the same transaction.


def _released(statement: Callable[[], T]) -> T:
    """``statement``, then the calling step thread's connection closed (the main thread
    and a thread inside a transaction keep theirs)."""
    try:
        return statement()
    finally:
        if threading.current_thread() is not threading.main_thread():
            connection = connections[_db()]
            if not connection.in_atomic_block:
                connection.close()
