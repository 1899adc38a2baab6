"""Notebooks on the local cluster's real Kueue (its StatefulSet and pod integrations; docs/notebooks.md):
a notebook is admitted within its team's own quota and comes up, one that would need borrowed GPUs
is refused though the cohort could lend them, it is not preempted when another team reclaims the
GPUs its team borrowed for training, stopping it gives its GPUs back and starting it admits it
again with the same claim at /home/user, its lifetime stops it, and a member cannot create a
StatefulSet with kubectl while the cluster admin is held by the team admission policy.

What kwok cannot show: nothing runs inside the pod, so JupyterLab itself never answers; the
pod is Ready because kwok says so. Teams here are nb-<random> (their own namespaces and labels)."""

import copy
import uuid
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from cluster import PermanentError
from core.owners import run
from jobs.lifecycle import State
from jobs.manifests import render_job
from jobs.models import Job, Volume
from jobs.tasks import TEAM_VOLUMES, sync_job
from jobs.use import reclaim
from quotas.models import Cohort, StorageQuota
from quotas.tasks import sync_team_quotas
from tenants.models import Membership, Team
from workloads.kueue import WORKLOAD
from workloads.notebook import STATEFULSET

from ...builders import make_flavor, make_job, make_quota, make_user
from ...support.cluster import (
    TAINT,
    TOLERATION,
    on_the_cluster,
    reaches,
    stays_true,
    submit,
    sync_retrying,
    wait_until,
)
from .test_field_ownership_live import running_pods, sweeps_change_nothing
from .test_no_way_around_the_queues import denied_by_policy, refused
from .test_volumes_live import bound_volume

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

NOTEBOOK = {"kind": "notebook", "image": "quay.io/jupyter/base-notebook:latest", "command": [], "args": [], "env": {}}


def _team(slug: str) -> tuple[Team, object, object]:
    owner, member = make_user(f"owner-{slug}"), make_user(f"member-{slug}")
    team = Team.objects.create(slug=slug, display_name=slug, max_priority_value=1000)
    Membership.objects.create(team=team, user=owner, role=Membership.Role.OWNER)
    Membership.objects.create(team=team, user=member, role=Membership.Role.MEMBER)
    return team, owner, member


@pytest.fixture
def cohort_teams(live):
    """Two teams (nb-<random>-a and -b) with 4 H100 GPUs each in one cohort: each may borrow
    the other's idle GPUs, and take them back."""
    base = f"nb-{uuid.uuid4().hex[:6]}"
    h100 = make_flavor(f"h100-{base}", node_labels={"gpuplatform.io/pool": "h100"}, node_taints=TAINT,
                       tolerations=TOLERATION)
    cohort = Cohort.objects.create(name=f"share-{base}")
    teams = []
    for suffix in ("a", "b"):
        team, owner, member = _team(f"{base}-{suffix}")
        make_quota(team, h100, nominal_gpus=4, cpu_cores=64, memory_gib=512, cohort=cohort)
        teams.append((team, owner, member))
    with on_the_cluster(live, [team for team, _, _ in teams], [h100], cohort=cohort):
        yield teams, h100


def notebook(live, team, flavor, **fields) -> Job:
    return submit(live, team, flavor, **{**NOTEBOOK, "gpus_per_worker": 1, **fields})


def workload_of(live, job) -> dict | None:
    name = render_job(job)[-1]["metadata"]["name"]
    found = [w for w in live.list(*WORKLOAD, namespace=job.team.namespace_name)
             if any(r.get("kind") == "StatefulSet" and r.get("name") == name
                    for r in w["metadata"].get("ownerReferences") or ())]
    return found[0] if found else None


def holds_quota(workload: dict | None) -> bool:
    return any(c["type"] == "QuotaReserved" and c["status"] == "True"
               for c in ((workload or {}).get("status") or {}).get("conditions") or ())


def pods_of(live, job) -> list[dict]:
    return live.list("v1", "Pod", namespace=job.team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}")


