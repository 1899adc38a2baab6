"""The local stack's components (deploy/stack/components/): one module each, one complete
declaration (module, version, build, ports, readiness), read by the scripts. Conformance over
every registered component, then the scripts against a cache directory with no real binaries."""

import json
import os
import pkgutil
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from deploy.stack import components, profiles
from deploy.stack.component import OWN_MODULES, Build, Component, Site, source_digest

REPO = Path(__file__).resolve().parents[2]
EVERY = list(components.COMPONENTS.values())
RELEASED = [c for c in EVERY if not c.module.startswith(OWN_MODULES)]
OURS = [c for c in EVERY if c.module.startswith(OWN_MODULES)]


def test_every_component_module_is_registered():
    modules = {m.name for m in pkgutil.iter_modules(components.__path__) if not m.name.startswith("_")}
    assert modules == {name.replace("-", "_") for name in components.COMPONENTS}


@pytest.mark.parametrize("component", EVERY, ids=lambda c: c.name)
def test_a_component_is_built_from_packages_of_its_module(component):
    for package in component.build.packages.values():
        assert package == component.module or package.startswith(component.module + "/")


@pytest.mark.parametrize("component", RELEASED, ids=lambda c: c.name)
def test_a_released_component_is_pinned_to_a_release(component):
    assert re.fullmatch(r"v\d+\.\d+\.\d+", component.version)
    assert component.pins[0] == f"{component.module}@{component.version}"


@pytest.mark.parametrize("component", OURS, ids=lambda c: c.name)
def test_a_module_of_ours_is_versioned_by_its_sources(component, tmp_path):
    assert component.version == source_digest(component.build.wrapper) and len(component.version) == 12
    assert component.pins == list(component.requires.values())  # the proxy has nothing of ours


