"""Where a webhook may send: public addresses only, unless an admin allows a network.

A webhook URL is typed by a team owner, and the platform's workers sit inside the
cluster's network; without this check a webhook could probe the API server, the
database or the cloud's metadata service. Every address the host name resolves to must
be public (or inside ``WEBHOOK_ALLOWED_NETWORKS``): checked when the webhook is saved and
again at each send, because DNS can answer differently later (rebinding). The sender
then connects to the address that was checked, never resolving the name a second time.
"""

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

SCHEMES = {"http": 80, "https": 443}


class UnsafeTarget(ValueError):
    """A URL the platform refuses to call; the message says why in plain words."""


def allowed_networks(values=None) -> list:
    values = settings.WEBHOOK_ALLOWED_NETWORKS if values is None else values
    return [ipaddress.ip_network(value, strict=False) for value in values]


def is_allowed(address, networks=None) -> bool:
    ip = ipaddress.ip_address(address)
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    networks = allowed_networks() if networks is None else networks
    if any(ip in network for network in networks):
        return True
    # is_global is False for loopback, link-local (169.254.169.254), private, shared
    # (100.64/10), documentation and reserved ranges alike.
    return ip.is_global and not ip.is_multicast


def split(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL we may call, or ``UnsafeTarget``."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise UnsafeTarget("Use an http:// or https:// URL.")
    if parts.username or parts.password:
        raise UnsafeTarget("Leave credentials out of the URL; verify the signature instead.")
    if not parts.hostname:
        raise UnsafeTarget("The URL needs a host name.")
    try:
        port = parts.port or SCHEMES[parts.scheme]
    except ValueError:
        raise UnsafeTarget("The port is not a number between 1 and 65535.") from None
    return parts.scheme, parts.hostname, port


def resolve(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, address to connect to) after checking every address the
    host resolves to; raises ``UnsafeTarget``."""
    scheme, host, port = split(url)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise UnsafeTarget(f"The host {host} cannot be resolved.") from None
    addresses = sorted({info[4][0] for info in infos})
    networks = allowed_networks()
    refused = [address for address in addresses if not is_allowed(address, networks)]
    if refused or not addresses:
        raise UnsafeTarget(
            f"{host} resolves to {', '.join(refused) or 'nothing'}, an address webhooks may not reach "
            "(loopback, link-local, private or cluster-internal). An administrator can allow a "
            "network with WEBHOOK_ALLOWED_NETWORKS.")
    return scheme, host, port, addresses[0]
