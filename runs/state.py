"""Run and step states: the statuses, the moves allowed between them, and the one way to
write a status.

Every status write in the app goes through ``run_transition`` or ``step_transition``: a
conditional UPDATE that adds ``status IN (the states allowed to reach the target)`` to
whatever conditions the caller already has (a claim token, the run's status, a lease).
Two writers racing for the same row therefore never both win, and a row can never jump
to a state the tables below do not allow.

This module knows no model: the write functions take a queryset or a model instance,
so ``runs.models`` can declare its fields from the enums here without an import cycle.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, connections, models, router, transaction

from tools.errors import FlowpilotError
from tools.statements import bound_cursor


class RunStatus(models.TextChoices):
    # Waiting for a slot of its workflow's concurrency limit (``runs.concurrency``): it
    # holds none, and starts (moves to pending) when one frees, oldest first per key.
    QUEUED = "queued", "Queued (concurrency limit)"
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    # Never started: its workflow's concurrency limit was reached (``on_limit: skip``).
    SKIPPED = "skipped", "Skipped (concurrency limit)"
    # Nothing to do but wait for a person (an ``approval`` step, ``runs.approvals``): it
    # holds no task, thread or connection, and goes on once the step is decided.
    WAITING = "waiting", "Waiting for approval"


class RunTrigger(models.TextChoices):
    MANUAL = "manual", "Manual (admin)"
    API = "api", "API"
    WEBHOOK = "webhook", "Webhook trigger"
    MCP = "mcp", "MCP client (flowpilot's MCP server)"
    CLI = "cli", "Command line"
    SCHEDULE = "schedule", "Schedule"
    VALIDATION = "validation", "Validation run"
    REPLAY = "replay", "Replay (offline, recorded responses)"
    WORKFLOW = "workflow", "Workflow step (a child run)"
    EVENT = "event", "Event trigger (another workflow's finished run)"


class StepStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped"
    # An ``approval`` step waiting for its decision: neither in flight nor finished.
    WAITING = "waiting", "Waiting for approval"


RUN_TERMINAL = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.SKIPPED}
)
# Runs that hold a slot of their workflow's concurrency limit (``runs.concurrency``).
RUN_HOLDING_SLOT = frozenset({RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING})
STEP_TERMINAL = frozenset({StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.SKIPPED})
# Handed to a worker (queued) or executing (running): a Celery run's steps hold a lease then.
STEP_IN_FLIGHT = frozenset({StepStatus.QUEUED, StepStatus.RUNNING})

RUN_TRANSITIONS: Mapping[str, frozenset[str]] = {
    # A slot freed (promoted, oldest first), or cancelled while it waited. A run is
    # created queued (or skipped) by its admission; no transition leads to either.
    RunStatus.QUEUED: frozenset({RunStatus.PENDING, RunStatus.CANCELLED}),
    RunStatus.PENDING: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.FAILED}),
    # Back to pending: resuming a run whose process died (operator --force).
    # Waiting: nothing left to do but an approval step's decision.
    RunStatus.RUNNING: frozenset(
        {
            RunStatus.SUCCEEDED,
            RunStatus.FAILED,
            RunStatus.CANCELLED,
            RunStatus.PENDING,
            RunStatus.WAITING,
        }
    ),
    # Decided: on the workers it runs on (running), in process it starts again (pending).
    RunStatus.WAITING: frozenset({RunStatus.RUNNING, RunStatus.PENDING, RunStatus.CANCELLED}),
    # Resume takes a failed or cancelled run back to pending, then running.
    # Resume takes it back to queued instead when its concurrency limit is reached.
    RunStatus.FAILED: frozenset({RunStatus.PENDING, RunStatus.QUEUED}),
    RunStatus.CANCELLED: frozenset({RunStatus.PENDING, RunStatus.QUEUED}),
    RunStatus.SUCCEEDED: frozenset(),
    RunStatus.SKIPPED: frozenset(),
}

STEP_TRANSITIONS: Mapping[str, frozenset[str]] = {
    # Queued for a worker, claimed in process, skipped (branch not taken, run cancelled),
    # or failed before any call (a reference or template error).
    StepStatus.PENDING: frozenset(
        {StepStatus.QUEUED, StepStatus.RUNNING, StepStatus.SKIPPED, StepStatus.FAILED}
    ),
    # Claimed by a task, skipped (the run ended first), back to pending on resume, or
    # failed for review (a non-idempotent step interrupted).
    StepStatus.QUEUED: frozenset(
        {StepStatus.RUNNING, StepStatus.SKIPPED, StepStatus.PENDING, StepStatus.FAILED}
    ),
    # Finished; back to queued for a retry or after its worker was lost; skipped when the
    # run ended between the claim and the call; back to pending on a forced resume.
    StepStatus.RUNNING: frozenset(
        {
            StepStatus.SUCCEEDED,
            StepStatus.FAILED,
            StepStatus.QUEUED,
            StepStatus.SKIPPED,
            StepStatus.PENDING,
            StepStatus.WAITING,
        }
    ),
    # An approval step decided (approved, rejected, timed out), or skipped when its run
    # is cancelled.
    StepStatus.WAITING: frozenset(
        {StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.SKIPPED, StepStatus.PENDING}
    ),
    # Resume runs failed and skipped steps again; a succeeded step never runs again.
    StepStatus.FAILED: frozenset({StepStatus.PENDING}),
    StepStatus.SKIPPED: frozenset({StepStatus.PENDING}),
    StepStatus.SUCCEEDED: frozenset(),
}


def _sources(table: Mapping[str, frozenset[str]], to: str) -> list[str]:
    """The states ``to`` may be reached from, sorted (one stable SQL text per target)."""
    if to not in table:
        raise ValueError(f"unknown status {to!r}")
    return sorted(str(s) for s, targets in table.items() if to in targets)


def _transition(
    rows: models.QuerySet[Any] | models.Model,
    table: Mapping[str, frozenset[str]],
    to: str,
    fields: dict[str, Any],
    run_status: str | None = None,
    expect: str | None = None,
) -> int:
    sources = [s for s in _sources(table, to) if expect is None or s == expect]
    if isinstance(rows, models.Model):
        if not any(hasattr(v, "resolve_expression") for v in fields.values()):
            return _row_update(rows, sources, to, fields, run_status)
        instance = rows
        rows = type(instance)._default_manager.filter(pk=instance.pk)
    else:
        instance = None
    if run_status is not None:
        rows = rows.filter(run__status=run_status)
    updated = rows.filter(status__in=sources).update(status=to, **fields)
    if updated and instance is not None:
        _apply(instance, to, fields)
    return updated


def _apply(instance: models.Model, to: str, fields: Mapping[str, Any]) -> None:
    for key, value in {"status": to, **fields}.items():
        setattr(instance, key, value)


# --- one row: a precompiled statement ------------------------------------------------
#
# The engine writes one row per step several times (claim, outcome). Built by the ORM,
# each such UPDATE costs more Python than the database needs to run it (a queryset
# clone, a compiler, a join turned into a subquery for the run's status). For one row
# with plain values the statement text is built once per shape and reused; the values
# are prepared by the fields themselves, so they are stored exactly as the ORM would.


def _row_update(
    instance: models.Model,
    sources: list[str],
    to: str,
    fields: dict[str, Any],
    run_status: str | None,
) -> int:
    write = _row_write(instance, sources, to, fields, run_status)
    with (
        transaction.mark_for_rollback_on_error(using=write.alias),
        bound_cursor(connections[write.alias]) as c,
    ):
        c.execute(write.sql, write.params)
        updated = c.rowcount
    if updated:
        write.apply()
    return updated


def _row_write(
    instance: models.Model,
    sources: list[str],
    to: str,
    fields: dict[str, Any],
    run_status: str | None,
    *,
    replay: str | None = None,
) -> RowWrite:
    model = type(instance)
    connection = connections[instance._state.db or router.db_for_write(model)]
    names = tuple(fields)
    replay = replay if replay in names else None
    sql = _row_update_sql(
        model, connection.alias, names, len(sources), run_status is not None, replay=replay
    )
    values = [_field(model, n).get_db_prep_save(fields[n], connection) for n in names]
    params = [to, *values, instance.pk, *sources]
    if run_status is not None:
        params.append(run_status)
    if replay is not None:
        params += [to, values[names.index(replay)]]
    return RowWrite(instance, to, fields, connection.alias, sql, params)


@dataclass(frozen=True)
class RowWrite:
    """One row's status write, prepared but not sent: ``rows_write`` sends a batch."""

    instance: models.Model
    to: str
    fields: Mapping[str, Any]
    alias: str
    sql: str  # UPDATE … WHERE …, parameters as %s
    params: Sequence[Any]

    def apply(self) -> None:
        """Set the written values on the instance (what the row holds once written)."""
        _apply(self.instance, self.to, self.fields)


