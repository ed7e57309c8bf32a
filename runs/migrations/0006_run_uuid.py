"""Run.uuid: a globally unique id per run, the base of its idempotency keys.

Added nullable, filled with a fresh UUID for every existing run, then made unique
and required (a single-column default would give every existing row the same value).
"""

import uuid

from django.db import migrations, models


def fill_run_uuids(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    for run in Run.objects.filter(uuid__isnull=True).order_by("pk").only("pk").iterator():
        Run.objects.filter(pk=run.pk).update(uuid=uuid.uuid4())


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0005_approval_moves_to_review"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="uuid",
            field=models.UUIDField(editable=False, null=True),
        ),
        migrations.RunPython(fill_run_uuids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="run",
            name="uuid",
            field=models.UUIDField(
                default=uuid.uuid4,
                editable=False,
                help_text="Globally unique: the base of every idempotency key the run sends.",
                unique=True,
            ),
        ),
    ]
