"""The benchmarks' own databases on the test PostgreSQL server."""

import urllib.parse


def ensure_database(url: str, name: str) -> str:
    """The URL of database ``name`` on ``url``'s server, created if missing."""
    import psycopg

    parts = urllib.parse.urlsplit(url)
    with psycopg.connect(urllib.parse.urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))
