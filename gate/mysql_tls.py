"""A PyMySQL connection whose "preferred" TLS context (no TLS options given) is built once
per process and shared (gate.db's ``_share_preferred_tls_context`` says why)."""

from __future__ import annotations

import ssl
import threading

from pymysql.connections import Connection

_lock = threading.Lock()
_preferred: list[ssl.SSLContext] = []


class PreferredTLSConnection(Connection):
    def _create_ssl_ctx(self, sslp):
        if isinstance(sslp, dict) and not sslp:  # preferred TLS: unverified, no CA, no client cert
            with _lock:
                if not _preferred:  # PyMySQL's own context for {}, built once; shared once configured
                    _preferred.append(super()._create_ssl_ctx({}))
                return _preferred[0]
        return super()._create_ssl_ctx(sslp)
