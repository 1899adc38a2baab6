"""GPU sharing and the network of multi-node jobs on the real local cluster: an MPS job and a
time-sliced job are admitted within their team's quota on their pools (the fake nodes
labelled as the NVIDIA device plugin labels them); a time-sliced job asking more memory than
a share is refused with the field error before anything reaches the cluster; a 2-node job on
an InfiniBand flavor runs with its NCCL variables and RDMA devices, and the admission policy
still refuses the ways around the device plugin (privileged, a host path to /dev/infiniband)."""

import copy
import json
import uuid

import pytest

from jobs.lifecycle import State
from jobs.manifests import render_job

from ...builders import make_flavor, make_job, make_quota
from ...quotas.test_hardware import INFINIBAND, L4_MPS, T4_TIME_SLICED
from ...support.cluster import TAINT, TOLERATION, on_the_cluster, submit, team_of_its_own, wait_until
from .test_no_way_around_the_queues import denied_by_policy

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

LIVE = State.ADMITTED, State.RUNNING, State.SUCCEEDED


@pytest.fixture
def pools(live):
    """A team with quotas on the time-sliced, MPS and InfiniBand (H100) pools of the local cluster."""
    slug = f"sh-{uuid.uuid4().hex[:6]}"
    team, owner = team_of_its_own(slug)
    placement = dict(node_taints=TAINT, tolerations=TOLERATION, network_fabric="tcp")
    flavors = {
        "ts": make_flavor(**dict(T4_TIME_SLICED, name=f"ts-{slug}"), **placement,
                          node_labels={"gpuplatform.io/pool": "timesliced"}),
        "mps": make_flavor(**dict(L4_MPS, name=f"mps-{slug}"), **placement,
                           node_labels={"gpuplatform.io/pool": "mps", "nvidia.com/gpu.sharing-strategy": "mps"}),
        "ib": make_flavor(f"ib-{slug}", **dict(placement, **INFINIBAND), node_labels={"gpuplatform.io/pool": "h100"}),
    }
    for flavor in flavors.values():
        make_quota(team, flavor, nominal_gpus=4, cpu_cores=32, memory_gib=64)
    with on_the_cluster(live, [team], list(flavors.values())):
        yield team, owner, flavors


def main_containers(live, job, count):
    def found():
        pods = live.list("v1", "Pod", namespace=job.team.namespace_name, label_selector=f"gpuplatform.io/job={job.pk}")
        placed = [p for p in pods if p["spec"].get("nodeName")]
        return placed if len(placed) >= count else None
    pods = wait_until(found, timeout=120, message=f"{count} placed pods of job {job.name}")
    return [(p["spec"]["nodeName"], next(c for c in p["spec"]["containers"] if c["name"] == "main")) for p in pods]


def env_of(container) -> dict:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def reaches_any(job, states, timeout=120):
    def check():
        job.refresh_from_db()
        return job.state in states
    wait_until(check, timeout=timeout, message=f"job {job.name} admitted (is {job.state}: {job.message})")


def test_an_mps_job_and_a_time_sliced_job_are_admitted_on_their_pools(live, pools, watcher):
    team, _, flavors = pools
    mps = submit(live, team, flavors["mps"], gpu_memory_gib=5)
    sliced = submit(live, team, flavors["ts"], gpu_memory_gib=4, gpus_per_worker=2)
    for job in (mps, sliced):
        reaches_any(job, LIVE)
    [(node, container)] = main_containers(live, mps, 1)
    assert node == "mps-0"
    assert container["resources"]["limits"]["nvidia.com/gpu.shared"] == "1"
    env = env_of(container)
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=6144M" and env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    [(node, container)] = main_containers(live, sliced, 1)
    assert node == "ts-0" and container["resources"]["limits"]["nvidia.com/gpu"] == "2"


def test_a_time_sliced_job_asking_more_than_a_share_is_refused_on_its_field(live, pools, client):
    team, owner, flavors = pools
    client.force_login(owner)
    body = {"team": team.slug, "name": "too-big", "flavor": flavors["ts"].name, "image": "pytorch/pytorch:2",
            "gpu_memory_gib": 12}
    response = client.post("/api/v1/jobs", json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content
    [message] = response.json()["fields"]["gpu_memory_gib"]
    assert "no memory isolation" in message and flavors["ib"].name in message
    assert not team.jobs.exists()
    assert not live.list("batch/v1", "Job", namespace=team.namespace_name)


def test_a_two_node_infiniband_job_runs_with_its_nccl_variables_and_rdma_devices(live, pools, watcher):
    team, _, flavors = pools
    job = submit(live, team, flavors["ib"], workers=2, gpus_per_worker=1, env={"NCCL_DEBUG": "INFO"})
    reaches_any(job, LIVE)
    placed = main_containers(live, job, 2)
    for node, container in placed:
        assert node.startswith("h100-")
        env = env_of(container)
        assert env["NCCL_IB_HCA"] == "mlx5_0:1,mlx5_1:1" and env["NCCL_NET_GDR_LEVEL"] == "PHB"
        assert env["NCCL_SOCKET_IFNAME"] == "eth0" and env["NCCL_DEBUG"] == "INFO"
        assert container["resources"]["limits"]["rdma/hca"] == "1"
        assert container["securityContext"]["privileged"] is False


def test_the_admission_policy_still_refuses_the_ways_around_the_rdma_device_plugin(live, pools):
    team, _, flavors = pools
    ns = team.namespace_name
    [batch_job] = [o for o in render_job(make_job(team, flavors["ib"], name="rdma-probe", workers=2))
                   if o["kind"] == "Job"]
    privileged = copy.deepcopy(batch_job)
    privileged["spec"]["template"]["spec"]["containers"][0]["securityContext"].update(
        privileged=True, allowPrivilegeEscalation=True)
    assert "not privileged" in denied_by_policy(live, privileged, ns)
    host_path = copy.deepcopy(batch_job)
    host_path["spec"]["template"]["spec"]["volumes"].append({"name": "ib", "hostPath": {"path": "/dev/infiniband"}})
    assert "hostPath" in denied_by_policy(live, host_path, ns)
