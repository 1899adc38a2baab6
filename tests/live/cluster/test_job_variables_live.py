"""What reaches the pods on the real local cluster, as its controllers make them: the DDP
preset's torchrun variables on a multi-worker Volcano gang (ours and those of Volcano's
pytorch plugin), and a Kueue inference server's priority class on its pods."""

import re

import pytest

from jobs.forms import PRESETS
from quotas.models import PriorityClass
from quotas.tasks import sync_cluster_objects

from ...support.cluster import submit, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


def pods_of(live, job, count):
    def found():
        pods = live.list("v1", "Pod", namespace=job.team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}")
        return pods if len(pods) >= count else None
    return wait_until(found, timeout=120, message=f"{count} pods of job {job.name}")


def test_the_ddp_presets_variables_are_all_set_in_a_volcano_gangs_pods(live, world):
    team, _, a100 = world
    preset = PRESETS["ddp"][1]
    job = submit(live, team, a100, workers=2, gpus_per_worker=4, image=preset["image"],
                 command=preset["command"].split(), args=preset["args"].split())
    used = set(re.findall(r"\$\(([A-Z_]+)\)", " ".join(job.command + job.args)))
    assert {"NNODES", "NPROC_PER_NODE", "MASTER_ADDR", "MASTER_PORT"} <= used
    for pod in pods_of(live, job, 2):
        main = next(c for c in pod["spec"]["containers"] if c["name"] == "main")
        env = {e["name"]: e.get("value") for e in main.get("env", [])}
        assert used <= set(env), (pod["metadata"]["name"], used - set(env))
        assert env["NNODES"] == "2" and env["WORLD_SIZE"] == "2" and env["NPROC_PER_NODE"] == "4"


def test_a_kueue_inference_servers_priority_reaches_its_pods(live, world):
    team, h100, _ = world
    urgent = PriorityClass.objects.create(name=f"urgent-{team.slug}", value=100)
    sync_cluster_objects(live)  # the WorkloadPriorityClass
    job = submit(live, team, h100, kind="inference", port=8000, min_replicas=1, max_replicas=1, gpus_per_worker=1,
                 priority=urgent)
    for pod in pods_of(live, job, 1):
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == urgent.name
