"""Ray on the local cluster's real KubeRay operator and Kueue (docs/ray.md): a RayJob and a
RayCluster are admitted within the team's quota and their head and workers come up on the
fake nodes; one more is held while the quota is full; a higher priority preempts a running
RayCluster and its job page says so; a member cannot create Ray objects with kubectl, and
whoever can is held by the team admission policy (a queue of the team's, no RayService).

What kwok cannot show: nothing runs inside the pods, so Ray's own job status (the head's
dashboard, which the operator asks) never arrives; docs/ray.md says what that leaves unproven."""

import copy
import uuid

import pytest
from django.test import Client
from django.urls import reverse

from cluster import PermanentError
from jobs.lifecycle import State
from jobs.manifests import render_job
from jobs.tasks import sync_job
from quotas.models import PriorityClass
from quotas.tasks import sync_cluster_objects
from tenants.models import Membership
from tenants.tasks import sync_team

from ...builders import make_flavor, make_job, make_quota, make_user
from ...support.cluster import TAINT, TOLERATION, on_the_cluster, reaches, submit, team_of_its_own, wait_until
from .test_field_ownership_live import running_pods, sweeps_change_nothing
from .test_no_way_around_the_queues import denied_by_policy, refused

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

RAY = {"command": [], "args": [], "image": "rayproject/ray:2.52.0"}


@pytest.fixture
def ray_team(live):
    """A team (slug ray-...) with a 4-GPU H100 quota on Kueue, an owner and a member."""
    slug = f"ray-{uuid.uuid4().hex[:6]}"
    team, owner = team_of_its_own(slug, max_priority_value=1000)
    member = make_user(f"member-{slug}")
    Membership.objects.create(team=team, user=member, role=Membership.Role.MEMBER)
    h100 = make_flavor(f"h100-{slug}", node_labels={"gpuplatform.io/pool": "h100"}, node_taints=TAINT,
                       tolerations=TOLERATION)
    make_quota(team, h100, nominal_gpus=4, cpu_cores=64, memory_gib=512)
    with on_the_cluster(live, [team], [h100], then=PriorityClass.objects.filter(name__endswith=slug).delete):
        yield team, h100, owner, member


def ray_job(live, team, flavor, **fields):
    return submit(live, team, flavor, kind="ray-job", ray_entrypoint="python train.py", **{**RAY, **fields})


def ray_cluster(live, team, flavor, **fields):
    return submit(live, team, flavor, kind="ray-cluster", **{**RAY, **fields})


def page_of(job, person) -> str:
    client = Client()
    client.force_login(person)
    return client.get(reverse("jobs:detail", args=[job.pk])).content.decode()


def test_a_ray_job_and_a_ray_cluster_run_within_quota_and_one_more_is_held(live, ray_team, watcher):
    team, h100, owner, _ = ray_team
    job = ray_job(live, team, h100, workers=2, gpus_per_worker=1)
    interactive = ray_cluster(live, team, h100, workers=2, gpus_per_worker=1)
    for each in (job, interactive):
        reaches(each, State.RUNNING, timeout=180)
        assert "head ready, 2/2 workers" in each.message, each.message
    # KubeRay made the pods (a head without GPUs, the workers with one each) on the H100 nodes.
    pods = live.list("v1", "Pod", namespace=team.namespace_name, label_selector=f"gpuplatform.io/job={interactive.pk}")
    assert sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods) == ["head", "worker", "worker"]
    assert all(p["spec"]["nodeName"] for p in pods)
    # Its GPUs in use (and so its GPU-hours) are its workers', as Kueue counts them: the head holds none.
    wait_until(lambda: interactive.refresh_from_db() or interactive.gpus_in_use == 2, timeout=60,
               message="the Ray cluster's 2 workers' GPUs counted, not its head")
    page = page_of(interactive, owner)
    assert "head ready, 2/2 workers" in page and "port-forward svc/" in page and "8265:8265" in page
    # The quota's 4 GPUs are held: one more waits, and Kueue keeps it suspended.
    held = ray_cluster(live, team, h100, workers=1, gpus_per_worker=2)
    reaches(held, State.QUEUED, timeout=60)
    wait_until(lambda: held.refresh_from_db() or "Waiting for quota" in held.message, timeout=60,
               message="the held cluster to say it waits for quota")
    [obj] = [o for o in live.list("ray.io/v1", "RayCluster", namespace=team.namespace_name,
                                  label_selector=f"gpuplatform.io/job={held.pk}")]
    assert obj["spec"]["suspend"] is True
    assert not live.list("v1", "Pod", namespace=team.namespace_name, label_selector=f"gpuplatform.io/job={held.pk}")
    # Cancelling the cluster frees its GPUs; the held one starts.
    interactive.request_cancel(owner)
    sync_job(live, interactive)
    reaches(interactive, State.CANCELLED, timeout=60)
    reaches(held, State.RUNNING, timeout=180)


