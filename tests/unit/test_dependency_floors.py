"""The dependency floors the threat model rests on (issue 48, finding 9): ``jinja2>=3.1``
admitted 3.1.4-3.1.5, whose sandbox lets ``{{ "{0.__init__.__globals__[sys]...}"|attr("format")(self) }}``
pass the template check and render the environment (CVE-2025-27516, fixed in 3.1.6). Each
floor here is the release that fixes a known flaw of a library the gate trusts with untrusted
input (docs/security.md); both the package's list and the ``client`` extra (what the Action
installs) must hold it, and the installed versions must meet it."""

from __future__ import annotations

import tomllib
from importlib.metadata import version

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from support.cli import ROOT

FLOORS = {  # package: (the fixed release, why)
    "jinja2": ("3.1.6", "CVE-2025-27516, CVE-2024-56326, CVE-2024-56201: sandbox escapes"),
    "pyyaml": ("5.4", "CVE-2020-14343: full_load runs code"),
    "pymysql": ("1.1.1", "CVE-2024-36039: dict keys unescaped"),
    "cryptography": ("44.0.1", "CVE-2024-12797: the OpenSSL its wheels bundle"),
    "starlette": ("0.49.1", "CVE-2025-62727, CVE-2025-54121, CVE-2024-47874: request DoS"),
    "h11": ("0.16.0", "CVE-2025-43859: chunked request smuggling"),
    "httptools": ("0.6.3", "CVE-2024-27982 (llhttp): request smuggling"),
    "uvicorn": ("0.11.7", "CVE-2020-7694, CVE-2020-7695: log and header injection"),
    "fastapi": ("0.109.1", "CVE-2024-24762: Content-Type ReDoS"),
    "requests": ("2.33.0", "CVE-2024-47081, CVE-2026-25645: the GitHub token's transport"),
    "urllib3": ("2.7.0", "CVE-2026-21441, CVE-2025-66471, CVE-2026-44431: the GitHub token's transport"),
}
CLIENT = ("jinja2", "pyyaml", "requests", "urllib3")  # what the client extra (the Action) installs of them


def _floors(requirements: list[str]) -> dict[str, Version | None]:
    out: dict[str, Version | None] = {}
    for text in requirements:
        req = Requirement(text)
        lows = [Version(s.version) for s in req.specifier if s.operator in (">=", "==", "~=")]
        out[req.name.lower()] = max(lows) if lows else None
    return out


@pytest.fixture(scope="module")
def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_the_package_list_holds_each_floor(project, package):
    fixed, why = FLOORS[package]
    found = _floors(project["dependencies"]).get(package)
    assert found is not None and found >= Version(fixed), f"{package}>={fixed} ({why}); pyproject has {found}"


@pytest.mark.parametrize("package", CLIENT)
def test_the_client_extra_holds_each_floor(project, package):
    fixed, why = FLOORS[package]
    found = _floors(project["optional-dependencies"]["client"]).get(package)
    assert found is not None and found >= Version(fixed), f"client: {package}>={fixed} ({why}); has {found}"


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_the_installed_version_meets_its_floor(package):
    assert Version(version(package)) >= Version(FLOORS[package][0]), package


def test_pymysql_comes_with_its_rsa_extra(project):
    """MySQL 8's default authentication (caching_sha2_password) over a connection without TLS
    sends the password encrypted with the server's RSA key: PyMySQL needs ``cryptography`` for
    it (its ``rsa`` extra), else the first connection fails to authenticate (issue 50.6)."""
    (pymysql,) = [Requirement(r) for r in project["dependencies"] if Requirement(r).name.lower() == "pymysql"]
    assert "rsa" in pymysql.extras, pymysql
