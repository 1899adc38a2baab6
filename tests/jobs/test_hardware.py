"""What a job asks of its flavor's hardware: a GPU memory budget checked against one unit
(refused on a time-sliced share it exceeds, with what would fit), an MPS share's limits set
by the platform and never by the job, and multi-node training only over a declared fabric,
with the flavor's NCCL defaults and RDMA devices rendered. Every rendered object validates
against the real schemas and keeps the security invariants."""

import pytest
from django.core.exceptions import ValidationError

from jobs.forms import JobForm, clone_initial
from jobs.manifests import pod_templates_of, render_job
from jobs.models import Job
from quotas.manifests import render_team_quotas
from quotas.models import Quota, Scheduler
from workloads.pods import EPHEMERAL_STORAGE

from ..builders import build_job, make_flavor, make_job, make_quota, make_team, make_user
from ..quotas.test_hardware import H100, INFINIBAND, L4_MPS, MIG, T4_TIME_SLICED
from ..schemas import validate
from ..security import assert_hardened

pytestmark = pytest.mark.django_db


@pytest.fixture
def team():
    return make_team("vision")


def errors_of(job: Job) -> dict:
    try:
        job.full_clean()
    except ValidationError as err:
        return err.message_dict
    return {}


def containers(objects) -> list[dict]:
    return [c for obj in objects for t in pod_templates_of(obj) for c in t["spec"]["containers"]]


def env_of(container: dict) -> dict:
    return {e["name"]: e.get("value") for e in container["env"]}


def rendered(job) -> list[dict]:
    objects = render_job(job)
    for obj in objects:
        validate(obj)
    assert assert_hardened(objects, job) >= 1
    return objects


# --- the memory budget --------------------------------------------------------------------------
def test_a_time_sliced_job_needing_more_than_a_share_is_refused_with_what_would_fit(team):
    t4 = make_flavor(**T4_TIME_SLICED, network_fabric="tcp")
    for fields in (H100, MIG, L4_MPS):
        make_quota(team, make_flavor(**fields, network_fabric="tcp"))
    make_quota(team, t4)
    errors = errors_of(build_job(team, t4, gpu_memory_gib=6))
    [message] = errors["gpu_memory_gib"]
    assert "needs 6 GiB per GPU" in message and "4 pods, 4 GiB each, with no memory isolation" in message
    assert "fewer pods per GPU, MPS (enforced limits), a MIG profile, or a whole GPU" in message
    # The team's flavors of at least 6 GiB a unit, named (an MPS share of an L4 is 6 GiB).
    assert "The team's flavors where 6 GiB fits: h100, l4-mps, mig-1g-10gb." in message
    assert "l4-mps" not in errors_of(build_job(team, t4, gpu_memory_gib=7))["gpu_memory_gib"][0]
    assert errors_of(build_job(team, t4, gpu_memory_gib=4)) == {}


def test_a_need_no_flavor_of_the_team_holds_says_so(team):
    t4 = make_flavor(**T4_TIME_SLICED, network_fabric="tcp")
    make_quota(team, t4)
    [message] = errors_of(build_job(team, t4, gpu_memory_gib=40))["gpu_memory_gib"]
    assert "None of the team's flavors has 40 GiB per GPU" in message


@pytest.mark.parametrize("fields, need, words", [
    (L4_MPS, 7, "MPS limits each share of l4-mps to 6 GiB"),
    (MIG, 11, "the MIG slice of mig-1g-10gb has 10 GiB"),
    (H100, 81, "a GPU of h100 has 80 GiB"),
])
def test_a_need_over_one_unit_of_any_flavor_is_refused(team, fields, need, words):
    flavor = make_flavor(**fields)
    assert words in errors_of(build_job(team, flavor, gpu_memory_gib=need))["gpu_memory_gib"][0]
    assert errors_of(build_job(team, flavor, gpu_memory_gib=need - 1)) == {}


def test_the_form_keeps_what_was_typed_and_says_the_budget_error_on_its_field(team):
    member = make_user()
    team.memberships.create(user=member, role="member")
    t4 = make_flavor(**T4_TIME_SLICED, network_fabric="tcp")
    form = JobForm(data=dict(kind="training", team=team.pk, name="too-big", flavor=t4.pk, image="pytorch/pytorch:2",
                             workers=1, gpus_per_worker=1, gpu_memory_gib=12, cpu_per_worker=2,
                             memory_per_worker_gib=8), user=member)
    assert not form.is_valid()
    assert "no memory isolation" in form.errors["gpu_memory_gib"][0]
    assert 'value="12"' in str(form["gpu_memory_gib"])
    # The model-size presets are offered with the field.
    assert "8B parameters, FP16: ~18 GiB" in str(form["gpu_memory_gib"])


def test_a_clone_keeps_the_budget(team):
    job = make_job(team, make_flavor(**H100), gpu_memory_gib=18)
    assert clone_initial(job)["gpu_memory_gib"] == 18


# --- MPS ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["training", "inference"])
def test_an_mps_job_gets_its_shares_limits_as_the_device_plugin_sets_them(team, kind):
    mps = make_flavor(**L4_MPS)
    fields = dict(port=8000, min_replicas=1, max_replicas=2) if kind == "inference" else {}
    job = make_job(team, mps, kind=kind, gpu_memory_gib=5, **fields)
    for container in containers(rendered(job)):
        env = env_of(container)
        assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=6144M"
        assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
        assert container["resources"]["limits"]["nvidia.com/gpu.shared"] == "1"


