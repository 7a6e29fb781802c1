"""Execute: claim chunks of ready items, render them, call the model outside any
transaction, write the results back as they come, guarded by the lease token
(``workers.execute.write_back``). The methods of ``Executor`` follow an item's way in that
order: claim → render (prepare) → call, then the leases and the drain. What is claimed, in
flight, answered, written and given back, whether a call may begin and whether there is
room for the next claim, is ``workers.execute.ledger``.

Up to ``concurrency`` calls are in flight per process (a call's slot is free once its answer
is in), and up to ``concurrency + window`` made and not yet recorded (an answered call waits
in the write-back window until its write-back; ``workers.execute.ledger``). Runs are served
in rotation, so a big dataset does not starve a small one. A claim adds its items to the
run's tally, so the calls a worker that dies with them may have made are counted, under the
executor's tag and bound (``store.stops.unrecorded_claims``). A retryable failure (timeout,
connection, 5xx, a 429 without a Retry-After) makes the item visible again after an
exponential backoff with jitter; at the attempt cap its ERROR is final. A 429 with a
Retry-After spends no attempt (``workers.execute.results``: backpressure). An item whose
last claims were lost with their workers is claimed alone (``store.items.claim_items``).
Leases of calls that outlive half the lease are renewed. One item's call, or its N calls for
a prompt with ``trials: N``, is ``workers.execute.calls``; the result made of its answers,
``workers.execute.results``. Each write-back also adds to its run's running counts
(``add_tally``), from which ``workers.execute.early_stop`` judges whether the run's verdict
is settled and stops its update; a call of an update with a spend cap is reserved first
(``workers.execute.spend``).

An item's messages are rendered through the process's template sandbox (a CPU-time and
memory budget per item, ``gate.prompt.sandbox``) and sent to the provider its update pinned at
submit (``gate.calls.providers``). Plain templates render in the call thread; the others render a
chunk at a time in a render thread (one sandbox request per chunk, not per item: each
round trip is a wait for the GIL among the call threads), which then hands the items to
the call threads, so calls of other runs never wait on a sandbox. A template over its budget ends the item ERROR,
not retried,
and the run's remaining items end ERROR without being rendered: the run's verdict is
FAILED already, and a template that burns its budget on every row would otherwise hold the
sandbox for the whole dataset while other prompts' updates wait.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy.exc import DBAPIError

from gate.calls.llm import call_prompt, prepare_default_client, render_messages_many
from gate.calls.providers import ProviderDecl, endpoint_for
from gate.db import read, transaction
from gate.errors import CallFailure, ModelCallError, UsageError, first_line
from gate.prompt.request_keys import trial_keys
from gate.prompt.sandbox import RenderBudget, RenderPool
from gate.prompt.spec import parse_spec
from gate.ratelimit import CallLimiter
from gate.records import Answer, ClaimedItem, ItemResult
from gate.states import Verdict
from gate.store.answers import find_answers
from gate.store.items import (
    claim_items,
    claim_items_from,
    fail_unclaimed_items,
    release_items,
    renew_item_leases,
)
from gate.store.runs import candidate_of_run, running_runs
from gate.store.stops import add_claims
from gate.store.versions import version_inputs
from workers.poller import Poller

from .call_threads import CallThreads
from .calls import ItemCaller, RunCall
from .early_stop import RunContext, Stopper
from .judging import load_judging
from .ledger import Chunk, ChunkLedger
from .results import reused_item
from .spend import SpendGuard
from .write_back import WriteBacks

log = logging.getLogger("promptgate.execute")
RUN_LIST_TTL = 1.0
WRITE_BACK_THREADS = 2
MEAN_AFTER = 16  # items rendered before a run's mean render time is judged


class Executor(Poller):
    role = "execute"

    def __init__(
        self,
        engine,
        settings,
        stop,
        call=call_prompt,
        activity=None,
        renderer: RenderPool | None = None,
    ):
        super().__init__(engine, settings, stop, activity)
        self.concurrency = self.settings.concurrency  # decided once: workers.supervisor.worker_settings
        self.call = call
        self.owns_renderer = renderer is None
        self.renderer = renderer or RenderPool(RenderBudget.from_settings(self.settings))
        self.pool = CallThreads(self.concurrency)
        # a finished chunk is written back here, not by the call thread that finished it,
        # which goes on to its next call at once (a write-back waits on a durable commit)
        self.writers = ThreadPoolExecutor(WRITE_BACK_THREADS, thread_name_prefix="write-back")
        self.rendering = ThreadPoolExecutor(self.renderer.budget.processes, thread_name_prefix="render")
        self.ledger = ChunkLedger(self.concurrency, self.settings.chunk_size, self.settings.window)
        # names this executor's claims in its runs' tallies, with its bound (store.stops.unrecorded_claims)
        self.tag = uuid.uuid4().hex[:16]
        self.run_calls: dict[int, RunCall] = {}
        self.runs: list[int] = []
        self.claim_from: dict[int, int | None] = {}  # run -> where its next claim starts (None: the first ready)
        self.runs_at = 0.0
        self.turn = 0
        # for the logs and the benchmarks; "claimed" is written by the claiming thread alone,
        # the others under ``counting``
        self.stats = {"claimed": 0, "written": 0, "lost": 0, "retries": 0, "calls": 0}
        self.counting = threading.Lock()
        # shared rate-limit budgets + concurrency that adapts to 429s (gate/ratelimit/)
        self.limiter = CallLimiter(self.settings, self.engine, self.concurrency, stop)
        # early stop and spend caps (workers/execute/early_stop.py, workers/execute/spend.py)
        self.stopper = Stopper(
            self.engine, lambda uid: [r for r in list(self.run_calls.values()) if r.update_id == uid]
        )
        self.caller = ItemCaller(
            call,
            self.settings,
            self.limiter,
            self.ledger,
            self.stats,
            self.counting,
            self._stop_run_over_budget,
            spend=SpendGuard(self.engine, self.stopper, stop),
        )
        self.write_backs = WriteBacks(
            self.engine,
            self.settings,
            self.ledger,
            self.run_calls,
            self.limiter,
            self.stopper,
            self.stats,
            self.counting,
            self.nudge,
            self.tag,
        )

    def warm_up(self) -> None:
        if self.call is call_prompt:
            prepare_default_client(self.settings.request_timeout)
        self.renderer.warm()
        super().warm_up()

    # --- the loop step ---------------------------------------------------------------

    def poll(self) -> float:
        self._renew_leases()
        self.write_backs.settle_owed()
        room = self.ledger.room()
        if room == 0:
            return 0.0
        if not self._claim(min(room, self.settings.chunk_size)):
            self.nudge("finalize")  # nothing ready: a run may have just been scored out
            return self.idle()
        return self.busy()

    # --- claim ------------------------------------------------------------------------

    def _running_runs(self) -> list[int]:
        if time.monotonic() - self.runs_at > RUN_LIST_TTL:
            with self.engine.connect() as conn:
                self.runs = running_runs(conn)
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
        items never leased there (``claim_items_from``: the scan does not step over
        the index entries of every item claimed before), then from the run's first ready
        item (retries, leases run out, items given back)."""
        settings, start = self.settings, self.claim_from.get(run_id, 0)

        caps = (settings.lease_seconds, settings.attempt_cap, settings.claim_cap)
        suspects = self.ledger.suspects == 0  # one item whose last claim was lost at a time

        def claim(conn, record):
            if start is not None:
                token, items = claim_items_from(conn, run_id, start, limit, *caps)
            else:
                token, items = claim_items(conn, run_id, limit, *caps, suspects=suspects)
            if items:  # counted before any call, with this executor and its bound: what it may have called
                add_claims(conn, run_id, token, record.who, claimed=len(items))
                record.also(conn)
            return token, items

        with self.write_backs.bounds.recording(run_id, claim=True) as record:
            token, items = transaction(
                self.engine, lambda conn: claim(conn, record), wrote=lambda claimed: bool(claimed[1])
            )
            if items:
                record.committed()
        if start is not None:
            self.claim_from[run_id] = max(i.position for i in items) + 1 if items else None
            if not items:
                return self._claim_run(run_id, limit)
        return token, items

    def _dispatch(self, chunk: Chunk) -> None:
        """The claimed chunk into the ledger, then to a render thread (or, when its run can
        call nothing, straight to the call threads: each item ends at once, uncalled)."""
        run = self._run_call(chunk.run_id)
        self.ledger.add(chunk)
        self.stats["claimed"] += len(chunk.items)
        if run.over_budget or run.endpoint is None or run.stopped:
            for item in chunk.items:
                self.pool.submit(self._score, chunk, run, item, None)
            return
        self.rendering.submit(self._prepare_and_dispatch, chunk, run)

    def _run_call(self, run_id: int) -> RunCall:
        run = self.run_calls.get(run_id)
        if run is None:
            with self.engine.connect() as conn:
                candidate = candidate_of_run(conn, run_id)
                known = RunContext.load(conn, run_id)
                spec = parse_spec(candidate.config)
                judging = load_judging(conn, run_id, spec, self.renderer, self._answers, candidate.reuse)
            decl = ProviderDecl.from_dict(candidate.provider) if candidate.provider else None
            run_call = functools.partial(
                RunCall,
                update_id=candidate.update_id,
                version_id=candidate.dataset_version_id,
                reuse=candidate.reuse,
                context=known,
                judging=judging,
            )
            try:
                run = run_call(spec, endpoint_for(decl))
            except UsageError as exc:  # the key variable the declaration names is not set here
                run = run_call(spec, None, endpoint_error=str(exc))
            self.run_calls[run_id] = run
        return run

    # --- render (prepare), in a render thread ------------------------------------------

    def _prepare_and_dispatch(self, chunk: Chunk, run: RunCall) -> None:
        """In a render thread: the chunk prepared (``_prepare``); then each item whose every
        answer was paid for before is answered at once, and the rest go to the call threads."""
        prepared = self._prepare(chunk, run)
        if prepared is None:
            return
        chunk.prepared_at = time.monotonic()
        reused = []
        for item, messages, item_keys, known in zip(chunk.items, *prepared):
            if item_keys and len(known) == len(item_keys) and run.judging is None:  # every trial answered before
                reused.append(reused_item(item, run.spec.rule, item_keys, known, run.spec.decision))
            else:
                self.pool.submit(self._score, chunk, run, item, messages, item_keys, known)
        if self.ledger.reused(chunk, reused):
            self.writers.submit(self.write_backs.chunk, chunk)

    def _prepare(self, chunk: Chunk, run: RunCall) -> tuple[list, list, list] | None:
        """The chunk's inputs (from its dataset version's rows), its messages (one sandbox
        request, or here for plain templates), each item's trial keys and the answers
        already paid for under them; None when the chunk is abandoned to its leases."""
        try:
            chunk.items = self._with_inputs(chunk.items, run)
            spent: list[float] = []
            rendered = render_messages_many(
                run.spec, [i.input or {} for i in chunk.items], self.renderer, skip=lambda: run.over_budget, spent=spent
            )
            rendered = self._within_mean(run, chunk, rendered, sum(spent))
            rendered = [
                m
                if i.input is not None
                else ModelCallError(
                    f"its row {i.position} is missing from dataset version {run.version_id}", retryable=False
                )
                for i, m in zip(chunk.items, rendered)
            ]
            assert run.endpoint is not None  # _dispatch renders only a run that has one
            keys = [
                None if isinstance(m, ModelCallError) else trial_keys(run.spec, m, run.endpoint.base_url)
                for m in rendered
            ]
            found = self._answers([k for ks in keys if ks for k in ks]) if run.reuse else {}
        except DBAPIError as exc:  # the database is away past the retries: not the items' fault
            self._abandon(chunk, exc)
            return None
        except Exception as exc:  # a bug must not strand the chunk: every item ends ERROR
            log.exception("run %s: unexpected error while preparing calls", run.spec.name)
            rendered = [ModelCallError(f"internal error: {exc}"[:1000], retryable=False)] * len(chunk.items)
            keys, found = [None] * len(chunk.items), {}
        known = [{k: found[k] for k in item_keys or () if k in found} for item_keys in keys]
        return rendered, keys, known

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
        reason = (
            f"the template took {mean:.2f} s per item on average over {run.rendered} items "
            f"(at most {self.settings.template_mean_seconds:g} s)"
        )
        self._stop_run_over_budget(run, chunk.items[0], reason)
        return [
            ModelCallError(f"template exceeded its budget: {reason}", retryable=False, kind=CallFailure.BUDGET)
            for _ in rendered
        ]

    def _with_inputs(self, items: list[ClaimedItem], run: RunCall) -> list[ClaimedItem]:
        """Items point at their dataset row: read the rows' inputs (one query). A row that is
        not there leaves its item's input None (it ends ERROR, never rendered over nothing)."""
        missing = [i.position for i in items if i.input is None]
        if not missing:
            return items
        version_id = run.version_id
        assert version_id is not None  # an item claimed without its input points at a row of its run's version
        inputs = read(self.engine, lambda conn: version_inputs(conn, version_id, missing))
        # the constructor, not dataclasses.replace: a tenth of the cost, on every item of a chunk
        return [
            i
            if i.input is not None
            else ClaimedItem(i.run_id, i.position, i.item_id, inputs.get(i.position), i.expected_decision, i.attempt)
            for i in items
        ]

    def _answers(self, keys: list[str]) -> dict[str, Answer]:
        if not keys:
            return {}
        return read(self.engine, lambda conn: find_answers(conn, keys))

    def _abandon(self, chunk: Chunk, exc: BaseException) -> None:
        """The chunk could not be prepared for a reason outside its items (the database was
        unreachable through every retry): nothing is written, its leases run out and the
        items are claimed again, rather than ending ERROR for an outage."""
        log.warning("chunk %s: left to its lease: %s", chunk.token[:8], first_line(exc))
        self.ledger.abandon(chunk)

    def _stop_run_over_budget(self, run: RunCall, item: ClaimedItem, why: str | None = None) -> None:
        """The run's template overran its budget: the run is FAILED whatever else happens, so
        its other items end ERROR uncalled and unrendered (those queued here, and every one
        nobody holds, in one statement)."""
        # no item named: a run's reason says its first budget error (gate.verdict.reasons)
        elsewhere = "the template exceeded its budget on another item of this run"
        run.over_budget = f"not rendered: {why or elsewhere}"
        try:
            failed = transaction(
                self.engine, lambda conn: fail_unclaimed_items(conn, item.run_id, f"budget: {run.over_budget}")
            )
            log.info("run %s: template over budget; %d unclaimed items end ERROR uncalled", item.run_id, failed)
        except Exception as exc:  # they still fail one by one, unrendered, as they are claimed
            log.warning("run %s: could not end its unclaimed items: %s", item.run_id, first_line(exc))

    # --- call: one item, in a call thread ----------------------------------------------

    def _score(
        self,
        chunk: Chunk,
        run: RunCall,
        item: ClaimedItem,
        rendered,
        keys: tuple[str, ...] | None = None,
        known: dict[str, Answer] | None = None,
    ) -> None:
        """The item's call (``workers.execute.calls``) and its result into the ledger, which
        hands it to the chunk's write-back (its call slot is free once it is answered, its
        place in the write-back window once it is written)."""
        if not self.ledger.begin(chunk, item):
            return  # a drain gave it back uncalled
        try:
            result = self.caller.result(run, item, rendered, keys, known or {})
        except Exception as exc:  # a bug must not strand the chunk
            log.exception("item %s: unexpected error", item.item_id)
            result = ItemResult(item.position, Verdict.ERROR, error=f"internal error: {exc}"[:1000])
        if self.ledger.answered(chunk, result):
            self.writers.submit(self.write_backs.chunk, chunk)

    # --- leases, the drain, the heartbeat -----------------------------------------------

    def _renew_leases(self) -> None:
        for chunk in self.ledger.due_for_renewal(self.settings.lease_seconds / 2):
            transaction(
                self.engine,
                lambda conn: renew_item_leases(
                    conn, chunk.run_id, [i.position for i in chunk.items], chunk.token, self.settings.lease_seconds
                ),
            )
            chunk.renewed_at = time.monotonic()

    def _give_back_unstarted(self) -> None:
        """Draining: no call begins any more, and the claimed items whose call has not begun
        go back at once (guarded by their claim's token, the claim not counted), for
        another worker to take now rather than after the lease."""
        given_back, to_write = self.ledger.give_back_unstarted()
        given = 0
        for chunk, positions in given_back:

            def release(conn, chunk=chunk, positions=positions) -> int:
                released = release_items(conn, chunk.token, chunk.run_id, positions)
                tag, bound = self.tag, self.ledger.announced
                add_claims(conn, chunk.run_id, chunk.token, {"claimer": tag, "bound": bound}, claimed=-released)
                return released

            try:
                given += transaction(self.engine, release)
            except Exception as exc:  # their lease runs out instead
                log.warning("drain: could not give back %d item(s): %s", len(positions), first_line(exc))
        for chunk in to_write:
            self.writers.submit(self.write_backs.chunk, chunk)
        if given:
            log.info("drain: gave back %d claimed item(s) not yet called", given)

    def close(self) -> None:
        """Drain: stop claiming, give back what no call has begun on, let calls in flight
        finish and write back (renewing leases meanwhile), then shut the pool."""
        self._give_back_unstarted()
        deadline = time.monotonic() + self.settings.request_timeout + 5
        while time.monotonic() < deadline and not self.ledger.all_written():
            self._renew_leases()
            time.sleep(0.05)
        self.rendering.shutdown(wait=False, cancel_futures=True)
        self.pool.shutdown(cancel=True)
        self.writers.shutdown(wait=True)
        self.write_backs.settle_owed()
        self.limiter.close()
        log.info(
            "execute: %d item(s) claimed, %d written back, %d result(s) refused (lease lost or update "
            "stopped: their calls are made again), %d call(s)",
            self.stats["claimed"],
            self.stats["written"],
            self.stats["lost"],
            self.stats["calls"],
        )
        if self.owns_renderer:
            self.renderer.close()

    def oldest_call_age(self) -> float | None:
        return self.ledger.oldest_call_age()
