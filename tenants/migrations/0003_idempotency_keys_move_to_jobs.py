# IdempotencyKey moves to the jobs app; its table stays (jobs 0002 takes it over by name).

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0002_api_tokens'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
        migrations.RemoveConstraint(
            model_name='idempotencykey',
            name='idempotency_key_unique_per_token',
        ),
        migrations.RemoveConstraint(
            model_name='idempotencykey',
            name='idempotency_key_unique_per_session_user',
        ),
        migrations.DeleteModel(
            name='IdempotencyKey',
        ),
        ]),
    ]
