"""Fixtures of the API tests: clients acting as each person or token of the permission
matrix, a submitted job, and no Celery (the reconcile a submission schedules is recorded)."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import Job
from tenants.tokens import ApiToken

from ..builders import make_job

JOB_BODY = dict(
    team="vision", name="train", kind="training", flavor="h100", image="ghcr.io/example/train:1",
    command=["python"], args=["train.py"], env={"EPOCHS": "3"}, workers=2, gpus_per_worker=4,
)


@pytest.fixture(autouse=True)
def scheduled_reconciles(monkeypatch):
    """The job pks a submission or cancellation asked to reconcile (no broker needed)."""
    scheduled = []
    monkeypatch.setattr("jobs.actions.reconcile_soon", lambda job: scheduled.append(job.pk))
    return scheduled


def issue_token(user, *, team=None, scopes=None, expired=False, revoked=False):
    """A token of `user` (every scope they can use unless `scopes` says)."""
    token, secret = ApiToken.objects.issue(user=user, name="test", team=team, scopes=scopes)
    if expired:
        ApiToken.objects.filter(pk=token.pk).update(
            created_at=timezone.now() - timedelta(days=2), expires_at=timezone.now() - timedelta(days=1)
        )
    if revoked:
        token.revoke()
    return secret


@pytest.fixture
def client_as(db):
    """``client_as(user)`` signs in (session); ``client_as(token=secret)`` sends a bearer
    token; ``client_as()`` is anonymous."""

    def make(user=None, *, token=None):
        client = APIClient()
        if user is not None:
            client.force_login(user)
        if token is not None:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return client

    return make


@pytest.fixture
def job(team, flavor, member):
    job = make_job(team, flavor, name="existing")
    Job.objects.filter(pk=job.pk).update(submitter=member)
    job.submit()
    return job


def add_pod(cluster, job, name: str, log: str) -> None:
    from core.ownership import ownership_labels

    cluster.put({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": job.team.namespace_name,
                     "labels": ownership_labels(team=job.team.slug, job=job.pk)},
        "spec": {"containers": [{"name": "main", "image": job.image}]},
    })
    cluster.set_pod_logs(job.team.namespace_name, name, log)


def caller_clients(request, client_as, team, token_holder):
    """``make(caller)`` -> a client acting as one caller of the permission matrices:
    "anonymous", a person fixture's name, or "token_<scope|expired|revoked>" for a team
    token of ``token_holder``."""
    def make(caller):
        if caller == "anonymous":
            return client_as()
        if caller.startswith("token_"):
            kind = caller.removeprefix("token_")
            if kind in ("expired", "revoked"):
                return client_as(token=issue_token(token_holder, team=team, **{kind: True}))
            return client_as(token=issue_token(token_holder, team=team, scopes=[kind]))
        return client_as(request.getfixturevalue(caller))

    return make
