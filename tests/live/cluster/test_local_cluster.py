"""Acceptance tests of the local GPU cluster (deploy/local-cluster): the real control plane,
the fake GPU nodes, Kueue and Volcano, and Kubernetes' own quota and RBAC enforcement.

Every test polls with a deadline; objects live in unique namespaces / names and are removed.
"""

from __future__ import annotations

import uuid

import pytest
from kubernetes import client

from deploy.stack import components

from ...support.cluster import stays_true, wait_until

pytestmark = pytest.mark.cluster

GPU = "nvidia.com/gpu"
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}

# the fake nodes (deploy/local-cluster/config/nodes.yaml): name -> (pool, product, resources)
EXPECTED_NODES = {
    **{
        f"h100-{i}": ("h100", "NVIDIA-H100-80GB-HBM3", {GPU: "8", "rdma/hca": "1k", "cpu": "96", "memory": "1Ti"})
        for i in range(4)
    },
    **{
        f"a100-{i}": ("a100", "NVIDIA-A100-SXM4-80GB", {GPU: "8", "cpu": "64", "memory": "512Gi"})
        for i in range(2)
    },
    "mig-0": (
        "mig",
        "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
        {"nvidia.com/mig-1g.10gb": "14", "cpu": "64", "memory": "512Gi"},
    ),
    "ts-0": ("timesliced", "Tesla-T4-SHARED", {GPU: "16", "cpu": "32", "memory": "128Gi"}),
    "mps-0": ("mps", "NVIDIA-L4-SHARED", {"nvidia.com/gpu.shared": "16", "cpu": "32", "memory": "128Gi"}),
}

KUEUE = ("kueue.x-k8s.io", "v1beta2")
VOLCANO_BATCH = ("batch.volcano.sh", "v1alpha1")
VOLCANO_SCHEDULING = ("scheduling.volcano.sh", "v1beta1")


def suffix():
    return uuid.uuid4().hex[:6]


def condition(obj, kind):
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return None


def gpu_container(gpus, resource=GPU):
    return {
        "name": "main",
        "image": "registry.invalid/gpuplatform/fake:latest",
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", resource: str(gpus)},
            "limits": {resource: str(gpus)},
        },
    }


# ---------------------------------------------------------------- API server and nodes


def test_api_server_reports_its_real_version(api_client):
    version = client.VersionApi(api_client).get_code()
    assert version.git_version == components.get("kubernetes").version
    assert (version.major, version.minor) == ("1", "36")


def test_fake_gpu_nodes_are_ready_with_capacity_and_taints(api_client):
    core = client.CoreV1Api(api_client)

    def all_ready():
        nodes = {n.metadata.name: n for n in core.list_node(label_selector="type=kwok").items}
        ready = {
            name
            for name, node in nodes.items()
            if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
        }
        return nodes if set(EXPECTED_NODES) | {"cpu-0"} <= ready else None

    nodes = wait_until(all_ready, timeout=60, message="every fake node Ready")
    for name, (pool, product, resources) in EXPECTED_NODES.items():
        node = nodes[name]
        assert node.metadata.labels["gpuplatform.io/pool"] == pool
        assert node.metadata.labels["nvidia.com/gpu.product"] == product
        assert node.metadata.annotations["kwok.x-k8s.io/node"] == "fake"
        for resource, quantity in resources.items():
            assert node.status.capacity[resource] == quantity, (name, resource)
            assert node.status.allocatable[resource] == quantity, (name, resource)
        taints = [(t.key, t.value, t.effect) for t in node.spec.taints or []]
        assert (GPU, "present", "NoSchedule") in taints, name
    assert nodes["ts-0"].metadata.labels["nvidia.com/gpu.replicas"] == "4"
    # Labelled as the NVIDIA device plugin labels a node shared through MPS.
    mps = nodes["mps-0"].metadata.labels
    assert (mps["nvidia.com/gpu.sharing-strategy"], mps["nvidia.com/mps.capable"], mps["nvidia.com/gpu.replicas"]) \
        == ("mps", "true", "4")
    # Racked for topology-aware placement (docs/topology.md): two racks of H100s in one block.
    racks = {name: (nodes[name].metadata.labels.get("gpuplatform.io/block"),
                    nodes[name].metadata.labels.get("gpuplatform.io/rack")) for name in nodes if name[:4] in ("h100", "a100")}
    assert racks == {"h100-0": ("block-a", "rack-a1"), "h100-1": ("block-a", "rack-a1"),
                     "h100-2": ("block-a", "rack-a2"), "h100-3": ("block-a", "rack-a2"),
                     "a100-0": ("block-b", "rack-b1"), "a100-1": ("block-b", "rack-b1")}
    cpu_node = nodes["cpu-0"]
    assert not cpu_node.spec.taints
    assert cpu_node.status.capacity["cpu"] == "16"
    assert GPU not in (cpu_node.status.capacity or {})