def test_a_higher_priority_ray_job_preempts_a_ray_cluster_and_the_page_says_so(live, ray_team, watcher):
    team, h100, owner, _ = ray_team
    low = PriorityClass.objects.create(name=f"low-{team.slug}", value=10)
    high = PriorityClass.objects.create(name=f"high-{team.slug}", value=1000)
    sync_cluster_objects(live)
    victim = ray_cluster(live, team, h100, workers=2, gpus_per_worker=2, priority=low)
    reaches(victim, State.RUNNING, timeout=180)
    urgent = ray_job(live, team, h100, workers=2, gpus_per_worker=2, priority=high)
    reaches(urgent, State.RUNNING, timeout=240)
    wait_until(lambda: victim.events.filter(to_state=State.PREEMPTED).exists(), timeout=60,
               message="the victim's preemption to be recorded")
    victim.refresh_from_db()
    assert victim.state in (State.PREEMPTED, State.QUEUED), victim.state
    assert "Preempted" in page_of(victim, owner)
    # Kueue suspended the victim again (it will run when the GPUs free up).
    [obj] = live.list("ray.io/v1", "RayCluster", namespace=team.namespace_name,
                      label_selector=f"gpuplatform.io/job={victim.pk}")
    assert obj["spec"]["suspend"] is True


def test_members_cannot_create_ray_objects_and_the_policy_holds_everyone_else(live, kube_cluster, ray_team):
    from cluster import Cluster

    team, h100, _, member = ray_team
    sync_team(live, team)  # the member's RoleBinding
    as_member = Cluster(kubeconfig=kube_cluster)
    as_member._api.set_default_header("Impersonate-User", member.username)
    as_member._api.set_default_header("Impersonate-Group", "system:authenticated")
    ns = team.namespace_name
    [rayjob] = render_job(make_job(team, h100, name="kubectl-rayjob", kind="ray-job", ray_entrypoint="python a.py",
                                   **RAY))
    cluster_objects = render_job(make_job(team, h100, name="kubectl-raycluster", kind="ray-cluster", **RAY))
    raycluster = next(o for o in cluster_objects if o["kind"] == "RayCluster")
    for obj in (rayjob, raycluster):
        assert "forbidden" in refused(as_member, obj, ns)
    # The cluster admin (RBAC does not stop it) is held by the team admission policy.
    unqueued = copy.deepcopy(raycluster)
    del unqueued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    unqueued["metadata"]["name"] = "unqueued"
    assert "Kueue queues" in denied_by_policy(live, unqueued, ns)
    service = {"apiVersion": "ray.io/v1", "kind": "RayService",
               "metadata": {"name": "serve", "labels": dict(raycluster["metadata"]["labels"])},
               "spec": {"rayClusterConfig": copy.deepcopy({k: raycluster["spec"][k]
                                                           for k in ("headGroupSpec", "workerGroupSpecs")})}}
    assert "RayService" in denied_by_policy(live, service, ns)
    with pytest.raises(PermanentError):
        loose = copy.deepcopy(raycluster)
        loose["metadata"]["name"] = "loose"
        loose["spec"]["workerGroupSpecs"][0]["template"]["spec"]["serviceAccountName"] = "default"
        live.apply([{**loose, "metadata": {**loose["metadata"], "namespace": ns}}])


def test_running_ray_objects_outlive_sweeps_that_write_nothing(live, ray_team, watcher):
    """Kueue unsuspended them and injected placement; KubeRay writes their status: a reconcile
    of each sends nothing, keeps its generation and its pods (DESIGN.md section 8)."""
    team, h100, _, _ = ray_team
    job = ray_job(live, team, h100, workers=1, gpus_per_worker=1)
    interactive = ray_cluster(live, team, h100, workers=1, gpus_per_worker=1)
    for each, workload in ((job, ("ray.io/v1", "RayJob")), (interactive, ("ray.io/v1", "RayCluster"))):
        reaches(each, State.RUNNING, timeout=180)
        sweeps_change_nothing(live, each, workload=workload, pods=running_pods(live, each, 2))
