# PlanRequest moved to the review app, WebhookTrigger and WebhookDelivery to the
# triggers app. Their tables (api_planrequest, api_webhooktrigger,
# api_webhookdelivery) and rows stay; only Django's state moves. The content types
# are relabelled, so the permissions granted on these models (and the admin log)
# follow them instead of being recreated empty under the new app.

from django.db import migrations

MOVED = {"planrequest": "review", "webhooktrigger": "triggers", "webhookdelivery": "triggers"}


def _relabel(apps, pairs):
    content_type = apps.get_model("contenttypes", "ContentType")
    for model, old, new in pairs:
        if content_type.objects.filter(app_label=new, model=model).exists():
            continue  # already known under the new app (a state never migrated back)
        content_type.objects.filter(app_label=old, model=model).update(app_label=new)
    content_type.objects.clear_cache()


def forwards(apps, schema_editor):
    _relabel(apps, [(model, "api", app) for model, app in MOVED.items()])


def backwards(apps, schema_editor):
    _relabel(apps, [(model, app, "api") for model, app in MOVED.items()])


class Migration(migrations.Migration):

    dependencies = [
        ('api', '0002_plan_request_questions'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='PlanRequest'),
                migrations.DeleteModel(name='WebhookDelivery'),
                migrations.DeleteModel(name='WebhookTrigger'),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
