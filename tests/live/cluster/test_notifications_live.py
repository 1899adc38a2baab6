"""On the local cluster, a job that ends, one that fails and one that is preempted each give
exactly one notification per subscriber (the submitter by email, the team's webhook), also
when the status watcher is restarted while they run and a second watcher reads them again."""

import threading

import pytest

from jobs.lifecycle import State
from jobs.watch.watcher import StatusWatcher
from notifications import tasks
from notifications.models import Event, Kind, Notification, Preference, Webhook, WebhookDelivery
from quotas.models import PriorityClass
from quotas.tasks import sync_cluster_objects

from ...builders import make_user
from ...support.cluster import reaches, submit

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

LONG_RUN = {"GPUPLATFORM_FAKE_DURATION": "300s"}  # read by the local cluster's fake kubelet (kwok)


class Watchers:
    """Status watchers in threads, started and stopped (restarted) by the test."""

    def __init__(self, live):
        self.live, self.running = live, []

    def start(self):
        watcher = StatusWatcher(self.live, resync_seconds=5, retry_seconds=0.5)
        thread = threading.Thread(target=watcher.run, daemon=True)
        thread.start()
        self.running.append((watcher, thread))
        return watcher

    def stop(self):
        while self.running:
            watcher, thread = self.running.pop()
            watcher.stop()
            thread.join(timeout=30)


@pytest.fixture
def watchers(live):
    made = Watchers(live)
    yield made
    made.stop()


@pytest.fixture
def subscriber(world, settings, monkeypatch):
    """The submitter wants every job event by email; the team has a webhook for them too.
    Delivery tasks are only counted here: what matters is what was recorded to send."""
    team, _, _ = world
    person = make_user(f"sub-{team.slug}", email=f"sub-{team.slug}@example.org")
    for kind in (Kind.JOB_SUCCEEDED, Kind.JOB_FAILED, Kind.JOB_PREEMPTED):
        Preference.objects.choose(person, kind, True)
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    hook = Webhook(team=team, url="http://127.0.0.1:9/hook",
                   kinds=[Kind.JOB_SUCCEEDED, Kind.JOB_FAILED, Kind.JOB_PREEMPTED])
    hook.full_clean()
    hook.save()
    sent = []
    monkeypatch.setattr(tasks.send_emails, "delay", lambda pk: sent.append(("email", pk)))
    monkeypatch.setattr(tasks.deliver_webhook, "delay", lambda pk: sent.append(("webhook", pk)))
    return person, hook, sent


def told(job, kind, person, hook):
    events = Event.objects.filter(job=job, kind=kind)
    return (events.count(), Notification.objects.filter(event__in=events, user=person).count(),
            WebhookDelivery.objects.filter(event__in=events, webhook=hook).count())


def test_ends_failures_and_preemptions_are_told_once_across_watcher_restarts(live, world, subscriber, watchers):
    team, h100, _ = world
    person, hook, sent = subscriber
    watchers.start()
    done = submit(live, team, h100, workers=1, gpus_per_worker=1, submitter=person)
    # Kueue deactivates a workload past its max run time: the job fails.
    doomed = submit(live, team, h100, workers=1, gpus_per_worker=1, max_runtime_seconds=60, env=LONG_RUN,
                    submitter=person)
    reaches(doomed, State.RUNNING)
    watchers.stop()  # the watcher restarts while one job is running and one may be ending
    watchers.start()
    reaches(done, State.SUCCEEDED, timeout=180)
    reaches(doomed, State.FAILED, timeout=240)

    low = PriorityClass.objects.create(name=f"low-{team.slug}", value=10)
    high = PriorityClass.objects.create(name=f"high-{team.slug}", value=1000)
    sync_cluster_objects(live)
    victim = submit(live, team, h100, workers=1, gpus_per_worker=8, priority=low, env=LONG_RUN, submitter=person)
    reaches(victim, State.RUNNING)
    watchers.stop()
    watchers.start()
    watchers.start()  # two at once, as when an old watcher has not quite stopped
    urgent = submit(live, team, h100, workers=1, gpus_per_worker=8, priority=high, env=LONG_RUN)
    reaches(urgent, State.RUNNING, timeout=120)
    victim.refresh_from_db()
    assert victim.events.filter(to_state=State.PREEMPTED).count() == 1, list(victim.events.values_list("to_state", flat=True))
    watchers.stop()
    # A fresh watcher reads everything again: nothing new to tell.
    StatusWatcher(live).evaluate([done.pk, doomed.pk, victim.pk, urgent.pk])

    assert told(done, Kind.JOB_SUCCEEDED, person, hook) == (1, 1, 1)
    assert told(doomed, Kind.JOB_FAILED, person, hook) == (1, 1, 1)
    assert told(victim, Kind.JOB_PREEMPTED, person, hook) == (1, 1, 1)
    preempted = Event.objects.get(job=victim, kind=Kind.JOB_PREEMPTED)
    assert preempted.message.startswith("Preempted by a higher-priority job")
    assert Event.objects.filter(job=urgent).exclude(kind=Kind.JOB_STARTED).count() == 0
    # Every notification and delivery was handed to Celery once.
    assert sorted(sent) == sorted(
        [("email", person.pk)] * Notification.objects.filter(user=person).count()
        + [("webhook", pk) for pk in WebhookDelivery.objects.filter(webhook=hook).values_list("pk", flat=True)])
