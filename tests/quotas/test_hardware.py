"""A flavor's hardware: its sharing mode and what one unit of quota means, and the network
multi-node jobs train across. Bad combinations are field errors (``clean``) and, where a
database can say it, constraints; quota managers read one unit in plain words in the admin,
the console and the API."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.urls import reverse

from quotas.models import GpuFlavor

from ..builders import make_flavor, make_quota, make_team, make_user

pytestmark = pytest.mark.django_db

T4_TIME_SLICED = dict(name="t4-shared", resource_name="nvidia.com/gpu", gpu_model="T4", gpu_memory_gib=16,
                      gpus_per_node=16, gpu_sharing="time-slicing", replicas_per_gpu=4)
L4_MPS = dict(name="l4-mps", resource_name="nvidia.com/gpu.shared", gpu_model="L4", gpu_memory_gib=24,
              gpus_per_node=16, gpu_sharing="mps", replicas_per_gpu=4)
MIG = dict(name="mig-1g-10gb", resource_name="nvidia.com/mig-1g.10gb", gpu_model="A100 80GB", gpu_memory_gib=10,
           gpus_per_node=14, gpu_sharing="mig")
H100 = dict(name="h100", resource_name="nvidia.com/gpu", gpu_model="H100 80GB", gpu_memory_gib=80, gpus_per_node=8)
INFINIBAND = dict(network_fabric="infiniband", nccl_ib_hca="mlx5_0:1,mlx5_1:1", nccl_net_gdr_level="PHB",
                  nccl_socket_ifname="eth0", rdma_resources={"rdma/hca": 1})


def errors_of(**fields) -> dict:
    try:
        GpuFlavor(**fields).full_clean()
    except ValidationError as err:
        return err.message_dict
    return {}


@pytest.mark.parametrize("fields", [T4_TIME_SLICED, L4_MPS, MIG, H100, dict(H100, **INFINIBAND),
                                    dict(H100, network_fabric="roce", nccl_ib_gid_index=3, rdma_resources={"rdma/roce": 2}),
                                    dict(T4_TIME_SLICED, network_fabric="tcp", nccl_socket_ifname="^docker0,lo")],
                         ids=["time-sliced", "mps", "mig", "exclusive", "infiniband", "roce", "tcp"])
def test_well_declared_hardware_is_valid(fields):
    assert errors_of(**fields) == {}


@pytest.mark.parametrize("fields, field, words", [
    (dict(T4_TIME_SLICED, replicas_per_gpu=None), "replicas_per_gpu", "how many pods share one GPU"),
    (dict(L4_MPS, replicas_per_gpu=None), "replicas_per_gpu", "how many pods share one GPU"),
    (dict(H100, replicas_per_gpu=4), "replicas_per_gpu", "Only time-sliced and MPS"),
    (dict(T4_TIME_SLICED, replicas_per_gpu=1), "replicas_per_gpu", "greater than or equal to 2"),
    (dict(L4_MPS, replicas_per_gpu=49), "replicas_per_gpu", "at most 48 clients"),
    (dict(L4_MPS, resource_name="nvidia.com/mig-1g.10gb"), "resource_name", "full GPUs only"),
    (dict(MIG, resource_name="nvidia.com/gpu"), "resource_name", "names its profile"),
    (dict(MIG, gpu_memory_gib=80), "gpu_memory_gib", "has 10 GiB; give 10"),
    (dict(H100, resource_name="nvidia.com/mig-3g.40gb", gpu_memory_gib=40), "gpu_sharing", "MIG slice"),
    (dict(H100, network_fabric="infiniband"), "rdma_resources", "never privileged"),
    (dict(H100, network_fabric="tcp", rdma_resources={"rdma/hca": 1}), "rdma_resources", "Only InfiniBand and RoCE"),
    (dict(H100, network_fabric="tcp", nccl_ib_hca="mlx5_0"), "nccl_ib_hca", "InfiniBand and RoCE flavors only"),
    (dict(H100, network_fabric="tcp", nccl_net_gdr_level="SYS"), "nccl_net_gdr_level", "InfiniBand and RoCE"),
    (dict(H100, **dict(INFINIBAND, nccl_ib_gid_index=3)), "nccl_ib_gid_index", "RoCE flavors only"),
    (dict(H100, nccl_socket_ifname="eth0"), "nccl_socket_ifname", "Declare the fabric first"),
    (dict(H100, network_fabric="tcp", nccl_socket_ifname="eth0; rm -rf /"), "nccl_socket_ifname", "as NCCL takes"),
    (dict(H100, **dict(INFINIBAND, nccl_ib_hca="mlx5 0")), "nccl_ib_hca", "as NCCL takes"),
    (dict(H100, **dict(INFINIBAND, rdma_resources={"rdma/hca": 0})), "rdma_resources", "from 1 to 64"),
    (dict(H100, **dict(INFINIBAND, rdma_resources={"nvidia.com/gpu": 1})), "rdma_resources", "not an RDMA device"),
    (dict(H100, **dict(INFINIBAND, rdma_resources=["rdma/hca"])), "rdma_resources", "mapping"),
    (dict(H100, network_fabric="ethernet"), "network_fabric", "not a valid choice"),
])
def test_hardware_that_does_not_fit_together_is_a_field_error(fields, field, words):
    errors = errors_of(**fields)
    assert field in errors, errors
    assert words in " ".join(errors[field])


@pytest.mark.parametrize("fields, unit, memory_mib", [
    (T4_TIME_SLICED, "1/4 of a T4 (16 GiB) by time-slicing: no memory isolation (plan on 4 GiB each)", 4096),
    (L4_MPS, "1/4 of a L4 (24 GiB) through MPS: at most 6 GiB of memory and 25% of the compute, enforced", 6144),
    (MIG, "One MIG 1g.10gb slice of a A100 80GB (10 GiB): its own memory and compute", 10240),
    (H100, "One whole H100 80GB (80 GiB), not shared", 81920),
    (dict(L4_MPS, replicas_per_gpu=7, gpu_memory_gib=80), "at most 11.4 GiB of memory and 14% of the compute", 11702),
])
def test_one_unit_is_said_in_plain_words(fields, unit, memory_mib):
    flavor = GpuFlavor(**fields)
    assert unit in flavor.unit_description
    assert flavor.unit_memory_mib == memory_mib


def test_an_mps_unit_carries_the_limits_the_device_plugins_daemon_sets():
    # cmd/mps-control-daemon: memory / replicas in MiB ("<MiB>M"), 100 / replicas percent of threads.
    assert GpuFlavor(**L4_MPS).mps_limits == {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=6144M",
                                              "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25"}
    assert GpuFlavor(**T4_TIME_SLICED).mps_limits == {}


@pytest.mark.parametrize("fields, env", [
    ({}, {}),
    (dict(network_fabric="tcp", nccl_socket_ifname="eth0"), {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": "1"}),
    (INFINIBAND, {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1",
                  "NCCL_NET_GDR_LEVEL": "PHB"}),
    (dict(network_fabric="roce", nccl_ib_gid_index=3, rdma_resources={"rdma/roce": 1}),
     {"NCCL_IB_DISABLE": "0", "NCCL_IB_GID_INDEX": "3"}),
])
def test_a_fabric_gives_multi_node_jobs_its_nccl_defaults_and_never_debug(fields, env):
    flavor = GpuFlavor(**H100, **fields)
    assert flavor.nccl_defaults == env
    assert "NCCL_DEBUG" not in flavor.nccl_defaults


def test_the_database_holds_replicas_to_shared_gpus_and_fabrics_to_their_choices():
    flavor = make_flavor("h100")
    with pytest.raises(IntegrityError), transaction.atomic():
        GpuFlavor.objects.filter(pk=flavor.pk).update(replicas_per_gpu=4)
    with pytest.raises(IntegrityError), transaction.atomic():
        GpuFlavor.objects.filter(pk=flavor.pk).update(network_fabric="ethernet")
    GpuFlavor.objects.filter(pk=flavor.pk).update(gpu_sharing="mps", replicas_per_gpu=4)


def test_the_flavor_api_says_what_one_unit_means_and_what_multi_node_jobs_get(client):
    make_flavor(**L4_MPS)
    make_flavor(**H100, **INFINIBAND)
    client.force_login(make_user())
    flavors = {f["name"]: f for f in client.get("/api/v1/flavors").json()["results"]}
    mps, h100 = flavors["l4-mps"], flavors["h100"]
    assert mps["gpu_sharing"] == "mps" and mps["replicas_per_gpu"] == 4 and mps["unit_memory_mib"] == 6144
    assert mps["unit"].startswith("1/4 of a L4 (24 GiB) through MPS")
    assert h100["network_fabric"] == "infiniband" and h100["rdma_resources"] == {"rdma/hca": 1}
    assert h100["nccl_env"]["NCCL_IB_HCA"] == "mlx5_0:1,mlx5_1:1"


def test_quota_managers_read_one_unit_in_the_admin_and_the_console(client):
    flavor = make_flavor(**T4_TIME_SLICED, network_fabric="tcp")
    make_quota(make_team(), flavor)
    client.force_login(make_user(quota_manager=True))
    words = "1/4 of a T4 (16 GiB) by time-slicing: no memory isolation"
    assert words in client.get(f"/admin/quotas/gpuflavor/{flavor.pk}/change/").content.decode()
    assert words in client.get("/admin/quotas/gpuflavor/").content.decode()
    assert words in client.get(reverse("console:capacity")).content.decode()


def test_the_admin_refuses_an_infiniband_flavor_without_rdma_devices_as_a_field_error(client):
    flavor = make_flavor(**H100)
    client.force_login(make_user(quota_manager=True, is_superuser=True))
    page = client.get(f"/admin/quotas/gpuflavor/{flavor.pk}/change/")
    form = page.context["adminform"].form
    data = {name: form.initial.get(name, "") for name in form.fields}
    data.update(node_labels='{"gpuplatform.io/pool": "h100"}', node_taints="[]", tolerations="[]",
                rdma_resources="{}", network_fabric="infiniband", nccl_ib_gid_index="", replicas_per_gpu="",
                cost_per_gpu_hour="")
    response = client.post(f"/admin/quotas/gpuflavor/{flavor.pk}/change/", data)
    assert response.status_code == 200
    assert "never privileged" in " ".join(response.context["adminform"].form.errors["rdma_resources"])
    flavor.refresh_from_db()
    assert flavor.network_fabric == "tcp"
