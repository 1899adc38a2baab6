"""The chart's prometheus.* values (docs/telemetry.md): the URL and timeout in the ConfigMap,
credentials only from a Secret the operator names, a private CA mounted where
PROMETHEUS_CA_FILE points in the processes that ask Prometheus; nothing of it by default."""

import kubernetes_validate
import pytest

from ...schemas import KUBERNETES_VERSION
from ...support.chart import CHART, run_helm, template

ON = ["--set", "prometheus.url=https://prometheus.monitoring.svc:9090", "--set", "prometheus.timeoutSeconds=3",
      "--set", "prometheus.credentialsSecret=prometheus-reader", "--set", "prometheus.caConfigMap.name=monitoring-ca"]


def config_map(objects):
    return next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-config"))["data"]


def containers(objects):
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job"):
            spec = obj["spec"]["template"]["spec"]
            for container in spec["containers"]:
                yield obj["metadata"]["name"], spec, container


def test_by_default_no_prometheus_setting_volume_or_secret(helm):
    objects = template(helm)
    assert not any(name.startswith("PROMETHEUS_") and name != "PROMETHEUS_MULTIPROC_DIR"
                   for name in config_map(objects))
    for name, spec, container in containers(objects):
        assert all(v["name"] != "prometheus-ca" for v in spec.get("volumes", [])), name
        assert [e for e in container["envFrom"] if e.get("secretRef", {}).get("name") == "prometheus-reader"] == []


def test_url_and_timeout_in_the_config_map_and_credentials_from_the_named_secret(helm):
    objects = template(helm, *ON)
    data = config_map(objects)
    assert data["PROMETHEUS_URL"] == "https://prometheus.monitoring.svc:9090"
    assert data["PROMETHEUS_TIMEOUT_SECONDS"] == "3"
    assert data["PROMETHEUS_CA_FILE"] == "/etc/gpuplatform/prometheus-ca/ca.crt"
    for name, _, container in containers(objects):
        assert {"secretRef": {"name": "prometheus-reader"}} in container["envFrom"], name
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("process", ["-web", "-worker"])
def test_the_processes_that_ask_prometheus_mount_its_ca(helm, process):
    objects = template(helm, *ON)
    [(_, spec, container)] = [c for c in containers(objects) if c[0].endswith(process)]
    assert {"name": "prometheus-ca", "configMap": {"name": "monitoring-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}} \
        in spec["volumes"]
    assert {"name": "prometheus-ca", "mountPath": "/etc/gpuplatform/prometheus-ca", "readOnly": True} \
        in container["volumeMounts"]


@pytest.mark.parametrize("values, problem", [
    (["--set", "config.extraEnv.PROMETHEUS_TOKEN=abc"], "PROMETHEUS_TOKEN"),
    (["--set", "config.extraEnv.PROMETHEUS_PASSWORD=abc"], "PROMETHEUS_PASSWORD"),
    (["--set", "prometheus.url=prometheus:9090"], "url"),
    (["--set", "prometheus.token=abc"], "token"),
    (["--set", "prometheus.timeoutSeconds=0"], "timeoutSeconds"),
])
def test_secrets_never_go_into_the_config_map_and_bad_values_are_refused(helm, values, problem):
    result = run_helm(helm, "template", "gp", str(CHART), *values, check=False)
    assert result.returncode != 0 and problem in result.stderr, result.stderr
