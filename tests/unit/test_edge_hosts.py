"""The Host header and Origin the service answers (``gate.service.edge``): what two readers
would read as different hosts is refused."""

from __future__ import annotations

import pytest

from gate.service.edge import origin_allowed, request_host

ALLOWED = ("gate.example.com", "localhost", "127.0.0.1", "::1")


@pytest.mark.parametrize(
    "header, name",
    [
        ("gate.example.com", "gate.example.com"),
        ("Gate.Example.com:8080", "gate.example.com"),
        ("[::1]:8080", "::1"),
        ("[::1]", "::1"),
        ("127.0.0.1:80", "127.0.0.1"),
    ],
)
def test_a_host_with_an_optional_port_is_read(header, name):
    assert request_host(header) == name


@pytest.mark.parametrize(
    "header",
    [
        "localhost:80@evil",
        "evil@localhost",
        "user:pw@localhost",
        "[::1]:80@evil",
        "localhost:80 ",
        " localhost",
        "localhost/x",
        "localhost?x",
        "localhost:",
        "localhost:abc",
        "localhost:0",
        "localhost:65536",
        "::1",
        "[::1",
        "[not-an-address]",
        "local\thost",
        "",
    ],
)
def test_userinfo_and_other_junk_in_a_host_is_refused(header):
    assert request_host(header) is None


def test_an_origin_is_a_scheme_and_an_allowed_host_only():
    assert origin_allowed("http://localhost:8080", ALLOWED) and origin_allowed("https://[::1]:443", ALLOWED)
    for origin in (
        "http://localhost:80@evil",
        "http://evil@localhost",
        "http://localhost/path",
        "http://localhost?q",
        "http://[::1",
        "ftp://localhost",
        "null",
    ):
        assert not origin_allowed(origin, ALLOWED), origin
