"""Where a webhook may send: public addresses only, unless an admin allows a network.

A webhook URL is typed by a team owner, and the platform's workers sit inside the
cluster's network; without this check a webhook could probe the API server, the
database or the cloud's metadata service. Every address the host name resolves to must
be public (or inside ``WEBHOOK_ALLOWED_NETWORKS``): checked when the webhook is saved and
again at each send, because DNS can answer differently later (rebinding). The sender
then connects to the address that was checked, never resolving the name a second time.

An IPv6 address can carry an IPv4 one inside it. Two embeddings have a use on the public
internet and are judged by the IPv4 address they carry: IPv4-mapped ``::ffff:a.b.c.d``
and NAT64's well-known prefix ``64:ff9b::/96`` (a NAT64 gateway would forward
``64:ff9b::7f00:1`` to 127.0.0.1). Every other embedding is refused whatever it carries:
NAT64 local-use ``64:ff9b:1::/48`` (where the IPv4 address sits depends on the operator's
prefix), 6to4 ``2002::/16`` and Teredo ``2001::/32`` (both deprecated, tunnels to an IPv4
address), IPv4-compatible ``::a.b.c.d`` (deprecated) and IPv4-translated
``::ffff:0:a.b.c.d``. Python calls some of them global. A host written as an IPv4 address
in any form but four decimal numbers (``2130706433``, ``0x7f.1``, ``0177.0.0.1``) is
refused before it is resolved: resolvers differ on what such a name means.
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


# Embeddings judged by the IPv4 address in their last 32 bits.
CARRIERS = [ipaddress.ip_network("::ffff:0:0/96"), ipaddress.ip_network("64:ff9b::/96")]
# Embeddings refused whatever they carry.
TUNNELS = [ipaddress.ip_network(net) for net in (
    "64:ff9b:1::/48",  # NAT64 local use (RFC 8215)
    "2002::/16",  # 6to4 (RFC 3056, deprecated by RFC 7526)
    "2001::/32",  # Teredo (RFC 4380)
    "::/96",  # IPv4-compatible (RFC 4291, deprecated), :: and ::1 among them
    "::ffff:0:0:0/96",  # IPv4-translated (RFC 2765)
)]


def _carried(ip):
    """The IPv4 address an allowed embedding carries, or the address itself."""
    if ip.version == 6 and any(ip in carrier for carrier in CARRIERS):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def is_allowed(address, networks=None) -> bool:
    ip = ipaddress.ip_address(address)
    networks = allowed_networks() if networks is None else networks
    if any(ip in network for network in networks):
        return True  # an administrator allowed it as written
    if ip.version == 6 and any(ip in tunnel for tunnel in TUNNELS):
        return False
    ip = _carried(ip)
    if ip.version == 4 and any(ip in network for network in networks):
        return True
    # is_global is False for loopback, link-local (169.254.169.254), private, shared
    # (100.64/10), documentation and reserved ranges alike.
    return ip.is_global and not ip.is_multicast


def _is_odd_ipv4(host: str) -> bool:
    """A host the C resolver reads as an IPv4 address that is not four decimal numbers."""
    try:
        socket.inet_aton(host)
    except (OSError, ValueError):
        return False
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return True
    return False


def split(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL we may call, or ``UnsafeTarget``."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise UnsafeTarget("Use an http:// or https:// URL.")
    if parts.username or parts.password:
        raise UnsafeTarget("Leave credentials out of the URL; verify the signature instead.")
    if not parts.hostname:
        raise UnsafeTarget("The URL needs a host name.")
    if _is_odd_ipv4(parts.hostname):
        raise UnsafeTarget("Write an IPv4 address as four decimal numbers (for example 203.0.113.7).")
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
