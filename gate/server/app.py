"""The application: ``create_app(gate, config)`` wires the service API ``Gate`` to HTTP.

Its one error boundary: a GateError is ``{"error": its one line, "exit_code": the CLI's}``
with a status that says what kind (400 usage, 404 unknown, 409 a refused transition, 503
the database); a refused token 401/403 (``auth``); a malformed request 400 with one line;
anything else 500 ``internal error`` (logged here, never sent: no stack trace, no SQL)."""

from __future__ import annotations

import gc
import logging
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__, db
from ..errors import GateError, first_line
from .auth import AuthError, TokenCache
from .http_status import status_of
from .limits import MAX_BODY_BYTES, MAX_UPLOAD_BYTES, BodyLimit
from .reports import ReportCache
from .watcher import StatusWatcher

log = logging.getLogger("promptgate.server")
FULL_COLLECTION_AFTER = 1000        # generation-1 collections between full ones (CPython's default: 10)


@dataclass(frozen=True)
class ServiceConfig:
    public_read: bool = False          # read scope without a token (an open status page)
    token_ttl: float = 5.0             # seconds a token look-up is trusted (auth.TokenCache)
    watch_interval: float = 0.25       # seconds between the shared watcher's status reads
    max_body_bytes: int = MAX_BODY_BYTES
    max_upload_bytes: int = MAX_UPLOAD_BYTES   # a dataset file uploaded to PUT /v1/datasets/{name}/rows


def create_app(gate, config: ServiceConfig | None = None) -> FastAPI:
    config = config or ServiceConfig()
    app = FastAPI(title="prompt-gate", version=__version__, docs_url="/docs", redoc_url=None, lifespan=_frozen_start,
                  description="Submit prompt changes, wait for their verdicts, read reports; "
                              "bearer tokens with scopes read < submit < admin.")
    app.state.gate, app.state.config = gate, config
    app.state.tokens = TokenCache(gate, config.token_ttl)
    app.state.reports = ReportCache(gate)
    app.state.watcher = StatusWatcher(gate.engine, config.watch_interval, prepare=app.state.reports.prepare)
    app.add_middleware(BodyLimit, limit=config.max_body_bytes, upload_limit=config.max_upload_bytes)
    _error_boundary(app)
    _health(app)
    from .api import router
    app.include_router(router)
    _optional_routers(app)
    return app


@asynccontextmanager
async def _frozen_start(_app: FastAPI):
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
    metrics.install(app)         # its registry, the request counter and the route


def error_json(status: int, message: str, exit_code: int = 2, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "exit_code": exit_code}, status_code=status, headers=headers)


def _error_boundary(app: FastAPI) -> None:
    @app.exception_handler(GateError)
    async def gate_error(_request: Request, exc: GateError):
        return error_json(status_of(exc), first_line(exc, 500), exc.exit_code)

    @app.exception_handler(AuthError)
    async def auth_error(_request: Request, exc: AuthError):
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return error_json(exc.status, str(exc), 2, headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, exc: RequestValidationError):
        errors = exc.errors()
        where = ".".join(str(p) for p in errors[0].get("loc", ())) if errors else "request"
        what = errors[0].get("msg", "invalid") if errors else "invalid"
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
        except Exception as exc:      # any failure to reach the database: not ready (the cause in the log only)
            log.warning("readyz: %s", first_line(exc))
            return error_json(503, "database unreachable")
        if pending:
            return error_json(503, f"the schema lacks migration(s) {', '.join(map(str, pending))}: run "
                                   "`promptgate db upgrade`")
        return {"ok": True}
