"""The OCI image (`make image`: deploy/image/build.sh, mmdebstrap + buildah): built from the
current tree, it passes `manage.py check --deploy` and applies every migration to a fresh
PostgreSQL database from inside the image (`buildah run`), as a non-root user, with no
compiler, with static files collected and a production server."""

import os
import secrets
import shutil
import subprocess
import uuid

import psycopg
import pytest
from django.db import connection

from ..support.chart import REPO
from ..test_production_settings import production_example

BUILD = REPO / "deploy" / "image" / "build.sh"
STORAGE = ["--storage-driver", "vfs", "--root", os.path.expanduser("~/.cache/gpuplatform/image/storage"),
           "--runroot", os.path.expanduser("~/.cache/gpuplatform/image/run")]


def buildah(*args, check=True, timeout=600) -> subprocess.CompletedProcess:
    result = subprocess.run(["buildah", *STORAGE, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        pytest.fail(f"buildah {' '.join(args[:3])}...: {result.stderr[-3000:]}")
    return result


@pytest.fixture(scope="module")
def image() -> str:
    missing = [tool for tool in ("mmdebstrap", "buildah") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not installed (apt-get install -y mmdebstrap buildah)")
    if os.geteuid() != 0:
        pytest.skip("the image build needs root (mmdebstrap's chroot mode, buildah's vfs storage)")
    result = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=3600)
    if result.returncode != 0:
        pytest.fail(f"make image failed:\n{result.stderr[-4000:]}")
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def container(image):
    name = f"gpi-test-{uuid.uuid4().hex[:8]}"
    buildah("from", "--name", name, image)
    yield name
    buildah("rm", name, check=False)


@pytest.fixture
def fresh_database(db):
    """An empty database on the test server, for the image's own `migrate`."""
    settings = connection.settings_dict
    name = f"gpi_image_{uuid.uuid4().hex[:8]}"
    dsn = dict(host=settings["HOST"], port=settings["PORT"], user=settings["USER"], password=settings["PASSWORD"] or None)
    with psycopg.connect(dbname="postgres", autocommit=True, **dsn) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"postgres://{settings['USER']}:{settings['PASSWORD'] or ''}@{settings['HOST']}:{settings['PORT']}/{name}"
    with psycopg.connect(dbname="postgres", autocommit=True, **dsn) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_in(container, *command, env=None, check=True) -> subprocess.CompletedProcess:
    """Run in the image with the production example of .env.example (as the chart sets it)."""
    production = {**production_example(), "SECRET_KEY": secrets.token_urlsafe(50),
                  "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none", "REDIS_URL": "redis://127.0.0.1:1/0",
                  **(env or {})}
    flags = [arg for key, value in production.items() for arg in ("--env", f"{key}={value}")]
    return buildah("run", "--isolation", "chroot", *flags, container, "--", *command, check=check)


def test_the_image_passes_the_deployment_checks(container):
    result = run_in(container, "python", "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert "no issues" in result.stdout, result.stdout + result.stderr


def test_the_image_applies_every_migration_to_an_empty_database(container, fresh_database):
    run_in(container, "python", "manage.py", "migrate", "--noinput", env={"DATABASE_URL": fresh_database})
    result = run_in(container, "python", "manage.py", "migrate", "--check", env={"DATABASE_URL": fresh_database})
    assert result.returncode == 0


def test_the_image_runs_as_a_user_without_compilers_and_serves_collected_static_files(container):
    assert run_in(container, "id", "-u").stdout.strip() == "10001"
    probe = "import shutil; print([c for c in ('gcc', 'cc', 'g++', 'clang', 'make', 'pip') if shutil.which(c)])"
    assert run_in(container, "python", "-c", probe).stdout.strip() == "[]"
    assert run_in(container, "test", "-f", "/app/staticfiles/admin/css/base.css.gz", check=False).returncode == 0
    assert run_in(container, "gunicorn", "--version").returncode == 0
    assert run_in(container, "celery", "--version").returncode == 0


def test_the_image_says_how_to_stop_and_how_big_it_is(image):
    import json

    config = json.loads(buildah("inspect", "--type", "image", image).stdout)
    oci = config["OCIv1"]["config"]
    assert oci["User"] == "10001:10001"
    assert oci["StopSignal"] == "SIGTERM"
    assert oci["Entrypoint"][0] == "/usr/bin/tini"
    size = buildah("images", "--format", "{{.Size}}", image).stdout.strip()
    print(f"\n[image] {image}: {size}")
