"""The live version of a prompt on the domain API (``Live``, a service of ``Gate``): what is
live, its history, and rollback.

A rollback makes an earlier version's config live again as a **new** version number (the
history only grows). It is not evaluated: that config cleared its bars when it first went
live. It is a request (``live_request``) for the reconcile step, the one writer of the live
table (``gate.store.live_transition``), which carries it out in one transaction: under the
prompt's lock, guarded by the live version still being the one the caller saw, recorded
with who, when and why, the config moved away from held, the prompt's open apply-mode
updates cancelled (they were judged against a live version that is no longer live) and a
canary rollout in progress SUPERSEDED. A rollback never waits for the fleet: when no
worker has claimed it within ``ROLLBACK_WAIT_SECONDS``, ``Live.rollback`` runs the same
step itself, claimed with SKIP LOCKED, so it is carried out once."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

from gate import db
from gate.calls.providers import Endpoint, ProviderDecl, endpoint_for
from gate.contract.shape import HISTORY_LIMIT
from gate.errors import IllegalTransition, NotFound, UsageError
from gate.prompt.behaviour import behaviour_hash
from gate.records import Hold, LivePrompt
from gate.records.metrics import RunFigures
from gate.report.unjudged import not_judged
from gate.states import LiveRequestStatus, Mode, RolloutStatus
from gate.store.holds import holds_of
from gate.store.live import find_live, live_providers, prompt_history, version_provider
from gate.store.live_requests import get_live_request, request_rollback
from gate.store.live_transition import carry_out_request
from gate.store.locks import ensure_prompt_lock
from gate.store.rollouts import rollouts_of_prompt
from gate.store.runs import runs_of_update
from gate.store.updates import find_update
from gate.store.workers import any_live_worker_of

from .boundary import driver_errors_become_gate_errors
from .config import Config

if TYPE_CHECKING:  # the prompt's parser (Jinja2, YAML) is loaded by what reads a prompt, not by this module
    from gate.prompt.spec import PromptSpec

MAX_REASON = 2000
ROLLBACK_WAIT_SECONDS = 0.5  # a worker's reconcile step has this long to claim a rollback; then the requester runs it
CLAIMED_ELSEWHERE_SECONDS = 0.5  # the requester's claim found it taken: the worker carrying it out ends it in that
POLL_SECONDS = 0.01


@driver_errors_become_gate_errors
class Live:
    """What is live, its history and holds, and rollback, on one gate database (``engine``);
    a version with no provider on record is sent where ``config`` declares its provider now."""

    def __init__(self, engine: Engine, config: Config, stale_seconds: float = 15.0):
        self.engine = engine
        self.config = config
        self.stale_seconds = stale_seconds  # a worker silent this long is not waited for

    def live(self, name: str) -> LivePrompt:
        with self.engine.connect() as conn:
            found = find_live(conn, name)
        if found is None:
            raise NotFound(f"prompt {name!r} has no live version yet: submit it with --mode apply")
        return found

    def live_endpoint(self, live: LivePrompt, spec: PromptSpec) -> tuple[Endpoint, bool]:
        """Where production sends the calls of the live version ``live`` (its config parsed:
        ``spec``), and whether that is pinned: the provider declaration it was evaluated
        with (``version_provider``), the key from this process's environment. A
        version with none on record (live since before the gate pinned providers) gets its
        provider as declared now (``endpoint``), and False says so."""
        with self.engine.connect() as conn:
            pinned, decl = version_provider(conn, live.name, live.version)
        if not pinned:
            return self.config.endpoint(spec), False
        return endpoint_for(ProviderDecl.from_dict(decl) if decl else None), True

    def live_providers(self) -> dict[str, dict | None]:
        """Prompt name → the provider declaration its live version was evaluated with (None:
        the default provider), for every live version that has one on record."""
        with self.engine.connect() as conn:
            return live_providers(conn)

    def judges_below_floors(
        self, declared: dict | None = None, may_read: Callable[[Any], bool] | None = None
    ) -> list[tuple[str, str]]:
        """The live judges below the floors of their own mappings or of a live prompt they
        judge (``declared``: (prompt, dataset) → Bars replacing the gate's), each with one
        line saying which figure failed where (``gate.domain.judging.below_floors``; ``may_read``:
        a judge evaluated on a set the caller may not read is named with its floor only)."""
        from .judging import below_floors

        with self.engine.connect() as conn:
            return below_floors(conn, declared or {}, may_read)

    def history(self, name: str, limit: int = HISTORY_LIMIT) -> list[dict]:
        """The prompt's live versions, newest first (``prompt_history``), each with
        ``update``: the update whose candidate it is — status, mode, commit, pull request,
        reason and per dataset its accuracy against its bar — or None; a version applied as
        a canary with ``rollout``: how its rollout ended (status, reason, figures)."""
        with self.engine.connect() as conn:
            rows = prompt_history(conn, name)[:limit]
            held = {h.config_hash: h for h in reversed(holds_of(conn, name))}  # the newest hold of each config
            canaries = {r.canary_version: r for r in rollouts_of_prompt(conn, name, limit)}
            return [
                {
                    **row,
                    "update": _update_summary(conn, row["update_id"]),
                    "hold": _hold_of(row, held),
                    **_rollout_of(canaries.get(row["version"])),
                    **_rolled_back_by(row, canaries.get(row["version"] - 1)),
                }
                for row in rows
            ]

    def holds(self, name: str) -> list[Hold]:
        """The prompt's configs held by a rollback (newest first): an apply of one is
        refused until a submission overrides the rollback."""
        with self.engine.connect() as conn:
            return holds_of(conn, name)

    def rollback(
        self, name: str, reason: str, actor: str, to_version: int | None = None, seen_version: int | None = None
    ) -> dict:
        """Make version ``to_version`` (default: the one before the live one) live again as
        a new version. ``seen_version``: the live version the caller saw (default: the one
        read now); if it moved on, nothing happens (IllegalTransition). Returns
        ``{"version", "restored_version", "cancelled": [update ids]}``."""
        reason = (reason or "").strip()
        if not reason:
            raise UsageError("a rollback needs a reason (--reason): the history keeps it")
        if len(reason) > MAX_REASON:
            raise UsageError(f"the reason is longer than {MAX_REASON} characters")

        def ask(conn) -> int:
            live = find_live(conn, name)
            if live is None:
                raise NotFound(f"prompt {name!r} has no live version to roll back")
            seen = live.version if seen_version is None else seen_version
            if seen != live.version:
                raise IllegalTransition(
                    f"prompt {name}: the live version is {live.version}, not {seen} as "
                    "seen: nothing was rolled back; look again and retry"
                )
            target = seen - 1 if to_version is None else to_version
            _check_target(name, live, target)
            return request_rollback(conn, name, seen, target, actor, reason)

        db.transaction(self.engine, lambda conn: ensure_prompt_lock(conn, name))
        request_id = db.transaction(self.engine, ask)
        with self.engine.connect() as conn:  # no reconcile worker alive: nothing to wait for
            wait = ROLLBACK_WAIT_SECONDS if any_live_worker_of(conn, "reconcile", self.stale_seconds) else 0.0
        return self._carried_out(request_id, wait)

    def _carried_out(self, request_id: int, wait: float) -> dict:
        """Wait for the reconcile step to carry the request out: a worker's, or, when none has
        claimed it within ``wait`` seconds, this process's (the same step, claimed
        with SKIP LOCKED: never carried out twice). Its outcome; IllegalTransition with the
        reason when it was refused."""
        deadline = time.monotonic() + wait
        while True:
            with self.engine.connect() as conn:
                request = get_live_request(conn, request_id)
            assert request is not None  # inserted above; a request is never deleted
            if request.status == LiveRequestStatus.DONE:
                return dict(request.outcome or {})
            if request.status == LiveRequestStatus.REFUSED:
                raise IllegalTransition(request.refusal or f"live request {request_id} was refused")
            if time.monotonic() >= deadline:
                db.transaction(self.engine, lambda conn: carry_out_request(conn, request_id))
                deadline = time.monotonic() + CLAIMED_ELSEWHERE_SECONDS  # a worker holds it: it ends soon
            time.sleep(POLL_SECONDS)


def check_hold(conn, spec: PromptSpec, mode: str, override: bool) -> None:
    """An apply of a config a rollback moved away from is refused, naming the rollback,
    unless the submission overrides it (the hold is released when that update is applied,
    ``gate.store.live_transition.apply_update``: an override cancelled or rejected leaves it
    held). Under the prompt's lock (the submission's transaction); a check is never held."""
    if mode != Mode.APPLY:
        return
    name, config_hash = spec.name, spec.config_hash
    held = holds_of(conn, name, config_hash, behaviour_hash(spec.to_config()))  # a description edit is held too
    if not held:
        return
    if not override:
        raise IllegalTransition(
            f"prompt {name}: {held[0].line()}; this apply submits that config again: submit it with "
            "--override-rollback (admin) to apply it anyway"
        )


def _config_hash_of(conn, name: str, version: int) -> str | None:
    return next((r["config_hash"] for r in prompt_history(conn, name) if r["version"] == version), None)


def _hold_of(row: dict, held: dict) -> dict | None:
    """The hold on a history row's config, when it is the version rolled back away from."""
    hold = held.get(row["config_hash"])
    if hold is None or row.get("kind") == "rollback" or hold.held_version != row["version"]:
        return None
    return {
        "actor": hold.actor,
        "reason": hold.reason,
        "at": hold.created_at,
        "rollback_version": hold.rollback_version,
    }