def test_fake_pods_follow_the_lifecycle_annotations(api_client, make_namespace):
    """Job pods succeed after gpuplatform.io/fake-duration, or fail when fake-outcome=fail;
    Deployment pods keep running."""
    namespace = make_namespace("lifecycle")
    batch = client.BatchV1Api(api_client)
    apps = client.AppsV1Api(api_client)
    core = client.CoreV1Api(api_client)

    def job(name, annotations):
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"annotations": annotations},
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "registry.invalid/fake"}]},
            }},
        }

    batch.create_namespaced_job(namespace, job("ok", {"gpuplatform.io/fake-duration": "1s"}))
    batch.create_namespaced_job(namespace, job("bad", {
        "gpuplatform.io/fake-duration": "1s", "gpuplatform.io/fake-outcome": "fail"}))
    apps.create_namespaced_deployment(namespace, {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "registry.invalid/fake"}]},
        }},
    })

    def job_condition(name, kind):
        status = batch.read_namespaced_job(name, namespace).status
        return any(c.type == kind and c.status == "True" for c in status.conditions or [])

    wait_until(lambda: job_condition("ok", "Complete"), timeout=60, message="Job ok Complete")
    wait_until(lambda: job_condition("bad", "Failed"), timeout=60, message="Job bad Failed")
    failed = core.list_namespaced_pod(namespace, label_selector="job-name=bad").items[0]
    assert failed.status.phase == "Failed"
    assert failed.status.container_statuses[0].state.terminated.exit_code == 1

    def web_running():
        pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
        return pods and all(p.status.phase == "Running" for p in pods)

    wait_until(web_running, timeout=30, message="Deployment pod Running")
    stays_true(web_running, seconds=2, message="Deployment pod Running")


# ---------------------------------------------------------------- Kueue


@pytest.fixture
def kueue_queue(api_client, make_namespace):
    """ResourceFlavor (H100 pool) + ClusterQueue (16 GPUs) + LocalQueue, all Active."""
    custom = client.CustomObjectsApi(api_client)
    group, version = KUEUE
    namespace = make_namespace("kueue")
    name = f"test-{suffix()}"
    custom.create_cluster_custom_object(group, version, "resourceflavors", {
        "apiVersion": f"{group}/{version}",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": {"gpuplatform.io/pool": "h100"}, "tolerations": [GPU_TOLERATION]},
    })
    custom.create_cluster_custom_object(group, version, "clusterqueues", {
        "apiVersion": f"{group}/{version}",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": f"cohort-{name}",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "resourceGroups": [{
                "coveredResources": ["cpu", "memory", GPU],
                "flavors": [{
                    "name": name,
                    "resources": [
                        {"name": "cpu", "nominalQuota": "64"},
                        {"name": "memory", "nominalQuota": "256Gi"},
                        {"name": GPU, "nominalQuota": "16"},
                    ],
                }],
            }],
        },
    })
    custom.create_namespaced_custom_object(group, version, namespace, "localqueues", {
        "apiVersion": f"{group}/{version}",
        "kind": "LocalQueue",
        "metadata": {"name": "team", "namespace": namespace},
        "spec": {"clusterQueue": name},
    })

    def active(get):
        cond = condition(get(), "Active")
        return cond and cond["status"] == "True"

    wait_until(
        lambda: active(lambda: custom.get_cluster_custom_object(group, version, "clusterqueues", name)),
        timeout=30, message="ClusterQueue Active",
    )
    wait_until(
        lambda: active(
            lambda: custom.get_namespaced_custom_object(group, version, namespace, "localqueues", "team")
        ),
        timeout=30, message="LocalQueue Active",
    )
    yield namespace, "team"
    batch = client.BatchV1Api(api_client)
    for job in batch.list_namespaced_job(namespace).items:
        batch.delete_namespaced_job(job.metadata.name, namespace, propagation_policy="Background")
    for plural in ("clusterqueues", "resourceflavors"):
        try:
            custom.delete_cluster_custom_object(group, version, plural, name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


def queued_job(name, queue, gpus, pods=1, duration="3s"):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "suspend": True,
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"gpuplatform.io/fake-duration": duration}},
                "spec": {"restartPolicy": "Never", "containers": [gpu_container(gpus)]},
            },
        },
    }


def workload_of(custom, namespace, job_name):
    group, version = KUEUE
    for wl in custom.list_namespaced_custom_object(group, version, namespace, "workloads")["items"]:
        if any(ref.get("name") == job_name for ref in wl["metadata"].get("ownerReferences", [])):
            return wl
    return None


