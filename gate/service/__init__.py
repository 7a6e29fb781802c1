"""The gate as an HTTP service (`promptgate serve`): a FastAPI application over the
domain API ``Gate``, served by uvicorn.

* ``app``: ``create_app`` — the application, its error boundary (every GateError is JSON
  with the CLI's one-line message; nothing else leaves but ``internal error``), the
  request-size limit, ``/healthz`` and ``/readyz``;
* ``auth``: bearer tokens with scopes (``require``), a short cache of token look-ups;
* ``api``: the JSON API under ``/v1``;
* ``watcher``: the one status watcher all long-poll waits of a process share;
* ``pages``: the status page (server-rendered HTML);
* ``metrics``: ``/metrics`` for Prometheus.
"""

from .app import ServiceConfig, create_app

__all__ = ["ServiceConfig", "create_app"]
