"""The HTTP service's commands: ``serve`` (the API, the status page and /metrics on
uvicorn) and ``token create|list|revoke`` (its bearer tokens, on the database)."""

from __future__ import annotations

import click

from ..untrusted import terminal_safe
from .common import database_option, echo_json, open_database


@click.command()
@database_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option("--public-read", is_flag=True, help="Reads (GETs, the status page) need no token.")
@click.option("--forwarded-allow-ips", default=None, metavar="IPS",
              help="Behind a TLS proxy: the proxy's addresses (comma-separated, or *), whose "
                   "X-Forwarded-Proto/For are trusted (the sign-in cookie is then Secure).")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]), default="info",
              show_default=True)
@click.pass_context
def serve(ctx, host, port, public_read, forwarded_allow_ips, log_level):
    """Serve the gate over HTTP: JSON under /v1 (OpenAPI at /docs), the status page at /,
    /metrics, /healthz and /readyz. Callers send `Authorization: Bearer TOKEN`."""
    import uvicorn
    from ..server import ServiceConfig, create_app
    gate = open_database(ctx)
    app = create_app(gate, ServiceConfig(public_read=public_read))
    uvicorn.run(app, host=host, port=port, log_level=log_level, server_header=False, timeout_graceful_shutdown=5,
                proxy_headers=bool(forwarded_allow_ips), forwarded_allow_ips=forwarded_allow_ips)


@click.group()
def token():
    """The service's bearer tokens (scopes nest: read < submit < admin)."""


@token.command("create")
@database_option
@click.argument("name")
@click.option("--scope", type=click.Choice(["read", "submit", "admin"]), required=True,
              help="read: every GET and the status page; submit: read, and submit, cancel, wait; admin: everything.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def token_create(ctx, name, scope, as_json):
    """Create token NAME; prints the token once (only its hash is kept)."""
    value = open_database(ctx).create_token(name, scope)
    if as_json:
        echo_json({"name": name, "scope": scope, "token": value})
    else:
        click.echo(value)


@token.command("list")
@database_option
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def token_list(ctx, as_json):
    """The tokens: name, scope, created, last used, and active or revoked (never the token)."""
    tokens = open_database(ctx).list_tokens()
    if as_json:
        echo_json([{"name": t.name, "scope": t.scope, "created_at": t.created_at, "last_used_at": t.last_used_at,
                    "revoked_at": t.revoked_at} for t in tokens])
        return
    if not tokens:
        click.echo("no tokens: promptgate token create NAME --scope read|submit|admin")
        return
    click.echo("name\tscope\tcreated\tlast used\tstate")
    for t in tokens:
        used = f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "never used"
        state = f"revoked {t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "active"
        click.echo(f"{terminal_safe(t.name)}\t{t.scope}\t{t.created_at:%Y-%m-%d %H:%M}\t{used}\t{state}")


@token.command("revoke")
@database_option
@click.argument("name")
@click.pass_context
def token_revoke(ctx, name):
    """Revoke token NAME (a running server stops accepting it within 5 seconds)."""
    revoked = open_database(ctx).revoke_token(name)
    click.echo(f"token {name}: revoked" if revoked else f"token {name}: was revoked already")
