"""The one writer of the live table, the reconcile step's statements: every change of the
live ``prompt`` row — an apply, a person's rollback, a canary's promotion or rollback — is
made here, by the reconcile step, in one transaction with everything that goes with it
(docs/architecture.md, "Who may touch what"; ``tests/unit/test_who_writes.py`` lets no
other module import the statements it is made of).

* **An apply** (``apply_update``, in reconcile's transaction that ends the update APPLIED):
  refused when its config is held by a rollback (unless the submission overrode it), else
  the candidate live guarded by ``version = base_version``, the history row, the canary
  in progress SUPERSEDED and the update's own canary started (``canary_on_apply``).
* **A request** (``live_request``: a person's rollback, a canary's decision) is claimed with
  SKIP LOCKED (``carry_out_request``: never carried out twice) and carried out under the
  prompt's lock: its guards checked (the live version is still the one the request saw; the
  restored version exists; a canary's rollout is still CANARY), then the prompt's open
  apply-mode updates cancelled (judged against a version no longer live), the restored
  config live as a new version with its history row, the config moved away from held, the
  rollout ended, and the request DONE. A failed guard ends it REFUSED with its reason and
  changes nothing else. Until then a canary stays CANARY: production keeps routing it.

Who runs the step: the reconcile worker (``workers.reconcile``, woken by the activity probe,
which sees PENDING requests) and, for a person's rollback no worker has claimed within a
moment, the requester (``gate.domain.live.Live.rollback``): the same statement, the same
claim. Each runs it in a transaction of its own (``gate.db.transaction``)."""

from __future__ import annotations

from gate.errors import GateError, IllegalTransition, NotFound
from gate.prompt.behaviour import behaviour_hash
from gate.records import Update
from gate.records.live_request import LiveRequest
from gate.rollout.rule import RolloutConfig
from gate.states import LiveRequestStatus, Mode, RolloutStatus

from .holds import add_hold, holds_of, release_holds
from .live import find_live, live_version, restore_live, version_config, write_live
from .live_requests import ROLLBACK, claim_live_request, end_live_request
from .locks import lock_prompt
from .rollouts import end_rollout, get_rollout, start_rollout, supersede_rollout, update_rollout
from .updates import cancel_update, superseded_updates

ROLLBACK_EXPIRES_SECONDS = 60  # a person's rollback is carried out at once or not at all
CANARY_ACTOR = "rollout worker"  # a canary's rollback in the history; its hold names the rollout


# --- an apply -----------------------------------------------------------------------------------


def apply_update(conn, upd: Update) -> str | None:
    """Make an update that cleared every bar live, in the caller's transaction. None when
    applied; else why not, in one line (the update then ends FAILED)."""
    key = behaviour_hash(upd.candidate_config)
    held = holds_of(conn, upd.prompt_name, upd.candidate_hash, key)
    overrides = bool((upd.source or {}).get("override_rollback"))
    if held and not overrides:
        return f"cleared every bar but was not applied: {held[0].line()}; resubmit with --override-rollback (admin)"
    if not write_live(conn, upd):
        live = live_version(conn, upd.prompt_name)
        return (
            f"cleared every bar but was not applied: the live version is {live}, not {upd.base_version} as at "
            "submit (another change went live first); resubmit to evaluate against it"
        )
    if held:  # released once the override is carried out, never at submit: a cancelled override holds on
        release_holds(conn, upd.prompt_name, upd.candidate_hash, f"update {upd.id} (--override-rollback)", key)
    canary_on_apply(conn, upd)
    return None


def canary_on_apply(conn, upd: Update) -> int | None:
    """In the apply's transaction: a rollout in progress ends SUPERSEDED (this apply replaces
    its canary), and an update that pinned a ``rollout:`` starts one, its version the canary
    beside the stable one (the superseded rollout's stable version: its canary was never
    shown good; else the version this apply replaced). A first version has nothing to be
    compared with and goes live whole. Returns the new rollout's id."""
    version = upd.base_version + 1
    ended = supersede_rollout(conn, upd.prompt_name, f"superseded: update {upd.id} applied version {version}")
    config = update_rollout(conn, upd.id)
    if not config or upd.base_version < 1:
        return None
    stable = upd.base_version
    if ended:
        superseded = get_rollout(conn, ended)
        assert superseded is not None  # its UPDATE just moved it, in this transaction (no rollout is ever deleted)
        stable = superseded.stable_version
    return start_rollout(conn, upd.prompt_name, upd.id, version, stable, config)


# --- requests -----------------------------------------------------------------------------------


def carry_out_request(conn, request_id: int) -> LiveRequestStatus | None:
    """The reconcile step for one request: claim it (SKIP LOCKED) and carry it out, in the
    caller's transaction. None when it was not ours: claimed by another process's step, or
    no longer PENDING."""
    request = claim_live_request(conn, request_id)
    return None if request is None else carry_out(conn, request)


def refuse_request(conn, request_id: int, why: str) -> None:
    """End a PENDING request REFUSED with ``why``, changing nothing else (one the reconcile
    step could not carry out, its unexpected error repeated: ``workers.give_up``)."""
    end_live_request(conn, request_id, LiveRequestStatus.REFUSED, None, why)


def carry_out(conn, request: LiveRequest) -> LiveRequestStatus:
    """The request, claimed, carried out under the prompt's lock: DONE, or REFUSED with the
    guard that failed (a savepoint undoes anything written before it failed)."""
    lock_prompt(conn, request.prompt_name)
    savepoint = conn.begin_nested()
    try:
        outcome = _roll_back(conn, request) if request.kind == ROLLBACK else _decide_canary(conn, request)
    except GateError as refused:
        savepoint.rollback()
        end_live_request(conn, request.id, LiveRequestStatus.REFUSED, None, str(refused))
        return LiveRequestStatus.REFUSED
    # any other error (a deadlock victim: the server rolled the whole transaction back, the
    # savepoint with it) is raised as it is, for gate.db.transaction to run the step again
    savepoint.commit()
    end_live_request(conn, request.id, LiveRequestStatus.DONE, outcome)
    return LiveRequestStatus.DONE


