# The last lines of failed containers, kept with their job (jobs/logtails.py).

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0005_gpu_intervals"),
    ]

    operations = [
        migrations.CreateModel(
            name="LogTail",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("pod", models.CharField(max_length=253)),
                ("container", models.CharField(max_length=63)),
                ("exit_code", models.IntegerField(blank=True, null=True)),
                ("reason", models.CharField(blank=True, max_length=64)),
                ("message", models.TextField(blank=True, help_text="The container's termination message.")),
                ("restarts", models.PositiveIntegerField(default=0)),
                ("ended_at", models.CharField(blank=True, max_length=64)),
                ("text", models.TextField(blank=True)),
                ("captured_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("job", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="log_tails",
                                          to="jobs.job")),
            ],
            options={
                "ordering": ["-captured_at", "-id"],
                "constraints": [
                    models.UniqueConstraint(fields=("job", "pod", "container"), name="log_tail_one_per_container",
                                            violation_error_message="A container keeps one log tail."),
                ],
            },
        ),
    ]