def test_a_notebook_runs_within_nominal_quota_and_one_needing_borrowed_gpus_is_refused(live, cohort_teams, watcher):
    (team, owner, _), _ = cohort_teams[0]
    h100 = cohort_teams[1]
    nb = notebook(live, team, h100, gpus_per_worker=2)
    reaches(nb, State.RUNNING, timeout=180)
    assert nb.message == "Notebook ready." and nb.reason == "NotebookReady"
    [pod] = pods_of(live, nb)
    assert pod["spec"]["nodeName"] and pod["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] \
        == "gpuplatform-minimum-runtime"
    client = Client()
    client.force_login(owner)
    page = client.get(reverse("jobs:detail", args=[nb.pk])).content.decode()
    assert "Notebook ready." in page and "port-forward service/" in page and "8888:8888" in page
    # Reconciles of a running notebook write nothing: the pod template Kueue's webhook marked stays
    # as it is, and the same pod runs on (DESIGN.md section 8).
    sweeps_change_nothing(live, nb, workload=STATEFULSET, pods=running_pods(live, nb, 1))
    # The team's own quota is full with a training job beside it...
    training = submit(live, team, h100, workers=1, gpus_per_worker=2)
    reaches(training, State.RUNNING, timeout=180)
    # ...so a notebook of one more GPU is refused, though the cohort would lend it:
    with pytest.raises(ValidationError) as err:
        make_job(team, h100, name="nb-borrow", **{**NOTEBOOK, "gpus_per_worker": 1})
    assert "0 of its 4 GPUs are free" in err.value.message_dict["gpus_per_worker"][0]
    # a training job of that size is admitted on the GPUs the other team lends.
    borrowing = submit(live, team, h100, workers=1, gpus_per_worker=1)
    reaches(borrowing, State.RUNNING, timeout=180)


def test_a_notebook_is_not_preempted_when_another_team_reclaims_what_its_team_borrowed(live, cohort_teams, watcher):
    (team, _, _), (other, _, _) = cohort_teams[0]
    h100 = cohort_teams[1]
    nb = notebook(live, team, h100, gpus_per_worker=2)
    reaches(nb, State.RUNNING, timeout=180)
    [pod] = pods_of(live, nb)
    # The team borrows 2 of the other team's GPUs for training (6 of its nominal 4 in use).
    borrower = submit(live, team, h100, workers=1, gpus_per_worker=4)
    reaches(borrower, State.RUNNING, timeout=180)
    # The other team takes its 4 back: Kueue reclaims, and the training job goes, not the notebook.
    reclaimer = submit(live, other, h100, workers=1, gpus_per_worker=4)
    reaches(reclaimer, State.RUNNING, timeout=240)
    wait_until(lambda: borrower.events.filter(to_state=State.PREEMPTED).exists(), timeout=60,
               message="the borrowing training job to be preempted")
    nb.refresh_from_db()
    assert nb.state == State.RUNNING and not nb.events.filter(to_state=State.PREEMPTED).exists()
    conditions = {c["type"]: c for c in (workload_of(live, nb).get("status") or {}).get("conditions") or []}
    assert conditions.get("Evicted", {}).get("status") != "True" and conditions["Admitted"]["status"] == "True"
    assert [p["metadata"]["uid"] for p in pods_of(live, nb)] == [pod["metadata"]["uid"]]  # the same pod
    stays_true(lambda: nb.refresh_from_db() or nb.state == State.RUNNING, 10, message="the notebook to run on")


def test_stop_gives_the_gpus_back_and_start_admits_it_again_with_the_same_home_claim(live, cohort_teams, watcher):
    (team, owner, member), _ = cohort_teams[0]
    h100 = cohort_teams[1]
    storage_class = f"nb-{uuid.uuid4().hex[:6]}"
    StorageQuota.objects.create(team=team, storage_class=storage_class, storage_gib=5, volumes=1)
    sync_team_quotas(live, team)
    made: list[str] = []
    try:
        # The owner's volume, bound as a provisioner would, is the notebook's home.
        Volume.objects.add(team=team, user=owner, name="home", storage_class=storage_class, size_gib=4)
        bound_volume(live, team, storage_class, "home", made)
        run(live, TEAM_VOLUMES, team)
        ns = team.namespace_name
        wait_until(lambda: (live.get("v1", "PersistentVolumeClaim", "home", ns) or {}).get("status", {})
                   .get("phase") == "Bound", timeout=60, message="the home claim to be bound")
        claim_uid = live.get("v1", "PersistentVolumeClaim", "home", ns)["metadata"]["uid"]
        nb = notebook(live, team, h100, gpus_per_worker=4, volumes={"home": "/home/user"})
        reaches(nb, State.RUNNING, timeout=180)
        [pod] = pods_of(live, nb)
        assert {"name": "vol-0", "persistentVolumeClaim": {"claimName": "home"}} in pod["spec"]["volumes"]

        # Stop: the StatefulSet goes to 0, the pod goes and its Workload holds no quota (Kueue
        # v0.19 keeps it on hold, QuotaReserved=False reason OnHold; v0.17 deleted it): the GPUs go back.
        nb.request_stop(member)
        sync_job(live, nb)
        sts = render_job(nb)[-1]["metadata"]["name"]
        assert live.get("apps/v1", "StatefulSet", sts, ns)["spec"]["replicas"] == 0
        wait_until(lambda: not pods_of(live, nb) and not holds_quota(workload_of(live, nb)), timeout=120,
                   message="the notebook's pod to go and its workload to give its quota back")
        training = submit(live, team, h100, workers=1, gpus_per_worker=4)  # its 4 GPUs are free again
        reaches(training, State.RUNNING, timeout=180)
        nb.refresh_from_db()
        assert nb.state == State.STOPPED and nb.gpus_in_use == 0
        with pytest.raises(ValidationError):  # no room in the team's own quota now
            nb.request_start(owner)
        training.request_cancel(owner)
        sync_job(live, training)
        reaches(training, State.CANCELLED, timeout=120)

        # Start: admitted again, with the same claim at /home/user.
        nb.refresh_from_db()
        nb.request_start(owner)
        sync_retrying(live, nb)  # Kueue may still be deleting the stop's Workload: a retry, not a failure
        reaches(nb, State.RUNNING, timeout=180)
        [again] = pods_of(live, nb)
        assert again["metadata"]["uid"] != pod["metadata"]["uid"]
        assert {"name": "vol-0", "persistentVolumeClaim": {"claimName": "home"}} in again["spec"]["volumes"]
        assert live.get("v1", "PersistentVolumeClaim", "home", ns)["metadata"]["uid"] == claim_uid

        # Its lifetime over, the sweep stops it (not deleted: its claim stays).
        Job.objects.filter(pk=nb.pk).update(max_runtime_seconds=60)
        reclaim.sweep_idle_jobs(live, None, now=timezone.now() + timedelta(minutes=5))
        nb.refresh_from_db()
        assert nb.state == State.STOPPED and nb.reason == reclaim.LIFETIME_OVER
        wait_until(lambda: not pods_of(live, nb), timeout=120, message="the pod to go at the end of its lifetime")
        assert live.get("v1", "PersistentVolumeClaim", "home", ns)["metadata"]["uid"] == claim_uid
    finally:
        for name in made:
            try:
                live.delete("v1", "PersistentVolume", name)
            except PermanentError:
                pass


def test_members_cannot_create_a_statefulset_and_the_policy_holds_everyone_else(live, kube_cluster, cohort_teams):
    from cluster import Cluster

    (team, _, member), _ = cohort_teams[0]
    h100 = cohort_teams[1]
    as_member = Cluster(kubeconfig=kube_cluster)
    as_member._api.set_default_header("Impersonate-User", member.username)
    as_member._api.set_default_header("Impersonate-Group", "system:authenticated")
    ns = team.namespace_name
    objects = render_job(make_job(team, h100, name="kubectl-nb", **{**NOTEBOOK, "gpus_per_worker": 1}))
    sts = next(o for o in objects if o["kind"] == "StatefulSet")
    assert "forbidden" in refused(as_member, sts, ns)
    # The cluster admin (RBAC does not stop it) is held by the team admission policy.
    unqueued = copy.deepcopy(sts)
    del unqueued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    unqueued["metadata"]["name"] = "unqueued"
    assert "Kueue queues" in denied_by_policy(live, unqueued, ns)
    claims = copy.deepcopy(sts)
    claims["metadata"]["name"] = "claims"
    claims["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
    assert "volumeClaimTemplates" in denied_by_policy(live, claims, ns)
    assert not live.list("apps/v1", "StatefulSet", namespace=ns)
