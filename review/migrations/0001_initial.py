# Approval, moved here from the runs app: the model enters this app's state over the
# table runs.0002 created (runs_approval); no table is created and no row moves.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('runs', '0005_approval_moves_to_review'),
        ('workflows', '0002_plans_and_approvals'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='Approval',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('definition_hash', models.CharField(help_text='Hash of the version approved.', max_length=64)),
                        ('sample_inputs', models.JSONField(blank=True, default=dict)),
                        ('status', models.CharField(choices=[('validating', 'Validation run in progress'), ('passed', 'Validation run succeeded'), ('failed', 'Validation run failed')], default='validating', max_length=12)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('approved_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='approvals', to=settings.AUTH_USER_MODEL)),
                        ('validation_run', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='approval', to='runs.run')),
                        ('workflow', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='approvals', to='workflows.workflow')),
                    ],
                    options={
                        'db_table': 'runs_approval',
                        'ordering': ['-created_at', '-id'],
                        'constraints': [models.CheckConstraint(condition=models.Q(('status__in', ['validating', 'passed', 'failed'])), name='approval_status_valid')],
                    },
                ),
            ],
        ),
    ]
