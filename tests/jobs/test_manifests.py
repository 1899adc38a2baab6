"""Job rendering, table-style: each case is a sentence, a job built from a few fields, and
the checks that matter. Every case also validates every object against the real schemas
and checks the security invariants of every pod template."""

from dataclasses import dataclass, field
from typing import Callable

import pytest

from core.ownership import JOB_LABEL, MANAGED_BY_LABEL, TEAM_LABEL
from jobs.manifests import object_name, pod_templates_of, render_job
from jobs.models import Job
from quotas.models import PriorityClass, Scheduler
from tenants.models import Team

from ..builders import make_flavor, make_job
from ..schemas import validate
from ..security import assert_hardened

pytestmark = pytest.mark.django_db

FLAVORS = {
    "h100": dict(scheduler=Scheduler.KUEUE, node_labels={"gpuplatform.io/pool": "h100"}),
    "a100": dict(scheduler=Scheduler.VOLCANO, node_labels={"gpuplatform.io/pool": "a100"}),
    "mig": dict(scheduler=Scheduler.KUEUE, resource_name="nvidia.com/mig-1g.10gb", gpus_per_node=14,
                node_labels={"gpuplatform.io/pool": "mig"}),
    "a100-sxm4-80gb-nvlink-partition-for-the-long-name-test": dict(
        scheduler=Scheduler.VOLCANO, node_labels={"gpuplatform.io/pool": "a100"}),
    "t4-shared": dict(scheduler=Scheduler.KUEUE, gpus_per_node=16, node_labels={"gpuplatform.io/pool": "timesliced"}),
}
INFERENCE = dict(kind=Job.Kind.INFERENCE, port=8000, min_replicas=1, max_replicas=4, readiness_path="/healthz",
                 readiness_initial_delay_seconds=180)


@dataclass
class Case:
    name: str
    flavor: str
    job: dict = field(default_factory=dict)
    check: Callable[[dict, Job], None] = lambda objects, job: None
    team: str = "vision"


def by_kind(objects) -> dict:
    return {o["kind"]: o for o in objects}


def container(obj, task: int = 0) -> dict:
    return pod_templates_of(obj)[task]["spec"]["containers"][0]


def env_of(obj, task: int = 0) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(obj, task)["env"]}


