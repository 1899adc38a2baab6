"""Finding 10 (issue 29): the webhook address check took NAT64 (``64:ff9b::/96``) forms of
loopback, private and link-local addresses. Every IPv6 form that carries an IPv4 address
is judged by what it carries or refused, and an IPv4 address written in any form but four
decimal numbers is refused before it is resolved."""

import ipaddress
import socket

import pytest
from django.core.exceptions import ValidationError

from notifications.addresses import UnsafeTarget, is_allowed, resolve
from notifications.models import Webhook

REFUSED_IPV4 = ["127.0.0.1", "10.96.0.1", "169.254.169.254", "192.168.1.5", "100.64.0.1", "0.0.0.0", "172.16.0.1"]


def embeddings(v4: str) -> dict[str, str]:
    """Every IPv6 form of ``v4``: name -> address."""
    n = int(ipaddress.IPv4Address(v4))
    return {
        "nat64 well-known": str(ipaddress.IPv6Address((0x64FF9B << 96) | n)),
        "nat64 local-use": str(ipaddress.IPv6Address((0x64FF9B0001 << 80) | n)),
        "ipv4-mapped": f"::ffff:{v4}",
        "ipv4-translated": str(ipaddress.IPv6Address((0xFFFF << 48) | n)),
        "ipv4-compatible": str(ipaddress.IPv6Address(n)),
        "6to4": str(ipaddress.IPv6Address((0x2002 << 112) | (n << 80) | 1)),
        "teredo": str(ipaddress.IPv6Address((0x20010000 << 96) | (0xFFFFFFFF ^ n))),
    }


@pytest.mark.parametrize("v4", REFUSED_IPV4)
@pytest.mark.parametrize("form", list(embeddings("127.0.0.1")))
def test_finding_10_every_ipv6_embedding_of_a_refused_address_is_refused(settings, v4, form):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    address = embeddings(v4)[form]
    assert not is_allowed(address), (form, address)


def test_finding_10_nat64_and_mapped_forms_of_a_public_address_still_pass(settings):
    """An IPv6-only cluster reaches the IPv4 internet through NAT64: a public address in the
    well-known prefix is public; the deprecated tunnels are refused whatever they carry."""
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    forms = embeddings("93.184.215.14")
    assert is_allowed(forms["nat64 well-known"]) and is_allowed(forms["ipv4-mapped"])
    assert not any(is_allowed(forms[name]) for name in ("6to4", "teredo", "ipv4-compatible", "ipv4-translated",
                                                         "nat64 local-use"))


def test_finding_10_an_allowed_ipv4_network_covers_its_nat64_form(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.20.0.0/16"]
    assert is_allowed(embeddings("10.20.3.4")["nat64 well-known"])
    assert not is_allowed(embeddings("10.21.3.4")["nat64 well-known"])


@pytest.mark.django_db
def test_finding_10_a_name_that_resolves_to_nat64_loopback_cannot_be_saved(team, owner, monkeypatch, settings):
    """DNS64 answers an AAAA record: the name looks public, the address is 169.254.169.254."""
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    metadata = embeddings("169.254.169.254")["nat64 well-known"]
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port, *a, **k: [
        (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (metadata, port, 0, 0))])
    hook = Webhook(team=team, url="https://hooks.example.test/x", kinds=["job.failed"], created_by=owner)
    with pytest.raises(ValidationError) as err:
        hook.full_clean()
    assert metadata in err.value.message_dict["url"][0]


@pytest.mark.parametrize("host", ["2130706433", "0x7f000001", "0x7f.1", "0177.0.0.1", "127.1", "017700000001",
                                  "127.000.000.001"])
def test_finding_10_odd_ipv4_forms_are_refused_before_resolving(settings, monkeypatch, host):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["0.0.0.0/0"]  # even where every IPv4 address is allowed
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: pytest.fail("resolved"))
    with pytest.raises(UnsafeTarget, match="four decimal numbers"):
        resolve(f"http://{host}:8080/hook")


@pytest.mark.parametrize("url", ["http://[64:ff9b::7f00:1]:8080/x", "http://[::ffff:7f00:1]/x",
                                 "http://[2002:7f00:1::1]/x", "http://[::127.0.0.1]/x"])
def test_finding_10_bracketed_ipv6_literals_carrying_loopback_are_refused(settings, url):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    with pytest.raises(UnsafeTarget, match="an address webhooks may not reach"):
        resolve(url)
