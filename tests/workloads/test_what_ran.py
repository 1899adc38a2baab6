"""What the watcher reads of a job's pods for accounting (the GPUs placed on nodes), and the one
reason every scheduler gives a job that can never start."""

import pytest

from jobs.lifecycle import State
from jobs.models import Job
from jobs.status import observe
from quotas.models import Scheduler
from workloads import EXCEEDS_QUOTA, placed_gpus
from workloads.kueue import observe_training as observe_kueue_training
from workloads.serving import observe_inference

from ..builders import make_flavor, make_job

pytestmark = pytest.mark.django_db

OVER = ("couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, "
        "previously considered podsets requests (0) + current podset request (32) > maximum capacity (24)")
MORE = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed"


def pod(node="h100-0", phase="Running", gated=False):
    spec = {"nodeName": node} if node else {}
    if gated:
        spec["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    return {"spec": spec, "status": {"phase": phase}}


def server(team, flavor, **fields):
    return make_job(team, flavor, kind=Job.Kind.INFERENCE, port=8000, **{"min_replicas": 1, "max_replicas": 3,
                                                                         "gpus_per_worker": 2, **fields})


class Seen:
    def __init__(self, deployment=None, pods=(), ceiling=None, workload=None, batch_job=None):
        self._deployment, self._pods, self._ceiling = deployment, list(pods), ceiling
        self._workload, self._batch_job = workload, batch_job

    def named(self, kind):
        return self._deployment if kind[1] == "Deployment" else self._batch_job

    def owned(self, kind):
        return self._workload

    def pods(self):
        return self._pods

    def ceiling_gpus(self):
        return self._ceiling


@pytest.mark.parametrize("name, pods, gpus", [
    ("one replica on a node of three allowed", [pod()], 2),
    ("two replicas on nodes", [pod(), pod("h100-1")], 4),
    ("a replica still gated by Kueue holds nothing", [pod(), pod(node=None, gated=True)], 2),
    ("a replica not yet bound holds nothing", [pod(), pod(node=None, phase="Pending")], 2),
    ("a pod that ended gave its GPUs back", [pod(phase="Succeeded"), pod(phase="Failed"), pod()], 2),
    ("no pods, no GPUs", [], 0),
], ids=lambda v: v if isinstance(v, str) else "")
def test_gpus_held_are_the_pods_placed_on_nodes_times_gpus_per_worker(team, flavor, name, pods, gpus):
    assert placed_gpus(server(team, flavor), pods) == gpus


@pytest.mark.parametrize("kind", [Job.Kind.RAY_JOB, Job.Kind.RAY_CLUSTER])
def test_a_ray_head_and_submitter_hold_no_gpus_so_two_workers_of_one_gpu_hold_two_as_kueue_counts(team, flavor, kind):
    job = make_job(team, flavor, kind=kind, workers=2, gpus_per_worker=1, ray_entrypoint="python a.py"
                   if kind == Job.Kind.RAY_JOB else "")

    def ray_pod(node_type):
        labelled = pod()
        if node_type:
            labelled["metadata"] = {"labels": {"ray.io/node-type": node_type}}
        return labelled

    pods = [ray_pod("head"), ray_pod("worker"), ray_pod("worker"), ray_pod(None)]  # None: the submitter
    assert placed_gpus(job, pods) == 2 == job.total_gpus


def test_a_server_of_one_to_three_replicas_running_one_is_observed_holding_one_replicas_gpus(team, flavor):
    seen = observe(server(team, flavor), Seen(deployment={"status": {"readyReplicas": 1}}, pods=[pod()]))
    assert (seen.state, seen.gpus) == (State.RUNNING, 2)


def test_a_running_job_whose_pods_are_not_seen_yet_is_not_counted_as_holding_nothing(team, flavor):
    seen = observe(server(team, flavor), Seen(deployment={"status": {"readyReplicas": 1}}, pods=[]))
    assert (seen.state, seen.gpus) == (State.RUNNING, None)


def test_kueue_says_a_job_over_the_maximum_capacity_exceeds_the_quota_and_one_short_of_free_gpus_waits(team, flavor):
    job = make_job(team, flavor, workers=4, gpus_per_worker=8)
    over = observe_kueue_training(job, {"status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": OVER}]}}, None)
    short = observe_kueue_training(job, {"status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": MORE}]}}, None)
    assert (over.state, over.reason) == (State.QUEUED, EXCEEDS_QUOTA)
    assert over.message.startswith("Can never start: this job needs 32 h100 GPUs but team vision can use at most 24")
    assert (short.state, short.reason) == (State.QUEUED, "WaitingForQuota")


def test_a_server_whose_minimum_replicas_exceed_the_ceiling_can_never_start(team, flavor):
    job = server(team, flavor, min_replicas=3, max_replicas=3, gpus_per_worker=4)
    gated = [pod(node=None, gated=True)]
    never = observe_inference(job, {"status": {}}, gated, ceiling_gpus=lambda: 8)
    assert (never.state, never.reason) == (State.QUEUED, EXCEEDS_QUOTA)
    assert never.message == ("Can never start: its 3 replicas need 12 h100 GPUs but team vision can use at most 8, "
                             "borrowing included.")
    assert observe_inference(job, {"status": {}}, gated, ceiling_gpus=lambda: 12).reason == "WaitingForQuota"


def test_a_volcano_gang_beyond_the_ceiling_gives_the_same_reason(team):
    job = make_job(team, make_flavor("a100", scheduler=Scheduler.VOLCANO), workers=3, gpus_per_worker=8)
    seen = observe(job, Seen(ceiling=8, batch_job={"status": {"state": {"phase": "Pending"}}},
                             workload={"status": {"phase": "Pending"}}))
    assert (seen.reason, seen.gpus) == (EXCEEDS_QUOTA, 0)
