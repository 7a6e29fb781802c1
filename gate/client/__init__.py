"""The service's client: ``RemoteGate`` over a ``ServiceSession`` on the standard library's
HTTP transport (no SQLAlchemy, no service, no store)."""
