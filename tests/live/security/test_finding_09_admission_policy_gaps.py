"""Finding 9 (issue 29): gaps in the team admission policy (tenants/admission.py) for writers
other than members, who RBAC already keeps to reading (defence in depth): StatefulSets (but a
notebook's, queued and without claims of its own),
DaemonSets, ReplicationControllers and bare ReplicaSets/Pods with any owner reference ran
GPU pods without a queue; GPU runtime variables came in through `envFrom`; ephemeral
containers went unchecked; ClusterIP Services with `externalIPs` were admitted;
`tolerations: [{operator: Exists}]` with another pool's nodeSelector reached that pool.

On the local cluster's real admission, as the cluster admin (whom RBAC does not stop):
each of them is refused by the policy, and the platform's own workloads of both schedulers
still run (Kueue's unsuspend and pod ungating, Volcano's pods and Service, a Deployment's
ReplicaSet and pods all pass). The older cases are tests/live/cluster/test_no_way_around_the_queues.py."""

import copy
import uuid

import pytest

from jobs.lifecycle import State
from jobs.manifests import render_job
from tenants.admission import placement

from ...builders import make_flavor, make_job
from ...support.cluster import reaches, submit
from ..cluster.test_no_way_around_the_queues import denied_by_policy

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def _batch_job(team, flavor, **fields) -> dict:
    [job] = [o for o in render_job(make_job(team, flavor, name=f"adm-{uuid.uuid4().hex[:5]}", **fields))
             if o["kind"] == "Job"]
    return job


def _as(kind: str, api_version: str, batch_job: dict) -> dict:
    """A controller of ``kind`` with the platform's labels and pod template of ``batch_job``."""
    template = copy.deepcopy(batch_job["spec"]["template"])
    template["spec"]["restartPolicy"] = "Always"
    labels = {"app": f"x{uuid.uuid4().hex[:5]}"}
    template.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
    spec = {"selector": {"matchLabels": labels} if kind != "ReplicationController" else labels, "template": template}
    if kind == "StatefulSet":
        spec["serviceName"] = "x"
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": f"{kind.lower()}-{uuid.uuid4().hex[:5]}", "labels": dict(batch_job["metadata"]["labels"])},
            "spec": spec}


def _pod(batch_job: dict, owners: list[dict]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p-{uuid.uuid4().hex[:6]}", "labels": dict(batch_job["metadata"]["labels"]),
                         "ownerReferences": owners},
            "spec": copy.deepcopy(batch_job["spec"]["template"]["spec"])}


def _owner(api_version, kind, name="anything") -> dict:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": str(uuid.uuid4()), "controller": True}


@pytest.mark.parametrize("kind, api_version", [("DaemonSet", "apps/v1"), ("ReplicationController", "v1")])
def test_finding_09_no_other_controller_runs_pods_in_a_team_namespace(live, world, kind, api_version):
    team, h100, _ = world
    obj = _as(kind, api_version, _batch_job(team, h100))
    assert "nothing else that makes pods" in denied_by_policy(live, obj, team.namespace_name)


def test_finding_09_a_statefulset_is_a_notebooks_queued_in_a_team_queue_without_claims(live, world):
    """Notebooks are StatefulSets (docs/notebooks.md): one is admitted only in a team queue, and
    makes no claims of its own."""
    team, h100, _ = world
    unqueued = _as("StatefulSet", "apps/v1", _batch_job(team, h100))
    del unqueued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert "Kueue queues" in denied_by_policy(live, unqueued, team.namespace_name)
    claims = _as("StatefulSet", "apps/v1", _batch_job(team, h100))
    claims["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
    assert "volumeClaimTemplates" in denied_by_policy(live, claims, team.namespace_name)


def test_finding_09_nor_a_cron_job(live, world):
    team, h100, _ = world
    job = _batch_job(team, h100)
    cron = {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": f"cron-{uuid.uuid4().hex[:5]}", "labels": dict(job["metadata"]["labels"])},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"metadata": {"labels": job["metadata"]["labels"]},
                                                             "spec": job["spec"]}}}
    assert "nothing else that makes pods" in denied_by_policy(live, cron, team.namespace_name)


# (Owners Kueue's pod webhook looks up, a StatefulSet's or a RayCluster's, it refuses itself first.)
@pytest.mark.parametrize("owner", [_owner("v1", "ConfigMap"), {**_owner("batch/v1", "Job"), "controller": False}])
def test_finding_09_a_bare_pod_cannot_pass_for_a_controllers(live, world, owner):
    team, h100, _ = world
    pod = _pod(_batch_job(team, h100), [owner])
    message = denied_by_policy(live, pod, team.namespace_name)
    assert "Owner references" in message or "made by the platform's Jobs" in message, message


def test_finding_09_a_replica_set_belongs_to_a_deployment(live, world):
    team, h100, _ = world
    rs = _as("ReplicaSet", "apps/v1", _batch_job(team, h100))
    rs["metadata"]["ownerReferences"] = [_owner("v1", "ConfigMap")]
    assert "Owner references" in denied_by_policy(live, rs, team.namespace_name)
    job = _batch_job(team, h100)
    job["metadata"]["ownerReferences"] = [_owner("batch/v1", "CronJob")]  # a Job of the platform has none
    assert "Owner references" in denied_by_policy(live, job, team.namespace_name)


