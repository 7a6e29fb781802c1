"""/metrics' figures of what production serves (``ServedCollector``, read from the database at
scrape time, at most once per ``FLEET_TTL`` like the fleet's): ``promptgate_runtime_processes``
(runtime processes that reported in their last interval, one per prompt they serve) and
``promptgate_stale_runtime_processes`` (those serving an older version than live for longer
than twice their ttl: alert on it above 0)."""

from __future__ import annotations

import logging
import threading
import time

from prometheus_client.core import GaugeMetricFamily
from sqlalchemy.exc import DBAPIError

from gate.errors import GateError, first_line

log = logging.getLogger("promptgate.server")


class ServedCollector:
    def __init__(self, gate, ttl: float):
        self.gate, self.ttl = gate, ttl
        self.lock = threading.Lock()
        self.read_at = -float("inf")
        self.counts: dict[str, int] | None = None

    def read(self) -> dict[str, int] | None:
        with self.lock:
            if time.monotonic() - self.read_at >= self.ttl:
                try:
                    self.counts = self.gate.served_counts()
                except (GateError, DBAPIError) as exc:
                    log.warning("metrics: what production serves could not be read: %s", first_line(exc))
                    self.counts = None
                self.read_at = time.monotonic()
            return self.counts

    def collect(self):
        counts = self.read()
        if counts is None:
            return
        yield GaugeMetricFamily(
            "promptgate_runtime_processes",
            "Runtime processes that reported in their last interval, counted once per prompt they serve.",
            value=counts["served"],
        )
        yield GaugeMetricFamily(
            "promptgate_stale_runtime_processes",
            "Of those, the ones serving an older version than live for longer than twice their ttl.",
            value=counts["stale"],
        )

    def describe(self):
        return []
