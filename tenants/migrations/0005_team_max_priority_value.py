# A team's priority ceiling: its jobs may use priority classes up to this value.

import django.core.validators
from django.db import migrations, models

HELP = ("The highest priority class value this team's jobs may use. Higher classes may preempt other "
        "teams' jobs, so a quota manager raises it for the teams that need them.")


def field():
    return models.IntegerField(default=0, help_text=HELP, validators=[
        django.core.validators.MinValueValidator(-1000000000), django.core.validators.MaxValueValidator(1000000000)])


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0004_team_history_from_quotas'),
    ]

    operations = [
        migrations.AddField(model_name='historicalteam', name='max_priority_value', field=field()),
        migrations.AddField(model_name='team', name='max_priority_value', field=field()),
        migrations.AddConstraint(
            model_name='team',
            constraint=models.CheckConstraint(
                condition=models.Q(('max_priority_value__gte', -1000000000), ('max_priority_value__lte', 1000000000)),
                name='team_max_priority_in_range', violation_error_message='Priority values lie between -1e9 and 1e9.'),
        ),
    ]
