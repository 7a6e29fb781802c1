"""/metrics for Prometheus (the read scope; public with ``--public-read``).

Two kinds of figures, in a registry of each application's own (not prometheus_client's
global one, so two apps in one process, as in the tests, never share a series):

* **The fleet, from the database** (``FleetCollector``, ``Gate.fleet()`` read at scrape
  time): the same on every server, correct whatever the number of servers and workers, so
  scrape one server for them. ``promptgate_updates{status}``, ``promptgate_runs{status}``,
  ``promptgate_items{state}`` (open runs' items: pending, leased, MATCH, MISMATCH, ERROR,
  STOPPED),
  ``promptgate_workers``, ``promptgate_worker_oldest_heartbeat_seconds``,
  ``promptgate_oldest_pending_submission_seconds``, ``promptgate_model_calls_saved_total{reason}``
  (early_stop, reuse, spend_cap: counters finalize adds to as each run ends),
  ``promptgate_model_calls_recorded_total`` and ``promptgate_model_calls_unrecorded_max_total``
  (calls made and recorded; at most how many more were made by workers that died and never
  recorded: counted as each run ends) and
  ``promptgate_fleet_up`` (0 when the
  database did not answer: the figures above are then absent, never stale or made up).
  One read serves every scrape within ``FLEET_TTL`` seconds, so several Prometheus
  servers scraping at once cost the database one read, not one each.
* **This server process**: ``promptgate_http_requests_total{route, method, status}``
  (``RequestCounter``: the route's template, ``/v1/updates/{update_id}``, never the raw
  path, and a fixed set of methods, so no client can grow the label set),
  ``promptgate_longpoll_waiters`` (long-poll waits now) and
  ``promptgate_status_watcher_polls_total`` (the shared watcher's status reads), and the
  process's CPU and memory (``process_*``). Several servers: scrape each and sum.
"""

from __future__ import annotations

import logging
import threading
import time

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from prometheus_client import CollectorRegistry, Counter, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from sqlalchemy.exc import DBAPIError

from gate.errors import GateError, first_line
from gate.records import FleetCounts
from gate.states import RunStatus, UpdateStatus

from .auth import require
from .metrics_served import ServedCollector

log = logging.getLogger("promptgate.server")
router = APIRouter()
FLEET_TTL = 1.0
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"  # the route label of a request no route matched (a 404)


def install(app: FastAPI) -> None:
    """The registry of ``app``, its collectors, the request counter and the route."""
    registry = CollectorRegistry()
    registry.register(FleetCollector(app.state.gate))
    registry.register(WatcherCollector(app.state.watcher))
    registry.register(ServedCollector(app.state.gate, FLEET_TTL))  # what production serves (metrics_served.py)
    ProcessCollector(registry=registry)
    requests = Counter(
        "promptgate_http_requests",
        "HTTP requests this server process answered, by route template, method and status code.",
        ["route", "method", "status"],
        registry=registry,
    )
    app.state.feedback_refused = Counter(
        "promptgate_feedback_refused_events",
        "Feedback events this server process refused: a call id that does not verify under its "
        "rollout's call key, a prompt outside a runtime token's reach, or another's rollout (issue 48).",
        registry=registry,
    )
    app.state.metrics = registry
    app.add_middleware(RequestCounter, counter=requests)
    app.include_router(router)


@router.get("/metrics", include_in_schema=False, dependencies=[Depends(require("read"))])
def metrics(request: Request) -> Response:
    """Prometheus's text format (OpenMetrics when the scraper asks for it). A plain def:
    the fleet read blocks, so it runs in the thread pool, not on the event loop."""
    encode, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encode(request.app.state.metrics), headers={"Content-Type": content_type})


class FleetCollector:
    """The fleet's figures from the database, read at most once per ``ttl`` seconds."""

    def __init__(self, gate, ttl: float = FLEET_TTL):
        self.gate, self.ttl = gate, ttl
        self.lock = threading.Lock()
        self.read_at = -float("inf")
        self.counts: FleetCounts | None = None

    def read(self) -> FleetCounts | None:
        """The counts (None: the database did not answer); a scrape that arrives while
        another reads waits for that read rather than making its own."""
        with self.lock:
            if time.monotonic() - self.read_at >= self.ttl:
                try:
                    self.counts = self.gate.fleet()
                except (GateError, DBAPIError) as exc:
                    log.warning("metrics: the fleet's figures could not be read: %s", first_line(exc))
                    self.counts = None
                self.read_at = time.monotonic()
            return self.counts

    def collect(self):
        counts = self.read()
        yield GaugeMetricFamily(
            "promptgate_fleet_up",
            "1 when the fleet's figures were read from the database, 0 when it did not answer.",
            value=0 if counts is None else 1,
        )
        if counts is not None:
            yield from fleet_families(counts)

    def describe(self):
        return []  # described by collecting, never at registration (no query at start-up)


