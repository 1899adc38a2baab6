"""The shell scripts: every one passes shellcheck (codes a script turns off say why, beside
the directive), and scripts/with-services.sh, the one way a command gets the test servers."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Not ours, or not sources: virtualenvs, state, build output.
SKIP_DIRS = {".git", ".venv", "var", "node_modules", "__pycache__"}


def shell_scripts() -> list[Path]:
    """Every *.sh in the repository, and the CI entry point (a bash script without the suffix)."""
    found = [REPO / ".ci" / "run"]
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        found += [Path(folder) / name for name in files if name.endswith(".sh")]
    return sorted(found)


def test_the_repository_has_its_shell_scripts():
    names = {p.relative_to(REPO).as_posix() for p in shell_scripts()}
    assert {"deploy/local-cluster/cluster.sh", "deploy/local-idp/idp.sh", "scripts/test.sh", ".ci/run"} <= names


@pytest.mark.skipif(shutil.which("shellcheck") is None,
                    reason="shellcheck is not installed (apt-get install shellcheck; .ci/run installs it)")
def test_every_shell_script_passes_shellcheck():
    # -x: follow `source` (keda.sh takes its helpers from cluster.sh)
    done = subprocess.run(["shellcheck", "-x", "-f", "gcc", *map(str, shell_scripts())], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def with_services(*command: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "scripts" / "with-services.sh"), *command], capture_output=True, text=True,
                          check=False, timeout=60, env={**os.environ, **env})


def test_with_services_keeps_the_servers_it_is_given_and_runs_the_command():
    done = with_services("sh", "-c", 'echo "$DATABASE_URL $REDIS_URL"; exit 3',
                         DATABASE_URL="postgres://db.example/x", REDIS_URL="redis://redis.example/7")
    assert done.stdout == "postgres://db.example/x redis://redis.example/7\n"
    assert done.returncode == 3  # the command's own exit status


def test_with_services_wants_a_command():
    done = with_services()
    assert done.returncode == 2 and "usage" in done.stderr
