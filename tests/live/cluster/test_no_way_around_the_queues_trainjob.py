"""Members cannot go around the queues with a TrainJob or a JobSet (issue 46 item 5).

On the real local cluster, impersonating a team member (`--as`, `member_cluster`): a TrainJob
the platform would render and a JobSet made by hand are refused in the team's namespace (RBAC:
members read TrainJobs and JobSets, nothing more). The cluster admin, whom RBAC does not stop,
is held by the team admission policy: a JobSet nobody's TrainJob controls, a TrainJob that names
no team queue, a JobSet pod template off the hardened rules, and a batch Job that pretends to
be a JobSet's by an owner reference without the controller flag. Needs Trainer's and JobSet's
CRDs on the cluster (the stack's trainer and jobset components): without them these fail, none
skips."""

import copy

import pytest

from jobs.manifests import render_job
from quotas.models import TrainingRuntime
from workloads import trainer
from workloads.kinds import train_job

from ...builders import make_job
from .test_no_way_around_the_queues import denied_by_policy, refused

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def a_trainjob(team, flavor, name: str) -> dict:
    TrainingRuntime.objects.get_or_create(name=train_job.TORCH_RUNTIME, defaults={"label": "PyTorch"})
    [obj] = render_job(make_job(team, flavor, name=name, kind="train-job", training_runtime=train_job.TORCH_RUNTIME,
                                command=["torchrun"], args=["train.py"], workers=2))
    return obj


def a_jobset(team, flavor, name: str) -> dict:
    """A JobSet with the platform's hardened pod template (a batch Job's), as if Trainer made it."""
    [batch_job] = [o for o in render_job(make_job(team, flavor, name=f"{name}-tpl")) if o["kind"] == "Job"]
    return {"apiVersion": trainer.JOBSET[0], "kind": "JobSet",
            "metadata": {"name": name, "labels": dict(batch_job["metadata"]["labels"])},
            "spec": {"replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {
                "parallelism": 1, "completions": 1, "template": copy.deepcopy(batch_job["spec"]["template"])}}}]}}


def test_a_member_cannot_create_a_trainjob_or_a_jobset(member_cluster, world):
    team, h100, _ = world
    ns = team.namespace_name
    for obj in (a_trainjob(team, h100, "kubectl-trainjob"), a_jobset(team, h100, "kubectl-jobset")):
        assert "forbidden" in refused(member_cluster, obj, ns), obj["kind"]
    # Members still read them (their Role's workload resources).
    assert member_cluster.list(*trainer.TRAIN_JOB, namespace=ns) == []
    assert member_cluster.list(*trainer.JOBSET, namespace=ns) == []


def test_the_policy_holds_the_cluster_admin_to_what_trainer_and_jobset_make(live, world):
    team, h100, _ = world
    ns = team.namespace_name
    # A JobSet is made by a TrainJob's controller only.
    assert "JobSets in team namespaces are made by the platform's" in denied_by_policy(
        live, a_jobset(team, h100, "admin-jobset"), ns)
    # A TrainJob waits in one of the team's Kueue queues.
    unqueued = a_trainjob(team, h100, "admin-unqueued")
    del unqueued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert "Kueue queues" in denied_by_policy(live, unqueued, ns)
    # A batch Job is let off its queue only when a JobSet controls it, not by naming one.
    [batch_job] = [o for o in render_job(make_job(team, h100, name="admin-fake-child")) if o["kind"] == "Job"]
    del batch_job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    batch_job["metadata"]["ownerReferences"] = [{"apiVersion": trainer.JOBSET[0], "kind": "JobSet", "name": "x",
                                                 "uid": "00000000-0000-0000-0000-000000000000"}]
    assert "Kueue queue" in denied_by_policy(live, batch_job, ns)


def test_a_jobsets_pod_templates_keep_the_hardened_rules(live, world):
    team, h100, _ = world
    # JobSet's own webhook looks its owner up first: a real TrainJob (suspended, held by Kueue).
    owner = live.create(a_trainjob(team, h100, "admin-owner"))
    loose = a_jobset(team, h100, "admin-loose")
    loose["metadata"]["ownerReferences"] = [{"apiVersion": trainer.API, "kind": "TrainJob", "controller": True,
                                             "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]
    loose["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["serviceAccountName"] = "default"
    assert "ServiceAccount" in denied_by_policy(live, loose, team.namespace_name)
