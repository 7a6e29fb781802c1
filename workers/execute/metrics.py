"""The executor's model calls for Prometheus: per process, served by `promptgate worker
--metrics-port PORT` (off by default).

What is counted (in ``CALL_REGISTRY``, a registry of this module's own, not the global one):

* ``promptgate_model_call_seconds`` (histogram): every model call the executor made,
  answered or failed, from request to answer; its ``_count`` is the number of requests
  sent to providers. Answers reused from earlier runs are not calls.
* ``promptgate_model_errors_total{kind}``: failed calls by ``CallFailure`` kind (a fixed
  set of label values; a 429 counts as ``rate_limit`` here too).
* ``promptgate_model_rate_limited_total``: calls a provider answered 429.
* ``promptgate_rate_limit_wait_seconds_total``: time calls spent waiting for the shared
  rate-limit buckets (``gate.ratelimit``) before they were sent.
* ``promptgate_model_calls_total{role}``: calls made by role: ``candidate`` (the prompt
  evaluated), ``judge`` (a judged run's judge), ``sentinel`` (the judge on its own
  human-labelled items, mixed into the run), ``live`` (the live version a comparison reads).

No label names a model, prompt or provider: those come from submitted prompt files, and a
label set a pull request can grow is a Prometheus server's memory a pull request can take.

One scrape per worker host
--------------------------

``--processes 1`` (the default): the process serves ``CALL_REGISTRY`` itself, from a
daemon thread (``prometheus_client.start_http_server``).

``--processes N``: the supervisor creates a fresh directory, names it in
``PROMETHEUS_MULTIPROC_DIR`` before it starts the worker processes (they are forked from a
fork server started after that, a new interpreter whose ``prometheus_client`` sees the
variable on import: ``workers.fork_server``; each process keeps its values in memory-mapped
files there, under its own pid), and serves ``MultiProcessCollector`` over
that directory: one scrape sums the host's processes. A worker process that dies leaves
its file, so the counters it had reached still count, and the one restarted in its place
adds to them. The directory is removed when the supervisor exits. The supervisor itself
records nothing: it imports this module before setting the variable, so its own metrics
(always zero) stay in memory.

Recording a call (``timed_call`` and ``count_wait``) costs 1.7 µs in memory and 3.5 µs in
multiprocess mode (100k calls timed), against ~2.5 ms of the SDK's CPU per call
(bench/README.md) and calls of tens of milliseconds and more: it is always on; only
serving is optional.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.multiprocess import MultiProcessCollector

from gate.errors import CallFailure, ModelCallError, UsageError

log = logging.getLogger("promptgate.metrics")
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# model calls take from tens of milliseconds (a local server) to a minute (a long answer)
CALL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

CALL_REGISTRY = CollectorRegistry()
MODEL_CALL_SECONDS = Histogram(
    "promptgate_model_call_seconds",
    "Model calls made by this worker (answered or failed), seconds from request to answer.",
    buckets=CALL_BUCKETS,
    registry=CALL_REGISTRY,
)
MODEL_ERRORS = Counter("promptgate_model_errors", "Failed model calls by kind.", ["kind"], registry=CALL_REGISTRY)
MODEL_RATE_LIMITED = Counter(
    "promptgate_model_rate_limited", "Model calls answered 429 (rate limited).", registry=CALL_REGISTRY
)
RATE_LIMIT_WAIT = Counter(
    "promptgate_rate_limit_wait_seconds",
    "Seconds calls waited for the shared rate-limit buckets before they were sent.",
    registry=CALL_REGISTRY,
)
MODEL_CALLS = Counter("promptgate_model_calls", "Model calls made, by role.", ["role"], registry=CALL_REGISTRY)
ROLES = ("candidate", "judge", "sentinel", "live")  # a fixed set: no label value comes from a prompt
for _kind in CallFailure:  # every kind present from the start: a rate() over it needs no first error
    MODEL_ERRORS.labels(_kind.value)
_ROLE_CALLS = {_role: MODEL_CALLS.labels(_role) for _role in ROLES}


def timed_call(call, *args, **kwargs):
    """``call(*args, **kwargs)``, a model call, counted: its duration whatever its outcome,
    and its failure by kind."""
    started = time.perf_counter()
    try:
        return call(*args, **kwargs)
    except ModelCallError as exc:
        count_failure(exc.kind)
        raise
    except Exception:
        count_failure(CallFailure.ERROR)
        raise
    finally:
        MODEL_CALL_SECONDS.observe(time.perf_counter() - started)


def count_role(role: str) -> None:
    """One call made, by its role (``ROLES``; its counter looked up once, not per call)."""
    (_ROLE_CALLS.get(role) or _ROLE_CALLS["candidate"]).inc()


def count_failure(kind: CallFailure) -> None:
    MODEL_ERRORS.labels(CallFailure(kind).value).inc()
    if kind is CallFailure.RATE_LIMIT:
        MODEL_RATE_LIMITED.inc()


def count_wait(seconds: float) -> None:
    """Time a call spent waiting for its rate-limit budget (nothing when it did not wait)."""
    if seconds > 0:
        RATE_LIMIT_WAIT.inc(seconds)


@contextmanager
def serving(port: int | None, addr: str = "0.0.0.0", processes: int = 1) -> Iterator[None]:
    """Serve this host's worker metrics on ``addr:port`` while the body runs (nothing when
    ``port`` is None); with ``processes`` > 1 the worker processes the body spawns record
    into a shared directory (the module docstring)."""
    if port is None:
        yield
        return
    directory = tempfile.mkdtemp(prefix="promptgate-metrics-") if processes > 1 else None
    registry = CALL_REGISTRY
    if directory is not None:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=directory)
    try:
        server, thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        _remove(directory)
        raise UsageError(f"--metrics-port {port}: cannot listen on {addr}:{port} ({exc.strerror or exc})") from None
    log.info("worker metrics on http://%s:%s/metrics", addr, server.server_port)
    previous = os.environ.get(MULTIPROC_ENV)
    if directory is not None:
        os.environ[MULTIPROC_ENV] = directory
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        if directory is not None:
            _restore_env(previous)
            _remove(directory)


def _restore_env(previous: str | None) -> None:
    if previous is None:
        os.environ.pop(MULTIPROC_ENV, None)
    else:
        os.environ[MULTIPROC_ENV] = previous


def _remove(directory: str | None) -> None:
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
