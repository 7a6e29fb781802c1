"""Opening connections to MariaDB costs what the connection needs, not a CA store per
connection (gate.db: the preferred-TLS context is built once per process)."""

from __future__ import annotations

import ssl

import pymysql.connections
from sqlalchemy import text

from gate.db import make_engine, warm_pool


def test_a_pool_of_connections_builds_the_preferred_tls_context_at_most_once(mysql_url, monkeypatch):
    built = []
    create = ssl.create_default_context

    def counted(*args, **kwargs):
        built.append(args or kwargs)
        return create(*args, **kwargs)

    monkeypatch.setattr(pymysql.connections.ssl, "create_default_context", counted)
    engine = make_engine(mysql_url, pool_size=6)
    try:
        warm_pool(engine, 6)
        held = [engine.connect() for _ in range(6)]
        answers = [conn.execute(text("SELECT 1")).scalar() for conn in held]
        for conn in held:
            conn.close()
    finally:
        engine.dispose()
    assert answers == [1] * 6
    assert len(built) <= 1, f"{len(built)} TLS contexts built (each loads the system's CA store) for 6 connections"


def test_preferred_tls_loads_no_ca_store_and_speaks_tls_as_the_server_offers(mysql_url):
    """The preferred context verifies nothing, so it loads no CA store (PyMySQL's loaded the
    system's: ~20-30 ms of every command's first connection); a connection still speaks TLS
    exactly when the server offers it."""
    engine = make_engine(mysql_url, pool_size=1)
    try:
        with engine.connect() as conn:
            context = conn.connection.dbapi_connection.ctx  # the TLS context PyMySQL connected with
            offered = conn.execute(text("SHOW GLOBAL VARIABLES LIKE 'have_ssl'")).one()[1]
            cipher = conn.execute(text("SHOW SESSION STATUS LIKE 'Ssl_cipher'")).one()[1]
    finally:
        engine.dispose()
    assert context.cert_store_stats()["x509_ca"] == 0
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname
    assert bool(cipher) == (offered == "YES"), (offered, cipher)


def test_the_preferred_context_completes_a_handshake_with_a_self_signed_server(tmp_path):
    """A MariaDB with TLS on serves a certificate nothing here trusts (its own, generated):
    the preferred context (this suite's servers have TLS off) still completes a handshake."""
    import datetime as dt
    import socket
    import threading

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from gate.mysql_tls import preferred_context

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "MariaDB_Server_Auto_Generated")])
    now = dt.datetime.now(dt.UTC)
    cert = x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
    cert = cert.serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
    (tmp_path / "cert.pem").write_bytes(cert.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    ours, theirs = socket.socketpair()
    served = threading.Thread(target=lambda: server.wrap_socket(theirs, server_side=True).recv(1))
    served.start()
    with preferred_context().wrap_socket(ours, server_hostname=None) as tls:
        version = tls.version()
        tls.sendall(b"x")
    served.join(10)
    theirs.close()
    assert version in ("TLSv1.2", "TLSv1.3")
