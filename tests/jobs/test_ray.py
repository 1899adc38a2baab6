"""Ray jobs and clusters (workloads/ray.py, workloads/kinds/ray_*.py, jobs/models/ray.py): what
they render for Kueue and KubeRay, what a person may ask, and how KubeRay's and Kueue's words
become the job's state ("head ready, 3/4 workers", Ray's own job status)."""

import pytest
from django.core.exceptions import ValidationError

from jobs.manifests import job_fields, render_job
from jobs.models import Job
from jobs.outlook import feasibility
from quotas.models import Scheduler
from workloads import Phase, gates
from workloads.kinds import for_job
from workloads.kueue import QUEUE_LABEL
from workloads.ray import HEAD_CPU, HEAD_MEMORY_GIB, observe_ray

from ..builders import build_job, make_flavor, make_job, make_quota, make_team
from ..schemas import validate
from ..security import assert_hardened

pytestmark = pytest.mark.django_db


@pytest.fixture
def team():
    return make_team("raylab")


@pytest.fixture
def flavor(team):
    flavor = make_flavor("h100")
    make_quota(team, flavor, nominal_gpus=8)
    return flavor


def ray_job(team, flavor, **fields):
    return make_job(team, flavor, kind=Job.Kind.RAY_JOB, command=[], args=[],
                    ray_entrypoint="python train.py", **{"workers": 3, "gpus_per_worker": 2, **fields})


def ray_cluster(team, flavor, **fields):
    return make_job(team, flavor, kind=Job.Kind.RAY_CLUSTER, command=[], args=[],
                    **{"workers": 2, "gpus_per_worker": 4, **fields})


