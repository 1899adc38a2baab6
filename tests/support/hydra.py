"""Drive the local Ory Hydra (deploy/local-idp/idp.sh) the way a login app would: register
OAuth2 clients, and answer login, consent and logout through Hydra's admin API.

Hydra has no login UI; it redirects the browser to the login (then consent, logout) URL
with a challenge. ``follow`` reads the challenge from the redirect and accepts it here (no
browser); ``LoginApp`` serves those URLs for a real browser. Either way each test says who
signs in and which claims (groups included) the ID token carries: a group change at the IdP
is a different ``claims`` at the next login.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import secrets
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlparse

import requests

from deploy.stack.components.hydra import COMPONENT as HYDRA


@dataclass
class Client:
    client_id: str
    client_secret: str


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


class Hydra:
    def __init__(self, issuer: str, admin_url: str, ca_bundle: str):
        self.issuer, self.admin_url, self.ca_bundle = issuer, admin_url, ca_bundle

    def _admin(self, method: str, path: str, **kwargs) -> dict:
        response = requests.request(method, f"{self.admin_url}{path}", timeout=10, **kwargs)
        assert response.ok, f"{method} {path}: {response.status_code} {response.text}"
        return response.json() if response.content else {}

    def create_client(self, redirect_uris: list[str], *, id_token_lifespan: str | None = None,
                      post_logout_redirect_uris: list[str] = ()) -> Client:
        body = self._admin("POST", "/admin/clients", json={
            "client_name": f"gpuplatform-test-{uuid.uuid4().hex[:8]}",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "scope": "openid email profile offline_access",
            "redirect_uris": redirect_uris,
            "post_logout_redirect_uris": list(post_logout_redirect_uris),
            "token_endpoint_auth_method": "client_secret_basic",
        })
        client = Client(body["client_id"], body["client_secret"])
        if id_token_lifespan:
            self._admin("PUT", f"/admin/clients/{client.client_id}/lifespans",
                        json={"authorization_code_grant_id_token_lifespan": id_token_lifespan})
        return client

    def ensure_client(self, client_id: str, client_secret: str, redirect_uris: list[str]) -> Client:
        """A client with a fixed id and secret (the cluster's audience), made or updated."""
        body = {"client_id": client_id, "client_secret": client_secret, "client_name": client_id,
                "grant_types": ["authorization_code"], "response_types": ["code"],
                "scope": "openid email profile", "redirect_uris": redirect_uris,
                "token_endpoint_auth_method": "client_secret_basic"}
        response = requests.post(f"{self.admin_url}/admin/clients", json=body, timeout=10)
        if response.status_code == 409:
            self._admin("PUT", f"/admin/clients/{client_id}", json=body)
        else:
            assert response.ok, response.text
        return Client(client_id, client_secret)

    def id_token(self, client: Client, redirect_uri: str, subject: str, claims: dict) -> str:
        """An ID token for ``subject`` through the whole code flow with PKCE, as a kubectl
        OIDC login plugin gets one."""
        verifier, challenge = pkce_pair()
        url = self.authorization_url(client, redirect_uri, state=secrets.token_urlsafe(16),
                                     nonce=secrets.token_urlsafe(16), code_challenge=challenge)
        code = parse_qs(urlparse(self.follow(url, subject, claims, until=redirect_uri)).query)["code"][0]
        return self.exchange(client, code, redirect_uri, verifier)["id_token"]

    def accept_login(self, challenge: str, subject: str) -> str:
        return self._admin("PUT", "/admin/oauth2/auth/requests/login/accept",
                           params={"login_challenge": challenge},
                           json={"subject": subject, "remember": False})["redirect_to"]

    def accept_consent(self, challenge: str, claims: dict) -> str:
        asked = self._admin("GET", "/admin/oauth2/auth/requests/consent", params={"consent_challenge": challenge})
        return self._admin("PUT", "/admin/oauth2/auth/requests/consent/accept",
                           params={"consent_challenge": challenge},
                           json={"grant_scope": asked["requested_scope"],
                                 "grant_access_token_audience": asked.get("requested_access_token_audience") or [],
                                 "remember": False,
                                 "session": {"id_token": claims, "access_token": {}}})["redirect_to"]

    def accept_logout(self, challenge: str) -> str:
        return self._admin("PUT", "/admin/oauth2/auth/requests/logout/accept",
                           params={"logout_challenge": challenge})["redirect_to"]

    def answer(self, url: str, subject: str, claims: dict) -> str | None:
        """If ``url`` is Hydra's login, consent or logout page, accept it and return where
        Hydra sends the browser next; else ``None``."""
        query = parse_qs(urlparse(url).query)
        if "login_challenge" in query:
            return self.accept_login(query["login_challenge"][0], subject)
        if "consent_challenge" in query:
            return self.accept_consent(query["consent_challenge"][0], claims)
        if "logout_challenge" in query:
            return self.accept_logout(query["logout_challenge"][0])
        return None

    def follow(self, url: str, subject: str, claims: dict, *, until: str) -> str:
        """Follow Hydra's redirects from ``url`` (an authorization request), answering login
        and consent, until one leads to a URL starting with ``until`` (the RP's callback)."""
        browser = requests.Session()
        for _ in range(12):
            if url.startswith(until):
                return url
            answered = self.answer(url, subject, claims)
            if answered is not None:
                url = answered
                continue
            response = browser.get(url, allow_redirects=False, timeout=10, verify=self.ca_bundle)
            assert response.is_redirect, f"{url}: {response.status_code} {response.text[:500]}"
            url = requests.compat.urljoin(url, response.headers["Location"])
        raise AssertionError(f"too many redirects, last {url}")

    def authorization_url(self, client: Client, redirect_uri: str, *, state: str, nonce: str,
                          code_challenge: str) -> str:
        """An authorization request made by hand (as an attacker would)."""
        return f"{self.issuer}/oauth2/auth?" + urlencode({
            "response_type": "code", "client_id": client.client_id, "redirect_uri": redirect_uri,
            "scope": "openid email profile", "state": state, "nonce": nonce,
            "code_challenge": code_challenge, "code_challenge_method": "S256",
        })

    def exchange(self, client: Client, code: str, redirect_uri: str, code_verifier: str) -> dict:
        response = requests.post(f"{self.issuer}/oauth2/token", verify=self.ca_bundle, timeout=10,
                                 auth=(client.client_id, client.client_secret),
                                 data={"grant_type": "authorization_code", "code": code,
                                       "redirect_uri": redirect_uri, "code_verifier": code_verifier})
        assert response.ok, response.text
        return response.json()


class LoginApp:
    """Hydra's login, consent and logout app, served for real on its address (Hydra's app
    port, deploy/stack/components/hydra.py, shifted as the issuer's) while a browser test runs: each
    challenge is accepted for ``subject`` with ``claims`` and the browser redirected on.
    One at a time on this machine (a file lock), as every test session shares the IdP."""

    def __init__(self, hydra: Hydra, subject: str, claims: dict):
        self.hydra, self.subject, self.claims = hydra, subject, claims
        self.answered: list[str] = []
        ports = HYDRA.ports
        self.port = urlparse(hydra.issuer).port - ports["public"] + ports["app"]

    def __enter__(self) -> "LoginApp":
        lock_path = Path(self.hydra.ca_bundle).parents[1] / "login-app.lock"
        self._lock = open(lock_path, "w")
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        app = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the http.server name
                try:
                    target = app.hydra.answer(f"http://127.0.0.1:{app.port}{self.path}", app.subject, app.claims)
                except AssertionError as err:
                    self.send_error(502, str(err)[:200])
                    return
                if target is None:
                    self.send_error(404)
                    return
                app.answered.append(urlparse(self.path).path.strip("/"))
                self.send_response(302)
                self.send_header("Location", target)
                self.end_headers()

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        fcntl.flock(self._lock, fcntl.LOCK_UN)
        self._lock.close()