def test_kueue_admits_a_queued_job_onto_h100_nodes(api_client, kueue_queue):
    namespace, queue = kueue_queue
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    batch.create_namespaced_job(namespace, queued_job("train", queue, gpus=8, pods=2, duration="3s"))

    wl = wait_until(
        lambda: (w := workload_of(custom, namespace, "train")) and condition(w, "Admitted")
        and condition(w, "Admitted")["status"] == "True" and w,
        timeout=60, message="the Job's Workload Admitted",
    )
    assert condition(wl, "QuotaReserved")["status"] == "True"
    wait_until(lambda: batch.read_namespaced_job("train", namespace).spec.suspend is False,
               timeout=30, message="Job unsuspended by Kueue")

    def pods_running_or_done():
        pods = core.list_namespaced_pod(namespace, label_selector="job-name=train").items
        placed = [p for p in pods if p.spec.node_name and p.status.phase in ("Running", "Succeeded")]
        return pods if len(placed) == 2 else None

    pods = wait_until(pods_running_or_done, timeout=60, message="both pods running")
    for pod in pods:
        assert pod.spec.node_name.startswith("h100-"), pod.spec.node_name
        # injected by Kueue from the ResourceFlavor
        assert pod.spec.node_selector.get("gpuplatform.io/pool") == "h100"
        assert any(t.key == GPU and t.operator == "Exists" for t in pod.spec.tolerations or [])
        node = core.read_node(pod.spec.node_name)
        assert node.metadata.labels["gpuplatform.io/pool"] == "h100"

    def complete():
        status = batch.read_namespaced_job("train", namespace).status
        return any(c.type == "Complete" and c.status == "True" for c in status.conditions or [])

    wait_until(complete, timeout=60, message="Job Complete")
    job = batch.read_namespaced_job("train", namespace)
    assert job.status.succeeded == 2


def test_kueue_keeps_an_over_quota_job_suspended(api_client, kueue_queue):
    namespace, queue = kueue_queue
    batch = client.BatchV1Api(api_client)
    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    # 3 pods x 8 GPUs = 24 > the ClusterQueue's 16
    batch.create_namespaced_job(namespace, queued_job("too-big", queue, gpus=8, pods=3))

    def pending_with_reason():
        wl = workload_of(custom, namespace, "too-big")
        cond = wl and condition(wl, "QuotaReserved")
        return cond if cond and cond["status"] == "False" and cond.get("message") else None

    cond = wait_until(pending_with_reason, timeout=60, message="QuotaReserved=False on the Workload")
    assert cond["reason"]
    assert GPU in cond["message"], cond["message"]
    stays_true(
        lambda: batch.read_namespaced_job("too-big", namespace).spec.suspend is True
        and not core.list_namespaced_pod(namespace, label_selector="job-name=too-big").items,
        seconds=3, message="Job suspended without pods",
    )


# ---------------------------------------------------------------- Volcano


@pytest.fixture
def volcano_queue(api_client):
    custom = client.CustomObjectsApi(api_client)
    group, version = VOLCANO_SCHEDULING
    name = f"test-{suffix()}"
    custom.create_cluster_custom_object(group, version, "queues", {
        "apiVersion": f"{group}/{version}",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, "reclaimable": False,
                 "capability": {"cpu": "128", "memory": "1Ti", GPU: "32"}},
    })
    wait_until(
        lambda: (custom.get_cluster_custom_object(group, version, "queues", name).get("status") or {})
        .get("state") == "Open",
        timeout=30, message="Volcano Queue Open",
    )
    yield name
    # remove the Jobs of this queue first, so the Volcano controller never sees them queue-less
    bgroup, bversion = VOLCANO_BATCH

    def jobs_in_queue():
        items = custom.list_cluster_custom_object(bgroup, bversion, "jobs")["items"]
        return [job for job in items if job["spec"].get("queue") == name]

    for job in jobs_in_queue():
        custom.delete_namespaced_custom_object(
            bgroup, bversion, job["metadata"]["namespace"], "jobs", job["metadata"]["name"],
            propagation_policy="Background",
        )
    wait_until(lambda: not jobs_in_queue(), timeout=30, message=f"Volcano Jobs of queue {name} gone")
    try:
        custom.delete_cluster_custom_object(group, version, "queues", name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise


def volcano_job(name, queue, replicas, min_available, gpus_per_pod, duration="60s"):
    group, version = VOLCANO_BATCH
    return {
        "apiVersion": f"{group}/{version}",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano",
            "queue": queue,
            "minAvailable": min_available,
            "maxRetry": 1,
            "tasks": [{
                "name": "worker",
                "replicas": replicas,
                "minAvailable": replicas,
                "template": {
                    "metadata": {"annotations": {"gpuplatform.io/fake-duration": duration}},
                    "spec": {
                        "schedulerName": "volcano",
                        "restartPolicy": "Never",
                        "nodeSelector": {"gpuplatform.io/pool": "a100"},
                        "tolerations": [GPU_TOLERATION],
                        "containers": [gpu_container(gpus_per_pod)],
                    },
                },
            }],
        },
    }


