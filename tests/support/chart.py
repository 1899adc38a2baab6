"""Plain helpers of the install tests: the Helm chart's paths, running helm and kubectl,
and the chart rendered (the fixtures that build Helm and install it: tests/fixtures/helm.py)."""

import subprocess
from pathlib import Path

import pytest
import yaml

from deploy.stack import components

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "gpuplatform"
PRODUCTION_VALUES = REPO / "deploy" / "helm" / "values-production.example.yaml"
BUILD_HELM = REPO / "deploy" / "helm" / "build-helm.sh"
KUBECTL = Path(components.get("kubernetes").binary("kubectl"))


def run_helm(helm: str, *args, check=True, timeout=300) -> subprocess.CompletedProcess:
    result = subprocess.run([helm, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def template(helm: str, *args, namespace="gpuplatform-system") -> list[dict]:
    out = run_helm(helm, "template", "gp", str(CHART), "--namespace", namespace, *args).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def kubectl(kubeconfig, *args, check=True) -> subprocess.CompletedProcess:
    result = subprocess.run([str(KUBECTL), "--kubeconfig", kubeconfig, *args], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        pytest.fail(f"kubectl {' '.join(args)}: {result.stderr}")
    return result
