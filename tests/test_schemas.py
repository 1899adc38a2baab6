"""The schema checks used by the renderer tests reject what a strict API server would."""

import kubernetes_validate
import pytest
from jsonschema import ValidationError

from .schemas import SHARED_CRDS, crd_validators, validate

CLUSTER_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
    "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]},
}


def test_a_valid_cluster_queue_passes():
    assert "clusterqueues" in validate(CLUSTER_QUEUE)


def test_an_unknown_crd_field_is_rejected():
    bad = {**CLUSTER_QUEUE, "spec": {**CLUSTER_QUEUE["spec"], "cohort": "research"}}  # v1beta1 spelling
    with pytest.raises(ValidationError, match="'cohort' was unexpected"):
        validate(bad)


def test_a_wrong_enum_value_is_rejected():
    bad = {**CLUSTER_QUEUE, "spec": {**CLUSTER_QUEUE["spec"], "queueingStrategy": "Random"}}
    with pytest.raises(ValidationError, match="Random"):
        validate(bad)


def test_an_unknown_core_field_is_rejected():
    with pytest.raises(kubernetes_validate.ValidationError):
        validate({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}, "automount": False})


def test_a_bad_field_in_a_volcano_pod_template_is_rejected():
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"tasks": [{"name": "t", "replicas": 1, "template": {"spec": {
               "containers": [{"name": "c", "image": "i", "privileged": True}]}}}]}}
    with pytest.raises((ValidationError, kubernetes_validate.ValidationError), match="privileged"):
        validate(job)


def test_kueue_schemas_come_from_the_module_the_local_cluster_runs_and_the_reference_copy():
    sources = [path for path, _ in crd_validators("kueue.x-k8s.io", "v1beta2", "ClusterQueue")]
    assert any("sigs.k8s.io/kueue@" in s for s in sources), sources
    if SHARED_CRDS.is_dir():
        assert any(s.startswith(str(SHARED_CRDS)) for s in sources), sources


def test_bad_label_values_are_rejected():
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"k": "x" * 64}}}
    with pytest.raises(AssertionError):
        validate(obj)


TRAIN_JOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tj"},
    "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}},
}
JOB_SET = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
    "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}}]},
}
LEADER_WORKER_SET = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "lws"},
    "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
        "containers": [{"name": "c", "image": "i"}]}}}},
}


@pytest.mark.parametrize("obj", [TRAIN_JOB, JOB_SET, LEADER_WORKER_SET], ids=lambda o: o["kind"])
def test_trainer_jobset_and_lws_objects_validate_against_their_modules_crds(obj):
    checked = validate(obj)
    assert "@" in checked, checked  # a module directory (name@version), not only a reference copy


@pytest.mark.parametrize("obj", [TRAIN_JOB, JOB_SET, LEADER_WORKER_SET], ids=lambda o: o["kind"])
def test_an_unknown_field_in_a_trainer_jobset_or_lws_spec_is_rejected(obj):
    with pytest.raises(ValidationError, match="'bogus' was unexpected"):
        validate({**obj, "spec": {**obj["spec"], "bogus": 1}})
