"""deploy/local-cluster/webhooks.py: an operator's webhook definitions pointed at its server on
127.0.0.1 with the cluster's CA, its pod webhooks on its own pods only."""

import base64
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def hook(name: str, path: str) -> dict:
    return {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
            "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}}}


MUTATING = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [hook("mjobset.kb.io", "/mutate-jobset-x-k8s-io-v1alpha2-jobset"),
                         hook("mpod.kb.io", "/mutate--v1-pod")]}


def run(tmp_path, *args: str, documents=(MUTATING,)) -> dict:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    done = subprocess.run([sys.executable, "-E", str(REPO / "deploy/local-cluster/webhooks.py"), "--prefix", "jobset",
                           "--port", "16945", "--ca", str(ca), *args],
                          input="\n".join(json.dumps(d) for d in documents), capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_each_webhook_calls_127_0_0_1_with_the_clusters_ca(tmp_path):
    [config] = run(tmp_path)["items"]
    assert config["metadata"]["name"] == "jobset-mutating-webhook-configuration"
    urls = [h["clientConfig"]["url"] for h in config["webhooks"]]
    assert urls == ["https://127.0.0.1:16945/mutate-jobset-x-k8s-io-v1alpha2-jobset",
                    "https://127.0.0.1:16945/mutate--v1-pod"]
    ca = base64.b64decode(config["webhooks"][0]["clientConfig"]["caBundle"])
    assert ca == b"-----BEGIN CERTIFICATE-----\n"


def test_a_pod_webhook_selects_only_the_operators_pods_outside_the_system_namespaces(tmp_path):
    [config] = run(tmp_path, "--pod-label", "jobset.sigs.k8s.io/jobset-name")["items"]
    jobset, pod = config["webhooks"]
    assert "objectSelector" not in jobset and "namespaceSelector" not in jobset
    assert pod["objectSelector"] == {"matchExpressions": [
        {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}
    assert "kube-system" in pod["namespaceSelector"]["matchExpressions"][0]["values"]


def test_keep_leaves_out_the_webhooks_of_what_is_not_run(tmp_path):
    [config] = run(tmp_path, "--keep=-jobset-x-k8s-io-")["items"]
    assert [h["name"] for h in config["webhooks"]] == ["mjobset.kb.io"]
