"""The security invariants every rendered pod template must keep, whatever the user typed."""

from jobs.manifests import pod_templates_of
from tenants.manifests import WORKLOAD_SERVICE_ACCOUNT
from workloads import trainer

FORBIDDEN_POD_FIELDS = ("hostNetwork", "hostPID", "hostIPC")


def assert_hardened(objects: list[dict], job) -> int:
    """Check every pod template in ``objects``; return how many were checked."""
    checked = 0
    for obj in objects:
        assert obj["metadata"].get("namespace") in (None, job.team.namespace_name), obj["metadata"]
        for template in pod_templates_of(obj):
            spec = template["spec"]
            assert spec["serviceAccountName"] == WORKLOAD_SERVICE_ACCOUNT
            assert spec["automountServiceAccountToken"] is False
            assert all(spec.get(field) in (None, False) for field in FORBIDDEN_POD_FIELDS)
            assert spec["securityContext"]["runAsNonRoot"] is True
            assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
            assert all("hostPath" not in volume for volume in spec.get("volumes", []))
            assert spec.get("nodeSelector", {}) == job.flavor.node_labels
            assert spec.get("tolerations", []) == job.flavor.tolerations
            for container in spec["containers"] + spec.get("initContainers", []):
                ctx = container["securityContext"]
                assert ctx["allowPrivilegeEscalation"] is False
                assert ctx.get("privileged") is False
                assert ctx["runAsNonRoot"] is True
                assert ctx["capabilities"] == {"drop": ["ALL"]}
                assert "add" not in ctx["capabilities"]
                assert container["image"] == job.image
            checked += 1
        if (obj["apiVersion"], obj["kind"]) == trainer.TRAIN_JOB:
            checked += _train_job_hardened(obj, job)
    return checked


def _train_job_hardened(obj: dict, job) -> int:
    """A TrainJob's pods get what its runtime patch sets (Trainer's PodSpecPatch: no image, no
    automountServiceAccountToken; the image is the trainer's and the workload ServiceAccount
    mounts no token): the same rules on what it can carry."""
    assert obj["spec"]["trainer"]["image"] == job.image
    spec = trainer.pod_template_of(obj)["spec"]
    assert spec["serviceAccountName"] == WORKLOAD_SERVICE_ACCOUNT
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert all("hostPath" not in volume for volume in spec.get("volumes", []))
    assert spec.get("nodeSelector", {}) == job.flavor.node_labels
    assert spec.get("tolerations", []) == job.flavor.tolerations
    [node] = spec["containers"]
    ctx = node["securityContext"]
    assert node["name"] == trainer.NODE_STEP
    assert ctx["allowPrivilegeEscalation"] is False and ctx.get("privileged") is False
    assert ctx["runAsNonRoot"] is True and ctx["capabilities"] == {"drop": ["ALL"]}
    return 1
