"""The spend caps at the call (gate/spend.py): before each model call of an update with a
cap, the call and the most it can cost are reserved in the gate database, atomically across
every worker process (``store.reserve_spend``); the cost is settled to the real one when
the answer comes. A refused reservation stops the update (its remaining items are not
called) and the call is not made. An update without a cap costs nothing here: no database
traffic per call."""

from __future__ import annotations

import logging

from gate import store
from gate.db import read, transaction
from gate.errors import first_line
from gate.spend import call_bound, output_bound, usd_nano
from gate.spec import request_kwargs
from gate.verdict import SPEND_CAP

log = logging.getLogger("promptgate.execute")


class SpendGuard:
    """Reserves each call of a capped update; ``stopper`` (workers.early_stop.Stopper)
    stops the update a reservation is refused for."""

    def __init__(self, engine, stopper):
        self.engine = engine
        self.stopper = stopper

    def reserve(self, run, item, messages) -> int | None:
        """Reserve one call of ``messages`` for ``run``'s update: the cost reserved (nano-
        dollars; 0 without a cost cap), or None when refused (the update is then stopped)."""
        caps = run.context.caps
        if not caps:
            return 0
        cost = 0
        if caps.max_cost_per_update_usd is not None:
            bound = output_bound(run.spec.params)
            if bound is None or not run.context.price:
                return self._refused(run, item, "a call whose cost cannot be bounded (no price or no max_tokens)")
            cost = call_bound(request_kwargs(run.spec, messages), bound, run.context.price)
        granted = transaction(self.engine, lambda conn: store.reserve_spend(
            conn, run.update_id, 1, cost, caps.max_calls_per_update, caps.max_cost_nanousd))
        return cost if granted else self._refused(run, item, None)

    def settle(self, run, reserved: int, out) -> None:
        """The call answered: give back what its reservation held beyond its real cost."""
        if not reserved or getattr(out, "prompt_tokens", None) is None or getattr(out, "completion_tokens", None) is None:
            return
        spent = usd_nano(out.prompt_tokens, out.completion_tokens, run.context.price)
        if spent < reserved:
            try:
                transaction(self.engine, lambda conn: store.release_spend(conn, run.update_id, 0, reserved - spent))
            except Exception as exc:        # kept reserved: the cap only binds sooner
                log.warning("update %s: could not settle a call's cost: %s", run.update_id, first_line(exc))

    def _refused(self, run, item, why: str | None) -> None:
        """The update reached a cap (or a call cannot be priced): stop it, once."""
        caps = run.context.caps
        calls, cost = read(self.engine, lambda conn: store.spend_of_update(conn, run.update_id))
        if why is None and caps.max_calls_per_update is not None and calls + 1 > caps.max_calls_per_update:
            cap = {"cap": "max_calls_per_update", "limit": caps.max_calls_per_update}
        elif why is None:
            cap = {"cap": "max_cost_per_update_usd", "limit": f"{caps.max_cost_per_update_usd:f}"}
        else:
            cap = {"cap": "max_cost_per_update_usd", "limit": f"{caps.max_cost_per_update_usd:f}", "why": why}
        self.stopper.stop(run.update_id, item.run_id, SPEND_CAP, SPEND_CAP,
                          {"kind": SPEND_CAP, "run_id": item.run_id, **cap})
        return None