def _rollout_of(found) -> dict:
    if found is None:
        return {}
    keys = ("id", "status", "stable_version", "reason", "figures", "started_at", "decided_at")
    return {"rollout": {k: getattr(found, k) for k in keys}}


def _rolled_back_by(row: dict, canary) -> dict:
    """A rollback the reconcile step made for a canary's decision: ``by_rollout``, the
    rollout (its id, its end and the figures it ended on)."""
    ended_here = canary is not None and canary.status in (RolloutStatus.ROLLED_BACK, RolloutStatus.UNDECIDED)
    if row.get("kind") != "rollback" or not ended_here or row.get("restored_version") != canary.stable_version:
        return {}
    return {"by_rollout": {"id": canary.id, "status": canary.status, "figures": canary.figures}}


def _check_target(name: str, live: LivePrompt, target: int) -> None:
    if target < 1:
        raise UsageError(f"prompt {name} has no version before {live.version} to roll back to")
    if target >= live.version:
        raise UsageError(f"version {target} is not earlier than the live version {live.version}")


def _update_summary(conn, update_id: int | None) -> dict | None:
    if update_id is None:
        return None
    upd = find_update(conn, update_id)
    if upd is None:
        return None
    runs = [
        {
            "dataset": r.dataset_name,
            "matches": RunFigures.of(r.metrics).matches,
            "scored": RunFigures.of(r.metrics).scored,
            "bar": r.min_accuracy,
            "status": r.status,
        }
        for r in runs_of_update(conn, update_id)
    ]
    source = upd.source or {}
    return {
        "id": upd.id,
        "status": upd.status,
        "mode": upd.mode,
        "sha": source.get("sha"),
        "pr": source.get("pr"),
        "repo": source.get("repo"),
        "reason": upd.reason,
        "override_rollback": bool(source.get("override_rollback")),  # applied over a hold, on purpose
        "finished_at": upd.finished_at,
        "runs": runs,
        "not_judged": not_judged(upd),  # an admin applied it without a judge (gate.report.unjudged)
    }
