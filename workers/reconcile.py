"""Reconcile: an update whose runs are all terminal ends APPLIED / PASSED / REJECTED /
FAILED. Apply is one transaction guarded by the update's status (still RUNNING, so a
cancelled update never applies) and by the live version still being ``base_version``.
Only this worker writes the live ``prompt`` table."""

from __future__ import annotations

import logging

from gate import store
from gate.db import transaction
from gate.verdict import update_end
from gate.states import UpdateStatus

from .poller import Poller

log = logging.getLogger("promptgate.reconcile")
BATCH = 20


class Reconciler(Poller):
    role = "reconcile"

    def poll(self) -> float:
        ids = transaction(self.engine, reconcile_batch, wrote=bool)
        return self.busy() if len(ids) == BATCH else (self.idle() if not ids else self.settings.poll_interval)


def reconcile_batch(conn) -> list[int]:
    ids = store.reconcilable_updates(conn, BATCH)
    for update_id in ids:
        reconcile_one(conn, update_id)
    return ids


def reconcile_one(conn, update_id: int) -> UpdateStatus:
    upd = store.get_update(conn, update_id)
    status, reason = update_end(upd.mode, store.runs_of_update(conn, update_id))
    if status == UpdateStatus.APPLIED and not store.write_live(conn, upd):
        live = store.live_version(conn, upd.prompt_name)
        status, reason = UpdateStatus.FAILED, (
            f"cleared every bar but was not applied: the live version is {live}, not {upd.base_version} as at "
            "submit (another change went live first); resubmit to evaluate against it")
    store.transition_update(conn, update_id, status, reason)
    log.info("update %s: %s (%s)", update_id, status, reason)
    return status
