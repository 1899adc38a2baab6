"""The typed settings helpers accept good values and refuse bad ones loudly."""

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from gpuplatform.env import (
    database_config,
    env_bool,
    env_choice,
    env_int,
    env_list,
    env_path,
    env_str,
    env_url,
)


@pytest.mark.parametrize(
    "raw, expected",
    [("true", True), ("YES", True), ("1", True), ("on", True),
     ("false", False), ("no", False), ("0", False), ("off", False), ("", False)],
)
def test_env_bool_reads_common_spellings(raw, expected):
    assert env_bool("FLAG", not expected, environ={"FLAG": raw}) is expected


def test_env_bool_uses_default_when_unset():
    assert env_bool("FLAG", True, environ={}) is True


def test_env_bool_rejects_anything_else_naming_the_variable():
    with pytest.raises(ImproperlyConfigured, match="DEBUG='maybe' is not a boolean"):
        env_bool("DEBUG", False, environ={"DEBUG": "maybe"})


def test_env_int_parses_and_rejects_non_numbers():
    assert env_int("N", 1, environ={"N": " 4 "}) == 4
    assert env_int("N", 7, environ={}) == 7
    with pytest.raises(ImproperlyConfigured, match="N='four' is not a whole number"):
        env_int("N", 1, environ={"N": "four"})


def test_env_int_enforces_minimum():
    with pytest.raises(ImproperlyConfigured, match="below the minimum of 1"):
        env_int("WEB_CONCURRENCY", 1, minimum=1, environ={"WEB_CONCURRENCY": "0"})


def test_env_list_splits_on_commas_and_drops_blanks():
    assert env_list("HOSTS", ["x"], environ={"HOSTS": "a.example, b.example,,"}) == ["a.example", "b.example"]
    assert env_list("HOSTS", ["x"], environ={}) == ["x"]


def test_env_choice_rejects_unknown_value():
    assert env_choice("LEVEL", "restricted", ("restricted", "baseline"), environ={}) == "restricted"
    with pytest.raises(ImproperlyConfigured, match="must be one of: restricted, baseline"):
        env_choice("LEVEL", "restricted", ("restricted", "baseline"), environ={"LEVEL": "strict"})


def test_env_url_checks_scheme():
    assert env_url("R", "redis://h:1/0", schemes=("redis",), environ={}) == "redis://h:1/0"
    with pytest.raises(ImproperlyConfigured, match="not a URL with one of the schemes: redis"):
        env_url("R", "x", schemes=("redis",), environ={"R": "http://h"})
    with pytest.raises(ImproperlyConfigured):
        env_url("R", "x", schemes=("redis",), environ={"R": "localhost:6379"})


def test_env_path_expands_home_and_is_none_when_unset(monkeypatch):
    monkeypatch.setenv("HOME", "/home/tester")
    assert str(env_path("KUBECONFIG", environ={"KUBECONFIG": "~/.kube/config"})) == "/home/tester/.kube/config"
    assert env_path("KUBECONFIG", environ={}) is None


def test_env_str_strips_whitespace():
    assert env_str("S", environ={"S": "  value "}) == "value"


def test_database_config_reads_postgres_url():
    config = database_config("DATABASE_URL", "", environ={"DATABASE_URL": "postgres://u:p@db:5433/gp"})
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["HOST"], config["PORT"], config["NAME"], config["USER"]) == ("db", 5433, "gp", "u")


def test_database_config_creates_sqlite_folder(tmp_path):
    path = tmp_path / "sub" / "db.sqlite3"
    config = database_config("DATABASE_URL", f"sqlite:///{path}", environ={})
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert path.parent.is_dir()


def test_database_config_rejects_unknown_scheme():
    with pytest.raises(ImproperlyConfigured, match="use postgres://"):
        database_config("DATABASE_URL", "", environ={"DATABASE_URL": "mysql://u@h/db"})


def test_bad_namespace_prefix_stops_settings_import():
    """Importing the settings with a bad prefix fails before Django starts."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", "import gpuplatform.settings"],
        env={"TEAM_NAMESPACE_PREFIX": "Team_", "DEBUG": "true", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, cwd=str(__import__("pathlib").Path(__file__).parent.parent),
    )
    assert result.returncode != 0
    assert "TEAM_NAMESPACE_PREFIX='Team_'" in result.stderr


def _sweep_interval(value: str) -> subprocess.CompletedProcess:
    """Settings are read once per process: load them in a fresh one with the value set."""
    env = {**os.environ, "SWEEP_INTERVAL_SECONDS": value, "DJANGO_SETTINGS_MODULE": "gpuplatform.settings"}
    code = "import django; django.setup(); from django.conf import settings; print(settings.SWEEP_INTERVAL_SECONDS)"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)


def test_sweep_interval_may_be_as_short_as_two_seconds_for_the_soak():
    result = _sweep_interval("2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2"


def test_sweep_interval_below_two_seconds_is_refused_naming_the_variable():
    result = _sweep_interval("1")
    assert result.returncode != 0
    assert "SWEEP_INTERVAL_SECONDS=1 is below the minimum of 2" in result.stderr


def test_env_example_lists_every_variable_the_settings_read():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    settings_text = "".join(path.read_text() for path in (root / "gpuplatform").glob("*settings*.py"))
    read = set(re.findall(r'(?:env_\w+|database_config)\(\s*"([A-Z][A-Z0-9_]*)"', settings_text))
    listed = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", (root / ".env.example").read_text(), re.MULTILINE))
    assert read - listed == set(), "add these to .env.example with their defaults"


@pytest.mark.django_db
def test_a_statement_a_connection_repeats_is_prepared_on_postgresql():
    """DATABASE_PREPARED_STATEMENTS (on by default): PostgreSQL plans it once, not every time."""
    from django.db import connection

    from tenants.models import Team

    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's")
    for _ in range(6):  # psycopg prepares a statement on its fifth run on a connection
        list(Team.objects.filter(slug="prepared-statement-test"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
                       ['%"tenants_team"."slug" = $1%'])
        assert cursor.fetchone()[0] == 1


def test_prepared_statements_can_be_turned_off():
    env = {**os.environ, "DATABASE_URL": "postgres://u@127.0.0.1:1/x", "DATABASE_PREPARED_STATEMENTS": "false",
           "DJANGO_SETTINGS_MODULE": "gpuplatform.settings"}
    code = ("import django; django.setup(); from django.conf import settings; "
            "print(settings.DATABASES['default'].get('OPTIONS', {}).get('server_side_binding', False))")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