def test_finding_09_no_gpu_variables_through_env_from(live, world):
    team, h100, _ = world
    job = _batch_job(team, h100)
    job["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "gpu-everything"}}]
    assert "envFrom" in denied_by_policy(live, job, team.namespace_name)
    prefixed = _batch_job(team, h100)
    prefixed["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"prefix": "NVIDIA_",
                                                                         "secretRef": {"name": "s"}}]
    assert "envFrom" in denied_by_policy(live, prefixed, team.namespace_name)


def test_finding_09_no_external_ips_on_a_cluster_ip_service(live, world):
    team, _, _ = world
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"ext-{uuid.uuid4().hex[:5]}"},
               "spec": {"type": "ClusterIP", "externalIPs": ["203.0.113.7"], "selector": {"app": "x"},
                        "ports": [{"port": 80}]}}
    assert "externalIPs" in denied_by_policy(live, service, team.namespace_name)


@pytest.mark.parametrize("move, says", [
    # tolerate everything and go to the other pool's nodes
    (lambda spec, other: spec.update(tolerations=[{"operator": "Exists"}], nodeSelector=dict(other.node_labels)),
     "nodes of the flavor"),
    (lambda spec, other: spec.update(tolerations=[{"operator": "Exists"}]), "nodes of the flavor"),
    (lambda spec, other: spec.update(nodeSelector=dict(other.node_labels)), "nodes of the flavor"),
    (lambda spec, other: spec.update(nodeSelector={**spec["nodeSelector"], "node-role.kubernetes.io/control-plane": ""}),
     "nodes of the flavor"),
    (lambda spec, other: spec.update(nodeName="kwok-gpu-0"), "no nodeName"),
    (lambda spec, other: spec.update(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpuplatform.io/pool", "operator": "In",
                                                     "values": ["a100"]}]}]}}}), "no node affinity"),
])
def test_finding_09_pods_stay_on_their_flavors_nodes(live, world, move, says):
    team, h100, a100 = world
    job = _batch_job(team, h100)
    move(job["spec"]["template"]["spec"], a100)
    assert says in denied_by_policy(live, job, team.namespace_name)


def test_finding_09_a_queue_of_another_team_is_no_queue(live, world):
    team, h100, _ = world
    stranger = make_flavor(f"b200-{uuid.uuid4().hex[:5]}", node_labels={"gpuplatform.io/pool": "b200"})
    job = _batch_job(team, h100)
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = stranger.name  # not a quota of this team
    assert "team's own Kueue queues" in denied_by_policy(live, job, team.namespace_name)


def test_finding_09_no_ephemeral_container_joins_a_running_pod(live, world, watcher, api_client):
    from kubernetes import client

    team, h100, _ = world
    job = submit(live, team, h100, workers=1, gpus_per_worker=1, env={"GPUPLATFORM_FAKE_DURATION": "300s"})
    reaches(job, State.RUNNING)
    core = client.CoreV1Api(api_client)
    [pod] = core.list_namespaced_pod(team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}").items
    restricted = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                  "seccompProfile": {"type": "RuntimeDefault"}}  # Pod Security would refuse it first otherwise
    debug = {"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox", "stdin": True, "tty": True,
                                               "securityContext": restricted}]}}
    with pytest.raises(client.ApiException) as caught:
        core.patch_namespaced_pod_ephemeralcontainers(pod.metadata.name, team.namespace_name, debug)
    assert caught.value.status == 403, caught.value
    assert "ephemeral containers" in caught.value.body and "gpuplatform-team-workloads" in caught.value.body


def test_finding_09_the_platforms_own_workloads_still_run(live, world, watcher):
    """Kueue's unsuspend and ungating, Volcano's pods and Service, a Deployment's ReplicaSet:
    every write the controllers make on the way passes the tighter policy."""
    team, h100, a100 = world
    training = submit(live, team, h100, workers=2, gpus_per_worker=1, env={"GPUPLATFORM_FAKE_DURATION": "300s"})
    gang = submit(live, team, a100, workers=2, gpus_per_worker=1, env={"GPUPLATFORM_FAKE_DURATION": "300s"})
    server = submit(live, team, h100, kind="inference", port=8000, min_replicas=1, max_replicas=1, gpus_per_worker=1)
    for job in (training, gang, server):
        reaches(job, State.RUNNING)


def test_finding_09_a_flavors_placement_as_the_policy_reads_it():
    flavor = make_flavor(f"p-{uuid.uuid4().hex[:5]}", node_labels={"gpuplatform.io/pool": "h100", "zone": "a"},
                         tolerations=[{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}])
    assert placement(flavor) == ("|node:gpuplatform.io/pool=h100|node:zone=a|nodes:2"
                                 "|tol:dedicated:Equal:ml:NoSchedule:|tol:nvidia.com/gpu:Exists::NoSchedule:|")