def fleet_families(counts: FleetCounts):
    """The gauges of one ``FleetCounts``; every known status is present, 0 when no row has it."""
    yield by_label(
        "promptgate_updates",
        "Updates by status (all of them, from the database).",
        "status",
        {s.value: 0 for s in UpdateStatus} | counts.updates,
    )
    yield by_label(
        "promptgate_runs",
        "Runs by status (all of them, from the database).",
        "status",
        {s.value: 0 for s in RunStatus} | counts.runs,
    )
    yield by_label(
        "promptgate_items",
        "Items of open runs by state: pending (waiting for a worker), leased "
        "(a worker holds them), and scored ones by verdict.",
        "state",
        counts.items,
    )
    yield GaugeMetricFamily(
        "promptgate_workers", "Live worker processes (a heartbeat within three beats).", value=counts.workers
    )
    yield GaugeMetricFamily(
        "promptgate_worker_oldest_heartbeat_seconds",
        "Age of the stalest live worker's heartbeat (0 with no live worker).",
        value=counts.oldest_heartbeat_seconds or 0.0,
    )
    yield GaugeMetricFamily(
        "promptgate_oldest_pending_submission_seconds",
        "Age of the oldest submission no worker has started on (0 when none waits).",
        value=counts.oldest_pending_seconds or 0.0,
    )
    saved = CounterMetricFamily(
        "promptgate_model_calls_saved",
        "Model calls never made, by why: early_stop (a run's "
        "verdict was settled before its items were all called), reuse (answers already "
        "paid for), spend_cap (an update reached its cap); counted as each run finishes.",
        labels=["reason"],
    )
    for reason, value in sorted(counts.calls_saved.items()):
        saved.add_metric([reason], value)
    yield saved
    yield CounterMetricFamily(
        "promptgate_model_calls_recorded",
        "Model calls the workers made and recorded, over every finished run (counted as each run ends).",
        value=counts.calls.get("recorded", 0),
    )
    yield CounterMetricFamily(
        "promptgate_model_calls_unrecorded_max",
        "Model calls that may have been made and were never recorded, at most: claims lost with workers "
        "that died, each worker's no more than its bound (concurrency + write-back window), times the calls "
        "per item, over every finished run. The provider may have billed up to this many "
        "calls beyond promptgate_model_calls_recorded_total.",
        value=counts.calls.get("unrecorded", 0),
    )


def by_label(name: str, documentation: str, label: str, values: dict[str, int]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([str(key)], value)
    return family


class WatcherCollector:
    """The shared status watcher of this process (``watcher.StatusWatcher``)."""

    def __init__(self, watcher):
        self.watcher = watcher

    def collect(self):
        # a copy of the dict's values first: the event loop's thread adds and removes waits meanwhile
        waiting = sum(map(len, list(self.watcher.waiters.values())))
        yield GaugeMetricFamily(
            "promptgate_longpoll_waiters", "Long-poll waits open on this server process now.", value=waiting
        )
        yield CounterMetricFamily(
            "promptgate_status_watcher_polls",
            "Status reads of this server process's shared watcher (one per beat while any wait is open).",
            value=self.watcher.polls,
        )

    def describe(self):
        return []


class RequestCounter:
    """ASGI middleware: one count per HTTP request, once its status is known (500 when the
    application raised before answering)."""

    def __init__(self, app, counter: Counter):
        self.app, self.counter = app, counter

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def sending(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.counter.labels(route_of(scope), method_of(scope), str(status)).inc()


def route_of(scope) -> str:
    """The matched route's template (the router records it in the scope), never the raw
    path: a client could otherwise make a series per URL."""
    route = scope.get("route")
    return getattr(route, "path", None) or UNMATCHED


def method_of(scope) -> str:
    method = scope.get("method", "")
    return method if method in METHODS else "other"