@pytest.mark.parametrize("name", ["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "cuda_mps_active_thread_percentage",
                                  "CUDA_MPS_PIPE_DIRECTORY"])
def test_a_job_never_sets_the_mps_variables_itself(team, name):
    errors = errors_of(build_job(team, make_flavor(**L4_MPS), env={name: "0=24G"}))
    assert "the platform sets the share's limits" in errors["env"][0]


def test_mps_gives_one_share_per_pod(team):
    errors = errors_of(build_job(team, make_flavor(**L4_MPS), gpus_per_worker=2))
    assert "MPS gives each pod one share of one GPU" in errors["gpus_per_worker"][0]


# --- the network of multi-node training ------------------------------------------------------------
def test_multi_node_training_on_a_flavor_without_a_fabric_is_refused_but_one_node_runs(team):
    bare = make_flavor("bare", network_fabric="")
    assert "declares no network fabric" in errors_of(build_job(team, bare, workers=2))["workers"][0]
    assert errors_of(build_job(team, bare, workers=1)) == {}
    assert errors_of(build_job(team, bare, kind="inference", port=80, min_replicas=1, max_replicas=4)) == {}


@pytest.mark.parametrize("scheduler", [Scheduler.KUEUE, Scheduler.VOLCANO])
def test_a_multi_node_job_on_infiniband_carries_the_nccl_defaults_and_rdma_devices(team, scheduler):
    ib = make_flavor(**H100, **INFINIBAND, scheduler=scheduler)
    job = make_job(team, ib, workers=2, gpus_per_worker=8, env={"NCCL_IB_HCA": "=mlx5_3", "NCCL_DEBUG": "INFO"})
    pods = containers(rendered(job))
    assert len(pods) >= 1
    for container in pods:
        env = env_of(container)
        # The job's own values win over the flavor's defaults; debugging only when asked.
        assert env["NCCL_IB_HCA"] == "=mlx5_3" and env["NCCL_DEBUG"] == "INFO"
        assert [e["name"] for e in container["env"]].count("NCCL_IB_HCA") == 1
        assert env["NCCL_SOCKET_IFNAME"] == "eth0" and env["NCCL_NET_GDR_LEVEL"] == "PHB"
        assert env["NCCL_IB_DISABLE"] == "0"
        for side in ("requests", "limits"):
            assert container["resources"][side]["rdma/hca"] == "1"
        assert "add" not in container["securityContext"]["capabilities"]


def test_nccl_debug_is_never_set_unless_asked(team):
    job = make_job(team, make_flavor(**H100, **INFINIBAND), workers=2)
    for container in containers(rendered(job)):
        assert "NCCL_DEBUG" not in env_of(container)


def test_a_single_worker_gets_no_nccl_defaults_nor_rdma_devices(team):
    job = make_job(team, make_flavor(**H100, **INFINIBAND), workers=1)
    [container] = containers(rendered(job))
    assert not any(name.startswith("NCCL_") for name in env_of(container))
    assert "rdma/hca" not in container["resources"]["limits"]


def test_a_tcp_flavor_keeps_nccl_on_sockets(team):
    job = make_job(team, make_flavor(**H100, network_fabric="tcp", nccl_socket_ifname="eth0"), workers=3)
    for container in containers(rendered(job)):
        env = env_of(container)
        assert env["NCCL_IB_DISABLE"] == "1" and env["NCCL_SOCKET_IFNAME"] == "eth0"
        assert set(container["resources"]["limits"]) == {"nvidia.com/gpu", "memory", EPHEMERAL_STORAGE}  # no RDMA device


def test_the_team_queue_covers_the_rdma_devices_its_multi_node_jobs_ask_for(team):
    make_quota(team, make_flavor(**H100, **INFINIBAND), nominal_gpus=16)
    [queue] = [o for o in render_team_quotas(team, list(Quota.objects.of_team(team))) if o["kind"] == "ClusterQueue"]
    validate(queue)
    [group] = queue["spec"]["resourceGroups"]
    assert "rdma/hca" in group["coveredResources"]
    assert {"name": "rdma/hca", "nominalQuota": "16"} in group["flavors"][0]["resources"]


def test_the_team_volcano_queue_has_capability_for_the_rdma_devices(team):
    # A Volcano Queue without a resource in its capability gives it none (volcano-sh/volcano#3204).
    make_quota(team, make_flavor(**H100, **INFINIBAND, scheduler=Scheduler.VOLCANO), nominal_gpus=8)
    [queue] = [o for o in render_team_quotas(team, list(Quota.objects.of_team(team))) if o["kind"] == "Queue"]
    validate(queue)
    assert queue["spec"]["capability"]["rdma/hca"] == "8" and queue["spec"]["deserved"]["rdma/hca"] == "8"


def test_the_forms_flavor_choices_say_what_memory_a_share_or_slice_brings(team):
    member = make_user()
    team.memberships.create(user=member, role="member")
    for fields in (T4_TIME_SLICED, MIG, H100):
        make_flavor(**fields)
    labels = [label for _, label in JobForm(user=member).fields["flavor"].choices]
    assert "t4-shared · 16 GPUs/node · 4 GiB of GPU memory each · no quota" in labels
    assert "mig-1g-10gb · 14 GPUs/node · 10 GiB of GPU memory each · no quota" in labels
    assert "h100 · 8 GPUs/node · no quota" in labels
