# The Approval model moved to the review app; its table (runs_approval) and rows stay.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0004_in_flight_lease_index'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name='Approval')],
            database_operations=[],
        ),
    ]
