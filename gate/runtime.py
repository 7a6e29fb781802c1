"""The production helper: the live prompt from the database, called the way the gate
evaluated it.

::

    from gate.runtime import PromptRuntime

    rt = PromptRuntime("mysql+pymysql://app:secret@db/promptgate", ttl=30)
    urgency = rt.prompt("ticket-urgency")
    result = urgency.decide({"subject": "Site down", "text": "Checkout returns 500"})
    print(urgency.version, result.decision)

``rt.prompt(name)`` returns a handle; the handle re-reads the live row at most once per
``ttl`` seconds, so an applied change reaches production within ``ttl``. ``decide`` goes
through ``gate.calls.llm.call_prompt``, the very function the executor scores candidates with,
rendering templates under the same budget, to the provider the live version was
evaluated with: the declaration pinned with the update that applied it (URL, models, the
*name* of the key's variable; the key from this process's environment). A later change of
the gate config's providers does not move production's calls; applying the prompt again
through the gate does. A version live since before the gate pinned providers has none on
record: its provider is resolved as the gate declares it now, and the log says so once.
``decide`` returns the result of the call: the decision, the answer's text
(``raw_output``) and, for a prompt with tools, the calls the model made (``tool_calls``:
each a name, its arguments parsed, and their problem, if they were not JSON or not of the
function's schema), read as the gate read them when it judged the version. An answer
off the prompt's strict schema, with no label, not an object or with a failed call is
``valid=False`` and ``result.invalid`` says why (``Invalid``: an ``InvalidKind`` and the
problem's message; None when valid); the decision carries none of the gate's marks
(``gate.production.result``)::

    router = rt.prompt("support-router")
    result = router.decide({"messages": conversation})
    for call in result.tool_calls:
        handlers[call.name](**call.arguments)

A call that fails raises ``ModelCallError``: one line naming the provider, its URL and
where the URL came from, without the SDK's chained traceback behind it.
If the database cannot be read on a refresh, the last loaded version keeps serving (and
the failure is logged); only the first load of a name raises.

Through the gate's service instead of its database (no database credentials; a runtime
token for the prompts this service runs, ``promptgate token create NAME --scope runtime
--prompts a,b``, which also sends the feedback)::

    rt = PromptRuntime(gate_url="https://gate.example.com", token=RUNTIME_TOKEN)

With no argument naming the gate, ``PromptRuntime()`` reads the environment as the CLI does:
``PROMPTGATE_URL`` and production's own token ``PROMPTGATE_RUNTIME_TOKEN`` (never the CLI's
``PROMPTGATE_TOKEN``), else ``PROMPTGATE_DATABASE_URL``; it logs once which it chose and why
(``gate.production.target``, docs/runtime-environment.md). While the gate does not answer, one
line says so and one when it answers again, however many refreshes fail between
(``gate.production.outage``).

A read token still loads any prompt, but its loads carry no canary's call key: the call ids
of its calls (``result.call_id``) do not verify, and the gate refuses their feedback (issue
48). With a runtime token each call of a canary rollout gets an id carrying the rollout, the
version, this process and a sequence number under the rollout's call key
(``gate.rollout.call_ids``); a forked child mints under a process tag of its own.

the live version is read with a conditional request (an unchanged prompt: one round trip,
answered 304 with no body), and a service that is down leaves the last version serving.
Either way a background thread tells the gate what this process serves, at most once per
``ttl`` per prompt (``gate.production.reporter``: `promptgate live NAME` lists the processes),
never on a call's path. During a canary rollout (the gate config's ``rollout:``) the canary
answers ``canary_percent`` of calls, chosen by a stable hash of ``key``
(``decide(item, key=user_id)``: a user always meets the same version; no key: at random per
call); every result says which version answered (``result.version``), and
``rt.feedback(result, correct=True)`` tells the gate how it went (buffered, sent in batches
by another background thread: ``gate.production.feedback``).

``rt.close()`` when the process ends sends what is still buffered and stops the threads. A
process that ends without it is covered by an ``atexit`` hook that sends what every runtime
holds, waiting at most ``flush_at_exit`` seconds (default 5; None: no hook); what the gate
did not take is counted and logged ("N feedback events not sent: ..."). No signal handler
is installed: SIGKILL, SIGTERM's default action and ``os._exit`` run no hook (docs/production.md,
"Feedback at shutdown", shows the gunicorn and uvicorn hooks that call ``close()``). After
``fork`` a child's buffer starts empty (the parent's buffered events are the parent's to
send), and its runtime has locks, connections and a process identity of its own.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gate.calls.llm import CallResult, call_prompt
from gate.errors import ModelCallError
from gate.production.feedback import FeedbackBuffer
from gate.production.outage import Outage
from gate.production.reporter import ServedReporter, process_identity
from gate.production.result import Invalid, InvalidKind, ServedResult, served_result
from gate.production.sources import DatabaseSource, ServiceSource
from gate.production.target import resolve_target
from gate.production.versions import LoadedPrompt, route
from gate.prompt.spec import PromptSpec
from gate.prompt.tool_decision import ToolCall
from gate.rollout.call_ids import CallIds
from gate.settings import Settings

log = logging.getLogger(__name__)

EXIT_TIMEOUT = 5.0  # seconds the interpreter's exit waits for buffered feedback (``flush_at_exit``)

_runtimes: weakref.WeakSet[PromptRuntime] = weakref.WeakSet()  # reset in a forked child

__all__ = [
    "PromptRuntime",
    "RuntimePrompt",
    "LoadedPrompt",
    "ServedResult",
    "Invalid",
    "InvalidKind",
    "CallResult",
    "ToolCall",
    "call_prompt",
]


class PromptRuntime:
    def __init__(
        self,
        database_url: str | None = None,
        *,
        ttl: float = 30.0,
        settings: Settings | None = None,
        gate: Any = None,
        gate_url: str | None = None,
        token: str | None = None,
        feedback_token: str | None = None,
        report: bool = True,
        flush_at_exit: float | None = EXIT_TIMEOUT,
    ):
        """``gate`` is a ready ``gate.domain.Gate`` (else one is connected to
        ``database_url``); or ``gate_url`` and ``token`` (a runtime token for the prompts
        served; a read token loads too, but its calls' feedback does not count) to go through
        the service, ``feedback_token`` for feedback (default: ``token``). None of them given:
        the environment, as the CLI reads it (``PROMPTGATE_URL`` with a token of production's
        own, ``PROMPTGATE_RUNTIME_TOKEN``, never the CLI's ``PROMPTGATE_TOKEN``; else
        ``PROMPTGATE_DATABASE_URL``; ``gate.production.target``); which one, and why, is logged
        once (``self.target.reason``). ``report`` False: tell the gate
        nothing of what this process serves. ``flush_at_exit``: seconds the interpreter's exit
        waits for the feedback still buffered to be sent when ``close()`` was not called (an
        ``atexit`` hook; None: no hook, and what ``close()`` does not send is lost); what is
        not sent by then is counted and logged ("N feedback events not sent")."""
        self.target = resolve_target(
            database_url=database_url, gate_url=gate_url, token=token, gate=gate, settings=settings
        )
        self.settings = settings or Settings.from_env()
        self.ttl = float(ttl)
        self._source: DatabaseSource | ServiceSource
        if self.target.kind == "service":
            assert self.target.url is not None  # a service target has its URL (gate.production.target)
            self._source = ServiceSource(self.target.url, self.target.token, feedback_token)
        else:
            self._source = DatabaseSource(self.target.url or self.settings.database_url, self.settings, gate)
        log.info("prompt-gate runtime: reading prompts from %s", self.target.reason)
        self._refresh = Outage("refresh prompts from the gate")
        self._cache: dict[str, LoadedPrompt] = {}
        self._lock = threading.Lock()
        self.process_id, self.host, self.pid = process_identity()
        self._call_ids = CallIds(self.process_id)
        self.reporter = ServedReporter(self.served_rows, self.refresh_due, self._source.report, ttl) if report else None
        self.feedback_buffer = FeedbackBuffer(self._source.feedback, self._source.retryable, exit_timeout=flush_at_exit)
        self._forked = False  # a forked child that has not told the gate yet what it serves
        _runtimes.add(self)

    def _after_fork_in_child(self) -> None:
        """A forked child's runtime: a lock of its own (one the parent's reporter held at the
        fork would never be released), its own process identity and connections; it reports
        what it serves as its own process at its next call (``gate.production.reporter`` and
        ``gate.production.feedback`` reset their threads and buffer themselves)."""
        self._lock = threading.Lock()
        self._refresh = Outage(self._refresh.what)  # its lock too is the parent's
        self.process_id, self.host, self.pid = process_identity()
        self._call_ids.reset(self.process_id)
        self._source.after_fork_in_child()
        self._forked = self.reporter is not None and bool(self._cache)

    def prompt(self, name: str) -> RuntimePrompt:
        """A handle on the live prompt ``name``; raises NotFound when there is none."""
        self.load(name)
        return RuntimePrompt(self, name)

    def decide(self, name: str, item: Mapping[str, Any], key: object | None = None) -> ServedResult:
        """Call the live version of ``name`` on ``item`` (during a canary rollout, the canary
        or the stable version: by ``key``'s hash, else at random; ``result.version`` says)."""
        loaded = self.load(name)
        served, arm = route(loaded, key)
        try:
            result = call_prompt(served.spec, item, settings=self.settings, endpoint=served.endpoint)
        except ModelCallError as exc:
            failure = exc
        else:
            call_id = None
            if loaded.canary is not None and loaded.canary.call_key is not None:
                call_id = self._call_ids.mint(loaded.canary.call_key, loaded.canary.rollout_id, served.version)
            return served_result(result, name, served.version, loaded.rollout_id(), arm, served.spec, call_id)
        failure.__cause__, failure.__suppress_context__ = None, True  # one line: no SDK traceback chained
        raise failure

    def feedback(self, result: ServedResult, correct: bool) -> bool:
        """Tell the gate whether ``result`` was right, for the canary rollout it was routed
        in (buffered; a background thread sends it in batches). False when the call was in
        no rollout (nothing compares it) — nothing is sent then."""
        if result.rollout_id is None:
            return False
        self.feedback_buffer.add(
            {"prompt": result.prompt, "version": result.version, "call_id": result.call_id, "correct": bool(correct)}
        )
        return True

    def served_rows(self) -> list[dict[str, Any]]:
        """What this process serves, one report row per prompt it holds."""
        now, interval = time.monotonic(), self.reporter.interval if self.reporter else self.ttl
        return [
            {
                "process_id": self.process_id,
                "host": self.host,
                "pid": self.pid,
                "prompt": p.name,
                "version": p.version,
                "stable_version": p.canary.stable.version if p.canary else None,
                "rollout_id": p.rollout_id(),
                "loaded_seconds_ago": round(max(0.0, now - p.since), 3),
                "ttl_seconds": interval,
            }
            for p in list(self._cache.values())
        ]

    def refresh_due(self) -> None:
        """Refresh every prompt this process holds whose cache is older than 0.8 × ttl (the
        reporter's thread, a little before a call would: calls seldom wait for a refresh)."""
        for name in list(self._cache):
            self.load(name, 0.8 * self.ttl)

    def close(self, timeout: float = 10.0) -> bool:
        """Stop the background threads, sending the feedback still buffered first (True when
        all of it went within ``timeout`` seconds; else the number left is logged and kept in
        ``feedback_buffer.unsent``). The exit hook no longer covers this runtime."""
        if self.reporter is not None:
            self.reporter.stop()
        sent = self.feedback_buffer.stop(timeout)
        self._source.close()
        return sent

    def load(self, name: str, due: float | None = None) -> LoadedPrompt:
        """The cached live version, re-read when older than ``due`` seconds (default: the
        ttl). A call that finds another thread refreshing (the reporter's, usually) serves
        the cached version rather than wait for it, while that is younger than twice the
        ttl."""
        if self._forked and self.reporter is not None:
            self._forked = False
            self.reporter.first_load(name)  # started anew in this child: it reports every prompt held
        due = self.ttl if due is None else due
        cached = self._cache.get(name)
        if cached is not None:
            age = time.monotonic() - cached.loaded_at
            if age < due or (age < 2 * self.ttl and self._lock.locked()):
                return cached
        with self._lock:
            cached = self._cache.get(name)
            if cached is not None and time.monotonic() - cached.loaded_at < due:
                return cached
            try:
                fresh = self._source.fetch(name, cached)
            except Exception as exc:
                if cached is None:
                    raise
                self._refresh.failed(name, exc, f"prompt {name} keeps serving version {cached.version}")
                fresh = replace(cached, loaded_at=time.monotonic())
            else:
                self._refresh.worked(name)
            self._cache[name] = fresh
        if cached is None and self.reporter is not None:
            self.reporter.first_load(name)
        return fresh

    def invalidate(self, name: str | None = None) -> None:
        with self._lock:
            if name is None:
                self._cache.clear()
            else:
                self._cache.pop(name, None)


def _after_fork_in_child() -> None:
    for runtime in list(_runtimes):
        runtime._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


class RuntimePrompt:
    """A live prompt by name; every attribute read is at most ``ttl`` seconds old."""

    def __init__(self, runtime: PromptRuntime, name: str):
        self._runtime, self.name = runtime, name

    @property
    def current(self) -> LoadedPrompt:
        return self._runtime.load(self.name)

    @property
    def version(self) -> int:
        return self.current.version

    @property
    def config_hash(self) -> str:
        return self.current.config_hash

    @property
    def spec(self) -> PromptSpec:
        return self.current.spec

    @property
    def labels(self) -> tuple[str, ...]:
        return self.current.spec.labels

    def decide(self, item: Mapping[str, Any], key: object | None = None) -> ServedResult:
        """Call the live version on one item (see ``gate.calls.llm.call_prompt`` and
        ``PromptRuntime.decide``)."""
        return self._runtime.decide(self.name, item, key)

    def __repr__(self) -> str:
        cached = self._runtime._cache.get(self.name)
        return f"RuntimePrompt({self.name!r}, version={cached.version if cached else None})"
