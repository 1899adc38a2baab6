# IdempotencyKey moves here from tenants, with its table (tenants_idempotencykey): state only.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0001_initial'),
        ('tenants', '0003_idempotency_keys_move_to_jobs'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.CreateModel(
            name='IdempotencyKey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(max_length=255)),
                ('request_digest', models.CharField(help_text='SHA-256 of the canonical request body.', max_length=64)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('job', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='jobs.job')),
                ('token', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenants.apitoken')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'db_table': 'tenants_idempotencykey',
                'constraints': [models.UniqueConstraint(condition=models.Q(('token__isnull', False)), fields=('token', 'key'), name='idempotency_key_unique_per_token', violation_error_message='This Idempotency-Key was already used with this token.'), models.UniqueConstraint(condition=models.Q(('token__isnull', True)), fields=('user', 'key'), name='idempotency_key_unique_per_session_user', violation_error_message='This Idempotency-Key was already used.')],
            },
        )]),
    ]
