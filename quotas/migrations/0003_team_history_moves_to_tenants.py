# The history of teams and memberships moves to tenants, with its tables: state only.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('quotas', '0002_requests_grants_history'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
        migrations.RemoveField(
            model_name='historicalteam',
            name='history_user',
        ),
        migrations.DeleteModel(
            name='HistoricalMembership',
        ),
        migrations.DeleteModel(
            name='HistoricalTeam',
        ),
        ]),
    ]
