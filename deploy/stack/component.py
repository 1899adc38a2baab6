"""What a component of the local stack is: the Go module and version it is built from, how it
is built, the ports it listens on and the URLs that say it is ready. One module per component
under deploy/stack/components/ declares one `Component`; the scripts read it with

    python3 -m deploy.stack.components env <name> [--offset N]     # NAME_VERSION=... lines
    python3 -m deploy.stack.components env-all [--offset N]       # every component's, at once
    python3 -m deploy.stack.components ready <name> [--offset N] [--ca-bundle FILE]
    python3 -m deploy.stack.components args <binary> --offset N --cluster-dir D --config-dir C
    python3 -m deploy.stack.components config <name> --offset N --cluster-dir D --config-dir C

A binary is cached by version (<cache>/bin/<name>-<version>): a new version is a new build, the
same version never builds twice. A module of this repository (gpuplatform.local/...) has no
release: its version is a digest of its sources (`source_digest`), so an edit is a new build.
"""

from __future__ import annotations

import hashlib
import ssl
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from .profiles import cache_dir

REPO = Path(__file__).resolve().parents[2]
OWN_MODULES = "gpuplatform.local/"  # the wrapper modules' and our own Go modules' path


def source_digest(wrapper: str) -> str:
    """The version of a Go module of this repository: the first 12 hex digits of the sha256 of
    its go.mod, go.sum and non-test .go files (the top directory), in byte order of name."""
    names = sorted(p.name for p in (REPO / wrapper).iterdir() if p.is_file() and (
        fnmatch(p.name, "go.*") or (fnmatch(p.name, "*.go") and not fnmatch(p.name, "*_test.go"))))
    digest = hashlib.sha256(b"".join((REPO / wrapper / name).read_bytes() for name in names))
    return digest.hexdigest()[:12]


@dataclass(frozen=True)
class Build:
    """How `go` builds the binaries: `packages` (binary name -> Go package) at the component's
    version, either directly (`go install package@version`) or inside `wrapper`, a module of
    this repository that pins the dependencies (deploy/local-idp/module)."""

    packages: dict[str, str]
    wrapper: str = ""  # relative to the repository's root
    tags: str = ""  # go build -tags
    ldflags: str = ""  # {version} is the component's version


@dataclass(frozen=True)
class Site:
    """Where a component runs: its cluster's state directory (as the script spells it: the
    arguments must be the running process's, byte for byte), the directory of the cluster's
    configuration files (deploy/local-cluster/config) and the port offset."""

    cluster_dir: str
    config_dir: str
    offset: int = 0

    @property
    def pki(self) -> str:
        return f"{self.cluster_dir}/pki"

    @property
    def kubeconfig(self) -> str:
        return f"{self.cluster_dir}/kubeconfig"


