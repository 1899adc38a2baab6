"""`cluster.sh status --json` / `up --json`: the cluster's facts as one JSON object, which the
fixtures, the soak and the demo read instead of parsing the lines meant for people. Checked
on the script alone, against a cache directory with no binaries (nothing is started)."""

import json
import os
import subprocess
from pathlib import Path

from deploy.stack import components, profiles

CLUSTER_SH = Path(__file__).resolve().parents[2] / "deploy" / "local-cluster" / "cluster.sh"


def status(tmp_path, *args, **env) -> subprocess.CompletedProcess:
    inherited = {k: v for k, v in os.environ.items()
                 if k not in ("GPUPLATFORM_PROFILE", "GPUPLATFORM_CLUSTER_DIR", "GPUPLATFORM_CLUSTER_PORT_OFFSET")}
    return subprocess.run([str(CLUSTER_SH), "status", *args], capture_output=True, text=True, check=False, timeout=60,
                          env={**inherited, "GPUPLATFORM_CACHE_DIR": str(tmp_path), "GPUPLATFORM_KEDA": "later", **env})


def test_status_json_says_where_the_profiles_cluster_is(tmp_path):
    soak = profiles.get("soak")
    facts = json.loads(status(tmp_path, "--json", GPUPLATFORM_PROFILE="soak").stdout)
    assert facts["kubeconfig"] == f"{tmp_path / soak.cluster}/kubeconfig"
    assert facts["port_offset"] == soak.port_offset
    assert facts["prometheus_url"] == f"http://127.0.0.1:{facts['ports']['prometheus']}"
    assert facts["ports"]["apiserver"] == components.get("kubernetes").port("apiserver", soak.port_offset)


def test_status_json_says_what_is_stopped_and_fails_like_the_human_status(tmp_path):
    done = status(tmp_path, "--json")
    facts = json.loads(done.stdout)
    assert done.returncode != 0 and facts["running"] is False
    assert facts["pids"]["kube-apiserver"] is None and facts["keda"] == "later"


def test_without_json_status_speaks_to_people(tmp_path):
    done = status(tmp_path)
    assert "kube-apiserver" in done.stdout and "stopped" in done.stdout
    assert not done.stdout.lstrip().startswith("{")
