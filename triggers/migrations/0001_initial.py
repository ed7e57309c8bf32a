# WebhookTrigger and WebhookDelivery, moved here from the api app: the models enter
# this app's state over the tables api.0001 created (api_webhooktrigger,
# api_webhookdelivery); no table is created and no row moves.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('api', '0003_plans_to_review_webhooks_to_triggers'),
        ('runs', '0012_webhook_mcp_triggers'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='WebhookTrigger',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('workflow_name', models.CharField(max_length=100, unique=True)),
                        ('public_id', models.CharField(max_length=64, unique=True)),
                        ('secret', models.CharField(max_length=128)),
                        ('enabled', models.BooleanField(default=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('rotated_at', models.DateTimeField(blank=True, null=True)),
                        ('created_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'api_webhooktrigger',
                        'ordering': ['workflow_name'],
                    },
                ),
                migrations.CreateModel(
                    name='WebhookDelivery',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('signature', models.CharField(max_length=64)),
                        ('timestamp', models.BigIntegerField()),
                        ('received_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                        ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='runs.run')),
                        ('trigger', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='triggers.webhooktrigger')),
                    ],
                    options={
                        'db_table': 'api_webhookdelivery',
                        'ordering': ['-received_at', '-id'],
                        'constraints': [models.UniqueConstraint(fields=('trigger', 'signature'), name='webhook_delivery_once')],
                    },
                ),
            ],
        ),
    ]
