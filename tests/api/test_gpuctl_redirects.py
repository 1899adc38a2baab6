"""``gpuctl`` follows redirects but sends its bearer token only to the server it was given:
a redirect to another host (a compromised proxy, an open redirect) gets no token."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpuctl.client import Client

TOKEN = "gpp_secret-token-for-the-platform-only"


class Recorder(BaseHTTPRequestHandler):
    """Answers ``/api/v1/go?to=URL`` with a 302 to URL, anything else with JSON; remembers
    the Authorization header of every request."""

    seen: list

    def do_GET(self):
        self.seen.append((self.path, self.headers.get("Authorization")))
        if self.path.startswith("/api/v1/go?to="):
            self.send_response(302)
            self.send_header("Location", self.path.split("?to=", 1)[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    """Start a recording server; returns (port, the requests it saw)."""
    servers = []

    def start():
        seen = []
        handler = type("Handler", (Recorder,), {"seen": seen})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return httpd.server_address[1], seen

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def test_gpuctl_drops_token_on_cross_host_redirect(server):
    platform_port, platform_seen = server()
    elsewhere_port, elsewhere_seen = server()
    # "localhost" and "127.0.0.1" are different hosts to a client, as two names would be.
    client = Client(f"http://127.0.0.1:{platform_port}", TOKEN, backoff=0)
    assert client.get(f"go?to=http://localhost:{elsewhere_port}/collect") == {"ok": True}
    assert platform_seen[0][1] == f"Bearer {TOKEN}"
    assert elsewhere_seen == [("/collect", None)]


def test_gpuctl_drops_token_on_redirect_to_another_port(server):
    platform_port, _ = server()
    other_port, other_seen = server()
    client = Client(f"http://127.0.0.1:{platform_port}", TOKEN, backoff=0)
    client.get(f"go?to=http://127.0.0.1:{other_port}/collect")
    assert other_seen == [("/collect", None)]


def test_gpuctl_keeps_token_on_redirect_within_the_same_server(server):
    platform_port, platform_seen = server()
    client = Client(f"http://127.0.0.1:{platform_port}", TOKEN, backoff=0)
    client.get(f"go?to=http://127.0.0.1:{platform_port}/api/v1/flavors")
    assert platform_seen[-1] == ("/api/v1/flavors", f"Bearer {TOKEN}")
