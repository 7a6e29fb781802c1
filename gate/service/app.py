"""The application: ``create_app(gate, config)`` wires the domain API ``Gate`` to HTTP.

Its one error boundary: a GateError is ``{"error": its one line, "exit_code": the CLI's}``
with a status that says what kind (400 usage, 404 unknown, 409 a refused transition, 503
the database); a refused token 401/403 (``auth``); a malformed request 400 with one line;
anything else 500 ``internal error`` (logged here, never sent: no stack trace, no SQL).
Before any route: the Host check and the body's bounds (``edge``, ``limits``)."""

from __future__ import annotations

import gc
import logging
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from gate import __version__, db
from gate.contract.http_status import http_status
from gate.errors import GateError, first_line

from .auth import AuthError, TokenCache
from .body_limits import (
    BODY_TIMEOUT_SECONDS,
    DEFAULT_MAX_UPLOADS,
    DEFAULT_MAX_UPLOADS_PER_TOKEN,
    MAX_BODY_BYTES,
    MAX_UPLOAD_BYTES,
    BodyLimit,
    UploadSlots,
)
from .edge import DEFAULT_MAX_WAITS, LOOPBACK_HOSTS, AllowedHosts, EdgeRefusal, WaitSlots
from .reports import ReportCache
from .shown_errors import shown
from .watcher import StatusWatcher

log = logging.getLogger("promptgate.server")
FULL_COLLECTION_AFTER = 1000  # generation-1 collections between full ones (CPython's default: 10)


@dataclass(frozen=True)
class ServiceConfig:
    public_read: bool = False  # read scope without a token (an open status page)
    token_ttl: float = 5.0  # seconds a token look-up is trusted (auth.TokenCache)
    watch_interval: float = 0.25  # seconds between the shared watcher's status reads
    max_body_bytes: int = MAX_BODY_BYTES
    source_hosts: str = "public"  # where sources read for callers may connect (gate.datasets.sources.egress)
    body_timeout: float = BODY_TIMEOUT_SECONDS  # seconds for a whole request body to arrive (else 408)
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS  # Host names answered (edge.AllowedHosts; /login's Origin)
    max_waits_per_token: int = DEFAULT_MAX_WAITS  # long-polls one token may hold open (else 429)
    docs: bool = False  # /docs (Swagger UI from the package's own files)
    max_upload_bytes: int = MAX_UPLOAD_BYTES  # a dataset file uploaded to PUT /v1/datasets/{name}/rows
    max_uploads: int = DEFAULT_MAX_UPLOADS  # uploads at once, server-wide (else 429; an import may go beyond)
    max_uploads_per_token: int = DEFAULT_MAX_UPLOADS_PER_TOKEN  # ... and per token (else 429)


def create_app(gate, config: ServiceConfig | None = None) -> FastAPI:
    config = config or ServiceConfig()
    app = FastAPI(
        title="prompt-gate",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        lifespan=_frozen_start,
        description="Submit prompt changes, wait for their verdicts, read reports; "
        "bearer tokens with scopes read < submit < admin.",
    )
    app.state.gate, app.state.config = gate, config
    from gate.datasets.sources.egress import Egress

    gate.source_egress = Egress.parse(config.source_hosts)  # no ${VAR}, no reach into the server's network
    app.state.tokens = TokenCache(gate, config.token_ttl)
    app.state.reports = ReportCache(gate)
    app.state.watcher = StatusWatcher(gate.engine, config.watch_interval, prepare=app.state.reports.prepare)
    app.state.wait_slots = WaitSlots(config.max_waits_per_token)
    app.state.upload_slots = UploadSlots(config.max_uploads, config.max_uploads_per_token)
    app.add_middleware(
        BodyLimit, limit=config.max_body_bytes, timeout=config.body_timeout, upload_limit=config.max_upload_bytes
    )
    app.add_middleware(AllowedHosts, hosts=config.allowed_hosts)  # added last: runs first
    _error_boundary(app)
    _honest_schema(app)
    _health(app)
    from .api import router

    app.include_router(router)
    _optional_routers(app)
    return app


@asynccontextmanager
async def _frozen_start(app: FastAPI):
    """Full garbage collections kept off the fan-out of a wake (bench/README.md,
    `service_waiters.py`). At start, everything loaded so far (FastAPI, SQLAlchemy,
    uvicorn: ~110k objects that live as long as the process) leaves the collector's view:
    a full collection over it took 135-215 ms. And a full collection waits for 1,000
    younger ones (~7M allocations) instead of 10: with 1,000 long-polls open (~150k live
    objects) each still took 30-140 ms, and answering a wake's 1,000 waiters was enough
    to set one off, stalling every response."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_AFTER)
    yield


def _optional_routers(app: FastAPI) -> None:
    """The status page and /metrics, each in its own module."""
    from . import metrics, pages

    app.include_router(pages.router)
    metrics.install(app)  # its registry, the request counter and the route
    if app.state.config.docs:
        from . import docs

        app.include_router(docs.router())


def _honest_schema(app: FastAPI) -> None:
    """The OpenAPI document without FastAPI's 422: a malformed request is a 400 here
    (``bad_request``), and each route lists its own statuses (``bodies.responses``)."""
    made = app.openapi

    def openapi() -> dict:
        fresh = app.openapi_schema is None
        schema = made()
        if fresh:
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to shape the schema


def error_json(status: int, message: str, exit_code: int = 2, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "exit_code": exit_code}, status_code=status, headers=headers)


def _error_boundary(app: FastAPI) -> None:
    @app.exception_handler(GateError)
    async def gate_error(request: Request, exc: GateError):
        scope = getattr(request.state, "caller_scope", None)  # set by auth.authorize once known
        return error_json(http_status(exc), shown(exc, scope, 500), exc.exit_code)

    @app.exception_handler(AuthError)
    async def auth_error(_request: Request, exc: AuthError):
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return error_json(exc.status, str(exc), 2, headers)

    @app.exception_handler(EdgeRefusal)
    async def edge_refusal(_request: Request, exc: EdgeRefusal):
        return error_json(exc.status, str(exc), 2, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, exc: RequestValidationError):
        errors = exc.errors()
        where = ".".join(str(p) for p in errors[0].get("loc", ())) if errors else "request"
        what = errors[0].get("msg", "invalid") if errors else "invalid"
        if errors and errors[0].get("type") == "value_error":  # a validator's own line (bodies.py)
            return error_json(400, what.removeprefix("Value error, ")[:300])
        return error_json(400, f"{where}: {what}"[:300])

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException):
        return error_json(exc.status_code, str(exc.detail)[:200])

    @app.exception_handler(Exception)
    async def internal(_request: Request, exc: Exception):
        log.exception("internal error")
        return error_json(500, "internal error")


def _health(app: FastAPI) -> None:
    @app.get("/healthz", include_in_schema=False)
    def healthz():
        return {"ok": True}

    @app.get("/readyz", include_in_schema=False)
    def readyz():
        """Ready: the database answers and its schema is current."""
        try:
            pending = db.pending_versions(app.state.gate.engine)
        except Exception as exc:  # any failure to reach the database: not ready (the cause in the log only)
            log.warning("readyz: %s", first_line(exc))
            return error_json(503, "database unreachable")
        if pending:
            return error_json(
                503, f"the schema lacks migration(s) {', '.join(map(str, pending))}: run `promptgate db upgrade`"
            )
        return {"ok": True}
