"""Fixtures for the install tests: Helm, built from its Go module and cached like the
local cluster's binaries (deploy/helm/build-helm.sh)."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "gpuplatform"
PRODUCTION_VALUES = REPO / "deploy" / "helm" / "values-production.example.yaml"
BUILD_HELM = REPO / "deploy" / "helm" / "build-helm.sh"


@pytest.fixture(scope="session")
def helm() -> str:
    """Path of the helm binary (a cold build takes minutes; then it is cached)."""
    if shutil.which("go") is None:
        pytest.skip("go is not installed: Helm is built from its Go module (helm.sh/helm/v4)")
    result = subprocess.run([str(BUILD_HELM)], capture_output=True, text=True, timeout=3600)
    if result.returncode != 0:
        pytest.fail(f"building helm failed:\n{result.stderr[-3000:]}")
    return result.stdout.strip().splitlines()[-1]


def run_helm(helm: str, *args, check=True, timeout=300) -> subprocess.CompletedProcess:
    result = subprocess.run([helm, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def template(helm: str, *args, namespace="gpuplatform-system") -> list[dict]:
    out = run_helm(helm, "template", "gp", str(CHART), "--namespace", namespace, *args).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]
