"""A PyMySQL connection whose "preferred" TLS context (no TLS options given) is built once
per process and shared (gate.db's ``_share_preferred_tls_context`` says why), with no CA
store loaded (``preferred_context``)."""

from __future__ import annotations

import ssl
import threading

from pymysql.connections import Connection

_lock = threading.Lock()
_preferred: list[ssl.SSLContext] = []


class PreferredTLSConnection(Connection):
    def _create_ssl_ctx(self, sslp):
        if isinstance(sslp, dict) and not sslp:  # preferred TLS: unverified, no CA, no client cert
            return preferred_context()
        return super()._create_ssl_ctx(sslp)


def preferred_context() -> ssl.SSLContext:
    """The process's one context for "preferred" TLS: what PyMySQL builds for it (TLS
    offered, nothing verified: no CA to check the server against, no host name), without
    the system's CA store that its ``ssl.create_default_context()`` loads and nothing reads
    when nothing is verified (~20-30 ms of CPU: the first connection of every CLI command
    and worker paid it; bench/README.md, issue 40)."""
    with _lock:
        if not _preferred:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            context.verify_flags &= ~ssl.VERIFY_X509_STRICT
            context.options |= ssl.OP_NO_SSLv2 | ssl.OP_NO_SSLv3
            _preferred.append(context)
        return _preferred[0]
