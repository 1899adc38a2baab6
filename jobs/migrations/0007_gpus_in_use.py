"""Job.gpus_in_use: the GPUs a job's pods hold on nodes now, kept with its open GpuInterval
(jobs/intervals.py); filled in here from the intervals still open.

Numbered 0006 but after 0007 (the log tails), which was written first: one line of
migrations, whatever order they were written in. Going back drops the column.
"""

import django.core.validators
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def fill(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    GpuInterval = apps.get_model("jobs", "GpuInterval")
    db = schema_editor.connection.alias
    open_gpus = GpuInterval.objects.using(db).filter(job=OuterRef("pk"), ended_at__isnull=True).values("gpus")[:1]
    Job.objects.using(db).filter(gpu_intervals__ended_at__isnull=True).update(gpus_in_use=Subquery(open_gpus))


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0006_log_tails"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="gpus_in_use",
            field=models.PositiveIntegerField(default=0, editable=False, validators=[
                django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(131072)]),
        ),
        migrations.AlterField(
            model_name="gpuinterval",
            name="gpus",
            field=models.PositiveIntegerField(help_text="GPUs the job's pods held on nodes: pods placed times GPUs per worker."),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
