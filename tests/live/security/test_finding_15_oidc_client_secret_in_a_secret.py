"""Issue 29, finding 15 (no Secret slot for the OIDC client secret), the chart rendered by
real Helm: the secret goes into a Secret, and the values schema refuses it in
`config.extraEnv`. The finding, its fix and what the docs say:
tests/security/test_finding_15_oidc_client_secret_in_a_secret.py."""

import base64

import pytest

from ...support.chart import CHART, PRODUCTION_VALUES, run_helm, template

SECRET_NAMES = ["SECRET_KEY", "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "METRICS_TOKEN",
                "EMAIL_HOST_PASSWORD", "OIDC_CLIENT_SECRET"]


def containers(objects):
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job"):
            spec = obj["spec"]["template"]["spec"]
            for container in spec["containers"] + spec.get("initContainers", []):
                yield obj["metadata"]["name"], container


def config_maps(objects) -> str:
    return "\n".join(str(o.get("data")) for o in objects if o["kind"] == "ConfigMap")


def test_finding_15_the_client_secret_goes_into_the_charts_secret(helm):
    objects = template(helm, "--set", "secrets.oidcClientSecret=s3cr3t-of-the-idp",
                       "--set", "config.extraEnv.OIDC_ISSUER=https://idp.example.com",
                       "--set", "config.extraEnv.OIDC_CLIENT_ID=gpuplatform")
    [secret] = [o for o in objects if o["kind"] == "Secret"]
    assert base64.b64decode(secret["data"]["OIDC_CLIENT_SECRET"]).decode() == "s3cr3t-of-the-idp"
    assert "s3cr3t" not in config_maps(objects)
    assert "OIDC_CLIENT_SECRET" not in config_maps(objects)
    for name, container in containers(objects):  # every process reads the Secret
        assert {"secretRef": {"name": secret["metadata"]["name"]}} in container["envFrom"], name


def test_finding_15_or_from_a_secret_of_its_own(helm):
    objects = template(helm, "-f", str(PRODUCTION_VALUES), "--set", "secrets.oidcExistingSecret=idp-client")
    found = list(containers(objects))
    assert found
    for name, container in found:  # every process, after the chart's Secret (so it wins)
        assert container["envFrom"][-1] == {"secretRef": {"name": "idp-client"}}, name
        assert {"secretRef": {"name": "gpuplatform-secrets"}} in container["envFrom"][:-1], name
    assert "OIDC_CLIENT_SECRET" not in config_maps(objects)
    for name, container in containers(template(helm, "-f", str(PRODUCTION_VALUES))):
        assert {"secretRef": {"name": "idp-client"}} not in container["envFrom"], name


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_finding_15_no_secret_goes_into_the_config_map(helm, name):
    result = run_helm(helm, "template", "gp", str(CHART), "--set", f"config.extraEnv.{name}=x", check=False)
    assert result.returncode != 0, f"config.extraEnv.{name} was accepted"
    assert name in result.stderr and "schema" in result.stderr, result.stderr


def test_finding_15_a_chart_secret_value_beside_an_existing_secret_is_an_error(helm):
    result = run_helm(helm, "template", "gp", str(CHART), "-f", str(PRODUCTION_VALUES),
                      "--set", "secrets.oidcClientSecret=x", check=False)
    assert result.returncode != 0 and "oidcExistingSecret" in result.stderr, result.stderr


