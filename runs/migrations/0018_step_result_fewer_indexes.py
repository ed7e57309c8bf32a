# The step table's single-column indexes on the run and the status are dropped: every
# step transition wrote an entry to each of them, and no query used them (the run's
# steps are found by the unique (run, step id) index, in-flight and failed steps by
# partial indexes). Only the indexes are dropped, by name as the database reports them:
# Django's own AlterField would also drop and re-add the foreign key, checking every row.

import django.db.models.deletion
from django.db import migrations, models


def _single_column_indexes(schema_editor, column):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "runs_stepresult")
    return sorted(
        name
        for name, info in constraints.items()
        if info["index"]
        and not info["unique"]
        and not info["primary_key"]
        and info["columns"] == [column]
        and name not in ("step_failed_by_run_idx", "step_in_flight_lease_idx")
    )


def drop_indexes(apps, schema_editor):
    quote = schema_editor.quote_name
    for column in ("run_id", "status"):
        for name in _single_column_indexes(schema_editor, column):
            schema_editor.execute(f"DROP INDEX IF EXISTS {quote(name)}")


def add_indexes(apps, schema_editor):
    quote = schema_editor.quote_name
    for column, name in (
        ("run_id", "runs_stepresult_run_id_83eeaf72"),
        ("status", "runs_stepresult_status_31120880"),
    ):
        schema_editor.execute(
            f"CREATE INDEX {quote(name)} ON {quote('runs_stepresult')} ({quote(column)})"
        )


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0017_run_started_by'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_indexes, add_indexes)],
            state_operations=[
                migrations.AlterField(
                    model_name='stepresult',
                    name='run',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='step_results', to='runs.run'),
                ),
                migrations.AlterField(
                    model_name='stepresult',
                    name='status',
                    field=models.CharField(choices=[('pending', 'Pending'), ('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('skipped', 'Skipped')], default='pending', max_length=16),
                ),
            ],
        ),
    ]
