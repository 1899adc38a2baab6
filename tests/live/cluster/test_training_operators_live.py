"""The training operators on the local cluster (deploy/local-cluster/operators.sh; issue 46):
a JobSet labelled with a namespace's Kueue queue is admitted by Kueue as one workload and its
pods run on the fake GPU nodes; the Trainer serves the runtimes the platform offers.

The namespace is a queue's own, not a platform team's: the team admission policy admits the
platform's kinds only (`tenants/admission.py`, derived from the kinds), and refuses what a JobSet
makes there (its headless Service, owned by the JobSet) until the TrainJob kind declares it."""

import uuid

import pytest

from workloads.kueue import QUEUE_LABEL

from ...support.cluster import TOLERATION, wait_until

pytestmark = pytest.mark.cluster

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
KUEUE = "kueue.x-k8s.io/v1beta2"
WORKLOAD = (KUEUE, "Workload")


@pytest.fixture
def queue(live, make_namespace):
    """A namespace whose LocalQueue `team` feeds a ClusterQueue of 8 H100 GPUs (its own flavor)."""
    namespace, name = make_namespace("jobset"), f"jobset-{uuid.uuid4().hex[:6]}"
    quota = [{"name": "cpu", "nominalQuota": "16"}, {"name": "memory", "nominalQuota": "64Gi"},
             {"name": "nvidia.com/gpu", "nominalQuota": "8"}]
    live.apply([
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name},
         "spec": {"nodeLabels": {"gpuplatform.io/pool": "h100"}, "tolerations": TOLERATION}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
         "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                  "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                                      "flavors": [{"name": name, "resources": quota}]}]}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "team", "namespace": namespace},
         "spec": {"clusterQueue": name}},
    ])
    yield namespace, "team"
    for kind in ("ClusterQueue", "ResourceFlavor"):
        live.delete(KUEUE, kind, name)


def jobset(name: str, queue: str, replicas: int, gpus: int) -> dict:
    """A JobSet of `replicas` one-pod Jobs of `gpus` GPUs each, queued by its label."""
    pod = {"metadata": {"annotations": {"gpuplatform.io/fake-duration": "300s"}},
           "spec": {"restartPolicy": "Never", "containers": [{
               "name": "node", "image": "registry.invalid/gpuplatform/fake:latest",
               "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                             "limits": {"nvidia.com/gpu": str(gpus)}}}]}}
    return {"apiVersion": JOBSET[0], "kind": JOBSET[1],
            "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
            "spec": {"replicatedJobs": [{"name": "node", "replicas": replicas, "template": {
                "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": pod}}}]}}


def admitted(live, namespace: str, name: str) -> dict | None:
    for workload in live.list(*WORKLOAD, namespace=namespace):
        owners = workload["metadata"].get("ownerReferences") or []
        conditions = {c["type"]: c["status"] for c in (workload.get("status") or {}).get("conditions") or []}
        if any(o["kind"] == "JobSet" and o["name"] == name for o in owners) and conditions.get("Admitted") == "True":
            return workload
    return None


def test_a_jobset_with_a_queue_label_is_admitted_and_runs_on_kwok_nodes(live, queue):
    namespace, local_queue = queue
    name = f"js-{uuid.uuid4().hex[:6]}"
    obj = jobset(name, local_queue, replicas=2, gpus=2)
    obj["metadata"]["namespace"] = namespace
    live.apply([obj])
    try:
        workload = wait_until(lambda: admitted(live, namespace, name), timeout=90,
                              message=f"the Workload of JobSet {name} admitted by Kueue")
        assert sum(p["count"] for p in workload["spec"]["podSets"]) == 2

        def running():
            pods = live.list("v1", "Pod", namespace=namespace, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
            placed = [p for p in pods if p["spec"].get("nodeName") and p["status"].get("phase") == "Running"]
            return placed if len(placed) == 2 else None

        pods = wait_until(running, timeout=90, message=f"both pods of JobSet {name} running")
        for pod in pods:
            assert pod["spec"]["nodeName"].startswith("h100-"), pod["spec"]["nodeName"]
            node = live.get("v1", "Node", pod["spec"]["nodeName"])
            assert node["metadata"]["labels"].get("type") == "kwok"
    finally:
        live.delete(*JOBSET, name, namespace=namespace)
        wait_until(lambda: not live.list("v1", "Pod", namespace=namespace,
                                         label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"),
                   timeout=120, message=f"the pods of JobSet {name} gone")


def test_the_trainer_serves_the_torch_distributed_runtime(live):
    runtime = live.get("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "torch-distributed")
    assert runtime is not None
    assert "torch" in runtime["spec"]["mlPolicy"]
    [step] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert step["name"] == "node"