def step_write(result: models.Model, to: str, **fields: Any) -> RowWrite:
    """``step_transition`` of one instance with plain values, prepared for ``rows_write``.

    With ``updated_at`` among ``fields`` the write is also safe to send again: a row
    that already holds ``to`` with exactly that ``updated_at`` (this write, committed,
    its acknowledgement lost) counts as written, so a retry of the same prepared write
    after a broken connection carries on instead of finding the row moved on.
    """
    return _row_write(result, _sources(STEP_TRANSITIONS, to), to, fields, None, replay="updated_at")


def step_claim_write(result: models.Model, *, run_status: str | None, **fields: Any) -> RowWrite:
    """``step_claim``, prepared for ``rows_write``; safe to send again as ``step_write``.

    ``run_status`` None drops the condition on the run's status: only for a claim sent in
    one ``rows_write`` behind the run's own start (``run_write``, the batch's first
    required write), which stands for it — in one PostgreSQL statement the claim's own
    look at the run would see the run as it was before the statement (pending).
    """
    return _row_write(
        result, [StepStatus.PENDING], StepStatus.RUNNING, fields, run_status, replay="updated_at"
    )


def run_write(run: models.Model, to: str, *, replay: str, **fields: Any) -> RowWrite:
    """``run_transition`` of one run instance with plain values, prepared for
    ``rows_write`` (so a run's start or finish goes in one atomic write with its steps').

    Safe to send again like ``step_write``: ``replay`` names a field among ``fields``
    whose value only this write sets (a timestamp taken for it: ``started_at`` of a run's
    first start, ``finished_at``); a run already in ``to`` with exactly that value counts
    as written.
    """
    if replay not in fields:
        raise ValueError(f"the replay field {replay!r} is not among the fields written")
    return _row_write(run, _sources(RUN_TRANSITIONS, to), to, fields, None, replay=replay)


