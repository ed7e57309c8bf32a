"""Writing a new run's rows: the Run and its StepResults, all or none.

On PostgreSQL this is one statement — the run's INSERT a data-modifying CTE whose
``RETURNING`` id the steps' INSERT reads — atomic by itself: one round trip and one
commit, where ``Run.objects.create`` and ``bulk_create`` in a transaction are four
(``BEGIN``, two INSERTs, ``COMMIT``). Both INSERTs are built by Django's own insert
compiler from the model instances, so every value is prepared (defaults,
``auto_now_add``, JSON) exactly as ``save()`` and ``bulk_create()`` would; elsewhere
those two run, in a transaction.
"""

from __future__ import annotations

from django.db import connections, router, transaction
from django.db.models import Field, Model
from django.db.models.expressions import RawSQL
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
    step_id = StepResult._meta.get_field("step_id")
    assert isinstance(step_id, Field)  # a concrete field of the model
    # The run's id as the statement knows it: a constant sub-select of the CTE.
    new_run_id = RawSQL(f"SELECT id FROM {_NEW_RUN}", ())  # noqa: S608, S611
    for step in steps:
        step.run_id = new_run_id
    try:
        step_sql, step_params = _insert_sql(
            alias, StepResult, steps, [*StepResult._meta.db_returning_fields, step_id]
        )
    finally:
        for step in steps:
            step.run = run  # the instance again (its id is still unknown)
    # Names from the models' metadata and the compiler; every value is a parameter.
    sql = (
        f"WITH {_NEW_RUN} AS ({run_sql}), new_steps AS ({step_sql}) "  # noqa: S608
        f"SELECT (SELECT id FROM {_NEW_RUN}), new_steps.* FROM new_steps"
    )
    params = [*run_params, *step_params]
    with (
        transaction.mark_for_rollback_on_error(using=alias),
        bound_cursor(db, len(params)) as cursor,
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
