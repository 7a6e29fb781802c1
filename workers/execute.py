"""Execute: claim chunks of ready items, call the model outside any transaction, write
each chunk's results back in one statement guarded by the lease token.

Up to ``concurrency`` calls are in flight per process. Runs are served in rotation, so a
big dataset does not starve a small one. A retryable failure (timeout, connection, 429,
5xx) makes the item visible again after an exponential backoff with jitter (at least the
provider's Retry-After); at the attempt cap its ERROR is final. Leases of calls that
outlive half the lease are renewed. One item's call, or its N calls for a prompt with
``trials: N``, is ``workers.calls``; the result made of its answers, ``workers.results``.
Each write-back also adds to its run's running counts (``store.add_tally``), from which
``workers.early_stop`` judges whether the run's verdict is settled and stops its update;
a call of an update with a spend cap is reserved first (``workers.spend``).

An item's messages are rendered through the process's template sandbox (a CPU-time and
memory budget per item, ``gate.sandbox``) and sent to the provider its update pinned at
submit (``gate.providers``). Plain templates render in the call thread; the others render a
chunk at a time in a render thread (one sandbox request per chunk, not per item: each
round trip is a wait for the GIL among the call threads), which then hands the items to
the call threads, so calls of other runs never wait on a sandbox. A template over its budget ends the item ERROR, not retried,
and the run's remaining items end ERROR without being rendered: the run's verdict is
FAILED already, and a template that burns its budget on every row would otherwise hold the
sandbox for the whole dataset while other prompts' updates wait.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from sqlalchemy.exc import DBAPIError

from gate import store
from gate.db import read, transaction
from gate.errors import CallFailure, ModelCallError, UsageError, first_line
from gate.llm import call_prompt, prepare_default_client, render_messages_many
from gate.reuse import trial_keys
from gate.models import Answer, ClaimedItem, ItemResult
from gate.providers import ProviderDecl, endpoint_for
from gate.ratelimit import CallLimiter
from gate.sandbox import RenderBudget, RenderPool
from gate.spec import parse_spec
from gate.states import Verdict

from .call_threads import CallThreads
from .calls import ItemCaller, RunCall
from .early_stop import RunContext, Stopper
from .poller import Poller
from .results import new_answers, reused_item
from .spend import SpendGuard

log = logging.getLogger("promptgate.execute")
RUN_LIST_TTL = 1.0
WRITE_BACK_THREADS = 2
MEAN_AFTER = 16               # items rendered before a run's mean render time is judged


@dataclass
class Chunk:
    token: str
    items: list[ClaimedItem]
    results: list[ItemResult] = field(default_factory=list)
    renewed_at: float = field(default_factory=time.monotonic)
    started: set[int] = field(default_factory=set)    # items whose call has begun
    given_back: int = 0                               # items a drain gave back uncalled
    claimed_at: float = field(default_factory=time.monotonic)
    prepared_at: float | None = None                  # its items handed to the call threads

    @property
    def done(self) -> bool:
        return len(self.results) + self.given_back == len(self.items)


class Executor(Poller):
    role = "execute"

    def __init__(self, gate, stop, concurrency: int | None = None, call=call_prompt, activity=None,
                 renderer: RenderPool | None = None):
        super().__init__(gate, stop, activity)
        self.concurrency = concurrency or self.settings.concurrency
        self.call = call
        self.owns_renderer = renderer is None
        self.renderer = renderer or RenderPool(RenderBudget.from_settings(self.settings))
        self.pool = CallThreads(self.concurrency)
        # a finished chunk is written back here, not by the call thread that finished it,
        # which goes on to its next call at once (a write-back waits on a durable commit)
        self.writers = ThreadPoolExecutor(WRITE_BACK_THREADS, thread_name_prefix="write-back")
        self.rendering = ThreadPoolExecutor(self.renderer.budget.processes, thread_name_prefix="render")
        self.lock = threading.Lock()
        self.capacity = threading.Condition(self.lock)
        self.in_flight = 0      # calls dispatched and not yet answered
        self.held = 0           # items claimed and not yet written back
        self.prep_bound = False   # the last chunk's calls took less time than claiming and preparing it
        self.chunks: dict[str, Chunk] = {}
        self.draining = False   # set once by close(): no call begins after it
        self.calls_began: dict[tuple[int, int], float] = {}   # (run, position) -> when its call began
        self.run_calls: dict[int, RunCall] = {}
        self.runs: list[int] = []
        self.claim_from: dict[int, int | None] = {}   # run -> where its next claim starts (None: the first ready)
        self.runs_at = 0.0
        self.turn = 0
        self.stats = {"claimed": 0, "written": 0, "lost": 0, "retries": 0, "calls": 0}
        # shared rate-limit budgets + concurrency that adapts to 429s (gate/ratelimit/)
        self.limiter = CallLimiter(self.settings, self.engine, self.concurrency, stop)
        # early stop and spend caps (workers/early_stop.py, workers/spend.py)
        self.stopper = Stopper(self.engine, lambda uid: [r for r in list(self.run_calls.values()) if r.update_id == uid])
        self.caller = ItemCaller(call, self.settings, self.limiter, self.lock, self.stats, self.calls_began,
                                 self._stop_run_over_budget, draining=lambda: self.draining,
                                 spend=SpendGuard(self.engine, self.stopper, stop))

    def warm_up(self) -> None:
        if self.call is call_prompt:
            prepare_default_client(self.settings.request_timeout)
        self.renderer.warm()
        super().warm_up()

    # --- the loop step ---------------------------------------------------------------

    def poll(self) -> float:
        self._renew_leases()
        room = self._wait_for_room()
        if room == 0:
            return 0.0
        if not self._claim(min(room, self.settings.chunk_size)):
            self.nudge("finalize")      # nothing ready: a run may have just been scored out
            return self.idle()
        return self.busy()

    @property
    def max_queued(self) -> int:
        """Items claimed and not yet answered: the calls in flight plus one chunk queued
        behind them, so a call slot that frees up starts the next item at once and claims
        stay off the critical path. When a chunk's calls take less time than claiming and
        preparing it (a provider answering in milliseconds, answers reused), the calls wait
        on the claims: then one more chunk is claimed and prepared while the calls of the
        one before run (``prep_bound``). A chunk's answered items wait for its slowest one
        before their one write-back; they do not hold up claims (up to ``max_held``)."""
        return self.concurrency + (2 if self.prep_bound else 1) * self.settings.chunk_size

    @property
    def max_held(self) -> int:
        return 4 * self.max_queued

    def _wait_for_room(self) -> int:
        """Room for a whole chunk (claims of a few items would cost a commit each), or
        for what is left when nothing is claimed at all. Short of that, it waits for a call
        to answer or a write-back to finish (both notify ``capacity``): with an instant
        model, or every answer reused, nothing is in flight while the answered items wait
        for their write-back, and returning at once would spin the loop and starve the
        write-back threads of the GIL (tests/integration/test_executor_loop.py)."""
        with self.capacity:
            room = min(self.max_queued - self.in_flight, self.max_held - self.held)
            if room < min(self.settings.chunk_size, self.max_queued) and self.held > 0:
                self.capacity.wait(timeout=0.05)
                return 0
            return max(0, room)

    def _running_runs(self) -> list[int]:
        if time.monotonic() - self.runs_at > RUN_LIST_TTL:
            with self.engine.connect() as conn:
                self.runs = store.running_runs(conn)
            self.runs_at = time.monotonic()
            self.claim_from = {run: start for run, start in self.claim_from.items() if run in self.runs}
        return self.runs

    def _claim(self, limit: int) -> bool:
        runs = self._running_runs()
        for offset in range(len(runs)):
            run_id = runs[(self.turn + offset) % len(runs)]
            token, items = self._claim_run(run_id, limit)
            if items:
                self.turn = (self.turn + offset + 1) % max(1, len(runs))
                self._dispatch(Chunk(token, items))
                return True
        self.runs_at = 0.0  # nothing claimable: look at the run list afresh next time
        return False

    def _claim_run(self, run_id: int, limit: int):
        """Claim from where this executor's last claim of the run ended while the run has
        items never leased there (``store.claim_items_from``: the scan does not step over
        the index entries of every item claimed before), then from the run's first ready
        item (retries, leases run out, items given back)."""
        settings, start = self.settings, self.claim_from.get(run_id, 0)

        def claim(conn):
            if start is not None:
                return store.claim_items_from(conn, run_id, start, limit, settings.lease_seconds, settings.attempt_cap)
            return store.claim_items(conn, run_id, limit, settings.lease_seconds, settings.attempt_cap)
        token, items = transaction(self.engine, claim, wrote=lambda claimed: bool(claimed[1]))
        if start is not None:
            self.claim_from[run_id] = max(i.position for i in items) + 1 if items else None
            if not items:
                return self._claim_run(run_id, limit)
        return token, items

    def _dispatch(self, chunk: Chunk) -> None:
        run = self._run_call(chunk.items[0].run_id)
        with self.lock:
            self.chunks[chunk.token] = chunk
            self.in_flight += len(chunk.items)
            self.held += len(chunk.items)
            self.stats["claimed"] += len(chunk.items)
        if run.over_budget or run.endpoint is None or run.stopped:   # each item ends at once, uncalled
            for item in chunk.items:
                self.pool.submit(self._score, chunk, run, item, None)
            return
        self.rendering.submit(self._prepare_and_dispatch, chunk, run)

    def _prepare_and_dispatch(self, chunk: Chunk, run: RunCall) -> None:
        """In a render thread: the chunk's inputs (from its dataset version's rows), its
        messages (one sandbox request, or here for plain templates), the answers already
        paid for; then the calls of the rest."""
        try:
            chunk.items = self._with_inputs(chunk.items, run)
            spent: list[float] = []
            rendered = render_messages_many(run.spec, [i.input or {} for i in chunk.items], self.renderer,
                                            skip=lambda: run.over_budget, spent=spent)
            rendered = self._within_mean(run, chunk, rendered, sum(spent))
            rendered = [m if i.input is not None else ModelCallError(
                f"its row {i.position} is missing from dataset version {run.version_id}", retryable=False)
                for i, m in zip(chunk.items, rendered)]
            keys = [None if isinstance(m, ModelCallError) else trial_keys(run.spec, m, run.endpoint.base_url)
                    for m in rendered]
            found = self._answers([k for ks in keys if ks for k in ks]) if run.reuse else {}
        except DBAPIError as exc:  # the database is away past the retries: not the items' fault
            self._abandon(chunk, exc)
            return
        except Exception as exc:  # a bug must not strand the chunk: every item ends ERROR
            log.exception("run %s: unexpected error while preparing calls", run.spec.name)
            rendered = [ModelCallError(f"internal error: {exc}"[:1000], retryable=False)] * len(chunk.items)
            keys, found = [None] * len(chunk.items), {}
        chunk.prepared_at = time.monotonic()
        reused = []
        for item, messages, item_keys in zip(chunk.items, rendered, keys):
            known = {k: found[k] for k in item_keys or () if k in found}
            if item_keys and len(known) == len(item_keys):     # every trial answered before: no call
                reused.append(reused_item(item, run.spec.rule, item_keys, known, run.spec.decision))
            else:
                self.pool.submit(self._score, chunk, run, item, messages, item_keys, known)
        self._record_reused(chunk, reused)

    def _record_reused(self, chunk: Chunk, results: list[ItemResult]) -> None:
        """Items whose every answer was paid for before: begun and recorded together, under
        one hold of the lock (one by one, as ``_begin`` and ``_record`` take a call's, the
        lock and its waiters were most of an all-reused chunk's cost). A drain that began
        first gives them back instead."""
        if not results:
            return
        with self.capacity:
            if self.draining:
                return
            chunk.started.update(r.position for r in results)
            done = self._add_results(chunk, results)
        if done:
            self.writers.submit(self._finish_chunk, chunk)

    def _within_mean(self, run: RunCall, chunk: Chunk, rendered: list, seconds: float) -> list:
        """A template under its budget per item can still be slow on every item and hold
        the sandbox for hours: once a run's renders average more than
        ``template_mean_seconds`` an item (after ``MEAN_AFTER`` items), the run stops like
        one over its budget."""
        if not seconds:
            return rendered
        run.rendered += len(chunk.items)
        run.render_seconds += seconds
        mean = run.render_seconds / run.rendered
        if run.rendered < MEAN_AFTER or mean <= self.settings.template_mean_seconds or run.over_budget:
            return rendered
        reason = (f"the template took {mean:.2f} s per item on average over {run.rendered} items "
                  f"(at most {self.settings.template_mean_seconds:g} s)")
        self._stop_run_over_budget(run, chunk.items[0], reason)
        return [ModelCallError(f"template exceeded its budget: {reason}", retryable=False, kind=CallFailure.BUDGET)
                for _ in rendered]

    def _with_inputs(self, items: list[ClaimedItem], run: RunCall) -> list[ClaimedItem]:
        """Items point at their dataset row: read the rows' inputs (one query). A row that is
        not there leaves its item's input None (it ends ERROR, never rendered over nothing)."""
        missing = [i.position for i in items if i.input is None]
        if not missing:
            return items
        inputs = read(self.engine, lambda conn: store.version_inputs(conn, run.version_id, missing))
        return [i if i.input is not None else replace(i, input=inputs.get(i.position)) for i in items]

    def _answers(self, keys: list[str]) -> dict[str, Answer]:
        if not keys:
            return {}
        return read(self.engine, lambda conn: store.find_answers(conn, keys))

    def _abandon(self, chunk: Chunk, exc: BaseException) -> None:
        """The chunk could not be prepared for a reason outside its items (the database was
        unreachable through every retry): nothing is written, its leases run out and the
        items are claimed again, rather than ending ERROR for an outage."""
        log.warning("chunk %s: left to its lease: %s", chunk.token[:8], first_line(exc))
        with self.capacity:
            self.chunks.pop(chunk.token, None)
            self.in_flight -= len(chunk.items)
            self.held -= len(chunk.items)
            self.capacity.notify_all()

    def _run_call(self, run_id: int) -> RunCall:
        run = self.run_calls.get(run_id)
        if run is None:
            with self.engine.connect() as conn:
                candidate = store.candidate_of_run(conn, run_id)
                known = RunContext.load(conn, run_id)
            spec = parse_spec(candidate.config)
            decl = ProviderDecl.from_dict(candidate.provider) if candidate.provider else None
            context = {"update_id": candidate.update_id, "version_id": candidate.dataset_version_id,
                       "reuse": candidate.reuse, "context": known}
            try:
                run = RunCall(spec, endpoint_for(decl), **context)
            except UsageError as exc:     # the key variable the declaration names is not set here
                run = RunCall(spec, None, endpoint_error=str(exc), **context)
            self.run_calls[run_id] = run
        return run

    # --- one item, in a pool thread ----------------------------------------------------

    def _score(self, chunk: Chunk, run: RunCall, item: ClaimedItem, rendered, keys: tuple[str, ...] | None = None,
               known: dict[str, Answer] | None = None) -> None:
        if not self._begin(chunk, item):
            return   # a drain gave it back uncalled
        try:
            result = self.caller.result(run, item, rendered, keys, known or {})
        except Exception as exc:  # a bug must not strand the chunk
            log.exception("item %s: unexpected error", item.item_id)
            result = ItemResult(item.position, Verdict.ERROR, error=f"internal error: {exc}"[:1000])
        self._record(chunk, result)

    def _record(self, chunk: Chunk, result: ItemResult) -> None:
        """An item's result is in: the chunk is written back once all of its are."""
        with self.capacity:
            self.calls_began.pop((chunk.items[0].run_id, result.position), None)
            done = self._add_results(chunk, [result])
        if done:
            self.writers.submit(self._finish_chunk, chunk)

    def _add_results(self, chunk: Chunk, results: list[ItemResult]) -> bool:
        """(Under the lock.) Results in, their calls out of flight; True when the chunk is
        whole (then it leaves ``chunks``: the caller writes it back)."""
        chunk.results.extend(results)
        self.in_flight -= len(results)
        if self.max_queued - self.in_flight >= min(self.settings.chunk_size, self.max_queued) or not self.in_flight:
            self.capacity.notify_all()   # room for a whole chunk: the claimer may go
        if not chunk.done:
            return False
        self.chunks.pop(chunk.token, None)
        self._judge_pipeline(chunk)
        return True

    def _judge_pipeline(self, chunk: Chunk) -> None:
        """(Under the lock, as a chunk's last answer is in.) Whether its calls took less time
        than its claim and preparation: then the claimer prepares one chunk ahead."""
        if chunk.prepared_at is not None and not chunk.given_back:
            now = time.monotonic()
            self.prep_bound = now - chunk.prepared_at < chunk.prepared_at - chunk.claimed_at

    def _begin(self, chunk: Chunk, item: ClaimedItem) -> bool:
        """The item's call (or its reuse) begins, unless a drain has begun (which gave the
        item back)."""
        with self.lock:
            if self.draining:
                return False
            chunk.started.add(item.position)
            self.calls_began[(item.run_id, item.position)] = time.monotonic()
            return True

    def oldest_call_age(self) -> float | None:
        with self.lock:
            oldest = min(self.calls_began.values(), default=None)
        return None if oldest is None else time.monotonic() - oldest

    def _stop_run_over_budget(self, run: RunCall, item: ClaimedItem, why: str | None = None) -> None:
        """The run's template overran its budget: the run is FAILED whatever else happens, so
        its other items end ERROR uncalled and unrendered (those queued here, and every one
        nobody holds, in one statement)."""
        run.over_budget = (f"not rendered: {why}" if why else
                           f"not rendered: the template exceeded its budget on item {item.item_id[:80]} of this run")
        try:
            failed = transaction(self.engine, lambda conn: store.fail_unclaimed_items(
                conn, item.run_id, f"budget: {run.over_budget}"))
            log.info("run %s: template over budget; %d unclaimed items end ERROR uncalled", item.run_id, failed)
        except Exception as exc:   # they still fail one by one, unrendered, as they are claimed
            log.warning("run %s: could not end its unclaimed items: %s", item.run_id, first_line(exc))

    def _finish_chunk(self, chunk: Chunk) -> None:
        try:
            self._write_back(chunk)
        finally:
            with self.capacity:
                self.held -= len(chunk.items)
                self.capacity.notify_all()
                drained = self.held == 0
            if drained:
                self.nudge("finalize")

    def _write_back(self, chunk: Chunk) -> None:
        """One guarded UPDATE, run again by ``transaction`` on a deadlock or a lost connection
        (the database may be restarting). Running it again is safe even when a lost COMMIT
        did commit: the lease token guards it, so the second run writes nothing."""
        run_id = chunk.items[0].run_id
        run = self.run_calls.get(run_id)
        # a --no-reuse run keeps its fresh answers to itself: a kept answer is the first the
        # gate obtained, so re-running until one passes cannot choose what an apply reuses
        answers = new_answers(chunk.results, run.update_id, run_id) if run and run.reuse else []
        judge = run.context.judge if run else None
        scored = [r.position for r in chunk.results if r.verdict != Verdict.PENDING] if judge else None
        calls = sum(r.calls for r in chunk.results)

        def write(conn) -> int:
            written = store.write_item_results(conn, run_id, chunk.token, chunk.results)
            whole = written == len(chunk.results)
            if whole:                           # kept only from a write-back that held its lease throughout
                store.save_answers(conn, answers)
            # the run's running counts (gate/settle.py), and the calls it made, lease or not
            store.add_tally(conn, run_id, store.stripe_of(chunk.token), scored if whole else None,
                            judge.live_run_id if judge else None, calls, judge.by_label if judge else True)
            return written
        try:
            written = transaction(self.engine, write)
        except Exception as exc:   # retries spent, or a bug: the leases run out and the items are claimed again
            log.warning("write-back failed: %s", first_line(exc))
            written = 0
        lost = len(chunk.results) - written
        with self.lock:
            self.stats["written"] += written
            self.stats["lost"] += lost
        if lost:
            log.warning("chunk %s: %d result(s) dropped: the lease was lost", chunk.token[:8], lost)
        self.limiter.flush(chunk.items[0].run_id)
        self.stopper.after_write_back(run, run_id, chunk.results if written else [], lost)

    # --- leases -------------------------------------------------------------------------

    def _renew_leases(self) -> None:
        half = self.settings.lease_seconds / 2
        with self.lock:
            due = [c for c in self.chunks.values() if time.monotonic() - c.renewed_at > half]
        for chunk in due:
            transaction(self.engine, lambda conn: store.renew_item_leases(
                conn, chunk.items[0].run_id, [i.position for i in chunk.items], chunk.token,
                self.settings.lease_seconds))
            chunk.renewed_at = time.monotonic()

    def _give_back_unstarted(self) -> None:
        """Draining: no call begins any more, and the claimed items whose call has not begun
        go back at once (guarded by their claim's token, their attempt not counted), for
        another worker to take now rather than after the lease. A chunk left with nothing
        in flight is written back now."""
        with self.capacity:
            self.draining = True
            unstarted = {c.token: (c.items[0].run_id, [i.position for i in c.items if i.position not in c.started])
                         for c in self.chunks.values()}
            finished = []
            for token, (_, positions) in unstarted.items():
                chunk = self.chunks[token]
                chunk.given_back, self.in_flight = len(positions), self.in_flight - len(positions)
                if positions and chunk.done:
                    finished.append(self.chunks.pop(token))
        given = 0
        for token, (run_id, positions) in unstarted.items():
            if positions:
                try:
                    given += transaction(self.engine, lambda conn: store.release_items(conn, token, run_id, positions))
                except Exception as exc:   # their lease runs out instead
                    log.warning("drain: could not give back %d item(s): %s", len(positions), first_line(exc))
        for chunk in finished:
            self.writers.submit(self._finish_chunk, chunk)
        if given:
            log.info("drain: gave back %d claimed item(s) not yet called", given)

    def close(self) -> None:
        """Drain: stop claiming, give back what no call has begun on, let calls in flight
        finish and write back (renewing leases meanwhile), then shut the pool."""
        self._give_back_unstarted()
        deadline = time.monotonic() + self.settings.request_timeout + 5
        while time.monotonic() < deadline:
            with self.lock:
                if self.held == 0:
                    break
            self._renew_leases()
            time.sleep(0.05)
        self.rendering.shutdown(wait=False, cancel_futures=True)
        self.pool.shutdown(cancel=True)
        self.writers.shutdown(wait=True)
        self.limiter.close()
        if self.owns_renderer:
            self.renderer.close()