def rows_write(writes: Sequence[RowWrite], *, required: int = 0) -> list[int]:
    """Send ``writes`` as one atomic unit; how many rows each changed (0 or 1).

    The first ``required`` writes are the facts the others were decided from: the
    others are written only if every one of those changed its row (else they change
    nothing, and report 0). On PostgreSQL the batch is one statement — each write a
    data-modifying CTE, the later ones conditional on the earlier ones' ``RETURNING``
    — so outside a transaction it is one round trip and one commit, atomic by itself;
    elsewhere the writes run one after the other in a transaction. Instances are
    updated (``RowWrite.apply``) for the writes that changed their row.
    """
    if not writes:
        return []
    alias = writes[0].alias
    if any(w.alias != alias for w in writes):
        raise ValueError("one batch of row writes goes to one database")
    db = connections[alias]
    if len(writes) == 1:
        counts = _rows_write_each(db, writes, required)  # one statement: atomic by itself
    elif db.vendor == "postgresql":
        # One statement, atomic by itself. Inside a caller's transaction it gets a
        # savepoint (as a transaction of several would), so a failed try leaves that
        # transaction usable.
        nested = transaction.atomic(using=alias) if db.in_atomic_block else contextlib.nullcontext()
        with nested:
            counts = _rows_write_cte(db, writes, required)
    else:
        with transaction.atomic(using=alias):
            counts = _rows_write_each(db, writes, required)
    for write, count in zip(writes, counts, strict=True):
        if count:
            write.apply()
    return counts


