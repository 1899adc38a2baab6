"""`GPUPLATFORM_KEDA=later` (deploy/local-cluster/README.md): `make test` starts the local
cluster without KEDA while KEDA builds. Checked on the script alone, against a cache
directory with no binaries (nothing is built or started)."""

import os
import subprocess
from pathlib import Path

CLUSTER_SH = Path(__file__).resolve().parents[2] / "deploy" / "local-cluster" / "cluster.sh"


def status(tmp_path, **env) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLUSTER_SH), "status"], capture_output=True, text=True, check=False, timeout=60,
                          env={**os.environ, "GPUPLATFORM_CACHE_DIR": str(tmp_path), **env})


def test_status_says_keda_is_not_built_yet_when_it_comes_later(tmp_path):
    later = status(tmp_path, GPUPLATFORM_KEDA="later")
    assert "keda: not built yet (GPUPLATFORM_KEDA=later)" in later.stdout
    assert "keda-operator" not in later.stdout


def test_by_default_keda_is_part_of_the_cluster(tmp_path):
    now = status(tmp_path, GPUPLATFORM_KEDA="now")
    assert "keda-operator" in now.stdout and "stopped" in now.stdout
    assert now.returncode != 0
