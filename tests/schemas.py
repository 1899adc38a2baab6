"""Validate rendered objects the way a strict API server would.

Core kinds go through ``kubernetes-validate`` (the Kubernetes OpenAPI schemas, unknown
fields rejected). Custom kinds (Kueue, Volcano, Ray, JobSet, TrainJob, ...) go through their CRDs' ``openAPIV3Schema``,
made strict the way ``fieldValidation=Strict`` is: an object schema with properties and
no ``x-kubernetes-preserve-unknown-fields`` rejects fields it does not list.

CRDs come from ``../shared/crds`` (reference copies) and from the Go modules the local cluster
builds (Kueue, Volcano, KEDA, KubeRay, JobSet, Kubeflow Trainer, LeaderWorkerSet; downloaded here
when missing), so a clone without ``../shared`` still validates. Every source found is used: an object must satisfy both
the reference version and the version the local cluster runs.
"""

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

from cluster.names import is_dns1123_label, is_label_value, is_qualified_name
from deploy.stack.components import jobset, keda, kuberay, kueue, lws, trainer, volcano

KUBERNETES_VERSION = "1.36"
REPO = Path(__file__).resolve().parent.parent
SHARED_CRDS = REPO.parent / "shared" / "crds"
# The versions the local cluster builds (deploy/stack/components/); their module archives carry the CRD files.
CRD_MODULES = {
    "kueue.x-k8s.io": (kueue.COMPONENT, "config/components/crd/bases"),
    "batch.volcano.sh": (volcano.COMPONENT, "config/crd/volcano/bases"),
    "scheduling.volcano.sh": (volcano.COMPONENT, "config/crd/volcano/bases"),
    "keda.sh": (keda.COMPONENT, "config/crd/bases"),
    "ray.io": (kuberay.COMPONENT, "config/crd/bases"),  # the KubeRay operator's (docs/ray.md)
    "jobset.x-k8s.io": (jobset.COMPONENT, "config/components/crd/bases"),
    "trainer.kubeflow.org": (trainer.COMPONENT, "manifests/base/crds"),
    "leaderworkerset.x-k8s.io": (lws.COMPONENT, "config/crd/bases"),
}
CORE_GROUPS = {"", "apps", "batch", "autoscaling", "networking.k8s.io", "policy", "rbac.authorization.k8s.io",
               "admissionregistration.k8s.io"}


def _module_dir(module: str, version: str) -> Path | None:
    go = shutil.which("go")
    if go is None:
        return None
    modcache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip()
    escaped = "".join(f"!{c.lower()}" if c.isupper() else c for c in module)
    path = Path(modcache) / f"{escaped}@{version}"
    if not path.is_dir():
        result = subprocess.run([go, "mod", "download", "-json", f"{module}@{version}"],
                                capture_output=True, text=True, cwd="/", env={**os.environ, "GOFLAGS": "-mod=mod"})
        if result.returncode != 0:
            return None
        path = Path(json.loads(result.stdout)["Dir"])
    return path


def _crd_files(group: str) -> list[Path]:
    files = []
    if SHARED_CRDS.is_dir():
        files += sorted(SHARED_CRDS.glob(f"*/{group}_*.yaml"))
    component, folder = CRD_MODULES[group]
    module_dir = _module_dir(component.module, component.version)
    if module_dir is not None:
        files += sorted((module_dir / folder).glob(f"{group}_*.yaml"))
    return files


def _strict(schema):
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


@functools.cache
def _crds(group: str) -> tuple[tuple[Path, dict], ...]:
    return tuple((path, yaml.load(path.read_text(), Loader=_Loader)) for path in _crd_files(group))


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def crd_validators(group: str, version: str, kind: str) -> tuple:
    """One (source, validator) pair per CRD source that defines ``kind`` at ``version``."""
    validators = []
    for path, crd in _crds(group):
        if crd["spec"]["names"]["kind"] != kind:
            continue
        for served in crd["spec"]["versions"]:
            if served["name"] == version:
                schema = _strict(served["schema"]["openAPIV3Schema"])
                validators.append((str(path), jsonschema.Draft7Validator(schema)))
    return tuple(validators)


def _check_metadata(obj: dict) -> None:
    meta = obj["metadata"]
    assert is_dns1123_label(meta["name"]) or obj["kind"] in {"Role", "RoleBinding"}, meta["name"]
    assert len(meta["name"]) <= 63, meta["name"]
    if "namespace" in meta:
        assert is_dns1123_label(meta["namespace"]), meta["namespace"]
    for key, value in meta.get("labels", {}).items():
        assert is_qualified_name(key), key
        assert is_label_value(value), f"{key}={value!r}"


def validate(obj: dict) -> str:
    """Raise if ``obj`` is not valid for its kind; return what it was checked against."""
    _check_metadata(obj)
    group, _, version = obj["apiVersion"].rpartition("/")
    if group in CORE_GROUPS:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        return f"kubernetes {KUBERNETES_VERSION}"
    validators = crd_validators(group, version, obj["kind"])
    assert validators, f"no CRD schema found for {obj['kind']} {obj['apiVersion']}"
    for _, validator in validators:
        validator.validate(obj)
    if obj["kind"] == "Job" and group == "batch.volcano.sh":
        # The Volcano Job CRD leaves pod templates loosely typed; check them as core objects.
        for task in obj["spec"]["tasks"]:
            kubernetes_validate.validate(
                {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": task["name"]},
                 "template": task["template"]}, KUBERNETES_VERSION, strict=True)
    if group == "ray.io":
        # And a Ray object's pod templates (head and worker groups) as core objects too.
        cluster = obj["spec"].get("rayClusterSpec", obj["spec"])
        for number, group_spec in enumerate([cluster["headGroupSpec"], *cluster.get("workerGroupSpecs", [])]):
            kubernetes_validate.validate(
                {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"group-{number}"},
                 "template": group_spec["template"]}, KUBERNETES_VERSION, strict=True)
    return ", ".join(path for path, _ in validators)