def _rows_write_each(db: Any, writes: Sequence[RowWrite], required: int) -> list[int]:
    counts: list[int] = []
    with transaction.mark_for_rollback_on_error(using=db.alias), bound_cursor(db) as cursor:
        for number, write in enumerate(writes):
            if number >= required and sum(counts[:required]) < required:
                counts.append(0)
                continue
            cursor.execute(write.sql, write.params)
            counts.append(cursor.rowcount)
    return counts


def _rows_write_cte(db: Any, writes: Sequence[RowWrite], required: int) -> list[int]:
    """``WITH w0 AS (UPDATE … RETURNING 1), … SELECT (SELECT count(*) FROM w0), …``."""
    parts: list[str] = []
    params: list[Any] = []
    guard = ""
    if required:
        # Only generated names and numbers: every value is a parameter of the writes.
        landed = " + ".join(f"(SELECT count(*) FROM w{n})" for n in range(required))  # noqa: S608
        guard = f" AND ({landed}) = {int(required)}"
    for number, write in enumerate(writes):
        condition = guard if number >= required else ""
        parts.append(f"w{number} AS ({write.sql}{condition} RETURNING 1)")
        params += write.params
    counted = ", ".join(f"(SELECT count(*) FROM w{n})" for n in range(len(writes)))  # noqa: S608
    sql = f"WITH {', '.join(parts)} SELECT {counted}"
    with transaction.mark_for_rollback_on_error(using=db.alias), bound_cursor(db) as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return [int(n) for n in row]


@functools.lru_cache(maxsize=256)
def _row_update_sql(
    model: type[models.Model],
    alias: str,
    names: tuple[str, ...],
    sources: int,
    run: bool,
    *,
    replay: str | None = None,
) -> str:
    """``UPDATE … SET status, <names> WHERE pk AND status IN (…) [AND the run's status]``.

    With ``replay`` (a field's name): ``WHERE pk AND ((status IN (…) [AND …]) OR
    (status = the target AND <replay> = the value written))`` — the same write, sent
    again, matches the row it already wrote. The whole condition is parenthesised, so
    ``rows_write`` can append its guard with ``AND``.
    """
    opts = model._meta
    quote = connections[alias].ops.quote_name
    columns = ", ".join(f"{quote(_column(model, n))} = %s" for n in ("status", *names))
    where = f"{quote('status')} IN ({', '.join(['%s'] * sources)})"
    if run:
        run_model = _field(model, "run").related_model
        assert isinstance(run_model, type)  # the foreign key to the run model
        run_table = run_model._meta
        # Names from the model's own metadata; every value is a parameter.
        where += (
            f" AND EXISTS (SELECT 1 FROM {quote(run_table.db_table)} WHERE "  # noqa: S608
            f"{quote(run_table.db_table)}.{quote(run_table.pk.column)} = "
            f"{quote(opts.db_table)}.{quote(_column(model, 'run'))} AND "
            f"{quote(run_table.db_table)}.{quote('status')} = %s)"
        )
    if replay is not None:
        written = f"{quote('status')} = %s AND {quote(_column(model, replay))} = %s"
        where = f"({where}) OR ({written})"
    where = f"{quote(opts.pk.column)} = %s AND ({where})"
    return f"UPDATE {quote(opts.db_table)} SET {columns} WHERE {where}"  # noqa: S608


