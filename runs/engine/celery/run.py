"""A Celery run's start, and the context each of its tasks builds.

``run_start`` moves a pending run to running and queues its first ready steps in one
transaction (``advance.advance_locked``); the step tasks are published when it commits.
``run_context`` is the fresh context of one task of a run; the plan and the tool
registry come from this process's caches, keyed by what the task read beside its row
(``read_step``).
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Field
from kombu.exceptions import OperationalError as KombuOperationalError

from runs.engine import caches
from runs.engine.build import build_run_context
from runs.engine.celery.advance import advance_locked
from runs.engine.celery.broker import Publish, lease_until, publish_step
from runs.engine.celery.claim import Claim, claim
from runs.engine.context import DEFAULT_CLOCK, CallTaps, Clock, RunContext
from runs.engine.http import process_http_client
from runs.models import Run, StepResult
from runs.state import RunError, RunStateError, RunStatus, StepStatus, run_transition
from tools.logcontext import log_fields
from tools.statements import bound_cursor
from workflows.services import workflow_spec

logger = logging.getLogger("flowpilot.engine")

# The taps of a run's tool and model calls, by run: ``runs.tasks`` passes the replay
# recorder's ``call_recorder_for`` (a validation run records its calls). Passed in,
# because ``runs.replay`` builds on the engine: the engine never imports it.
TapsFor = Callable[[Run], CallTaps | None]


def run_context(
    run: Run, *, tools_key: tuple | None = None, taps_for: TapsFor | None = None
) -> RunContext:
    """A fresh context for one task of ``run`` (its own redactor), with the taps
    ``taps_for`` gives (None: a task that makes no tool or model call). Its HTTP client
    is the process's (``process_http_client``): a task is often one step, and a client
    of its own would connect anew for every step.

    The compiled plan (by the version's hash: a version never changes) and the tool
    registry (by the tool table's state, ``tools_key``) come from this process's caches
    (``runs.engine.caches``): building a registry validates every built-in schema,
    more than a step task's own work.
    """
    return build_run_context(
        run_id=run.pk,
        run_uuid=str(run.uuid),
        plan=caches.plan_for_version(run.definition_hash, lambda: workflow_spec(run.workflow)),
        registry=caches.registry_for(caches.tools_state() if tools_key is None else tools_key),
        taps=None if taps_for is None else taps_for(run),
        http=process_http_client(),
    )


def read_step(step_result_id: int) -> tuple[StepResult, tuple]:
    """A step task's first read, one precompiled statement: the step (its id, run, step
    id and status; other fields load on use) with its whole run, and the tool table's
    state (``caches.tools_state``, the key of the process's registry).

    Raises ``StepResult.DoesNotExist`` for an unknown id. Building this read with the
    ORM (a related run, three aggregates) cost more CPU than running it, on every task.
    """
    sql, run_fields, converters = _step_read()
    with bound_cursor(connection) as cursor:
        cursor.execute(sql, [step_result_id])
        row = cursor.fetchone()
    if row is None:
        raise StepResult.DoesNotExist(f"StepResult matching id={step_result_id} does not exist.")
    values = list(row)
    for index, convert in converters:
        for fn in convert:
            values[index] = fn(values[index], None, connection)
    db = connection.alias
    result = StepResult.from_db(db, list(_STEP_FIELDS), values[: len(_STEP_FIELDS)])
    at = len(_STEP_FIELDS)
    run = Run.from_db(db, [f.attname for f in run_fields], values[at : at + len(run_fields)])
    result.run = run
    updated, count, enabled = values[at + len(run_fields) :]
    return result, caches.state_key(updated, count, enabled or 0)


_STEP_FIELDS = ("id", "run_id", "step_id", "status")  # in the model's order (``from_db``)


@functools.cache
def _step_read_for(vendor: str) -> tuple[str, tuple[Field, ...], tuple[tuple[int, tuple], ...]]:
    """The statement for ``vendor`` (names from the models' metadata; the id is its
    one parameter), the run's fields, and each converted column's converters (what the
    ORM applies to a value read: JSON, dates and booleans as the backend returns them)."""
    quote = connection.ops.quote_name
    steps, runs = StepResult._meta, Run._meta
    step_table, run_table = quote(steps.db_table), quote(runs.db_table)
    run_fields = tuple(runs.concrete_fields)
    by_attname = {f.attname: f for f in steps.concrete_fields}
    step_fields = tuple(by_attname[name] for name in _STEP_FIELDS)
    columns = [f"{step_table}.{quote(f.column)}" for f in step_fields]
    columns += [f"{run_table}.{quote(f.column)}" for f in run_fields]
    converters = []
    for index, field in enumerate((*step_fields, *run_fields)):
        col = field.get_col(run_table if index >= len(step_fields) else step_table)
        own = field.get_db_converters(connection)  # type: ignore[attr-defined]  # untyped
        found = (*connection.ops.get_db_converters(col), *own)
        if found:
            converters.append((index, tuple(found)))
    sql = (
        f"SELECT {', '.join(columns)}, tools.* FROM {step_table} "  # noqa: S608
        f"INNER JOIN {run_table} ON {run_table}.{quote(runs.pk.column)} = "
        f"{step_table}.{quote(steps.get_field('run').column)} "
        f"CROSS JOIN ({caches.tools_state_sql()}) tools "
        f"WHERE {step_table}.{quote(steps.pk.column)} = %s"
    )
    return sql, run_fields, tuple(converters)


def _step_read() -> tuple[str, tuple[Field, ...], tuple[tuple[int, tuple], ...]]:
    return _step_read_for(connection.vendor)


def claim_read(
    step_result_id: int, *, worker: str, now: Clock = DEFAULT_CLOCK
) -> tuple[Claim, tuple] | None:
    """A step task's claim, which is also its first read: the queued step taken for this
    task (``claim.claim``, its inputs not stored yet: they are written with the outcome),
    read back with its whole run and the tool table's state (``read_step``). None when
    it is no longer queued (a duplicate or stale message) or unknown.

    On PostgreSQL one statement, ``UPDATE … FROM`` the run and the tool table's state
    ``… RETURNING`` all three, built once per process; elsewhere (SQLite cannot return
    the columns of an ``UPDATE … FROM``'s other tables) the claim, then ``read_step``.
    """
    if connection.vendor != "postgresql":
        won = claim(step_result_id, worker=worker, now=now)
        if won is None:
            return None
        result, tools = read_step(step_result_id)
        won.result.run = result.run
        return won, tools
    token, leased_at = uuid.uuid4().hex, time.monotonic()
    at = now()
    sql, field_of, run_fields, converters = _claim_read_for(connection.vendor)
    written = {
        "status": StepStatus.RUNNING,
        "claim_token": token,
        "worker": worker[:255],
        "lease_expires_at": lease_until(settings.FLOWPILOT_STEP_LEASE, at),
        "started_at": at,
        "updated_at": at,
    }
    params = [field_of[name].get_db_prep_save(v, connection) for name, v in written.items()]
    with bound_cursor(connection) as cursor:
        cursor.execute(sql, [*params, step_result_id, StepStatus.QUEUED.value])
        row = cursor.fetchone()
    if row is None:
        return None
    values = _converted(row, converters)
    db = connection.alias
    result = StepResult.from_db(db, list(_CLAIM_FIELDS), values[: len(_CLAIM_FIELDS)])
    result.claim_token = token
    start, end = len(_CLAIM_FIELDS), len(_CLAIM_FIELDS) + len(run_fields)
    run = Run.from_db(db, [f.attname for f in run_fields], values[start:end])
    result.run = run
    updated, count, enabled = values[end:]
    tools = caches.state_key(updated, count, enabled or 0)
    return Claim(token, result, run.status, leased_at), tools


# In the model's order (``from_db``): what the claim reads back of the step.
_CLAIM_FIELDS = ("id", "run_id", "step_id", "status", "attempts", "attempt_log", "attempt_limit")


def _converted(row: tuple, converters: tuple[tuple[int, tuple], ...]) -> list:
    values = list(row)
    for index, convert in converters:
        for fn in convert:
            values[index] = fn(values[index], None, connection)
    return values


def _converters_of(fields: tuple[tuple[Field, str], ...]) -> tuple[tuple[int, tuple], ...]:
    """Each converted column's converters (what the ORM applies to a value read: JSON,
    dates and booleans as the backend returns them), for fields read from tables."""
    converters = []
    for index, (field, table) in enumerate(fields):
        col = field.get_col(table)
        own = field.get_db_converters(connection)  # type: ignore[attr-defined]  # untyped
        found = (*connection.ops.get_db_converters(col), *own)
        if found:
            converters.append((index, tuple(found)))
    return tuple(converters)


@functools.cache
def _claim_read_for(
    vendor: str,
) -> tuple[str, dict[str, Field], tuple[Field, ...], tuple[tuple[int, tuple], ...]]:
    """``claim_read``'s statement for ``vendor`` (names from the models' metadata; the
    written values, the id and the queued status are its parameters), the written
    fields by name, the run's fields and the converters of what it returns."""
    quote = connection.ops.quote_name
    steps, runs = StepResult._meta, Run._meta
    step_table, run_table = quote(steps.db_table), quote(runs.db_table)
    by_attname = {f.attname: f for f in steps.concrete_fields}
    step_fields = tuple(by_attname[name] for name in _CLAIM_FIELDS)
    run_fields = tuple(runs.concrete_fields)
    written = ("status", "claim_token", "worker", "lease_expires_at", "started_at", "updated_at")
    field_of = {name: by_attname[name] for name in written}
    sets = []
    for name in written:
        column = quote(field_of[name].column)
        keep = f"COALESCE({step_table}.{column}, %s)" if name == "started_at" else "%s"
        sets.append(f"{column} = {keep}")  # a step tried before keeps its first start
    columns = [f"{step_table}.{quote(f.column)}" for f in step_fields]
    columns += [f"{run_table}.{quote(f.column)}" for f in run_fields]
    sql = (
        f"UPDATE {step_table} SET {', '.join(sets)} "  # noqa: S608 - names from metadata
        f"FROM {run_table}, ({caches.tools_state_sql()}) tools "
        f"WHERE {step_table}.{quote(steps.pk.column)} = %s "
        f"AND {step_table}.{quote('status')} = %s "
        f"AND {run_table}.{quote(runs.pk.column)} = "
        f"{step_table}.{quote(steps.get_field('run').column)} "
        f"RETURNING {', '.join(columns)}, tools.*"
    )
    tables = [(f, steps.db_table) for f in step_fields] + [(f, runs.db_table) for f in run_fields]
    return sql, field_of, run_fields, _converters_of(tuple(tables))


def lock_run(run_id: int) -> Run:
    """The run, row-locked until the transaction ends."""
    return Run.objects.select_for_update().get(pk=run_id)


class BrokerUnavailable(RunError):
    code = "broker_unavailable"


def run_start(*, run: Run, publish: Publish = publish_step) -> Run:
    """Move a pending run to running and queue its first steps (published on commit).

    Raises ``BrokerUnavailable`` when the broker refuses the steps: the run is started
    and its steps queued by then, so the sweeper publishes them again later. What it
    logs carries the run's ids (``run_log_fields``).
    """
    with run_log_fields(run):
        return _start(run, publish)


def _start(run: Run, publish: Publish) -> Run:
    """``run_start``'s work, within the run's ids."""
    try:
        with transaction.atomic():
            locked = lock_run(run.pk)
            with run_context(locked) as ctx:
                now = ctx.now()
                started = locked.started_at or now
                if not run_transition(locked, RunStatus.RUNNING, started_at=started):
                    raise RunStateError(f"run {locked.pk} is {locked.status}; it cannot start")
                advance_locked(ctx, locked, publish=publish, now=now)
    except KombuOperationalError as exc:
        raise BrokerUnavailable(
            f"run {run.pk} started, but its steps could not be sent to the broker ({exc}); "
            "the sweeper sends them again once the broker is back, or cancel it with "
            f"`manage.py cancelrun {run.pk}`"
        ) from exc
    logger.info("run %s started on the Celery workers", run.pk)
    return locked


def run_log_fields(run: Run, *, step_id: str | None = None) -> AbstractContextManager[None]:
    """The run's ids (its id, and its trace id: its UUID as 32 hex digits), and the step's
    when a task is about one, on every line it logs meanwhile (``tools.logcontext``)."""
    return log_fields(run_id=run.pk, trace_id=str(run.uuid).replace("-", ""), step_id=step_id)
