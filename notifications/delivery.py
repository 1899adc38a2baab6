"""Send one webhook request: sign the body, connect to the address that was checked.

The signature is HMAC-SHA256 of ``"<timestamp>.<body>"`` under the webhook's secret, sent
as ``X-GPUPlatform-Signature: sha256=<hex>`` beside ``X-GPUPlatform-Timestamp``; docs/api.md
shows how a receiver verifies it. Redirects are never followed (a 3xx is a failed attempt),
and the host name is resolved and checked once per attempt (``addresses.resolve``), then the
connection goes to that address, so DNS cannot answer differently in between.
"""

import hashlib
import hmac
import http.client
import socket
import ssl
from urllib.parse import urlsplit

from django.conf import settings

from .addresses import UnsafeTarget, resolve

USER_AGENT = "gpuplatform-webhooks/1"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, host, port, address, timeout):
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self):
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, host, port, address, timeout):
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self):
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str]:
    """POST ``body``; returns (status code or None, error text or "")."""
    try:
        scheme, host, port, address = resolve(url)
    except UnsafeTarget as err:
        return None, f"Refused: {err}"
    connection_class = _PinnedHTTPS if scheme == "https" else _PinnedHTTP
    connection = connection_class(host, port, address, settings.WEBHOOK_TIMEOUT_SECONDS)
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request("POST", path, body=body, headers={"User-Agent": USER_AGENT, **headers})
        response = connection.getresponse()
        response.read(64 * 1024)
        status = response.status
    except (OSError, http.client.HTTPException) as err:
        return None, f"{type(err).__name__}: {err}"
    finally:
        connection.close()
    if 300 <= status < 400:
        return status, "Redirects are not followed; give the final URL."
    return status, "" if 200 <= status < 300 else f"The receiver answered {status}."
