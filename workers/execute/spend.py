"""The spend caps at the call (gate/calls/spend_caps.py): before each model call of an update with a
cap, the call and the most it can cost are reserved in the gate database, atomically across
every worker process (``reserve_spend``); the cost is settled to the real one when
the answer comes. A reservation refused because the cap is spent stops the update (its
remaining items are not called) and the call is not made; one refused only because calls
in flight hold part of the budget (they may yet cost less than their most) waits for them
to settle; one refused because the update is no longer open to calls (cancelled,
superseded, ended, or stopped by another process) makes no call of it here any more. A
reservation granted to a call that is then not made (its update stopped meanwhile) is
given back: what is reserved is what was called. An update without a cap costs nothing
here: no database traffic per call."""

from __future__ import annotations

import logging
import threading

from gate.calls.spend_caps import call_bound, output_bound, usd_nano
from gate.db import read, transaction
from gate.errors import first_line
from gate.prompt.spec import request_kwargs
from gate.states import UpdateStatus
from gate.store.spend import release_spend, reserve_spend, settle_spend, spend_of_update
from gate.store.updates import get_update
from gate.verdict.update_outcome import SPEND_CAP

log = logging.getLogger("promptgate.execute")
SETTLE_WAIT = 0.05  # seconds between tries while calls in flight hold the budget


class SpendGuard:
    """Reserves each call of a capped update; ``stopper`` (workers.execute.early_stop.Stopper)
    stops the update a reservation is refused for; ``halt`` is set when the worker stops."""

    def __init__(self, engine, stopper, halt: threading.Event | None = None):
        self.engine = engine
        self.stopper = stopper
        self.halt = halt or threading.Event()

    def reserve(self, run, item, messages, spec=None, price=None) -> int | None:
        """Reserve one call of ``messages`` for ``run``'s update: the cost reserved (nano-
        dollars; 0 without a cost cap), or None when refused (the update is then stopped,
        or the worker is stopping). ``spec`` and ``price``: the prompt called and its price
        when it is not the run's candidate (a judge's call, workers.execute.judging)."""
        caps = run.context.caps
        if not caps:
            return 0
        spec, price = spec or run.spec, price if spec is not None else run.context.price
        cost = 0
        if caps.max_cost_per_update_usd is not None:
            bound = output_bound(spec.params)
            if bound is None or not price:
                self._reached(run, item, "a call whose cost cannot be bounded (no price or no max_tokens)")
                return None
            cost = call_bound(request_kwargs(spec, messages), bound, price)
        while not run.stopped:
            if transaction(
                self.engine,
                lambda conn: reserve_spend(
                    conn, run.update_id, 1, cost, caps.max_calls_per_update, caps.max_cost_nanousd
                ),
            ):
                return cost
            upd, (calls, reserved, in_flight) = read(
                self.engine,
                lambda conn: (get_update(conn, run.update_id), spend_of_update(conn, run.update_id)),
            )
            if upd.status != UpdateStatus.RUNNING or upd.stopped:
                # refused for no cap: the update was cancelled (superseded), ended, or stopped
                # by another process; no call of it begins here any more, and waiting for its
                # budget would hold this call thread for good
                self.stopper.mark(run.update_id)
                return None
            if caps.max_calls_per_update is not None and calls + 1 > caps.max_calls_per_update:
                self._reached(run, item, None, "max_calls_per_update")
                return None
            if caps.max_cost_nanousd is not None and reserved - in_flight + cost > caps.max_cost_nanousd:
                self._reached(run, item, None, "max_cost_per_update_usd")
                return None
            if self.halt.wait(SETTLE_WAIT):  # calls in flight hold it: they may cost less than their most
                return None
        return None

    def release(self, run, reserved: int) -> None:
        """A reservation was granted but its call is not made (the update stopped between the
        grant and the call: another call thread's refusal, another process's stop): give it
        back, so the calls reserved are the calls made ("15 calls made" said 15 where 14 had
        been). Failing that, it stays reserved: the cap only binds sooner."""
        if not run.context.caps:
            return
        try:
            transaction(self.engine, lambda conn: release_spend(conn, run.update_id, 1, reserved))
        except Exception as exc:
            log.warning("update %s: could not give back an unused reservation: %s", run.update_id, first_line(exc))

    def settle(self, run, reserved: int, out, price=None) -> None:
        """The call answered (``out``: its answer; None: it failed): no longer in flight, and
        its reservation becomes what it cost (a failed or unmetered call keeps its whole
        reservation: it may have cost that much). A call that cost more than its most (a
        provider that answered past ``max_tokens``) is recorded at its cost: the figures
        never hide that the bound did not hold."""
        if not reserved:
            return
        tokens_in, tokens_out = getattr(out, "prompt_tokens", None), getattr(out, "completion_tokens", None)
        price = price or run.context.price
        spent = reserved if tokens_in is None or tokens_out is None else usd_nano(tokens_in, tokens_out, price)
        try:
            transaction(self.engine, lambda conn: settle_spend(conn, run.update_id, reserved, spent))
        except Exception as exc:  # kept reserved and in flight: the cap only binds sooner
            log.warning("update %s: could not settle a call's cost: %s", run.update_id, first_line(exc))

    def _reached(self, run, item, why: str | None, cap: str = "max_cost_per_update_usd") -> None:
        """The update reached a cap (or a call cannot be priced): stop it, once."""
        caps = run.context.caps
        limit = caps.max_calls_per_update if cap == "max_calls_per_update" else f"{caps.max_cost_per_update_usd:f}"
        self.stopper.stop(
            run.update_id,
            item.run_id,
            SPEND_CAP,
            SPEND_CAP,
            {"kind": SPEND_CAP, "run_id": item.run_id, "cap": cap, "limit": limit, **({"why": why} if why else {})},
        )
        return None
