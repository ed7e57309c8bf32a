"""Writing a new run's rows: the Run and its StepResults, all or none.

On PostgreSQL this is one statement — the run's INSERT a data-modifying CTE whose
``RETURNING`` id the steps' INSERT reads — atomic by itself: one round trip and one
commit, where ``Run.objects.create`` and ``bulk_create`` in a transaction are four
(``BEGIN``, two INSERTs, ``COMMIT``). Every value is prepared by Django's own insert
compiler from the model instances (defaults, ``auto_now_add``, JSON), exactly as
``save()`` and ``bulk_create()`` would; the steps go in as one array per column, so the
statement's text does not grow with the run (``_steps_insert_sql``). Elsewhere those
two run, in a transaction.
"""

from __future__ import annotations

from django.db import connections, router, transaction
from django.db.models import Field, Model
from django.db.models.sql import InsertQuery

from runs.models import Run, StepResult
from tools.statements import bound_cursor

_NEW_RUN = "new_run"  # the CTE holding the inserted run's id


def run_rows_create(run: Run, steps: list[StepResult]) -> None:
    """Insert ``run`` and ``steps`` (new instances, each built with ``run=run``) in one
    atomic write; their ids are set, as ``save()`` and ``bulk_create()`` set them."""
    alias = router.db_for_write(Run)
    db = connections[alias]
    if db.vendor != "postgresql" or not steps:
        with transaction.atomic(using=alias):
            run.save(force_insert=True, using=alias)
            StepResult.objects.using(alias).bulk_create(steps)
        return
    run_sql, run_params = _insert_sql(alias, Run, [run], Run._meta.db_returning_fields)
    step_sql, step_params = _steps_insert_sql(alias, steps)
    # Names from the models' metadata and the compiler; every value is a parameter.
    sql = (
        f"WITH {_NEW_RUN} AS ({run_sql}), new_steps AS ({step_sql}) "  # noqa: S608
        f"SELECT (SELECT id FROM {_NEW_RUN}), new_steps.* FROM new_steps"
    )
    params = [*run_params, *step_params]
    with (
        transaction.mark_for_rollback_on_error(using=alias),
        bound_cursor(db) as cursor,
    ):
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    run.pk = rows[0][0]
    ids = {row[2]: row[1] for row in rows}
    for instance in (run, *steps):
        instance._state.adding = False
        instance._state.db = alias
    for step in steps:
        step.pk = ids[step.step_id]
        step.run = run  # sets run_id too


def _steps_insert_sql(alias: str, steps: list[StepResult]) -> tuple[str, list]:
    """The steps' INSERT as one row per step read from arrays, one per column:
    ``INSERT … SELECT (SELECT id FROM new_run), * FROM unnest(%s::bigint[], …)
    RETURNING id, step_id``.

    Its text is the same for a run of any size, so psycopg converts it once and the
    server prepares it (``tools.statements``), where a ``VALUES`` list of one row per
    step was a new statement of ~20 parameters per step for every run size, too long for
    psycopg's cache. Every value is still prepared by Django's insert compiler from the
    instances (defaults, ``auto_now_add``, JSON), exactly as ``bulk_create()`` would.
    """
    db = connections[alias]
    meta = StepResult._meta
    run_field = meta.get_field("run")
    fields = [
        f
        for f in meta.local_concrete_fields
        if not f.generated and f is not meta.auto_field and f is not run_field
    ]
    query = InsertQuery(StepResult)
    rows: list[Model] = list(steps)
    query.insert_values(fields, rows)
    compiler = query.get_compiler(using=alias)
    columns = [
        [compiler.prepare_value(f, compiler.pre_save_val(f, step)) for step in steps]
        for f in fields
    ]
    quote = db.ops.quote_name
    step_id = meta.get_field("step_id")
    assert isinstance(run_field, Field)  # a concrete field of the model
    assert isinstance(step_id, Field)
    names = ", ".join(quote(f.column) for f in (run_field, *fields))
    arrays = ", ".join(f"%s::{f.db_type(db)}[]" for f in fields)
    returned = ", ".join(quote(f.column) for f in (*meta.db_returning_fields, step_id))
    # Names and types from the model's metadata; every value is a parameter.
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({names}) "  # noqa: S608
        f"SELECT (SELECT id FROM {_NEW_RUN}), * FROM unnest({arrays}) RETURNING {returned}"
    )
    return sql, columns


def _insert_sql(
    alias: str, model: type[Model], objs: list, returning: list[Field]
) -> tuple[str, list]:
    """The INSERT of ``objs`` with ``RETURNING returning``, as Django compiles it."""
    meta = model._meta
    fields = [f for f in meta.local_concrete_fields if not f.generated and f is not meta.auto_field]
    query = InsertQuery(model)
    query.insert_values(fields, objs)
    compiler = query.get_compiler(using=alias)
    compiler.returning_fields = returning
    ((sql, params),) = compiler.as_sql()
    return sql, list(params)
