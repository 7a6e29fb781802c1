"""Where a source read by the service for a caller may connect: the server's network is
the operator's, not the token holder's.

``Egress`` is the policy (``promptgate serve --source-hosts`` / ``PROMPTGATE_SOURCE_HOSTS``):
a comma-separated list of host names, CIDRs and ``public`` (every globally routable
address that is not the server's own; the default). A source's host is resolved once,
every address it resolves to is checked, and the connection goes to the checked address
(``pin``): a name cannot resolve to an allowed address for the check and to another for
the connection. Loopback, link-local (the cloud metadata address 169.254.169.254),
private ranges, shared (CGNAT), multicast, unspecified and reserved addresses, and the
server's own addresses, are refused unless an entry names them; an IPv4 address inside
IPv6 (mapped, 6to4, Teredo, NAT64) is checked as the IPv4 address it reaches.

The readers take the policy in ``SourceOptions.egress`` (None: the CLI on the database,
which reads what its operator asks). HTTP(S) connects through ``http_opener``: every
connection, the redirects' included, goes through the check and is pinned; a redirect
is followed at most ``MAX_REDIRECTS`` times and only to http(s). The SQL warehouse
checks its host with ``pin`` (``warehouse.py``)."""

from __future__ import annotations

import ipaddress
import re
import socket
import urllib.request
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from gate.errors import DatasetError, UsageError

from .deadline import DeadlineHTTPConnection, DeadlineHTTPSConnection

PUBLIC = "public"
ENV = "PROMPTGATE_SOURCE_HOSTS"
MAX_REDIRECTS = 4
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_HOSTNAME = re.compile(r"(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Egress:
    """Which addresses a source read for a caller may connect to."""

    public: bool = True
    networks: tuple = ()
    names: frozenset = field(default_factory=frozenset)

    @classmethod
    def parse(cls, text: str | None) -> Egress:
        entries = [e.strip() for e in (PUBLIC if text is None else text).split(",") if e.strip()]
        if not entries:
            raise UsageError(f"--source-hosts / {ENV}: give host names, CIDRs or 'public' (comma-separated)")
        public, networks, names = False, [], set()
        for entry in entries:
            if entry.lower() == PUBLIC:
                public = True
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            name = entry.lower().rstrip(".")
            if not _HOSTNAME.fullmatch(name):
                raise UsageError(f"--source-hosts / {ENV}: {entry[:80]!r} is neither a host name, a CIDR nor 'public'")
            names.add(name)
        return cls(public, tuple(networks), frozenset(names))

    def describe(self) -> str:
        allowed = (["public addresses"] if self.public else []) + [str(n) for n in self.networks] + sorted(self.names)
        return ", ".join(allowed) or "nothing"

    def refusal(self, address: IPAddress) -> str | None:
        """Why ``address`` may not be connected to (None: it may)."""
        if any(address in net or _unwrapped(address) in net for net in self.networks):
            return None
        if not self.public:
            return "not in the list of allowed hosts"
        kind = _not_global(_unwrapped(address))
        if kind:
            return kind
        if is_own_address(address):
            return "an address of the server itself"
        return None

    def pin(self, host: str | None, port: int, source: str) -> str:
        """The address to connect to for ``host`` (resolved once, every address checked),
        or a DatasetError naming ``source`` and why. Nothing is connected to here."""
        host = (host or "").strip().strip("[]")
        if not host:
            raise DatasetError(f"{source}: names no host")
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError, ValueError):
            raise DatasetError(f"{source}: the host name does not resolve") from None
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos))
        if not addresses:
            raise DatasetError(f"{source}: the host name does not resolve")
        if host.lower().rstrip(".") not in self.names:
            for address in addresses:
                why = self.refusal(address)
                if why:
                    raise DatasetError(
                        f"{source}: refused by the service's source policy: the host is (or resolves "
                        f"to) {why}; the service connects only to {self.describe()} (serve "
                        f"--source-hosts), or register it with --database-url"
                    )
        return str(addresses[0])


def _unwrapped(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, Teredo client, NAT64), else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped:
            return address.ipv4_mapped
        if address.sixtofour:
            return address.sixtofour
        if address.teredo:
            return address.teredo[1]
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


