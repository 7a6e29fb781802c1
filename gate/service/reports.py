"""Reports as the service hands them out: built once per update however many callers
ask at the same moment (a thousand waiters woken together cost one report, not a
thousand), and kept a while once the update is terminal (a finished report changes only
when prune takes its items).

An open update's report is kept for ``OPEN_KEEP_SECONDS`` too, but handed only to the
waits that timed out (``recent_ok``): a thousand waits that started over a few seconds time
out over those seconds, one by one, and each built its own report (a loaded CI machine
counted 334 queries for 60 waits where ~150 is the figure; 20 ms apart, 734). A wait that
timed out is answered "not yet" whichever way: a report a second old says that as well.
A status read and a woken waiter never get it: they want the report as it is now."""

from __future__ import annotations

import asyncio
import json
import time

from gate.contract.codec import encode

from .dataset_access import holdout_items_hidden, scrubbed

TERMINAL_KEEP_SECONDS = 30.0
OPEN_KEEP_SECONDS = 1.0


class ReportCache:
    def __init__(self, gate, keep: float = TERMINAL_KEEP_SECONDS, size: int = 512):
        self.gate, self.keep, self.size = gate, keep, size
        self.done: dict[tuple[int, int, bool, bool], tuple[float, bytes]] = {}
        self.recent: dict[tuple[int, int, bool, bool], tuple[float, bytes]] = {}  # open updates'
        self.building: dict[tuple[int, int, bool, bool], asyncio.Task] = {}

    async def report_json(
        self, update_id: int, failures: int, wire: bool = False, admin: bool = True, recent_ok: bool = False
    ) -> bytes:
        """The update's report as JSON bytes: the documented ``status --json`` form
        (gate/schemas/status.schema.json), or with ``wire`` the ``gate.contract.codec`` encoding the
        client decodes back into the very ``UpdateReport``. Not ``admin``: a holdout's
        items left out (``sources.holdout_items_hidden``). ``recent_ok``: an open update's
        report up to ``OPEN_KEEP_SECONDS`` old will do (a wait that timed out)."""
        key = (update_id, failures, wire, admin)
        for kept in (self.done, self.recent) if recent_ok else (self.done,):
            hit = kept.get(key)
            if hit is not None and hit[0] > time.monotonic():
                return hit[1]
        task = self.building.get(key)
        if task is None:
            task = self.building[key] = asyncio.create_task(self._build(key))
            task.add_done_callback(lambda _t: self.building.pop(key, None))
        return await asyncio.shield(task)

    async def prepare(self, wanted: dict[int, set[tuple[int, bool, bool]]]) -> None:
        """Build (and keep) the reports of updates that just ended, each in the forms
        (``(failures, wire, admin)``) their waiters asked for: the status watcher awaits this
        before it wakes them. Errors are left to the waiters, who ask again."""
        await asyncio.gather(
            *(self.report_json(uid, *key) for uid, keys in wanted.items() for key in keys),
            return_exceptions=True,
        )

    async def _build(self, key: tuple[int, int, bool, bool]) -> bytes:
        report = await asyncio.to_thread(self.gate.status, key[0], key[1])
        if not key[3]:
            report = await asyncio.to_thread(holdout_items_hidden, report, self.gate)
        data = scrubbed(encode(report) if key[2] else report.to_dict())
        body = json.dumps(data, ensure_ascii=True, separators=(",", ":"), default=str).encode()
        # a canary's end changes an APPLIED update's report (gate.report.canary): kept as an open one's
        settled = report.terminal and report.outcome != "CANARY"
        kept, keep = (self.done, self.keep) if settled else (self.recent, OPEN_KEEP_SECONDS)
        if len(kept) >= self.size:
            kept.clear()
        kept[key] = (time.monotonic() + keep, body)
        return body