# --- checks -----------------------------------------------------------------------------------
def kueue_training_is_a_suspended_indexed_job(objects, job):
    kinds = by_kind(objects)
    assert list(kinds) == ["Service", "Job"]
    spec = kinds["Job"]["spec"]
    assert spec["suspend"] is True and spec["completionMode"] == "Indexed"
    assert spec["parallelism"] == spec["completions"] == job.workers
    assert kinds["Job"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "h100"
    assert kinds["Service"]["spec"]["clusterIP"] == "None"
    assert spec["template"]["spec"]["subdomain"] == kinds["Service"]["metadata"]["name"]


def kueue_single_worker_meets_itself_without_a_service(objects, job):
    [batch] = objects
    assert batch["kind"] == "Job" and batch["spec"]["completions"] == 1
    assert "subdomain" not in batch["spec"]["template"]["spec"]
    env = env_of(batch)
    assert (env["MASTER_ADDR"], env["WORLD_SIZE"], env["NNODES"]) == ("localhost", "1", "1")


def torchrun_env_points_every_worker_at_index_zero(objects, job):
    name = object_name(job)
    env = env_of(by_kind(objects)["Job"])
    assert env["MASTER_ADDR"] == f"{name}-0.{name}.team-vision.svc"
    assert (env["WORLD_SIZE"], env["NNODES"], env["NPROC_PER_NODE"], env["MASTER_PORT"]) == ("4", "4", "8", "29500")
    assert env["NODE_RANK"] == {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def gpus_are_limits_of_the_flavor_resource(resource: str, count: str):
    def check(objects, job):
        resources = container(by_kind(objects)["Job" if "Job" in by_kind(objects) else "Deployment"])["resources"]
        assert resources["limits"][resource] == resources["requests"][resource] == count
    return check


def priority_label_names_the_class(objects, job):
    assert by_kind(objects)["Job"]["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"


def max_runtime_becomes_kueues_max_exec_time(objects, job):
    assert by_kind(objects)["Job"]["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] == "7200"


def no_max_runtime_label_without_a_limit(objects, job):
    assert "kueue.x-k8s.io/max-exec-time-seconds" not in by_kind(objects)["Job"]["metadata"]["labels"]


def volcano_gang_of_all_workers(objects, job):
    [vcjob] = objects
    spec = vcjob["spec"]
    assert vcjob["apiVersion"] == "batch.volcano.sh/v1alpha1"
    assert spec["minAvailable"] == job.workers == sum(t["replicas"] for t in spec["tasks"])
    assert spec["schedulerName"] == "volcano" and spec["queue"] == "team-vision-a100"
    assert [t["name"] for t in spec["tasks"]] == ["master", "worker"]
    assert set(spec["plugins"]) == {"pytorch", "svc", "env"}
    assert {"event": "PodEvicted", "action": "RestartJob"} in spec["policies"]
    assert spec["maxRetry"] == 3 and spec["ttlSecondsAfterFinished"] > 0


def volcano_single_worker_is_only_a_master(objects, job):
    tasks = objects[0]["spec"]["tasks"]
    assert [(t["name"], t["replicas"]) for t in tasks] == [("master", 1)]
    assert objects[0]["spec"]["minAvailable"] == 1
    # No svc plugin (its Service, hosts ConfigMap and NetworkPolicy) and no pytorch plugin
    # (which reads them): the variables it would set come from us.
    assert objects[0]["spec"]["plugins"] == {"env": []}
    env = env_of(objects[0])
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["WORLD_SIZE"], env["RANK"]) == ("localhost", "29500", "1", "0")


def volcano_max_runtime_is_the_pod_deadline(objects, job):
    for template in pod_templates_of(objects[0]):
        assert template["spec"]["activeDeadlineSeconds"] == 3600


def inference_on_kueue(objects, job):
    kinds = by_kind(objects)
    assert list(kinds) == ["Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"]
    deployment = kinds["Deployment"]
    assert deployment["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "h100"
    assert deployment["spec"]["replicas"] == 1
    probe = container(deployment)["readinessProbe"]
    assert probe["httpGet"] == {"path": "/healthz", "port": 8000} and probe["initialDelaySeconds"] == 180
    assert kinds["Service"]["spec"]["type"] == "ClusterIP"
    assert kinds["Service"]["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    hpa = kinds["HorizontalPodAutoscaler"]["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (1, 4)
    assert hpa["scaleTargetRef"]["name"] == deployment["metadata"]["name"]


def inference_on_volcano(objects, job):
    deployment = by_kind(objects)["Deployment"]
    template = deployment["spec"]["template"]
    assert template["spec"]["schedulerName"] == "volcano"
    assert template["metadata"]["annotations"] == {"scheduling.volcano.sh/queue-name": "team-vision-a100"}
    assert "kueue.x-k8s.io/queue-name" not in deployment["metadata"]["labels"]


def fixed_replicas_need_no_autoscaler(objects, job):
    assert "HorizontalPodAutoscaler" not in by_kind(objects)


def autoscaler_uses_the_requested_target(objects, job):
    metric = by_kind(objects)["HorizontalPodAutoscaler"]["spec"]["metrics"][0]["resource"]
    assert metric == {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 55}}


def names_fit_with_derived_pod_names(objects, job):
    name = object_name(job)
    assert len(name) <= 45 and name.startswith(job.name[:20])
    assert name == object_name(job)  # deterministic
    longest_index = str(max(job.workers - 1, 0))
    assert len(f"{name}-{longest_index}") <= 63
    assert len(f"{name}-worker-{longest_index}") <= 63


def long_team_names_keep_queue_names_valid(objects, job):
    queue = by_kind(objects)["Job"]["spec"]["queue"]
    assert len(queue) == 63 and queue.startswith("team-a-team-with-an-extraordinarily-long-name-a100")
    assert queue != f"{job.team.namespace_name}-{job.flavor.name}"[:63]  # shortened with a hash suffix


def user_values_pass_through_verbatim(objects, job):
    main = container(by_kind(objects)["Job"])
    assert main["command"] == ["bash", "-c"]
    assert main["args"] == ["echo 'héllo wörld' && python train.py --tag=\"$(date)\" ; rm -rf / # 🙂"]
    assert env_of(by_kind(objects)["Job"])["PROMPT"] == "Ünïcödé `id` $HOME | tee /etc/passwd"


def privileged_wishes_stay_strings(objects, job):
    main = container(by_kind(objects)["Job"])
    assert main["securityContext"]["privileged"] is False
    assert env_of(by_kind(objects)["Job"])["SECURITY_CONTEXT"] == "privileged: true"
    assert "hostNetwork" in main["args"][0]


def mig_slices_are_requested_on_the_mig_pool(objects, job):
    gpus_are_limits_of_the_flavor_resource("nvidia.com/mig-1g.10gb", "2")(objects, job)
    assert pod_templates_of(by_kind(objects)["Job"])[0]["spec"]["nodeSelector"] == {"gpuplatform.io/pool": "mig"}
    assert "nvidia.com/gpu" not in container(by_kind(objects)["Job"])["resources"]["limits"]


def time_sliced_gpus_use_the_shared_pool(objects, job):
    gpus_are_limits_of_the_flavor_resource("nvidia.com/gpu", "4")(objects, job)
    assert pod_templates_of(by_kind(objects)["Job"])[0]["spec"]["nodeSelector"] == {"gpuplatform.io/pool": "timesliced"}


def cpu_and_memory_per_worker(objects, job):
    resources = container(by_kind(objects)["Job"])["resources"]
    assert resources["requests"]["cpu"] == "2500m" and resources["requests"]["memory"] == "64Gi"
    assert resources["limits"]["memory"] == "64Gi"


def shared_memory_for_data_loaders(objects, job):
    spec = pod_templates_of(by_kind(objects)["Job"])[0]["spec"]
    assert spec["volumes"][0] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}


def job_without_quota_still_renders_into_the_team_namespace(objects, job):
    assert {o["metadata"]["namespace"] for o in objects} == {"team-vision"}
    assert by_kind(objects)["Job"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "h100"


def every_object_is_owned_by_team_and_job(objects, job):
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert (labels[MANAGED_BY_LABEL], labels[TEAM_LABEL], labels[JOB_LABEL]) == ("gpuplatform", "vision", str(job.pk))
        for template in pod_templates_of(obj):
            assert template["metadata"]["labels"][JOB_LABEL] == str(job.pk)


CASES = [
    Case("kueue training is a suspended indexed job with a headless service", "h100", dict(workers=2, gpus_per_worker=8),
         kueue_training_is_a_suspended_indexed_job),
    Case("kueue training with one worker needs no service", "h100", dict(workers=1),
         kueue_single_worker_meets_itself_without_a_service),
    Case("kueue training with many workers sets torchrun env", "h100", dict(workers=4, gpus_per_worker=8),
         torchrun_env_points_every_worker_at_index_zero),
    Case("kueue training requests whole gpus as limits", "h100", dict(gpus_per_worker=8),
         gpus_are_limits_of_the_flavor_resource("nvidia.com/gpu", "8")),
    Case("kueue training carries the priority class label", "h100", dict(priority="high"), priority_label_names_the_class),
    Case("kueue training max runtime becomes the max exec time label", "h100", dict(max_runtime_seconds=7200),
         max_runtime_becomes_kueues_max_exec_time),
    Case("kueue training without max runtime has no limit label", "h100", {}, no_max_runtime_label_without_a_limit),
    Case("volcano training is a gang of all workers on the team queue", "a100", dict(workers=4, gpus_per_worker=8),
         volcano_gang_of_all_workers),
    Case("volcano training with one worker has only a master task", "a100", dict(workers=1),
         volcano_single_worker_is_only_a_master),
    Case("volcano training max runtime is the pod deadline", "a100", dict(workers=2, max_runtime_seconds=3600),
         volcano_max_runtime_is_the_pod_deadline),
    Case("inference on kueue is a queued deployment with service and autoscaler", "h100", dict(INFERENCE),
         inference_on_kueue),
    Case("inference on volcano uses the volcano scheduler and queue annotation", "a100", dict(INFERENCE),
         inference_on_volcano),
    Case("inference with fixed replicas has no autoscaler", "h100", dict(INFERENCE, min_replicas=2, max_replicas=2),
         fixed_replicas_need_no_autoscaler),
    Case("inference autoscaler uses the requested cpu target", "h100", dict(INFERENCE, autoscaling_target_cpu_percent=55),
         autoscaler_uses_the_requested_target),
    Case("mig flavor requests mig slices on the mig pool", "mig", dict(gpus_per_worker=2), mig_slices_are_requested_on_the_mig_pool),
    Case("time-sliced flavor requests shared gpus on its pool", "t4-shared", dict(gpus_per_worker=4),
         time_sliced_gpus_use_the_shared_pool),
    Case("very long job names are shortened with a stable hash", "h100",
         dict(name="a-very-long-job-name-that-keeps-going-xx", workers=128), names_fit_with_derived_pod_names),
    Case("very long volcano job names leave room for task pod names", "a100",
         dict(name="another-very-long-volcano-job-name-abcde", workers=16), names_fit_with_derived_pod_names),
    Case("very long team and flavor names keep queue names within limits",
         "a100-sxm4-80gb-nvlink-partition-for-the-long-name-test", dict(workers=2), long_team_names_keep_queue_names_valid,
         team="a-team-with-an-extraordinarily-long-name"),
    Case("unicode and shell metacharacters pass through as plain values", "h100",
         dict(command=["bash", "-c"], args=["echo 'héllo wörld' && python train.py --tag=\"$(date)\" ; rm -rf / # 🙂"],
              env={"PROMPT": "Ünïcödé `id` $HOME | tee /etc/passwd"}),
         user_values_pass_through_verbatim),
    Case("a user asking for privileges through any field gets only strings", "h100",
         dict(image="evil/root:latest", command=["nsenter", "--target", "1"], args=["--hostNetwork=true --privileged"],
              env={"SECURITY_CONTEXT": "privileged: true", "HOST_PID": "true"}),
         privileged_wishes_stay_strings),
    Case("cpu and memory per worker become requests and memory limits", "h100",
         dict(cpu_per_worker="2.50", memory_per_worker_gib=64), cpu_and_memory_per_worker),
    Case("workers get shared memory sized from their memory", "h100", dict(memory_per_worker_gib=64),
         shared_memory_for_data_loaders),
    Case("a job on a flavor the team has no quota for still renders into the team namespace", "h100", {},
         job_without_quota_still_renders_into_the_team_namespace),
    Case("every kueue object is owned by team and job", "h100", dict(workers=3), every_object_is_owned_by_team_and_job),
    Case("every volcano object is owned by team and job", "a100", dict(workers=3), every_object_is_owned_by_team_and_job),
    Case("every inference object is owned by team and job", "a100", dict(INFERENCE), every_object_is_owned_by_team_and_job),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_render_job(case):
    team = Team.objects.create(slug=case.team, display_name=case.team, max_priority_value=1000)
    flavor = make_flavor(case.flavor, **FLAVORS[case.flavor])
    fields = dict(case.job)
    if "priority" in fields:
        fields["priority"] = PriorityClass.objects.create(name=fields["priority"], value=1000)
    job = make_job(team, flavor, **fields)
    objects = render_job(job)
    for obj in objects:
        validate(obj)
    assert assert_hardened(objects, job) >= 1
    case.check(objects, job)
    assert render_job(job) == objects


def test_there_are_at_least_25_named_cases():
    assert len({c.name for c in CASES}) == len(CASES) >= 25
