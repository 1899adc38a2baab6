"""The ETA of a job queued behind a running TrainJob whose trainer publishes its remaining time
(Kubeflow Trainer's status.trainerStatus): the trainer's own word replaces the draw from the
job's maximum runtime and history (jobs/queue/eta.py `Runner.remaining`, jobs/outlook/estimates.py)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.lifecycle import State
from jobs.models import Job
from jobs.outlook import estimates
from jobs.queue import eta
from jobs.queue.eta import Queue, Runner, Waiter
from workloads.kinds import train_job

from ..builders import make_job, make_quota

HOUR = 3600


def test_a_runners_published_remaining_time_beats_its_maximum_runtime():
    behind = Waiter(gpus=8, max_runtime=HOUR, target=True)
    by_maximum = eta.estimate(Queue(capacity=8, ceiling=8, running=(Runner(8, 600, 2 * HOUR),), waiting=(behind,)))
    by_trainer = eta.estimate(Queue(capacity=8, ceiling=8, running=(Runner(8, 600, 2 * HOUR, remaining=900),),
                                    waiting=(behind,)))
    assert by_maximum.p50 == pytest.approx(2 * HOUR - 600)
    assert (by_trainer.p10, by_trainer.p50, by_trainer.p90) == (900, 900, 900)


def test_a_published_remaining_time_never_outlasts_the_maximum_and_makes_an_unlimited_job_known():
    behind = Waiter(gpus=8, max_runtime=HOUR, target=True)
    capped = eta.estimate(Queue(8, 8, running=(Runner(8, 3000, HOUR, remaining=5 * HOUR),), waiting=(behind,)))
    assert capped.p50 == 600
    unlimited = eta.estimate(Queue(8, 8, running=(Runner(8, 60, None, remaining=1200),), waiting=(behind,)))
    assert unlimited.known and unlimited.p50 == 1200


@pytest.mark.django_db
def test_a_job_queued_behind_a_running_trainjob_gets_an_eta_from_its_trainers_remaining_time(team, flavor):
    make_quota(team, flavor, nominal_gpus=8)
    now = timezone.now()
    trainer = make_job(team, flavor, kind=Job.Kind.TRAIN_JOB, training_runtime=train_job.TORCH_RUNTIME, workers=2,
                       gpus_per_worker=4, max_runtime_seconds=4 * HOUR)
    admitted = now - timedelta(minutes=30)
    Job.objects.filter(pk=trainer.pk).update(state=State.RUNNING, submitted_at=admitted, admitted_at=admitted,
                                             run_admitted_at=admitted, started_at=admitted, gpus_in_use=8)
    waiting = make_job(team, flavor, gpus_per_worker=8, max_runtime_seconds=HOUR)
    Job.objects.filter(pk=waiting.pk).update(state=State.QUEUED, submitted_at=now)
    waiting.refresh_from_db()
    before = estimates.estimate(waiting).eta.p50
    assert before == pytest.approx(3.5 * HOUR, abs=60)  # its maximum runtime's end

    trainer.refresh_from_db()
    said = timezone.now() - timedelta(minutes=5)  # 20 min left, said 5 min ago: 15 min from now
    Job.objects.filter(pk=trainer.pk).update(trainer_progress_percent=60, trainer_remaining_seconds=20 * 60,
                                             trainer_status_at=said)
    after = estimates.estimate(waiting).eta.p50
    assert after == pytest.approx(15 * 60, abs=60)