def run_transition(run: models.QuerySet[Any] | models.Model, to: str, **fields: Any) -> int:
    """Move a run (an instance, or the runs of a queryset) to ``to``, with ``fields``.

    Only rows in a state allowed to reach ``to`` change; returns how many did. An
    instance that changed gets the new values (expressions aside) set on it as well.
    """
    return _transition(run, RUN_TRANSITIONS, to, fields)


def step_transition(rows: models.QuerySet[Any] | models.Model, to: str, **fields: Any) -> int:
    """Move step results (an instance, or those of a queryset) to ``to``, with ``fields``.

    The caller's own conditions stay (filter the queryset); this adds the states allowed
    to reach ``to``. ``updated_at`` is written only
    when passed (an UPDATE skips ``auto_now``). Returns how many rows changed. One
    instance with plain values is written by a precompiled statement.
    """
    return _transition(rows, STEP_TRANSITIONS, to, fields)


def step_claim(result: models.Model, *, run_status: str, **fields: Any) -> int:
    """Move one pending step to running, only while its run is in ``run_status`` (no
    step starts in a run that is not running), with ``fields``. Returns 1 or 0."""
    return _transition(
        result, STEP_TRANSITIONS, StepStatus.RUNNING, fields, run_status, StepStatus.PENDING
    )


def step_transition_returning(
    model: type[models.Model],
    pk: int,
    to: str,
    *,
    status: str,
    fields: Mapping[str, Any],
    keep: frozenset[str] = frozenset(),
    returning: Sequence[str] = (),
    returning_sql: Sequence[str] = (),
) -> tuple[Any, ...] | None:
    """Move one step result from ``status`` to ``to`` and read it back in one round trip.

    ``step_update_returning`` with the row named by its id.
    """
    return step_update_returning(
        model, to, status=status, match={"id": pk}, fields=fields, keep=keep,
        returning=returning, returning_sql=returning_sql,
    )  # fmt: skip


def step_update_returning(
    model: type[models.Model],
    to: str,
    *,
    status: str,
    match: Mapping[str, Any],
    fields: Mapping[str, Any],
    keep: frozenset[str] = frozenset(),
    plus: Mapping[str, tuple[str, int]] | None = None,
    guard_sql: str = "",
    guard_params: Sequence[Any] = (),
    returning: Sequence[str] = (),
    returning_sql: Sequence[str] = (),
) -> tuple[Any, ...] | None:
    """Move one step result from ``status`` to ``to`` and read it back in one round trip.

    ``UPDATE … SET status=to, fields WHERE <match> AND status=status [AND guard]
    RETURNING …``. ``match`` names the row (``{"id": pk}``, or ``{"run": id, "step_id":
    sid}``: one row by the table's unique constraints); ``plus`` sets columns from
    another plus a number (``{"attempts": ("attempts", 1)}``); fields in ``keep`` are
    set only where NULL; ``guard_sql`` is a further condition in raw SQL (with
    ``guard_params``). It returns the ``returning`` fields (converted as the model
    reads them), then the ``returning_sql`` expressions (raw SQL over the row's columns,
    which may lock another row: a sub-select ``FOR UPDATE`` runs after the row was
    written). Returns None when no row matched (another writer won). Where the database
    cannot return rows from an UPDATE (SQLite before 3.35), the same UPDATE and a SELECT
    of the row by ``match`` run in one transaction instead.
    """
    if status not in _sources(STEP_TRANSITIONS, to):
        raise ValueError(f"a step cannot move from {status!r} to {to!r}")
    plus = plus or {}
    if changed := sorted(set(match) & {"status", *fields, *plus}):
        raise ValueError(f"a row named by {changed} cannot change them in the same UPDATE")
    meta = model._meta
    quote = connection.ops.quote_name
    table = quote(meta.db_table)
    sets: list[str] = ["status = %s"]
    params: list[Any] = [to]
    for name, value in fields.items():
        field = _field(model, name)
        column = quote(_column(model, name))
        sets.append(f"{column} = COALESCE({column}, %s)" if name in keep else f"{column} = %s")
        params.append(field.get_db_prep_save(value, connection))
    for name, (source, number) in plus.items():
        target, base = quote(_column(model, name)), quote(_column(model, source))
        sets.append(f"{target} = {base} + %s")
        params.append(number)
    where: list[str] = []
    where_params: list[Any] = []
    for name, value in match.items():
        field = _field(model, name)
        where.append(f"{quote(_column(model, name))} = %s")
        where_params.append(field.get_db_prep_value(value, connection))
    columns = [_field(model, name) for name in returning]
    quoted = [quote(_column(model, name)) for name in returning]
    selected = ", ".join([*quoted, *returning_sql])
    condition = " AND ".join([*where, "status = %s", *([guard_sql] if guard_sql else [])])
    # Names come from the model's metadata, values are parameters.
    update = f"UPDATE {table} SET {', '.join(sets)} WHERE {condition}"  # noqa: S608
    params += [*where_params, status, *guard_params]
    with (
        transaction.mark_for_rollback_on_error(using=connection.alias),
        bound_cursor(connection) as cursor,
    ):
        if connection.features.can_return_columns_from_insert:
            cursor.execute(f"{update} RETURNING {selected}", params)
            row = cursor.fetchone()
        else:
            with transaction.atomic():
                cursor.execute(update, params)
                row = None
                if cursor.rowcount:
                    read = f"SELECT {selected} FROM {table} WHERE {' AND '.join(where)}"  # noqa: S608
                    cursor.execute(read, where_params)
                    row = cursor.fetchone()
    if row is None:
        return None
    converted = [_from_db(f, value) for f, value in zip(columns, row, strict=False)]
    return (*converted, *row[len(columns) :])


