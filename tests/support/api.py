"""Plain helpers of the API tests: a job's request body, tokens, a job's pod with a log, and
the callers of the permission matrices."""

from datetime import timedelta

from django.utils import timezone

from core.ownership import ownership_labels
from tenants.tokens import ApiToken

JOB_BODY = dict(
    team="vision", name="train", kind="training", flavor="h100", image="ghcr.io/example/train:1",
    command=["python"], args=["train.py"], env={"EPOCHS": "3"}, workers=2, gpus_per_worker=4,
)


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


def add_pod(cluster, job, name: str, log: str) -> None:
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