def _seen_still_live(conn, request: LiveRequest, what: str):
    """The live row, when it is still the version the request saw (else IllegalTransition)."""
    live = find_live(conn, request.prompt_name)
    if live is None:
        raise NotFound(f"prompt {request.prompt_name!r} has no live version to roll back")
    if live.version != request.seen_version:
        raise IllegalTransition(
            f"prompt {request.prompt_name}: the live version is {live.version}, not {request.seen_version} as "
            f"seen: {what}; look again and retry"
        )
    return live


def _restored(conn, name: str, target: int) -> dict:
    found = version_config(conn, name, target)
    if found is None:
        raise NotFound(f"prompt {name!r} has no version {target}")
    return found


def _key(live, restored: dict) -> str | None:
    """The hold's ``hold_key``: the held config's ``behaviour_hash``, unless the restored
    version's is the same (a rollback of a description edit: holding it would hold what is
    live again; held by its exact hash only)."""
    key = behaviour_hash(live.config)
    return None if key == behaviour_hash(restored["config"]) else key


def _cancel_open_applies(conn, name: str, why: str) -> list[int]:
    cancelled = superseded_updates(conn, name, Mode.APPLY, None)
    for update_id in cancelled:
        cancel_update(conn, update_id, why)
    return cancelled


def _roll_back(conn, request: LiveRequest) -> dict:
    """A person's rollback: the target's config live again as a new version; the config
    moved away from held; a canary in progress SUPERSEDED. One nobody carried out within
    ``ROLLBACK_EXPIRES_SECONDS`` (its requester gone before running the step, no worker
    running) is refused: a person's rollback never happens long after they asked."""
    name, target, actor = request.prompt_name, request.target_version, request.actor or "?"
    if request.age_seconds > ROLLBACK_EXPIRES_SECONDS:
        raise IllegalTransition(
            f"prompt {name}: the rollback to version {target} asked by {actor} {request.age_seconds:.0f} s ago was "
            f"not carried out within {ROLLBACK_EXPIRES_SECONDS} s: nothing was rolled back; ask again"
        )
    live = _seen_still_live(conn, request, "nothing was rolled back")
    restored = _restored(conn, name, target)
    # a person's rollback to a version whose config an earlier rollback held is that person's
    # override: the hold is released (a held config is never live), and says by whom
    restored_key = behaviour_hash(restored["config"])
    release_holds(conn, name, restored["config_hash"], f"{actor} (rolled back to version {target})", restored_key)
    cancelled = _cancel_open_applies(
        conn,
        name,
        f"cancelled: prompt {name} was rolled back to version {target} (by {actor}); this update was judged "
        f"against version {live.version}, which is no longer live",
    )
    version = restore_live(conn, name, live.version, target, actor, request.reason or "")
    held = live.config_hash != restored["config_hash"]  # the config rolled back away from is held
    if held:
        add_hold(conn, name, live.config_hash, live.version, version, actor, request.reason or "", _key(live, restored))
    ended = supersede_rollout(conn, name, f"superseded: rolled back to version {target} by {actor}")
    done = {"version": version, "restored_version": target, "cancelled": cancelled, "held": held}
    return {**done, "rollout_ended": ended} if ended else done


def _decide_canary(conn, request: LiveRequest) -> dict:
    """A canary's decision: PROMOTED changes no live row (the canary is live); ROLLED_BACK
    and UNDECIDED make the stable version's config live again, and hold the canary's config
    (UNDECIDED only when the rollout says ``hold_undecided``)."""
    rollout_id = request.rollout_id
    assert rollout_id is not None  # a canary's request names its rollout (request_canary_decision)
    rollout = get_rollout(conn, rollout_id)
    decision = RolloutStatus(request.decision or "")
    if rollout is None or rollout.status != RolloutStatus.CANARY:
        raise IllegalTransition(
            f"rollout {rollout_id} is {rollout.status if rollout else 'missing'}: its decision {decision} "
            "was not carried out"
        )
    live = _seen_still_live(conn, request, f"rollout {rollout_id}'s decision {decision} was not carried out")
    end_rollout(conn, rollout_id, decision, request.figures, request.reason or "")
    if decision == RolloutStatus.PROMOTED:
        return {"version": live.version, "rollout": rollout_id, "decision": str(decision)}
    stable = rollout.stable_version
    restored = _restored(conn, request.prompt_name, stable)
    why = f"canary v{rollout.canary_version} {decision.lower().replace('_', ' ')}: {request.reason or ''}"
    cancelled = _cancel_open_applies(
        conn,
        request.prompt_name,
        f"cancelled: the canary of prompt {request.prompt_name} ended {decision} and version {stable}'s config "
        f"is live again; this update was judged against version {rollout.canary_version}",
    )
    version = restore_live(conn, request.prompt_name, live.version, stable, CANARY_ACTOR, why)
    held = decision == RolloutStatus.ROLLED_BACK or RolloutConfig.from_json(rollout.config).hold_undecided
    if held:
        actor = f"rollout {rollout_id}"
        add_hold(conn, request.prompt_name, live.config_hash, live.version, version, actor, why, _key(live, restored))
    return {
        "version": version,
        "restored_version": stable,
        "cancelled": cancelled,
        "rollout": rollout_id,
        "decision": str(decision),
        "held": held,
    }
