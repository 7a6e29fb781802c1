"""The HTTP service's commands: ``serve`` (the API, the status page and /metrics on
uvicorn) and ``token create|list|revoke`` (its bearer tokens, on the database)."""

from __future__ import annotations

import os

import click

from gate.untrusted import terminal_safe

from .common import database_option, echo_json, open_database


@click.command()
@database_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.option("--public-read", is_flag=True, help="Reads (GETs, the status page) need no token.")
@click.option(
    "--forwarded-allow-ips",
    default=None,
    metavar="IPS",
    help="Behind a TLS proxy: the proxy's addresses (comma-separated, or *), whose "
    "X-Forwarded-Proto/For are trusted (the sign-in cookie is then Secure).",
)
@click.option(
    "--source-hosts",
    default="public",
    show_default=True,
    envvar="PROMPTGATE_SOURCE_HOSTS",
    metavar="LIST",
    help="Where dataset sources registered or synced through the service may connect: host names, "
    "CIDRs and 'public' (every globally routable address), comma-separated. Loopback, "
    "link-local, private and the server's own addresses are refused unless listed.",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="HOST",
    help="A Host name the service answers for (repeatable; also PROMPTGATE_ALLOWED_HOSTS, comma-"
    "separated). Default: localhost, 127.0.0.1, ::1 and --host when it is a specific address.",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds a connection may take to send a request's headers before it is closed.",
)
@click.option(
    "--body-timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds a request's whole body may take to arrive (else 408).",
)
@click.option(
    "--max-waits-per-token",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Long-polls (/v1/updates/ID/wait) one token may hold open at once (beyond: 429).",
)
@click.option("--docs", is_flag=True, help="Serve Swagger UI at /docs (from the package's own files).")
@click.option(
    "--max-upload-bytes",
    type=click.IntRange(1),
    default=256 * 1024 * 1024,
    show_default=True,
    help="The largest dataset file a client may upload (PUT /v1/datasets/NAME/rows).",
)
@click.option(
    "--max-uploads",
    type=click.IntRange(1),
    default=4,
    show_default=True,
    help="Dataset uploads in progress at once, server-wide (beyond: 429); a token with one in progress "
    "takes another only while more than half stay free. An admin's import (a sync) "
    "is never refused because of other tokens' uploads: it meets only --max-uploads-per-token.",
)
@click.option(
    "--max-uploads-per-token",
    type=click.IntRange(1),
    default=2,
    show_default=True,
    help="Dataset uploads one token may have in progress at once (beyond: 429).",
)
@click.pass_context
def serve(
    ctx,
    host,
    port,
    public_read,
    forwarded_allow_ips,
    source_hosts,
    log_level,
    allowed_hosts,
    header_timeout,
    body_timeout,
    max_waits_per_token,
    docs,
    max_upload_bytes,
    max_uploads,
    max_uploads_per_token,
):
    """Serve the gate over HTTP: JSON under /v1 (OpenAPI at /openapi.json; Swagger UI at
    /docs with --docs), the status page at /, /metrics, /healthz and /readyz. Callers send
    `Authorization: Bearer TOKEN`."""
    import uvicorn

    from gate.datasets.sources.egress import Egress
    from gate.service import ServiceConfig, create_app
    from gate.service.edge import default_hosts, parse_hosts
    from gate.service.protocol import with_header_timeout

    Egress.parse(source_hosts)  # a wrong list stops here, in one line, before anything opens
    hosts = parse_hosts([*allowed_hosts, os.environ.get("PROMPTGATE_ALLOWED_HOSTS", "")]) or default_hosts(host)
    gate = open_database(ctx)
    app = create_app(
        gate,
        ServiceConfig(
            public_read=public_read,
            source_hosts=source_hosts,
            allowed_hosts=hosts,
            body_timeout=body_timeout,
            max_waits_per_token=max_waits_per_token,
            docs=docs,
            max_upload_bytes=max_upload_bytes,
            max_uploads=max_uploads,
            max_uploads_per_token=max_uploads_per_token,
        ),
    )
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        server_header=False,
        timeout_graceful_shutdown=5,
        proxy_headers=bool(forwarded_allow_ips),
        forwarded_allow_ips=forwarded_allow_ips,
        http=with_header_timeout(header_timeout),
    )


@click.group()
def token():
    """The service's bearer tokens (scopes nest: read < submit < admin; feedback beside them)."""


@token.command("create")
@database_option
@click.argument("name")
@click.option(
    "--scope",
    type=click.Choice(["read", "submit", "admin", "feedback", "runtime"]),
    required=True,
    help="read: every GET and the status page; submit: read, and submit, cancel, wait; admin: everything; "
    "feedback: production's outcomes for a canary rollout (POST /v1/feedback) and nothing else; "
    "runtime: production's runtime for --prompts only (load, report what it serves, feedback).",
)
@click.option("--prompts", default=None, help="a runtime token's prompts, by name: a,b (required with --scope runtime)")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def token_create(ctx, name, scope, prompts, as_json):
    """Create token NAME; prints the token once (only its hash is kept)."""
    value = open_database(ctx).create_token(name, scope, prompts)
    if as_json:
        shown = {"name": name, "scope": scope, "token": value}
        if prompts is not None:
            shown["prompts"] = sorted({p.strip() for p in prompts.split(",")})
        echo_json(shown)
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
        echo_json(
            [
                {
                    "name": t.name,
                    "scope": t.scope,
                    "prompts": list(t.prompts) if t.prompts is not None else None,
                    "created_at": t.created_at,
                    "last_used_at": t.last_used_at,
                    "revoked_at": t.revoked_at,
                }
                for t in tokens
            ]
        )
        return
    if not tokens:
        click.echo("no tokens: promptgate token create NAME --scope read|submit|admin")
        return
    click.echo("name\tscope\tcreated\tlast used\tstate")
    for t in tokens:
        used = f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "never used"
        state = f"revoked {t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "active"
        scope = f"{t.scope} ({','.join(t.prompts)})" if t.prompts else t.scope
        click.echo(f"{terminal_safe(t.name)}\t{scope}\t{t.created_at:%Y-%m-%d %H:%M}\t{used}\t{state}")


@token.command("revoke")
@database_option
@click.argument("name")
@click.pass_context
def token_revoke(ctx, name):
    """Revoke token NAME (a running server stops accepting it within 5 seconds)."""
    revoked = open_database(ctx).revoke_token(name)
    click.echo(f"token {name}: revoked" if revoked else f"token {name}: was revoked already")