# IANA's special-purpose address registries (iana-ipv4-special-registry, iana-ipv6-special-registry,
# as of 2024), refused by the ``public`` policy whatever Python's ``ipaddress`` says: before 3.11.10 /
# 3.12.4 its ``is_global`` held only 192.0.0.0/29 of 192.0.0.0/24 not global, so 192.0.0.192 (a
# cloud's metadata address) and 192.0.0.8 passed (issue 48, finding 7). Blocks the registry marks
# globally reachable (AS112, AMT) are refused too: no dataset is served from them. The blocks that
# carry an IPv4 address (::ffff:0:0/96, 64:ff9b::/96, 2002::/16, Teredo's 2001::/32) are checked
# as the IPv4 address they reach (``_unwrapped``), so they are not listed here.
SPECIAL_PURPOSE = tuple(
    (ipaddress.ip_network(block), name)
    for block, name in (
        ("0.0.0.0/8", "this network"),
        ("10.0.0.0/8", "private-use"),
        ("100.64.0.0/10", "shared address space"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link local"),
        ("172.16.0.0/12", "private-use"),
        ("192.0.0.0/24", "IETF protocol assignments"),
        ("192.0.2.0/24", "documentation (TEST-NET-1)"),
        ("192.31.196.0/24", "AS112-v4"),
        ("192.52.193.0/24", "AMT"),
        ("192.88.99.0/24", "deprecated 6to4 relay anycast"),
        ("192.168.0.0/16", "private-use"),
        ("192.175.48.0/24", "direct delegation AS112 service"),
        ("198.18.0.0/15", "benchmarking"),
        ("198.51.100.0/24", "documentation (TEST-NET-2)"),
        ("203.0.113.0/24", "documentation (TEST-NET-3)"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
        ("255.255.255.255/32", "limited broadcast"),
        ("::1/128", "loopback"),
        ("::/128", "unspecified"),
        ("::/96", "deprecated IPv4-compatible"),
        ("64:ff9b:1::/48", "IPv4-IPv6 translation, local use"),
        ("100::/64", "discard-only"),
        ("100:0:0:1::/64", "dummy IPv6 prefix"),
        ("2001::/23", "IETF protocol assignments"),
        ("2001:db8::/32", "documentation"),
        ("2620:4f:8000::/48", "direct delegation AS112 service"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "segment routing (SRv6) SIDs"),
        ("fc00::/7", "unique-local"),
        ("fe80::/10", "link-local unicast"),
        ("fec0::/10", "deprecated site-local"),
        ("ff00::/8", "multicast"),
    )
)


def special_purpose(address: IPAddress) -> str | None:
    """The IANA special-purpose block ``address`` is in, named (None: none)."""
    for network, name in SPECIAL_PURPOSE:
        if address.version == network.version and address in network:
            return f"not a globally routable address: in {network} ({name}), an IANA special-purpose block"
    return None


def _not_global(address: IPAddress) -> str | None:
    for kind, test in (
        ("a loopback address", "is_loopback"),
        ("a link-local address", "is_link_local"),
        ("an unspecified address", "is_unspecified"),
        ("a multicast address", "is_multicast"),
        ("a reserved address", "is_reserved"),
        ("a private address", "is_private"),
    ):
        if getattr(address, test):
            return kind
    special = special_purpose(address)
    if special:
        return special
    if not address.is_global:
        return "not a globally routable address"
    return None


def is_own_address(address: IPAddress) -> bool:
    """Is ``address`` one of this machine's? (Binding to it works only if it is; nothing is sent.)"""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((str(address), 0))
        return True
    except OSError:
        return False


# --- HTTP(S) through the policy -----------------------------------------------------------


def _pinned(connection_class, egress: Egress, source: str):
    """A connection factory for urllib: the host checked and its address pinned; the Host
    header, TLS SNI and certificate check keep the name."""

    def make(host, **kwargs):
        connection = connection_class(host, **kwargs)
        address = egress.pin(connection.host, connection.port, source)

        def connect(target, timeout=socket.getdefaulttimeout(), source_address=None):
            return socket.create_connection((address, target[1]), timeout, source_address)

        connection._create_connection = connect
        return connection

    return make


class _PinnedHTTP(urllib.request.HTTPHandler):
    def __init__(self, egress: Egress, source: str):
        super().__init__()
        self.make = _pinned(DeadlineHTTPConnection, egress, source)

    def http_open(self, req):
        return self.do_open(self.make, req)


class _PinnedHTTPS(urllib.request.HTTPSHandler):
    def __init__(self, egress: Egress, source: str):
        super().__init__()
        self.make = _pinned(DeadlineHTTPSConnection, egress, source)

    def https_open(self, req):
        # HTTPSHandler.__init__ sets _context (its SSL context); typeshed does not declare it
        return self.do_open(self.make, req, context=self._context)  # type: ignore[attr-defined]


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """At most MAX_REDIRECTS, only to http(s); the target's host is checked when it is
    connected to (``_pinned``), like the first one."""

    max_redirections = MAX_REDIRECTS
    max_repeats = 2

    def __init__(self, source: str):
        self.source = source

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if urlsplit(newurl).scheme.lower() not in ("http", "https"):
            fp.close()
            raise DatasetError(f"{self.source}: the server redirects to a URL that is not http(s)")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def http_opener(egress: Egress, source: str) -> urllib.request.OpenerDirector:
    """An opener that connects only where ``egress`` allows: no proxy, no other scheme."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.UnknownHandler(),
        _PinnedHTTP(egress, source),
        _PinnedHTTPS(egress, source),
        urllib.request.HTTPDefaultErrorHandler(),
        _CheckedRedirects(source),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener
