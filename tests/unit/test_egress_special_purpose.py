"""The ``public`` egress policy refuses every IANA special-purpose block itself, whatever
Python's ``ipaddress`` says (issue 48, finding 7): before Python 3.11.10 / 3.12.4,
``is_global`` held only 192.0.0.0/29 of 192.0.0.0/24 not global, so a source could reach
192.0.0.192 (a cloud's metadata address) and 192.0.0.8. The registries' blocks are checked
here with ``ipaddress`` made to call every address global, as an old interpreter would."""

from __future__ import annotations

import ipaddress

import pytest

from gate.datasets.sources.egress import Egress

# IANA IPv4 and IPv6 special-purpose address registries (the blocks that carry an IPv4 address,
# mapped, NAT64, 6to4 and Teredo, are checked as the IPv4 address: tests/unit/test_egress_policy.py)
IANA_BLOCKS = [
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.0.0/29", "192.0.0.8/32", "192.0.0.9/32", "192.0.0.10/32", "192.0.0.170/31",
    "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24", "192.168.0.0/16",
    "192.175.48.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4",
    "255.255.255.255/32",
    "::1/128", "::/128", "64:ff9b:1::/48", "100::/64", "100:0:0:1::/64", "2001::/23", "2001:1::1/128",
    "2001:1::2/128", "2001:1::3/128", "2001:2::/48", "2001:3::/32", "2001:4:112::/48", "2001:10::/28",
    "2001:20::/28", "2001:30::/28", "2001:db8::/32", "2620:4f:8000::/48", "3fff::/20", "5f00::/16",
    "fc00::/7", "fe80::/10",
]  # fmt: skip

PROPERTIES = ("is_global", "is_private", "is_reserved", "is_loopback", "is_link_local", "is_multicast")


@pytest.fixture
def python_says_global(monkeypatch):
    """``ipaddress`` calling every address global and nothing else: the policy's own table decides."""
    for cls in (ipaddress.IPv4Address, ipaddress.IPv6Address):
        for name in PROPERTIES:
            monkeypatch.setattr(cls, name, property(lambda self, g=name == "is_global": g))
        monkeypatch.setattr(cls, "is_unspecified", property(lambda self: False))
    assert ipaddress.ip_address("192.0.0.192").is_global


def addresses(block: str):
    net = ipaddress.ip_network(block)
    yield net.network_address
    yield net.broadcast_address
    yield net.network_address + net.num_addresses // 2


@pytest.mark.parametrize("block", IANA_BLOCKS)
def test_every_special_purpose_block_is_refused_whatever_python_says(block, python_says_global, monkeypatch):
    monkeypatch.setattr("gate.datasets.sources.egress.is_own_address", lambda _a: False)
    policy = Egress.parse(None)
    for address in addresses(block):
        assert policy.refusal(address), (block, address)


def test_the_reviews_addresses_are_refused_and_a_public_one_is_not(python_says_global, monkeypatch):
    monkeypatch.setattr("gate.datasets.sources.egress.is_own_address", lambda _a: False)
    policy = Egress.parse(None)
    for spelled in ("192.0.0.192", "192.0.0.8", "::ffff:192.0.0.192", "64:ff9b::c000:c0", "2002:c000:00c0::1"):
        assert "192.0.0.0/24" in (policy.refusal(ipaddress.ip_address(spelled)) or ""), spelled
    for public in ("8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "192.0.3.1", "192.1.0.1"):
        assert policy.refusal(ipaddress.ip_address(public)) is None, public
    assert Egress.parse("192.0.0.0/24").refusal(ipaddress.ip_address("192.0.0.192")) is None  # named: allowed
