"""The local stack's profiles (deploy/stack/profiles.py): one table of who runs where, which
Python imports and bash reads through `python3 -m deploy.stack.profiles`. Checked on the
table and on cluster.sh alone, against a cache directory with no binaries (nothing starts)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from deploy.stack import components, profiles

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO / "deploy" / "local-cluster" / "cluster.sh"
APISERVER_DEFAULT_PORT = components.get("kubernetes").port("apiserver")


def run_profiles(*args: str, **env: str) -> subprocess.CompletedProcess:
    """The command line as bash runs it: the system python3, no virtualenv, no Django."""
    return subprocess.run(["python3", "-E", "-m", "deploy.stack.profiles", *args], cwd=REPO, capture_output=True,
                          text=True, check=False, timeout=60, env={**os.environ, **env})


def test_no_two_profiles_share_a_redis_database():
    dbs = [p.redis_db for p in profiles.PROFILES.values()]
    assert len(dbs) == len(set(dbs)), dbs


def test_profiles_share_a_port_offset_only_when_they_share_the_cluster():
    by_offset = {}
    for p in profiles.PROFILES.values():
        if p.cluster is not None:
            assert by_offset.setdefault(p.port_offset, p.cluster) == p.cluster, p.name


def test_every_profile_has_a_cluster_and_an_offset_or_neither():
    for p in profiles.PROFILES.values():
        assert (p.cluster is None) == (p.port_offset is None), p.name


def test_redis_url_keeps_the_server_and_takes_the_profiles_database():
    assert profiles.get("demo").redis_url("redis://:pw@127.0.0.1:56379/0?x=1") == "redis://:pw@127.0.0.1:56379/1?x=1"


def test_bash_reads_a_profile_as_name_value_lines(tmp_path):
    done = run_profiles("env", "second", GPUPLATFORM_CACHE_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert dict(line.split("=", 1) for line in done.stdout.splitlines()) == {
        "GPUPLATFORM_REDIS_DB": "4",
        "GPUPLATFORM_CLUSTER_DIR": str(tmp_path / "cluster-second"),
        "GPUPLATFORM_CLUSTER_PORT_OFFSET": "4000",
    }


def test_an_unknown_profile_is_refused_with_the_known_ones():
    done = run_profiles("env", "nope")
    assert done.returncode != 0
    assert "no profile 'nope'" in done.stderr and "demo" in done.stderr


def cluster_status(tmp_path, **env) -> str:
    inherited = {k: v for k, v in os.environ.items() if k not in profiles.PROFILES["test"].env()}
    inherited.pop("GPUPLATFORM_PROFILE", None)
    done = subprocess.run([str(CLUSTER_SH), "status"], capture_output=True, text=True, check=False, timeout=60,
                          env={**inherited, "GPUPLATFORM_CACHE_DIR": str(tmp_path), "GPUPLATFORM_KEDA": "later", **env})
    return done.stdout


@pytest.mark.parametrize("name", ["test", "demo", "second"])
def test_cluster_sh_runs_the_cluster_its_profile_names(tmp_path, name):
    profile = profiles.get(name)
    out = cluster_status(tmp_path, GPUPLATFORM_PROFILE=name)
    assert f"kubeconfig: {tmp_path / profile.cluster}/kubeconfig" in out
    assert f"apiserver {APISERVER_DEFAULT_PORT + profile.port_offset}," in out


def test_an_explicit_directory_and_offset_override_the_profile(tmp_path):
    out = cluster_status(tmp_path, GPUPLATFORM_PROFILE="demo", GPUPLATFORM_CLUSTER_DIR=str(tmp_path / "mine"),
                         GPUPLATFORM_CLUSTER_PORT_OFFSET="5000")
    assert f"kubeconfig: {tmp_path}/mine/kubeconfig" in out
    assert f"apiserver {APISERVER_DEFAULT_PORT + 5000}," in out


def test_the_table_is_standard_library_only():
    # bash runs it with the system python3, before any virtualenv exists
    done = subprocess.run([sys.executable, "-S", "-E", "-c", "import deploy.stack.profiles, deploy.stack.components"], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