@dataclass(frozen=True)
class Component:
    name: str
    module: str
    version: str
    build: Build
    ports: dict[str, int] = field(default_factory=dict)  # role -> port at offset 0, on 127.0.0.1
    readiness: tuple[str, ...] = ()  # URLs that answer when it is ready; {role} is that port
    # Other modules the build needs at a version of their own (role -> "module@version"); the
    # wrapper's go.mod pins the same (required or replaced), `cluster.sh probe` asks the proxy.
    requires: dict[str, str] = field(default_factory=dict)
    # The command line of each binary it runs (binary -> arguments), where it runs.
    arguments: Callable[[Site], dict[str, list[str]]] | None = None
    # Its configuration file, where its flags cannot say everything (an operator's webhook
    # server: port and certificate directory): a JSON object that cluster.sh writes to
    # `config_file(site)` before the start (and restarts it when the file changed).
    config: Callable[[Site], dict] | None = None

    @property
    def prefix(self) -> str:
        return self.name.upper().replace("-", "_")

    @property
    def pins(self) -> list[str]:
        """The module versions the Go module proxy must serve to build it."""
        own = [] if self.module.startswith(OWN_MODULES) else [f"{self.module}@{self.version}"]
        return own + list(self.requires.values())

    def binary(self, which: str | None = None) -> str:
        """The cached binary (`which`: one of the build's, by default the one named as the component)."""
        which = which or self.name
        if which not in self.build.packages:
            raise KeyError(f"{self.name} builds no binary {which!r}")
        return str(cache_dir() / "bin" / f"{which}-{self.version}")

    def args(self, binary: str, site: Site) -> list[str]:
        """The arguments `binary` runs with at `site`."""
        declared = self.arguments(site) if self.arguments else {}
        if binary not in declared:
            raise KeyError(f"{self.name} declares no arguments for {binary!r}")
        return declared[binary]

    def config_file(self, site: Site) -> str:
        return f"{site.cluster_dir}/{self.name}-config.json"

    def port(self, role: str, offset: int = 0) -> int:
        return self.ports[role] + offset

    def ready_urls(self, offset: int = 0) -> list[str]:
        ports = {role: self.port(role, offset) for role in self.ports}
        return [url.format(**ports) for url in self.readiness]

    def env(self, offset: int = 0) -> dict[str, str]:
        """What a script reads: <PREFIX>_MODULE, _VERSION, the build's fields, _BINARIES and _PINS
        (space-separated), a <PREFIX>_<ROLE>_PORT per port, a <PREFIX>_<ROLE>_PIN per required
        module, and <BINARY>_BIN and <BINARY>_PACKAGE per binary."""
        values = {"MODULE": self.module, "VERSION": self.version, "WRAPPER": self.build.wrapper,
                  "TAGS": self.build.tags, "LDFLAGS": self.build.ldflags.format(version=self.version),
                  "BINARIES": " ".join(self.build.packages), "PINS": " ".join(self.pins)}
        values |= {f"{role.upper()}_PORT": str(self.port(role, offset)) for role in self.ports}
        values |= {f"{role.upper()}_PIN": pin for role, pin in self.requires.items()}
        env = {f"{self.prefix}_{key}": value for key, value in values.items()}
        for binary, package in self.build.packages.items():
            prefix = binary.upper().replace("-", "_")
            env |= {f"{prefix}_BIN": self.binary(binary), f"{prefix}_PACKAGE": package}
        return env

    def is_ready(self, offset: int = 0, ca_bundle: str | None = None, timeout: float = 2) -> bool:
        """Every readiness URL answers (https ones verified against `ca_bundle`)."""
        context = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else None
        try:
            for url in self.ready_urls(offset):
                with urllib.request.urlopen(url, timeout=timeout, context=context):  # noqa: S310 - our loopback URLs
                    pass
        except OSError:
            return False
        return True


def manager_configuration(component: Component, site: Site, api_version: str, *, cert_dir: str | None = None,
                          **own) -> dict:
    """The Configuration of a controller-runtime manager (JobSet, Trainer, LWS): one replica (no
    leader election), its webhook, metrics and health endpoints on 127.0.0.1 at the component's
    ports, its webhook certificate from ``cert_dir`` (one of the cluster's CA, cluster.sh), and
    ``own`` settings (its key to turn its own certificate management off, ...) on top."""
    port = {role: component.port(role, site.offset) for role in component.ports}
    webhook = {"host": "127.0.0.1", "port": port["webhook"]}
    if cert_dir:
        webhook["certDir"] = cert_dir
    return {
        "apiVersion": api_version, "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "webhook": webhook,
        "metrics": {"bindAddress": f"127.0.0.1:{port['metrics']}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{port['health']}"},
        "clientConnection": {"qps": 50, "burst": 100},
        **own,
    }


def manager_arguments(component: Component, site: Site, *extra: str) -> list[str]:
    """A controller-runtime manager's command line: its configuration file, the cluster's
    kubeconfig, info logs."""
    return ["--config", component.config_file(site), "--kubeconfig", site.kubeconfig, "--zap-log-level", "info",
            *extra]