def _field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    """The concrete field ``name`` of ``model`` (one with a column)."""
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field) or field.column is None:
        raise TypeError(f"{model.__name__}.{name} is not a concrete field")
    return field


def _column(model: type[models.Model], name: str) -> str:
    """The column of the concrete field ``name`` of ``model``."""
    column = _field(model, name).column
    assert column is not None  # _field refused a field without one
    return column


def _from_db(field: models.Field, value: Any) -> Any:
    if hasattr(field, "from_db_value"):
        return field.from_db_value(value, None, connection)
    return value


# --- errors ---------------------------------------------------------------------------


class RunError(FlowpilotError):
    code = "run_error"


class RunStateError(RunError):
    code = "run_state_invalid"


class RunNotStarted(RunStateError):
    """A run could not start: it is no longer pending (another process started it, or
    it was cancelled or finished first). Nothing of it was written."""


class StepError(FlowpilotError):
    """An error the engine records on a step itself (not raised by a tool).

    ``record()`` is what the step's ``error`` column stores.
    """

    code = "step_error"

    def record(self) -> dict[str, Any]:
        return self.as_dict()


class InterruptedNonIdempotent(StepError):
    """A step stopped mid-call whose tool is not idempotent: repeating it blindly could
    do the call twice, so it is failed for review instead."""

    code = "interrupted_non_idempotent"
    retryable = False

    def __init__(self, step_id: str) -> None:
        super().__init__(
            f"step `{step_id}` was interrupted during a non-idempotent call; it was not "
            "repeated. Check the target system, then restart from this step."
        )


class WorkerLost(StepError):
    """The worker running a step stopped renewing its lease (killed, machine lost)."""

    code = "worker_lost"
    retryable = True


class StepUnstartable(StepError):
    """No run context could be built for a step: it fails at once, under the code of the
    error that prevented it, and is never retried."""

    retryable = False

    def __init__(self, cause: FlowpilotError) -> None:
        super().__init__(cause.message[:4000])
        self.code = cause.code
