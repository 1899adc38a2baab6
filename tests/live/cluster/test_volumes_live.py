"""Team storage on the real local cluster: a volume an owner creates becomes a claim counted
against the team's storage quota (the namespace's ResourceQuota refuses a claim beyond it),
an inference job mounts it and runs, and a member cannot create a claim with kubectl.

No provisioner runs on kwok: the test's storage class has none, and a PersistentVolume made
here (as the cluster admin) is pre-bound to the claim (``claimRef``), so the volume controller
binds it as a provisioner would have. What is proven: the claim, its binding, the quota's
accounting and refusal, the pod spec that mounts it, scheduling and the job's status. What
is not: that a real provisioner makes the disk, or that anything is written to it."""

import uuid

import pytest

from cluster import PermanentError
from core.owners import run
from jobs.lifecycle import State
from jobs.models import Volume
from jobs.tasks import TEAM_VOLUMES
from quotas.models import StorageQuota
from quotas.tasks import sync_team_quotas
from tenants.models import Membership
from tenants.tasks import sync_team

from ...builders import make_user
from ...support.cluster import reaches, submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def claim(name: str, namespace: str, storage_class: str, size: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"storageClassName": storage_class, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": size}}}}


@pytest.fixture
def storage(live, world):
    """The team's storage quota on a class of its own (5 GiB, 2 volumes), and the PersistentVolumes
    made for its claims, removed afterwards."""
    team, h100, _ = world
    storage_class = f"nbook-{uuid.uuid4().hex[:6]}"
    StorageQuota.objects.create(team=team, storage_class=storage_class, storage_gib=5, volumes=2)
    sync_team_quotas(live, team)
    volumes: list[str] = []
    yield storage_class, volumes
    for name in volumes:
        try:
            live.delete("v1", "PersistentVolume", name)
        except PermanentError:
            pass


def bound_volume(live, team, storage_class: str, claim_name: str, volumes: list[str], size="4Gi") -> None:
    """A PersistentVolume pre-bound to the team's claim, as a provisioner would make it."""
    name = f"{storage_class}-{claim_name}"
    live.apply([{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
                 "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                          "storageClassName": storage_class, "persistentVolumeReclaimPolicy": "Delete",
                          "hostPath": {"path": f"/tmp/{name}"},
                          "claimRef": {"namespace": team.namespace_name, "name": claim_name}}}])
    volumes.append(name)


def test_an_owners_volume_is_counted_mounted_by_inference_and_not_made_by_members(live, world, storage, watcher,
                                                                               kube_cluster):
    from cluster import Cluster

    team, h100, _ = world
    storage_class, volumes = storage
    ns = team.namespace_name
    owner = team.memberships.get(role=Membership.Role.OWNER).user

    # 1. the owner's volume becomes a claim, bound to the volume made for it
    Volume.objects.add(team=team, user=owner, name="model-cache", storage_class=storage_class, size_gib=4)
    bound_volume(live, team, storage_class, "model-cache", volumes)
    run(live, TEAM_VOLUMES, team)
    wait_until(lambda: (live.get("v1", "PersistentVolumeClaim", "model-cache", ns) or {}).get("status", {})
               .get("phase") == "Bound", timeout=60, message="the claim to be bound")

    # 2. counted against the team's storage quota, and a claim beyond it refused by the API server
    def used() -> dict:
        return (live.get("v1", "ResourceQuota", "team-quota", ns).get("status") or {}).get("used") or {}

    wait_until(lambda: used().get(f"{storage_class}.storageclass.storage.k8s.io/requests.storage") == "4Gi",
               timeout=60, message="the quota to count the claim")
    assert used()["persistentvolumeclaims"] == "1"
    with pytest.raises(PermanentError) as over:
        live.apply([claim("too-big", ns, storage_class, "2Gi")])
    assert over.value.status == 403 and "exceeded quota" in str(over.value)

    # 3. an inference server mounts it and runs
    job = submit(live, team, h100, kind="inference", port=8000, min_replicas=1, max_replicas=1, gpus_per_worker=1,
                 volumes={"model-cache": "/models"}, env={"HF_HOME": "/models"})
    reaches(job, State.RUNNING)
    [pod] = live.list("v1", "Pod", namespace=ns, label_selector=f"gpuplatform.io/job={job.pk}")
    assert {"name": "vol-0", "persistentVolumeClaim": {"claimName": "model-cache"}} in pod["spec"]["volumes"]
    main = pod["spec"]["containers"][0]
    assert {"mountPath": "/models", "name": "vol-0"} in [
        {k: m[k] for k in ("mountPath", "name")} for m in main["volumeMounts"]]
    assert pod["status"]["phase"] == "Running"

    # 4. a member cannot make a claim with kubectl (RBAC: members read)
    member = make_user(f"member-{team.slug}")
    Membership.objects.create(team=team, user=member, role=Membership.Role.MEMBER)
    sync_team(live, team)
    as_member = Cluster(kubeconfig=kube_cluster)
    as_member._api.set_default_header("Impersonate-User", member.username)
    as_member._api.set_default_header("Impersonate-Group", "system:authenticated")
    with pytest.raises(PermanentError) as refused:
        as_member.apply([claim("sneaky", ns, storage_class, "1Gi")])
    assert refused.value.status == 403 and "forbidden" in str(refused.value)
    assert [c["metadata"]["name"] for c in as_member.list("v1", "PersistentVolumeClaim", namespace=ns)] == [
        "model-cache"]
