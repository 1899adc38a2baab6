"""GpuInterval: the stretches of time a job held its GPUs, written by ``Job.transition`` from
now on and filled in here from the job events already recorded.

The backfill replays each job's events with the rule of ``jobs.usage.admitted_intervals``
(copied, as a migration must not follow later changes of the code): an event entering
admitted or running opens an interval unless one is open; cancelling keeps it; any other
event closes it; one still open stays open (``ended_at`` empty). Jobs are read in batches,
so memory stays flat whatever the number of events. Going back drops the table.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

HOLDING = ("admitted", "running")
CANCELLING = "cancelling"
BATCH = 2000


def replay(events):
    """``events``: (time, to_state) in order -> [(started_at, ended_at or None)]."""
    intervals, opened = [], None
    for at, state in events:
        if state in HOLDING:
            opened = opened or at
        elif state == CANCELLING:
            continue
        elif opened is not None:
            intervals.append((opened, at))
            opened = None
    if opened is not None:
        intervals.append((opened, None))
    return intervals


def backfill(apps, schema_editor):
    Job = apps.get_model("jobs", "Job")
    JobEvent = apps.get_model("jobs", "JobEvent")
    GpuInterval = apps.get_model("jobs", "GpuInterval")
    db = schema_editor.connection.alias
    last = 0
    while True:
        jobs = list(
            Job.objects.using(db).filter(pk__gt=last).order_by("pk")
            .values_list("pk", "team_id", "flavor_id", "submitter_id", "kind", "workers", "max_replicas",
                         "gpus_per_worker")[:BATCH]
        )
        if not jobs:
            return
        first, last = jobs[0][0], jobs[-1][0]
        events: dict[int, list] = {}
        for job_id, at, state in (JobEvent.objects.using(db).filter(job_id__gte=first, job_id__lte=last)
                                  .order_by("job_id", "created_at", "id").values_list("job_id", "created_at", "to_state")):
            events.setdefault(job_id, []).append((at, state))
        rows = []
        for pk, team_id, flavor_id, submitter_id, kind, workers, max_replicas, gpus_per_worker in jobs:
            gpus = ((max_replicas if kind == "inference" else workers) or 1) * gpus_per_worker
            rows.extend(GpuInterval(job_id=pk, team_id=team_id, flavor_id=flavor_id, submitter_id=submitter_id,
                                    gpus=gpus, started_at=started, ended_at=ended)
                        for started, ended in replay(events.get(pk, ())))
        GpuInterval.objects.using(db).bulk_create(rows, batch_size=BATCH)


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0004_job_list_indexes'),
        ('quotas', '0001_initial'),
        ('tenants', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='GpuInterval',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('gpus', models.PositiveIntegerField(help_text="The job's GPUs: replicas (maximum for inference) times GPUs per worker.")),
                ('started_at', models.DateTimeField()),
                ('ended_at', models.DateTimeField(blank=True, null=True)),
                ('flavor', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='gpu_intervals', to='quotas.gpuflavor')),
                ('job', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='gpu_intervals', to='jobs.job')),
                ('submitter', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='gpu_intervals', to=settings.AUTH_USER_MODEL)),
                ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='gpu_intervals', to='tenants.team')),
            ],
            options={
                'ordering': ['started_at', 'id'],
                'indexes': [
                    models.Index(fields=['started_at'], name='gpu_interval_start'),
                    models.Index(fields=['team', 'started_at'], name='gpu_interval_team_start'),
                    models.Index(fields=['ended_at'], name='gpu_interval_end'),
                ],
                'constraints': [
                    models.UniqueConstraint(condition=models.Q(('ended_at__isnull', True)), fields=('job',), name='gpu_interval_one_open_per_job', violation_error_message='A job holds its GPUs in one interval at a time.'),
                ],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
