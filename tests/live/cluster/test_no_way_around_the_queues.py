"""Members cannot go around the queues with kubectl (issue: security hardening, high 2).

On the real local cluster, impersonating a team member (`--as`): bare Pods, batch Jobs,
Deployments and Volcano Jobs in the team's namespace are refused, so is a Volcano Job that
names another team's queue and a LoadBalancer Service; members still read their workloads
and their logs; the platform's own objects are still admitted."""

import copy

import pytest

from jobs.lifecycle import State
from jobs.manifests import render_job

from ...builders import make_job
from ...support.cluster import reaches, submit

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sneaky"},
       "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "exposed"},
           "spec": {"type": "LoadBalancer", "selector": {"app": "x"}, "ports": [{"port": 80}]}}


def create(cluster, obj: dict, namespace: str):
    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = namespace
    obj["metadata"].pop("resourceVersion", None)
    cluster.apply([obj])


def refused(cluster, obj, namespace) -> str:
    from cluster import PermanentError

    with pytest.raises(PermanentError) as caught:
        create(cluster, obj, namespace)
    assert caught.value.status == 403, caught.value
    return str(caught.value)


def test_a_member_cannot_create_workloads_or_expose_them(member_cluster, world):
    team, h100, a100 = world
    ns = team.namespace_name
    training = render_job(make_job(team, h100, name="kubectl-train"))
    gang = render_job(make_job(team, a100, name="kubectl-gang", workers=2))
    serving = render_job(make_job(team, h100, name="kubectl-serve", kind="inference", port=8000,
                                  min_replicas=1, max_replicas=1))
    batch_job = next(o for o in training if o["kind"] == "Job")
    deployment = next(o for o in serving if o["kind"] == "Deployment")
    vcjob = gang[0]
    elsewhere = copy.deepcopy(vcjob)
    elsewhere["spec"]["queue"] = "team-someone-else-a100"
    for obj in (POD, batch_job, deployment, vcjob, elsewhere, SERVICE):
        assert "forbidden" in refused(member_cluster, obj, ns)


def test_a_member_still_reads_workloads_and_follows_logs(member_cluster, live, world, watcher):
    from kubernetes import client

    team, h100, _ = world
    job = submit(live, team, h100, workers=1, gpus_per_worker=1, env={"GPUPLATFORM_FAKE_DURATION": "300s"})
    reaches(job, State.RUNNING)  # the platform's own objects are admitted and run
    [pod] = member_cluster.list("v1", "Pod", namespace=team.namespace_name,
                                label_selector=f"gpuplatform.io/job={job.pk}")
    assert pod["status"]["phase"] == "Running"
    assert member_cluster.list("batch/v1", "Job", namespace=team.namespace_name)

    def may(verb, resource, subresource=""):
        review = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(
                namespace=team.namespace_name, verb=verb, resource=resource, subresource=subresource)))
        return client.AuthorizationV1Api(member_cluster._api).create_self_subject_access_review(review).status.allowed

    assert may("get", "pods", "log") and may("create", "pods", "portforward")
    assert not may("delete", "pods") and not may("create", "pods", "exec")


# --- the admission policy: whoever writes into a team namespace --------------------------
# RBAC keeps members to reading; the ValidatingAdmissionPolicy also holds anyone else with
# write rights there (a CI account a cluster admin bound, a controller) to what the platform
# renders. These run as the cluster admin, which RBAC does not stop.


def denied_by_policy(cluster, obj, namespace) -> str:
    message = refused(cluster, obj, namespace)
    assert "gpuplatform-team-workloads" in message, message
    return message


def test_the_policy_refuses_what_the_platform_would_never_render(live, world):
    team, h100, a100 = world
    ns = team.namespace_name
    [batch_job] = [o for o in render_job(make_job(team, h100, name="admin-train")) if o["kind"] == "Job"]
    [vcjob] = render_job(make_job(team, a100, name="admin-gang", workers=2))
    serving = render_job(make_job(team, h100, name="admin-serve", kind="inference", port=8000,
                                  min_replicas=1, max_replicas=1))
    deployment = next(o for o in serving if o["kind"] == "Deployment")

    labelled_pod = copy.deepcopy(POD)
    labelled_pod["metadata"]["labels"] = batch_job["metadata"]["labels"]
    labelled_pod["spec"] = copy.deepcopy(batch_job["spec"]["template"]["spec"])
    assert "made by the platform's Jobs" in denied_by_policy(live, labelled_pod, ns)

    unqueued = copy.deepcopy(batch_job)
    del unqueued["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert "Kueue queue" in denied_by_policy(live, unqueued, ns)

    unlabelled = copy.deepcopy(batch_job)
    unlabelled["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "anything"}
    assert "Workloads in team namespaces are the platform's" in denied_by_policy(live, unlabelled, ns)

    other_queue = copy.deepcopy(vcjob)
    other_queue["spec"]["queue"] = "team-someone-else-a100"
    assert "team's own queues" in denied_by_policy(live, other_queue, ns)

    unqueued_server = copy.deepcopy(deployment)
    del unqueued_server["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert "Deployment in a team namespace" in denied_by_policy(live, unqueued_server, ns)

    assert "ClusterIP" in denied_by_policy(live, SERVICE, ns)


@pytest.mark.parametrize("break_it, says", [
    (lambda spec: spec.update(serviceAccountName="default"), "ServiceAccount"),
    (lambda spec: spec.update(hostNetwork=True), "network, PID or IPC"),
    (lambda spec: spec.setdefault("volumes", []).append({"name": "root", "hostPath": {"path": "/"}}), "hostPath"),
    (lambda spec: spec["containers"][0].setdefault("env", []).append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}),
     "GPU runtime"),
    (lambda spec: spec["containers"][0]["securityContext"].update(privileged=True, allowPrivilegeEscalation=True),
     "privileged"),
])
def test_the_policy_keeps_pod_templates_hardened(live, world, break_it, says):
    team, h100, _ = world
    [batch_job] = [o for o in render_job(make_job(team, h100, name="admin-harden")) if o["kind"] == "Job"]
    break_it(batch_job["spec"]["template"]["spec"])
    assert says in denied_by_policy(live, batch_job, team.namespace_name)


def test_the_platforms_own_workloads_pass_the_policy(live, world, watcher):
    team, h100, a100 = world
    training = submit(live, team, h100, workers=1, gpus_per_worker=1, env={"GPUPLATFORM_FAKE_DURATION": "300s"})
    gang = submit(live, team, a100, workers=2, gpus_per_worker=1, env={"GPUPLATFORM_FAKE_DURATION": "300s"})
    server = submit(live, team, h100, kind="inference", port=8000, min_replicas=1, max_replicas=1,
                    gpus_per_worker=1)
    for job in (training, gang, server):
        reaches(job, State.RUNNING)
