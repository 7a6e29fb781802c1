"""Run worker roles: in threads of this process (``WorkerProcess``), in several child
processes (``supervise``), or until given updates are terminal (``run_until_terminal``,
for tests, the demo and the Action). All three run the same pollers, each built from the
gate database's engine and the settings: no role goes through the service (``gate.domain``);
only ``run_until_terminal`` is handed a ``Gate``, to wait on its updates' reports."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Sequence

from sqlalchemy.exc import DBAPIError

from gate.db import KeptConnection, make_engine, transaction, warm_pool
from gate.errors import UsageError, first_line
from gate.prompt.sandbox import RenderBudget, RenderPool
from gate.report.update import UpdateReport
from gate.settings import Settings
from gate.store.workers import heartbeat_worker, prune_workers, register_worker, remove_worker
from workers import ROLES
from workers.poller import Activity, Poller, log
from workers.signals import StopSignals


def parse_roles(role: str | Iterable[str]) -> list[str]:
    names = [r.strip() for r in (role.split(",") if isinstance(role, str) else role) if r.strip()]
    if not names or "all" in names:
        return list(ROLES)
    unknown = [n for n in names if n not in ROLES]
    if unknown:
        raise UsageError(f"unknown role {unknown[0]!r}: use all or any of {', '.join(ROLES)}")
    return names


def worker_settings(settings: Settings, concurrency: int | None = None) -> Settings:
    """The settings a worker process runs with: the one place the executor's concurrency (model
    calls in flight per process) is decided. An explicit ``concurrency`` (the worker's
    ``--concurrency``; a caller's of ``run_until_terminal`` or ``WorkerProcess``: the demo, the
    Action, the tests) wins over ``settings.concurrency`` (``PROMPTGATE_CONCURRENCY``, else 8);
    None or 0 keeps the settings'. From here on it travels in the settings alone: the executor
    sizes its call threads, its ledger and its adaptive limit by ``settings.concurrency``."""
    return settings.with_(concurrency=concurrency or None)


def build_pollers(
    engine,
    settings: Settings,
    stop: threading.Event,
    roles: Sequence[str],
    concurrency: int | None = None,
    call=None,
    renderer: RenderPool | None = None,
) -> list[Poller]:
    """The pollers of one process, sharing one activity probe and one template sandbox, and
    able to nudge each other; ``concurrency``: as ``worker_settings`` decides."""
    settings = worker_settings(settings, concurrency)
    activity = Activity(engine, settings.idle_probe_interval)
    pollers = []
    for role in roles:
        pollers.append(make_poller(role, engine, settings, stop, activity, call, renderer))
    peers = {p.role: p for p in pollers}
    for poller in pollers:
        poller.peers = peers
    return pollers


def make_poller(
    role: str,
    engine,
    settings: Settings,
    stop: threading.Event,
    activity: Activity,
    call,
    renderer: RenderPool | None,
) -> Poller:
    """One role's poller. Each role's module is imported when a process runs that role: a
    process of quick roles (finalize, reconcile) starts without the model client's imports
    (the openai SDK is most of a worker's start-up time)."""
    if role == "execute":
        from workers.execute.executor import Executor

        if call is not None:
            return Executor(engine, settings, stop, activity=activity, renderer=renderer, call=call)
        return Executor(engine, settings, stop, activity=activity, renderer=renderer)
    if role == "materialize":
        from workers.materialize import Materializer

        return Materializer(engine, settings, stop, activity=activity, renderer=renderer)
    if role == "finalize":
        from workers.finalize import Finalizer

        return Finalizer(engine, settings, stop, activity=activity)
    if role == "rollout":  # on its own clock: its work outlives every open update (workers/rollout.py)
        from workers.rollout import RolloutWorker

        return RolloutWorker(engine, settings, stop)
    from workers.reconcile import Reconciler

    return Reconciler(engine, settings, stop, activity=activity)


class WorkerProcess:
    """The roles of one process on the gate database ``engine``, each in its own thread,
    registered in ``worker`` and heartbeating; ``stop`` (or SIGTERM/SIGINT) drains them."""

    def __init__(self, engine, settings: Settings, roles: Sequence[str], concurrency: int | None = None, call=None):
        self.engine = engine
        self.settings = settings
        self.roles = list(roles)
        self.stop = threading.Event()
        self.renderer = RenderPool(RenderBudget.from_settings(settings))
        self.pollers = build_pollers(engine, settings, self.stop, self.roles, concurrency, call, self.renderer)
        self.id = f"{socket.gethostname()[:40]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.threads: list[threading.Thread] = []
        self.role_label = "all" if set(self.roles) == set(ROLES) else ",".join(self.roles)

    def start(self) -> WorkerProcess:
        self._register()
        # one pooled connection per role and two spare, opened now: a connection costs a TLS
        # context and a handshake (PyMySQL; bench/README.md), which would otherwise land on
        # the first claims of the first submission
        warm_pool(self.engine, len(self.pollers) + 2)
        for poller in self.pollers:
            poller.warm_up()
        for poller in self.pollers:
            thread = threading.Thread(target=poller.run, name=poller.role, daemon=True)
            thread.start()
            self.threads.append(thread)
        beat = threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True)
        beat.start()
        return self

    def join(self, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self.threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if self.pollers and self.pollers[0].activity is not None:
            self.pollers[0].activity.close()
        self.renderer.close()
        try:  # best effort, briefly: a row left behind is pruned once its heartbeats stop
            transaction(self.engine, lambda conn: remove_worker(conn, self.id), give_up_after=1.0)
        except DBAPIError:
            pass

    def shutdown(self, timeout: float | None = None) -> None:
        self.request_stop()
        self.join(timeout)

    def request_stop(self) -> None:
        self.stop.set()
        for poller in self.pollers:
            poller.wake.set()
        if self.pollers and self.pollers[0].activity is not None:
            self.pollers[0].activity.interrupt()  # a probe waiting in its statement ends now

    def run_forever(self) -> None:
        """Run until SIGTERM/SIGINT, then drain. The handler only records the signal
        (``StopSignals``): this loop, not the handler, stops the pollers."""
        signals = StopSignals().install()
        self.start()
        # Everything imported and warmed up so far lives as long as the process: keep it out
        # of the collector's way. A full collection over it stalls every thread, and the
        # first one fell on the first submission's pickup (bench/README.md).
        gc.collect()
        gc.freeze()
        while not signals.wait(1.0):
            pass
        log.info("worker %s: draining", self.id)
        self.request_stop()
        self.join()
        signals.hold()

    def _register(self) -> None:
        try:  # briefly: the heartbeat registers the process if this could not
            transaction(self.engine, self._insert_row, give_up_after=1.0)
        except DBAPIError as exc:
            log.warning("could not register worker (will retry with the heartbeat): %s", exc)

    def _insert_row(self, conn) -> None:
        register_worker(conn, self.id, self.role_label, socket.gethostname()[:255], os.getpid())

    def oldest_call_age(self) -> float | None:
        """Seconds since the process's oldest model call in flight began (None: none): a
        heartbeat proves the process lives, this that its calls move."""
        return max((age for p in self.pollers if (age := p.oldest_call_age()) is not None), default=None)

    def _heartbeat(self) -> None:
        """Single statements in autocommit on a kept connection: part of what an idle
        process costs the server."""
        interval = self.settings.heartbeat_seconds
        kept = KeptConnection(self.engine)
        beats = 0
        while not self.stop.wait(interval):
            beats += 1
            try:
                oldest = self.oldest_call_age()
                if not kept.run(lambda conn: heartbeat_worker(conn, self.id, oldest)):
                    kept.run(self._insert_row)
                if beats % 6 == 0:  # rows silent for 6 beats go; no need to look every beat
                    kept.run(lambda conn: prune_workers(conn, interval * 6))
            except DBAPIError as exc:  # the next beat tries again
                log.warning("heartbeat failed: %s", first_line(exc))
        kept.close()


ROLE_MODULES = {
    "execute": "workers.execute.executor",
    "materialize": "workers.materialize",
    "finalize": "workers.finalize",
    "reconcile": "workers.reconcile",
    "rollout": "workers.rollout",
}


def run_process(settings: Settings, roles: Sequence[str]) -> None:
    engine = make_engine(settings.database_url)
    try:
        WorkerProcess(engine, settings, roles).run_forever()
    finally:
        engine.dispose()


def run_forked(settings: Settings, roles: Sequence[str]) -> None:
    """One worker process of ``supervise``, forked from its fork server (``workers.fork_server``)."""
    from workers.fork_server import forked

    forked()
    run_process(settings, roles)


def supervise(settings: Settings, roles: Sequence[str], processes: int = 1) -> None:
    """Run ``processes`` worker processes, each forked from one fork server that imported
    their modules once (``workers.fork_server``); restart one that dies (a fork, not a new
    interpreter); on SIGTERM/SIGINT pass the signal on and wait for them to drain.
    ``settings``: a worker's (``worker_settings``)."""
    if processes <= 1:
        run_process(settings, roles)
        return
    ctx = multiprocessing.get_context("forkserver")
    # the roles' modules imported once, in the fork server, not in each process (workers.fork_server)
    ctx.set_forkserver_preload(["workers.fork_server", "workers.supervisor", *(ROLE_MODULES[r] for r in roles)])
    signals = StopSignals().install()  # the handler records the signal; this loop acts on it

    def spawn():
        proc = ctx.Process(target=run_forked, args=(settings, list(roles)), daemon=False)
        proc.start()
        return proc

    children = [spawn() for _ in range(processes)]
    while not signals.wait(0.5):
        for i, child in enumerate(children):
            if not child.is_alive() and not signals.stopping:
                log.warning("worker process %s exited with %s; restarting", child.pid, child.exitcode)
                children[i] = spawn()
    for child in children:
        if child.is_alive():
            os.kill(child.pid, signal.SIGTERM)
    for child in children:
        child.join()
    signals.hold()


def run_until_terminal(
    gate, update_ids: Sequence[int], timeout: float = 300.0, concurrency: int | None = None, call=None
) -> list[UpdateReport]:
    """Run every role in this process until the given updates are terminal (or the
    timeout passes), then drain. Returns their final reports. ``gate`` is a
    ``gate.domain.Gate``: the roles run on its engine and settings, and its ``wait``
    gives the reports."""
    worker = WorkerProcess(gate.engine, gate.settings, ROLES, concurrency, call).start()
    try:
        deadline = time.monotonic() + timeout
        reports = []
        for update_id in update_ids:
            reports.append(gate.wait(update_id, timeout=max(0.0, deadline - time.monotonic()), poll=0.05))
        return reports
    finally:
        worker.shutdown()
