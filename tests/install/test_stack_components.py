"""The local stack's components (deploy/stack/components/): one module each, one complete
declaration (module, version, build, ports, readiness), read by the scripts. Conformance over
every registered component, then the scripts against a cache directory with no real binaries."""

import os
import pkgutil
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from deploy.stack import components
from deploy.stack.component import Build, Component

REPO = Path(__file__).resolve().parents[2]
EVERY = list(components.COMPONENTS.values())


def test_every_component_module_is_registered():
    modules = {m.name for m in pkgutil.iter_modules(components.__path__) if not m.name.startswith("_")}
    assert modules == set(components.COMPONENTS)


@pytest.mark.parametrize("component", EVERY, ids=lambda c: c.name)
def test_a_component_is_built_from_a_package_of_its_module_at_a_pinned_version(component):
    for package in component.build.packages.values():
        assert package == component.module or package.startswith(component.module + "/")
    assert component.version.startswith("v") and component.version.count(".") == 2


@pytest.mark.parametrize("component", [c for c in EVERY if c.build.wrapper], ids=lambda c: c.name)
def test_a_wrapper_module_pins_the_declared_version(component):
    # the build runs `go get -tool module@version` there; a wrapper pinning another version
    # would change its committed go.mod on the next build
    go_mod = (REPO / component.build.wrapper / "go.mod").read_text()
    pinned = re.findall(rf"^\s*(?:require\s+)?{re.escape(component.module)}\s+(v\S+)", go_mod, re.M)
    assert pinned == [component.version]


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
    fields, ports, binaries = 5, len(component.ports), len(component.build.packages)
    assert len(component.env()) == fields + ports + 2 * binaries


def test_no_two_components_listen_on_the_same_port():
    ports = [port for c in EVERY for port in c.ports.values()]
    assert len(ports) == len(set(ports)), ports


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
