# PlanRequest, moved here from the api app: the model enters this app's state over
# the table api.0001 created (api_planrequest); no table is created and no row moves.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('review', '0004_approval_workflow_pins'),
        ('api', '0003_plans_to_review_webhooks_to_triggers'),
        ('workflows', '0005_planner_templates_and_questions'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='PlanRequest',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('create', 'Plan a goal'), ('revise', 'Revise with feedback'), ('reject', 'Reject with feedback')], max_length=8)),
                        ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('questions', 'The planner asks; answer to go on'), ('failed', 'Failed')], default='queued', max_length=10)),
                        ('goal', models.TextField(blank=True)),
                        ('sample_inputs', models.JSONField(blank=True, default=dict)),
                        ('feedback', models.TextField(blank=True)),
                        ('attempts', models.JSONField(blank=True, default=list)),
                        ('questions', models.JSONField(blank=True, default=list, help_text="The planner's clarifying questions, when it asked: [{id, question, options}].")),
                        ('answers', models.JSONField(blank=True, default=dict, help_text='Question id -> answer.')),
                        ('error', models.JSONField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('started_at', models.DateTimeField(blank=True, null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('based_on', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='workflows.workflow')),
                        ('workflow', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='workflows.workflow')),
                        ('question_attempt', models.ForeignKey(blank=True, help_text='The plan attempt that asked the questions (answer it with answers_to).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='workflows.planattempt')),
                        ('answers_to', models.ForeignKey(blank=True, help_text='The plan attempt whose questions this request answers.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='workflows.planattempt')),
                        ('requested_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'api_planrequest',
                        'ordering': ['-created_at', '-id'],
                        'constraints': [models.CheckConstraint(condition=models.Q(('kind__in', ['create', 'revise', 'reject'])), name='plan_kind_valid'), models.CheckConstraint(condition=models.Q(('status__in', ['queued', 'running', 'succeeded', 'questions', 'failed'])), name='plan_request_status_valid')],
                    },
                ),
            ],
        ),
    ]