def test_volcano_runs_a_gang_of_two_on_a100_nodes(api_client, make_namespace, volcano_queue):
    namespace = make_namespace("volcano")
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    group, version = VOLCANO_BATCH
    custom.create_namespaced_custom_object(
        group, version, namespace, "jobs", volcano_job("gang", volcano_queue, 2, 2, gpus_per_pod=8))

    def both_running():
        pods = core.list_namespaced_pod(namespace).items
        running = [p for p in pods if p.spec.node_name and p.status.phase == "Running"]
        return running if len(running) == 2 else None

    pods = wait_until(both_running, timeout=90, message="both gang pods Running")
    assert sorted(p.spec.node_name for p in pods) == ["a100-0", "a100-1"]
    assert all(p.spec.scheduler_name == "volcano" for p in pods)
    wait_until(
        lambda: (custom.get_namespaced_custom_object(group, version, namespace, "jobs", "gang")
                 .get("status") or {}).get("state", {}).get("phase") == "Running",
        timeout=60, message="Volcano Job Running",
    )


def test_volcano_binds_nothing_of_a_gang_that_cannot_fit(api_client, make_namespace, volcano_queue):
    namespace = make_namespace("volcano")
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    group, version = VOLCANO_BATCH
    # 3 pods x 8 GPUs on the a100 pool, which has 2 nodes x 8 GPUs: the gang can never fit
    custom.create_namespaced_custom_object(
        group, version, namespace, "jobs", volcano_job("too-big", volcano_queue, 3, 3, gpus_per_pod=8))

    sgroup, sversion = VOLCANO_SCHEDULING

    def unschedulable():
        groups = custom.list_namespaced_custom_object(sgroup, sversion, namespace, "podgroups")["items"]
        for pg in groups:
            cond = condition(pg, "Unschedulable")
            if cond and cond.get("status") == "True":
                return pg
        return None

    wait_until(unschedulable, timeout=60, message="PodGroup Unschedulable")
    stays_true(
        lambda: not [p for p in core.list_namespaced_pod(namespace).items if p.spec.node_name],
        seconds=5, message="no pod of the gang bound",
    )


# ---------------------------------------------------------------- Kubernetes itself


def test_resource_quota_rejects_a_pod_over_the_gpu_limit(api_client, make_namespace):
    namespace = make_namespace("quota")
    core = client.CoreV1Api(api_client)
    core.create_namespaced_resource_quota(namespace, {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus"},
        "spec": {"hard": {f"requests.{GPU}": "4"}},
    })
    def quota_computed():
        status = core.read_namespaced_resource_quota("gpus", namespace).status
        return (status.hard or {}).get(f"requests.{GPU}")

    wait_until(quota_computed, timeout=30, message="quota status computed")

    def pod(name, gpus):
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "tolerations": [GPU_TOLERATION],
                     "containers": [gpu_container(gpus)]},
        }

    with pytest.raises(client.ApiException) as excinfo:
        core.create_namespaced_pod(namespace, pod("too-many", 8))
    assert excinfo.value.status == 403
    assert "exceeded quota" in excinfo.value.body
    core.create_namespaced_pod(namespace, pod("fits", 4))


def test_rbac_confines_a_service_account_to_its_namespace(api_client, kube_config, make_namespace):
    own, other = make_namespace("rbac-own"), make_namespace("rbac-other")
    core = client.CoreV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    core.create_namespaced_service_account(own, {"metadata": {"name": "runner"}})
    rbac.create_namespaced_role(own, {
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
    })
    rbac.create_namespaced_role_binding(own, {
        "metadata": {"name": "runner-reads-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "runner", "namespace": own}],
    })
    token = core.create_namespaced_service_account_token(
        "runner", own, {"spec": {"audiences": [], "expirationSeconds": 600}}).status.token

    sa_config = client.Configuration()
    sa_config.host = kube_config.host
    sa_config.ssl_ca_cert = kube_config.ssl_ca_cert
    sa_config.api_key = {"authorization": f"Bearer {token}"}
    with client.ApiClient(sa_config) as sa_api:
        sa_core = client.CoreV1Api(sa_api)
        # RBAC caches may take a moment to see the new binding
        wait_until(lambda: sa_core.list_namespaced_pod(own) is not None, timeout=15,
                   message="the ServiceAccount may list pods in its namespace")
        with pytest.raises(client.ApiException) as excinfo:
            sa_core.list_namespaced_pod(other)
        assert excinfo.value.status == 403
        assert f"system:serviceaccount:{own}:runner" in excinfo.value.body