# --- rendering ----------------------------------------------------------------------------------
def test_a_ray_job_is_a_suspended_queued_rayjob_that_shuts_its_cluster_down(team, flavor):
    job = ray_job(team, flavor, ray_runtime_env="pip: [torch]\n")
    [obj] = render_job(job)
    assert (obj["apiVersion"], obj["kind"]) == ("ray.io/v1", "RayJob")
    assert obj["metadata"]["labels"][QUEUE_LABEL] == "h100"
    spec = obj["spec"]
    assert spec["suspend"] is True and spec["shutdownAfterJobFinishes"] is True  # Kueue requires both
    assert (spec["entrypoint"], spec["runtimeEnvYAML"]) == ("python train.py", "pip: [torch]\n")
    head, [workers] = spec["rayClusterSpec"]["headGroupSpec"], spec["rayClusterSpec"]["workerGroupSpecs"]
    assert "nvidia.com/gpu" not in head["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert (workers["replicas"], workers["minReplicas"], workers["maxReplicas"]) == (3, 3, 3)
    assert workers["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    validate(obj)
    assert assert_hardened([obj], job) == 2  # the head's and the workers' pod templates


def test_a_ray_cluster_renders_its_cluster_and_its_dashboard_service(team, flavor):
    job = ray_cluster(team, flavor)
    service, cluster = render_job(job)
    assert cluster["kind"] == "RayCluster" and cluster["spec"]["suspend"] is True
    assert "enableInTreeAutoscaling" not in cluster["spec"]  # Kueue refuses it on a queued RayCluster
    assert service["spec"]["selector"]["ray.io/node-type"] == "head"
    assert {p["port"] for p in service["spec"]["ports"]} == {8265, 10001}
    for obj in (service, cluster):
        validate(obj)
    endpoint = for_job(job).endpoint(job)
    assert endpoint["port_forward"] == (f"kubectl -n {team.namespace_name} port-forward "
                                        f"svc/{service['metadata']['name']} 8265:8265")


def test_kueue_charges_a_ray_head_its_template_alone_no_submitter_or_autoscaler_sidecar(team, flavor):
    # Kueue v0.19 adds 500m/200Mi to the head pod set of a RayJob in SidecarMode and 500m/512Mi
    # for the in-tree autoscaler (docs/ray.md): the platform renders neither, so what Kueue
    # charges is the head's own requests, which the platform counts too.
    [obj] = render_job(ray_job(team, flavor))
    spec = obj["spec"]
    assert spec["submissionMode"] == "HTTPMode"
    assert "enableInTreeAutoscaling" not in spec["rayClusterSpec"]
    [head] = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
    assert head["resources"]["requests"]["cpu"] == str(HEAD_CPU)
    assert head["resources"]["requests"]["memory"] == f"{HEAD_MEMORY_GIB}Gi"


def test_kueue_alone_writes_suspend_and_the_groups_never_change(team, flavor):
    # beside suspend, only the platform's admission gate is kept as created (`workloads.gates`)
    rules = job_fields(ray_job(team, flavor))[("ray.io", "RayJob")]
    assert rules.create_only == ("spec.suspend", gates.FIELD) and "spec.rayClusterSpec" in rules.immutable
    rules = job_fields(ray_cluster(team, flavor))[("ray.io", "RayCluster")]
    assert rules.create_only == ("spec.suspend", gates.FIELD) and "spec.workerGroupSpecs" in rules.immutable


# --- what a person may ask ------------------------------------------------------------------------
@pytest.mark.parametrize(("fields", "field", "says"), [
    (dict(kind="ray-job", ray_entrypoint=""), "ray_entrypoint", "needs the command"),
    (dict(kind="ray-job", ray_entrypoint="python a.py", ray_runtime_env="pip: [torch"), "ray_runtime_env",
     "Not valid YAML"),
    (dict(kind="ray-job", ray_entrypoint="python a.py", ray_runtime_env="- torch"), "ray_runtime_env", "mapping"),
    (dict(kind="ray-job", ray_entrypoint="python a.py", ray_runtime_env="a: " + "x" * 40000), "ray_runtime_env",
     "32 KiB"),
    (dict(kind="training", ray_entrypoint="python a.py"), "ray_entrypoint", "Training does not take this"),
])
def test_bad_ray_settings_are_refused_on_their_field(team, flavor, fields, field, says):
    job = build_job(team, flavor, **fields)
    with pytest.raises(ValidationError) as caught:
        job.full_clean()
    assert says in " ".join(caught.value.message_dict[field])


@pytest.mark.parametrize("kind", ["ray-job", "ray-cluster"])
def test_ray_runs_on_kueue_flavors_only(team, kind):
    volcano = make_flavor("a100", scheduler=Scheduler.VOLCANO)
    job = build_job(team, volcano, kind=kind, ray_entrypoint="python a.py" if kind == "ray-job" else "")
    with pytest.raises(ValidationError) as caught:
        job.full_clean()
    assert "Kueue flavors only" in caught.value.message_dict["kind"][0]


def test_feasibility_says_a_ray_job_needs_a_head_and_its_workers(team, flavor):
    fits = feasibility.assess(build_job(team, flavor, kind="ray-job", ray_entrypoint="x", workers=3,
                                        gpus_per_worker=2))
    assert fits.verdict == "now" and "head + 3 x 2 GPUs (6)" in fits.message
    never = feasibility.assess(build_job(team, flavor, kind="ray-cluster", workers=5, gpus_per_worker=2))
    assert never.verdict == "never" and "head + 5 x 2 GPUs (10)" in never.message


# --- what the cluster says --------------------------------------------------------------------------
def _workload(*conditions):
    return {"status": {"conditions": [
        {"type": kind, "status": "True", "reason": reason, "message": message,
         "lastTransitionTime": "2026-12-03T10:00:00Z"} for kind, reason, message in conditions]}}


ADMITTED = _workload(("QuotaReserved", "QuotaReserved", ""), ("Admitted", "Admitted", ""))


def _ray_job_status(**status):
    return {"kind": "RayJob", "status": status}


@pytest.mark.parametrize(("case", "workload", "obj", "state", "says"), [
    ("waiting for quota", {"status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending",
         "message": "couldn't assign flavors to pod set workers: insufficient unused quota for nvidia.com/gpu "
                    "in flavor h100, 2 more needed"}]}}, None, Phase.QUEUED, "Waiting for quota"),
    ("admitted, head starting", ADMITTED, _ray_job_status(rayClusterStatus={"readyWorkerReplicas": 1}),
     Phase.ADMITTED, "head starting, 1/3 workers"),
    ("running", ADMITTED, _ray_job_status(jobStatus="RUNNING", jobDeploymentStatus="Running", rayClusterStatus={
        "readyWorkerReplicas": 3, "conditions": [{"type": "HeadPodReady", "status": "True"}]}),
     Phase.RUNNING, "head ready, 3/3 workers, Ray job RUNNING"),
    ("a cluster of 3 workers, 3 ready", ADMITTED, {"kind": "RayCluster", "status": {
        "state": "ready", "readyWorkerReplicas": 3}}, Phase.RUNNING, "head ready, 3/3 workers"),
    ("Ray says it succeeded", ADMITTED, _ray_job_status(jobStatus="SUCCEEDED", jobDeploymentStatus="Complete"),
     Phase.SUCCEEDED, "succeeded"),
    ("Ray says it failed", ADMITTED, _ray_job_status(jobStatus="FAILED", jobDeploymentStatus="Complete",
                                                     message="exit code 1"), Phase.FAILED, "exit code 1"),
    ("KubeRay gave up", ADMITTED, _ray_job_status(jobDeploymentStatus="Failed", reason="DeadlineExceeded",
                                                  message="past activeDeadlineSeconds"), Phase.FAILED, "past"),
    ("preempted", _workload(("Evicted", "Preempted", "Preempted to accommodate a workload (UID: a, JobUID: b) "
                                                     "due to prioritization in the ClusterQueue"),
                            ("Preempted", "InClusterQueue", "Preempted to accommodate a workload (UID: a, JobUID: b) "
                                                            "due to prioritization in the ClusterQueue")),
     _ray_job_status(jobDeploymentStatus="Suspended"), Phase.PREEMPTED, "higher-priority job of the same team"),
])
def test_what_kueue_and_kuberay_say_becomes_the_jobs_state(team, flavor, case, workload, obj, state, says):
    job = ray_job(team, flavor)
    seen = observe_ray(job, workload, obj)
    assert seen.state == state, case
    assert says in seen.message, (case, seen.message)


def test_nothing_seen_is_no_observation(team, flavor):
    assert observe_ray(ray_job(team, flavor), None, None) is None


def test_a_ray_jobs_progress_comes_from_the_cluster_kuberay_made_for_it(team, flavor):
    """KubeRay refreshes the copy in the RayJob's status only on its way through: the
    RayCluster it made (and owns) is read first."""
    job = ray_job(team, flavor)
    stale = _ray_job_status(jobDeploymentStatus="Running", rayClusterStatus={"readyWorkerReplicas": 1})
    cluster = {"kind": "RayCluster", "status": {"readyWorkerReplicas": 3, "conditions": [
        {"type": "HeadPodReady", "status": "True"}]}}
    assert observe_ray(job, ADMITTED, stale).state == Phase.ADMITTED
    seen = observe_ray(job, ADMITTED, stale, cluster)
    assert seen.state == Phase.RUNNING and "head ready, 3/3 workers" in seen.message
