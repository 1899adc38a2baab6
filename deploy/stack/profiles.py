"""Who runs a local stack beside whom: one row per consumer, with its Redis database and,
when it runs a local cluster, the cluster's state directory and port offset.

The local cluster's ports are its defaults shifted by the offset (deploy/local-cluster), so two
profiles may share an offset only when they share the cluster. Every consumer reads this
table: Python imports it, bash runs

    python3 -m deploy.stack.profiles env <profile>      # NAME=value lines
    python3 -m deploy.stack.profiles redis-url <profile> <base Redis URL>
    python3 -m deploy.stack.profiles --json              # the whole table

Standard library only: the scripts run it with the system python3, before any virtualenv.
GPUPLATFORM_CLUSTER_DIR and GPUPLATFORM_CLUSTER_PORT_OFFSET, when set, still override a
profile's cluster in cluster.sh (a cluster of one's own at an offset of one's own).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# The profile cluster.sh uses when none is named (GPUPLATFORM_PROFILE).
DEFAULT = "test"


@dataclass(frozen=True)
class Profile:
    name: str
    purpose: str
    redis_db: int
    cluster: str | None = None  # the cluster's state directory, under the cache directory
    port_offset: int | None = None

    @property
    def cluster_dir(self) -> Path | None:
        return None if self.cluster is None else cache_dir() / self.cluster

    def redis_url(self, base: str) -> str:
        """`base` (a Redis URL) on this profile's database."""
        return urlunsplit(urlsplit(base)._replace(path=f"/{self.redis_db}"))

    def env(self) -> dict[str, str]:
        """What cluster.sh and the scripts read: the cluster (if any) and the Redis database."""
        env = {"GPUPLATFORM_REDIS_DB": str(self.redis_db)}
        if self.cluster is not None:
            env["GPUPLATFORM_CLUSTER_DIR"] = str(self.cluster_dir)
            env["GPUPLATFORM_CLUSTER_PORT_OFFSET"] = str(self.port_offset)
        return env


PROFILES = {p.name: p for p in (
    Profile("unit", "the tests that need no cluster (make test's main pytest)", redis_db=0),
    Profile("demo", "make demo", redis_db=1, cluster="demo-cluster", port_offset=1000),
    Profile("soak", "make soak", redis_db=2, cluster="soak-cluster", port_offset=2000),
    Profile("e2e", "make bench-e2e", redis_db=3, cluster="e2e-cluster", port_offset=3000),
    Profile("second", "make test's second cluster: the cluster's long tests", redis_db=4,
            cluster="cluster-second", port_offset=4000),
    Profile("test", "make test's cluster tests, make cluster-up", redis_db=5, cluster="cluster", port_offset=0),
    # The benchmarks that need no cluster of their own (bench-watcher uses make cluster-up's).
    Profile("bench-watcher", "make bench-watcher", redis_db=12, cluster="cluster", port_offset=0),
    Profile("bench-pages", "make bench-pages", redis_db=13),
    Profile("bench-api", "make bench-api", redis_db=14),
)}


def cache_dir() -> Path:
    """Where the local stack's builds and state live (GPUPLATFORM_CACHE_DIR)."""
    return Path(os.environ.get("GPUPLATFORM_CACHE_DIR") or Path.home() / ".cache" / "gpuplatform")


def get(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise SystemExit(f"no profile {name!r}: one of {', '.join(PROFILES)}") from None


def main(argv: list[str]) -> int:
    match argv:
        case ["env", name]:
            print("\n".join(f"{key}={value}" for key, value in get(name).env().items()))
        case ["redis-url", name, base]:
            print(get(name).redis_url(base))
        case ["--json"]:
            print(json.dumps({name: asdict(p) | p.env() for name, p in PROFILES.items()}, indent=2))
        case _:
            print("usage:", *(line.strip() for line in __doc__.splitlines() if "python3 -m" in line), sep="\n  ", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
