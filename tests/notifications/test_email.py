"""Emails reach a real SMTP server: text and HTML parts, absolute links, a working
unsubscribe link, and a digest when many events come together."""

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from jobs.models import Job
from notifications.actions import record, requeue_stale
from notifications.messages import read_unsubscribe_token, unsubscribe_token
from notifications.models import Kind, Notification, Preference

from ..builders import make_job

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def parts(message):
    text = message.get_body(preferencelist=("plain",)).get_content()
    html = message.get_body(preferencelist=("html",)).get_content()
    return text, html


def test_a_failed_job_is_mailed_to_its_submitter_over_smtp(people, smtp, inline, settings):
    settings.PUBLIC_URL = "https://gpu.example.org"
    job = make_job(people["team"], people["flavor"], submitter=people["member"])
    with inline["commit"]():
        job.submit()
        job.observe(Job.State.FAILED, reason="BackoffLimitExceeded", message="Job has reached the specified backoff limit")
    [(to, message)] = smtp
    assert to == ["max@example.org"]
    assert message["Subject"] == f"[GPU Platform] vision/{job.name} failed (BackoffLimitExceeded)"
    text, html = parts(message)
    assert f"https://gpu.example.org/jobs/{job.pk}/" in text and f'href="https://gpu.example.org/jobs/{job.pk}/"' in html
    assert "Job has reached the specified backoff limit" in text
    assert b"\nList-Unsubscribe: <https://gpu.example.org/notifications/unsubscribe/" in message.raw  # not encoded
    unsubscribe = message["List-Unsubscribe"].strip("<>")
    assert unsubscribe.startswith("https://gpu.example.org/notifications/unsubscribe/") and unsubscribe in text
    assert Notification.objects.get().status == Notification.Status.SENT


def test_the_unsubscribe_link_works_without_signing_in_and_only_for_its_kind(people):
    token = unsubscribe_token(people["member"], Kind.JOB_FAILED)
    anonymous = Client()
    page = anonymous.get(f"/notifications/unsubscribe/{token}/")
    assert page.status_code == 200 and b"Your job failed" in page.content
    assert Preference.objects.effective(people["member"])[Kind.JOB_FAILED] is True  # a GET changes nothing
    assert anonymous.post(f"/notifications/unsubscribe/{token}/").status_code == 200
    chosen = Preference.objects.effective(people["member"])
    assert chosen[Kind.JOB_FAILED] is False and chosen[Kind.JOB_SUCCEEDED] is True


def test_a_forged_unsubscribe_token_is_refused(people):
    token = unsubscribe_token(people["member"], Kind.JOB_FAILED)
    assert read_unsubscribe_token(token[:-2] + "xx") is None
    assert Client().post(f"/notifications/unsubscribe/{token[:-2]}xx/").status_code == 404


def test_many_events_at_once_become_one_mail_then_one_digest(people, smtp, inline, clock, settings):
    settings.NOTIFY_DIGEST_SECONDS = 60
    clock(T0)
    for n in range(30):  # as the watcher records them: one transaction each
        with inline["commit"]():
            record(kind=Kind.JOB_SUCCEEDED, key=f"burst:{n}", team=people["team"], title=f"job {n} succeeded",
                   people=[people["member"]])
    assert len(smtp) == 1  # the first goes out at once
    [(_, first)] = smtp
    assert first["Subject"] == "[GPU Platform] job 0 succeeded"
    assert len(inline["later"]) == 1 and inline["later"][0][2] == 60  # one flush scheduled
    clock(T0 + timedelta(seconds=60))
    inline["run_later"]()
    assert len(smtp) == 2
    digest = smtp[1][1]
    assert digest["Subject"].startswith("[GPU Platform] 29 updates: job 1 succeeded")
    text, _ = parts(digest)
    assert "job 29 succeeded" in text
    assert Notification.objects.filter(status=Notification.Status.SENT, in_digest=True).count() == 29
    # A lost flush message is sent again by the sweep.
    with inline["commit"]():
        record(kind=Kind.JOB_SUCCEEDED, key="late", team=people["team"], title="late", people=[people["member"]])
    inline["later"].clear()
    clock(T0 + timedelta(minutes=20))
    with inline["commit"]():
        assert requeue_stale(T0 + timedelta(minutes=20)) == 1
    assert len(smtp) == 3 and not Notification.objects.filter(status=Notification.Status.PENDING).exists()


def test_an_smtp_server_that_is_down_leaves_the_notification_pending(people, inline, settings):
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.smtp.EmailBackend",
                                    "OPTIONS": {"host": "127.0.0.1", "port": 9, "timeout": 2}}}
    with inline["commit"]():
        record(kind=Kind.JOB_FAILED, key="down", team=people["team"], title="t", people=[people["member"]])
    assert Notification.objects.get().status == Notification.Status.PENDING
