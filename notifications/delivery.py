"""Send one webhook request: sign the body, connect to the address that was checked.

The signature is HMAC-SHA256 of ``"<timestamp>.<body>"`` under the webhook's secret, sent
as ``X-GPUPlatform-Signature: sha256=<hex>`` beside ``X-GPUPlatform-Timestamp``; docs/api.md
shows how a receiver verifies it. Redirects are never followed (a 3xx is a failed attempt),
and the host name is resolved and checked once per attempt (``addresses.resolve``), then the
connection goes to that address, so DNS cannot answer differently in between.

Each attempt has one deadline, ``WEBHOOK_TIMEOUT_SECONDS``, from resolving the host to the
answer's last byte. A socket timeout bounds each read, not their sum: a receiver sending a
byte every second would hold the attempt for as long as it liked. So a timer shuts the
socket down at the deadline, which ends whatever read or write is under way.
"""

import hashlib
import hmac
import http.client
import socket
import ssl
import threading
import time
from urllib.parse import urlsplit

from django.conf import settings

from .addresses import UnsafeTarget, resolve

USER_AGENT = "gpuplatform-webhooks/1"


def signature(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


class _Deadline:
    """Shuts a connection's socket down when the attempt's time is up."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.ends = time.monotonic() + seconds
        self.expired = False
        self._sockets = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        left = self.ends - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline")
        return left

    def watch(self, sock) -> None:
        with self._lock:
            self._sockets.append(sock)
            if not self.expired:
                return
        self._shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            watched = list(self._sockets)
        for sock in watched:
            self._shut(sock)

    @staticmethod
    def _shut(sock) -> None:
        try:
            # The plain socket's shutdown, also under TLS: SSLSocket.shutdown would drop the
            # TLS state another thread is reading with.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass  # closed already

    def cancel(self) -> None:
        self._timer.cancel()


def _connect(address: str, port: int, deadline: _Deadline):
    sock = socket.create_connection((address, port), deadline.left())
    deadline.watch(sock)
    return sock


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, host, port, address, deadline):
        super().__init__(host, port, timeout=deadline.seconds)
        self._address, self._deadline = address, deadline

    def connect(self):
        self.sock = _connect(self._address, self.port, self._deadline)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, host, port, address, deadline):
        super().__init__(host, port, timeout=deadline.seconds, context=ssl.create_default_context())
        self._address, self._deadline = address, deadline

    def connect(self):
        sock = _connect(self._address, self.port, self._deadline)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)
        self._deadline.watch(self.sock)


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str]:
    """POST ``body`` within ``WEBHOOK_TIMEOUT_SECONDS``; returns (status code or None,
    error text or "")."""
    deadline = _Deadline(settings.WEBHOOK_TIMEOUT_SECONDS)
    try:
        return _post(url, body, headers, deadline)
    finally:
        deadline.cancel()


def _post(url: str, body: bytes, headers: dict[str, str], deadline: _Deadline) -> tuple[int | None, str]:
    try:
        scheme, host, port, address = resolve(url)
    except UnsafeTarget as err:
        return None, f"Refused: {err}"
    connection_class = _PinnedHTTPS if scheme == "https" else _PinnedHTTP
    connection = connection_class(host, port, address, deadline)
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request("POST", path, body=body, headers={"User-Agent": USER_AGENT, **headers})
        response = connection.getresponse()
        response.read(64 * 1024)
        status = response.status
    except (OSError, http.client.HTTPException) as err:
        if deadline.expired or isinstance(err, TimeoutError):
            return None, (f"The receiver did not answer within {settings.WEBHOOK_TIMEOUT_SECONDS} s "
                          "(WEBHOOK_TIMEOUT_SECONDS, the whole attempt).")
        return None, f"{type(err).__name__}: {err}"
    finally:
        connection.close()
    if 300 <= status < 400:
        return status, "Redirects are not followed; give the final URL."
    return status, "" if 200 <= status < 300 else f"The receiver answered {status}."