def pinned_versions(go_mod: str, module: str) -> list[str]:
    """The versions a go.mod builds `module` at: a replace's, else the require's."""
    replaced = re.findall(rf"^\s*(?:replace\s+)?{re.escape(module)}\s+=>\s+{re.escape(module)}\s+(v\S+)", go_mod, re.M)
    return replaced or re.findall(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", go_mod, re.M)


@pytest.mark.parametrize("component", [c for c in RELEASED if c.build.wrapper], ids=lambda c: c.name)
def test_a_wrapper_module_pins_the_declared_versions(component):
    # the build runs in the wrapper (Hydra's: `go get -tool module@version` there); a wrapper
    # pinning another version would build another one, or change its committed go.mod
    go_mod = (REPO / component.build.wrapper / "go.mod").read_text()
    for pin in component.pins:
        module, version = pin.split("@")
        assert pinned_versions(go_mod, module) == [version], pin


@pytest.mark.parametrize("component", EVERY, ids=lambda c: c.name)
def test_a_component_is_cached_by_version(component, monkeypatch, tmp_path):
    monkeypatch.setenv("GPUPLATFORM_CACHE_DIR", str(tmp_path))
    for binary in component.build.packages:
        assert component.binary(binary) == str(tmp_path / "bin" / f"{binary}-{component.version}")


@pytest.mark.parametrize("component", EVERY, ids=lambda c: c.name)
def test_readiness_names_only_declared_ports(component):
    assert len(component.ready_urls(offset=7)) == len(component.readiness)


@pytest.mark.parametrize("component", EVERY, ids=lambda c: c.name)
def test_every_fact_a_script_reads_has_a_name_of_its_own(component):
    fields, ports, binaries = 7, len(component.ports), len(component.build.packages)
    assert len(component.env()) == fields + ports + len(component.requires) + 2 * binaries


def test_no_port_is_taken_twice_by_the_components_of_clusters_that_run_side_by_side():
    # every port shifts with its cluster's offset; profiles that share a cluster share its ports
    clusters = {(p.cluster, p.port_offset) for p in profiles.PROFILES.values() if p.cluster is not None}
    taken = [(c.name, role, port + offset) for _, offset in clusters for c in EVERY for role, port in c.ports.items()]
    ports = [port for *_, port in taken]
    assert len(ports) == len(set(ports)), sorted(taken, key=lambda t: t[2])
    assert max(ports) < 65536


def components_cli(*args: str) -> subprocess.CompletedProcess:
    """The command line as bash runs it: the system python3, no virtualenv."""
    return subprocess.run(["python3", "-E", "-m", "deploy.stack.components", *args], cwd=REPO, capture_output=True,
                          text=True, check=False, timeout=60)


def parse_env(out: str) -> dict[str, str]:
    lines = out.splitlines()
    env = dict(line.split("=", 1) for line in lines)
    assert len(env) == len(lines), "a name printed twice"
    return env


def test_env_all_prints_every_components_facts_once_each():
    done = components_cli("env-all", "--offset", "3000")
    assert done.returncode == 0, done.stderr
    assert parse_env(done.stdout) == {k: v for c in EVERY for k, v in c.env(3000).items()}


@pytest.mark.parametrize("component", EVERY, ids=lambda c: c.name)
def test_env_prints_what_the_component_declares(component):
    done = components_cli("env", component.name, "--offset", "5")
    assert done.returncode == 0, done.stderr
    assert parse_env(done.stdout) == component.env(5)


@pytest.mark.parametrize("script", ["deploy/local-cluster/cluster.sh", "deploy/local-cluster/keda.sh"])
def test_the_cluster_scripts_declare_no_version_and_no_port_of_their_own(script):
    text = (REPO / script).read_text()
    assert not re.findall(r"^\s*\w+_VERSION=", text, re.M)
    assert not re.findall(r"\$\(\(\s*\d+\s*\+\s*\$?OFFSET", text)


def test_the_env_a_script_reads_shifts_the_ports_and_stamps_the_version():
    web = Component("web-ui", "example.com/web", "v1.2.3",
                    Build({"web-ui": "example.com/web/cmd/web", "web-cli": "example.com/web/cmd/cli"},
                          ldflags="-X v={version}"),
                    ports={"http": 100})
    env = web.env(offset=1000)
    assert env["WEB_UI_HTTP_PORT"] == "1100" and env["WEB_UI_LDFLAGS"] == "-X v=v1.2.3"
    assert env["WEB_UI_VERSION"] == "v1.2.3" and env["WEB_UI_PACKAGE"] == "example.com/web/cmd/web"
    assert env["WEB_CLI_PACKAGE"] == "example.com/web/cmd/cli" and env["WEB_CLI_BIN"].endswith("/bin/web-cli-v1.2.3")


@pytest.fixture
def listening():
    class Ok(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server name
            self.send_response(200 if self.path == "/ready" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_a_component_is_ready_when_every_readiness_url_answers(listening):
    served = Component("x", "m", "v1.0.0", Build({"x": "m"}), ports={"http": listening - 5}, readiness=("http://127.0.0.1:{http}/ready",))
    missing = Component("x", "m", "v1.0.0", Build({"x": "m"}), ports={"http": listening}, readiness=("http://127.0.0.1:{http}/nope",))
    assert served.is_ready(offset=5)
    assert not missing.is_ready()


def run(script: str, *args: str, cache: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / script), *args], capture_output=True, text=True, check=False, timeout=60,
                          env={**os.environ, "GPUPLATFORM_CACHE_DIR": str(cache), **env})


def test_build_helm_reuses_the_binary_of_the_declared_version(tmp_path):
    cached = Path(tmp_path / "bin" / f"helm-{components.get('helm').version}")
    cached.parent.mkdir()
    cached.write_text("#!/bin/sh\n")
    cached.chmod(0o755)
    done = run("deploy/helm/build-helm.sh", cache=tmp_path, PATH="/usr/bin:/bin")  # no go: it must not build
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(cached)


def test_idp_sh_serves_on_the_declared_ports_shifted_by_its_offset(tmp_path):
    hydra = components.get("hydra")
    done = run("deploy/local-idp/idp.sh", "status", cache=tmp_path, GPUPLATFORM_IDP_PORT_OFFSET="9")
    assert f"hydra {hydra.version}    stopped" in done.stdout
    assert f"issuer: https://127.0.0.1:{hydra.port('public', 9)} " in done.stdout
    assert f"admin: http://127.0.0.1:{hydra.port('admin', 9)}," in done.stdout


SITE = Site("/state/cluster", "/repo/config", offset=3000)
RUN = [(c, binary) for c in EVERY if c.arguments for binary in c.arguments(SITE)]


@pytest.mark.parametrize(("component", "binary"), RUN, ids=lambda x: getattr(x, "name", x))
def test_a_binary_runs_with_paths_of_its_site_only(component, binary):
    assert binary in component.build.packages
    paths = [arg.split("=", 1)[-1] for arg in component.args(binary, SITE) if "/" in arg and "://" not in arg]
    stray = [p for p in paths if p.startswith("/") and not p.startswith(("/state/cluster/", "/repo/config/"))]
    assert not stray


# (Kueue's and Hydra's ports are in their configuration files, which cluster.sh and idp.sh render
# from templates; a component's own configuration (`Component.config`) is checked with its arguments)
@pytest.mark.parametrize(("component", "binary"), [(c, b) for c, b in RUN if b not in ("kueue", "hydra")],
                         ids=lambda x: getattr(x, "name", x))
def test_a_binary_names_declared_ports_shifted_by_the_offset(component, binary):
    line = component.args(binary, SITE)
    said = [*line, json.dumps(component.config(SITE))] if component.config else line
    listens = [int(port) for arg in said for port in re.findall(r"127\.0\.0\.1[:\"]+(?:, \"port\": )?(\d+)", arg)]
    listens += [int(value) for flag, value in zip(line, line[1:], strict=False) if flag.endswith("-port")]
    assert listens and set(listens) <= {port + SITE.offset for c in EVERY for port in c.ports.values()}


CONFIGURED = [c for c in EVERY if c.config]


@pytest.mark.parametrize("component", CONFIGURED, ids=lambda c: c.name)
def test_an_operator_reads_its_own_configuration_on_127_0_0_1_without_leader_election(component):
    config = component.config(SITE)
    binary, = component.build.packages
    assert component.config_file(SITE) in component.args(binary, SITE)
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["webhook"]["host"] == "127.0.0.1"
    assert config["webhook"]["port"] == component.port("webhook", SITE.offset)
    assert config["metrics"]["bindAddress"] == f"127.0.0.1:{component.port('metrics', SITE.offset)}"
    assert config["health"]["healthProbeBindAddress"] == f"127.0.0.1:{component.port('health', SITE.offset)}"
    # its certificates are the cluster's (cluster.sh operators.sh), not ones it makes itself
    assert {"internalCertManagement", "certManagement"} & set(config)
    assert all(v == {"enable": False} for k, v in config.items() if k.endswith("ertManagement"))


def test_config_prints_a_components_configuration_as_json():
    done = components_cli("config", "jobset", "--offset", "3000", "--cluster-dir", SITE.cluster_dir,
                          "--config-dir", SITE.config_dir)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == components.get("jobset").config(SITE)


def test_every_process_the_stack_starts_has_declared_arguments():
    started = {binary for *_, binary in RUN}
    cluster = "".join((REPO / "deploy/local-cluster" / name).read_text() for name in ("cluster.sh", "keda.sh", "operators.sh"))
    idp = (REPO / "deploy/local-idp/idp.sh").read_text()
    declared = set(re.findall(r"run_declared start(?:_current)? ([\w-]+)", cluster))
    declared |= set(re.findall(r"deploy\.stack\.components args ([\w-]+)", idp))
    assert declared == started


def test_args_prints_one_argument_a_line_as_bash_reads_them():
    done = components_cli("args", "kuberay-operator", "--offset", "3000", "--cluster-dir", SITE.cluster_dir,
                          "--config-dir", SITE.config_dir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == components.of_binary("kuberay-operator").args("kuberay-operator", SITE)
    assert "" in done.stdout.splitlines()  # --watch-namespace "" (every namespace) survives


def test_ready_takes_its_options_before_the_name_as_idp_sh_passes_them(tmp_path):
    # idp.sh: `components ready --ca-bundle F` + `hydra --offset N`; nothing listens there: not
    # ready (1), not a usage error (2).
    bundle = tmp_path / "ca.crt"
    bundle.write_text("")
    done = components_cli("ready", "--ca-bundle", str(bundle), "hydra", "--offset", "9")
    assert done.returncode == 1, done.stderr
