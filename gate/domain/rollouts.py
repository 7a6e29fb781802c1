"""Canary rollouts on the domain API (``Rollouts``, a service of ``Gate``): production's feedback
(``record_feedback``), what a reader sees of a prompt's rollouts (``rollouts``: the one in
progress with its interval now, the decided ones with their figures), what the runtime
loads to serve a prompt (``canary_of`` on the database, ``serve_document`` through the
service, with its ETag ``serve_tag``), and the gate config's ``rollout:`` per prompt.

Feedback is untrusted input: at most ``MAX_FEEDBACK_EVENTS`` events a request, each a
prompt, the version that answered, the call's id and whether the answer was correct. An
event counts for the prompt's rollout in CANARY when its version is that rollout's canary
or stable version; any other is ignored (and counted as such), never stored. A call id
counts once however often it is sent. Which rollout a sender may inform is per object: a
feedback or admin token any; a submit token only those its own applies started (others'
events are counted as refused, never stored), so a pull request's token cannot decide a
rollout somebody else's apply started.

Through the service (``sender`` given: issue 48) an event counts only when its call id
verifies (``gate.rollout.call_ids``): minted by a runtime that loaded the prompt with
its rollout's call key, for that rollout, that prompt and the version it names. Any other
event — a made-up id, one minted without the key (a fleet on read tokens), another
rollout's, or a prompt outside a runtime token's reach — is refused (counted, never
stored), and ``ignored`` counts only verified events whose rollout is decided already, so
the answer tells a sender nothing about prompts it cannot run. Verifying costs two HMACs
and no database read (the call keys derive from a secret read once)."""

from __future__ import annotations

import base64
import random
import re
from typing import Any

from sqlalchemy.engine import Engine

from gate import db
from gate.calls.providers import ProviderDecl, endpoint_for, resolve
from gate.errors import NotFound, UsageError
from gate.prompt.call_settings import NAME_RE, check_name
from gate.records import Rollout
from gate.rollout.call_ids import rollout_call_key, verify_call_id
from gate.rollout.rule import RolloutConfig, figures_of
from gate.rollout.sequence import Arm
from gate.store.feedback import call_secret, read_tally, record_feedback
from gate.store.live import find_live, version_config, version_provider
from gate.store.providers import list_providers
from gate.store.rollouts import (
    active_rollout,
    active_rollouts,
    get_rollout,
    rollout_hours,
    rollout_of_update,
    rollout_settings,
    rollout_states,
    rollout_submitters,
    rollouts_of_prompt,
    set_rollout_setting,
)
from gate.store.updates import find_update

from .boundary import driver_errors_become_gate_errors
from .config import Config
from .live import Live

MAX_FEEDBACK_EVENTS = 1000
CALL_KEYS_CACHED = 4096
CALL_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def checked_event(raw: Any) -> tuple[str, int, str, bool]:
    """(prompt, version, call id, correct) of one feedback event (UsageError naming a field)."""
    if not isinstance(raw, dict):
        raise UsageError("a feedback event is an object: prompt, version, call_id, correct")
    name, version, call_id, correct = (raw.get(k) for k in ("prompt", "version", "call_id", "correct"))
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise UsageError("prompt: not a prompt name")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version < 2**31:
        raise UsageError("version: the version that answered (a whole number)")
    if not isinstance(call_id, str) or not CALL_ID_RE.fullmatch(call_id):
        raise UsageError("call_id: 1-64 letters, digits, '_' or '-' (the result's call_id)")
    if not isinstance(correct, bool):
        raise UsageError("correct: true or false")
    return name, version, call_id, correct


def _prompt_of(conn, rollout_id: int, known: dict[int, str | None]) -> str | None:
    """The prompt of rollout ``rollout_id`` (None: none such), read once per batch."""
    if rollout_id not in known:
        found = get_rollout(conn, rollout_id)
        known[rollout_id] = found.prompt_name if found else None
    return known[rollout_id]


def rollout_view(rollout: Rollout, tally: dict | None = None, hours: float | None = None) -> dict:
    """A rollout as readers see it; one in CANARY with its figures now (``tally``)."""
    view = {
        "id": rollout.id,
        "prompt": rollout.prompt_name,
        "update_id": rollout.update_id,
        "canary_version": rollout.canary_version,
        "stable_version": rollout.stable_version,
        "status": rollout.status,
        "config": rollout.config,
        "started_at": rollout.started_at,
        "decided_at": rollout.decided_at,
        "figures": rollout.figures,
        "reason": rollout.reason,
    }
    if tally is not None:
        config = RolloutConfig.from_json(rollout.config)
        view["figures"] = figures_of(config, Arm(*tally["canary"]), Arm(*tally["stable"]), hours or 0.0)
    return view


@driver_errors_become_gate_errors
class Rollouts:
    """Canary rollouts, on one gate database (``engine``): the runtime's view of one needs the
    live version (``live``) and, for a version with no provider on record, where ``config``
    declares its provider now."""

    def __init__(self, engine: Engine, config: Config, live: Live):
        self.engine = engine
        self.config = config
        self.live = live
        self._secret: bytes | None = None
        self._keys: dict[int, bytes] = {}

    def call_key(self, rollout_id: int) -> bytes:
        """Rollout ``rollout_id``'s call key (``gate.rollout.call_ids``): derived from the
        gate's secret, read from the database once per process. Hand it only to a token
        allowed to run the rollout's prompt."""
        key = self._keys.get(rollout_id)
        if key is None:
            if self._secret is None:
                self._secret = db.transaction(self.engine, call_secret)
            if len(self._keys) >= CALL_KEYS_CACHED:
                self._keys.clear()
            key = self._keys[rollout_id] = rollout_call_key(self._secret, rollout_id)
        return key

    def record_feedback(
        self,
        events: list,
        *,
        submitter: str | None = None,
        sender: str | None = None,
        prompts: frozenset[str] | None = None,
    ) -> dict[str, int]:
        """Store production's outcomes (see the module docstring) in one transaction.
        ``submitter``: the name of the submit token that sends them (its events count only
        for rollouts its own applies started); None for a feedback or admin token.
        ``sender``: the service token's name (every event's call id must verify; None: on
        the database, trusted); ``prompts``: a runtime token's prompts (others' events are
        refused). Returns {"recorded", "duplicates", "ignored", "refused"}."""
        if not isinstance(events, list) or len(events) > MAX_FEEDBACK_EVENTS:
            raise UsageError(f"send at most {MAX_FEEDBACK_EVENTS} feedback events at once")
        parsed = [checked_event(e) for e in events]
        process: dict[int, str] = {}  # event index → its verified call id's process tag
        refused = 0
        kept: list[tuple[str, int, str, bool, int | None]] = []
        if sender is not None:
            for name, version, call_id, correct in parsed:
                fields = verify_call_id(call_id, self.call_key)
                if fields is None or fields.version != version or (prompts is not None and name not in prompts):
                    refused += 1
                    continue
                process[len(kept)] = fields.process
                kept.append((name, version, call_id, correct, fields.rollout_id))
        else:
            kept = [(name, version, call_id, correct, None) for name, version, call_id, correct in parsed]

        def store(conn) -> dict[str, int]:
            rollouts = active_rollouts(conn, sorted({p for p, *_ in kept}))
            owners = rollout_submitters(conn, [r.id for r in rollouts.values()]) if submitter is not None else {}
            theirs = {rid for rid, who in owners.items() if who != submitter}
            by_rollout: dict[int, list[tuple]] = {}
            ignored, refusing = 0, refused
            prompt_of: dict[int, str | None] = {}  # a verified id's rollout, not in progress → its prompt
            for i, (name, version, call_id, correct, minted_for) in enumerate(kept):
                found = rollouts.get(name)
                if minted_for is not None and (found is None or found.id != minted_for):
                    own = _prompt_of(conn, minted_for, prompt_of) == name  # this prompt's rollout, decided since
                    ignored, refusing = ignored + own, refusing + (not own)  # another's: no canary of this one told
                elif found is None or version not in (found.canary_version, found.stable_version):
                    ignored += 1
                elif found.id in theirs:
                    refusing += 1
                else:
                    event = (call_id, version == found.canary_version, correct)
                    by_rollout.setdefault(found.id, []).append((*event, process[i]) if i in process else event)
            recorded = duplicates = 0
            stripe = random.randrange(1 << 16)
            for rollout_id, batch in sorted(by_rollout.items()):
                new, again = record_feedback(conn, rollout_id, batch, stripe, token=sender)
                recorded, duplicates = recorded + new, duplicates + again
            return {"recorded": recorded, "duplicates": duplicates, "ignored": ignored, "refused": refusing}

        nothing = {"recorded": 0, "duplicates": 0, "ignored": 0, "refused": refused}
        return db.transaction(self.engine, store) if kept else nothing

    def rollouts(self, name: str, limit: int = 20) -> list[dict]:
        """The prompt's rollouts, newest first; one in CANARY with its interval now."""
        with self.engine.connect() as conn:
            found = rollouts_of_prompt(conn, name, limit)
            return [
                rollout_view(r, read_tally(conn, r.id), rollout_hours(conn, r.id))
                if r.status == "CANARY"
                else rollout_view(r)
                for r in found
            ]

    def rollout_of_update(self, update_id: int) -> dict | None:
        """The rollout an apply started (None: it went live at 100 %, or not yet)."""
        with self.engine.connect() as conn:
            if find_update(conn, update_id) is None:
                raise NotFound(f"unknown update {update_id}")
            found = rollout_of_update(conn, update_id)
            if found is None:
                return None
            live = found.status == "CANARY"
            return rollout_view(found, read_tally(conn, found.id) if live else None, rollout_hours(conn, found.id))

    def rollout_states(self, update_ids: list[int]) -> dict[int, str]:
        """update id → its rollout's state, for those of ``update_ids`` whose apply started one."""
        with self.engine.connect() as conn:
            return rollout_states(conn, update_ids)

    def rollout_settings(self) -> dict[str, dict]:
        """prompt → the rollout the gate config gives it."""
        with self.engine.connect() as conn:
            return rollout_settings(conn)

    def set_rollout(self, prompt_name: str, config: dict | None) -> None:
        """Set (None: clear) a prompt's rollout, checked as the gate config checks it."""
        check_name(prompt_name, "prompt name")
        checked = None if config is None else RolloutConfig.parse(config, f"rollout.{prompt_name}").to_json()
        db.transaction(self.engine, lambda conn: set_rollout_setting(conn, prompt_name, checked))

    # --- what the runtime loads -------------------------------------------------------------

    def canary_of(self, name: str) -> dict | None:
        """The prompt's rollout in CANARY as the runtime on the database routes it: id,
        canary_percent, and the stable version (``stable_version``, its ``config``,
        ``config_hash`` and ``endpoint``: the provider it was evaluated with, the key from
        this process's environment); None when none is in progress."""
        with self.engine.connect() as conn:
            found = active_rollout(conn, name)
            stable = version_config(conn, name, found.stable_version) if found else None
        if found is None or stable is None:
            return None
        from gate.prompt.spec import parse_spec  # Jinja2 and YAML: loaded by what reads a config

        decl = ProviderDecl.from_dict(stable["provider"]) if stable["provider"] else None
        endpoint = (
            endpoint_for(decl) if stable["provider_pinned"] else self.config.endpoint(parse_spec(stable["config"]))
        )
        return {**_route(found, stable), "endpoint": endpoint}

    def serve_tag(self, name: str) -> str:
        """What changes when what the runtime serves of ``name`` changes: the live version and
        config, the rollout in progress (its ETag)."""
        with self.engine.connect() as conn:
            live = find_live(conn, name)
            found = active_rollout(conn, name) if live else None
        if live is None:
            raise NotFound(f"prompt {name!r} has no live version yet: submit it with --mode apply")
        return f'"{live.version}-{live.config_hash[:16]}-{found.id if found else 0}"'

    def serve_document(self, name: str, call_key: bool = False) -> dict:
        """Everything a runtime needs to serve ``name`` through the service: the live version
        and its config, the provider declaration its calls go to (never a key: the runtime
        reads the key from its own environment), and a rollout in progress with its stable
        version's config and declaration; with ``etag`` (``serve_tag``). ``call_key``: the
        caller may run ``name`` (a runtime token whose prompts include it), so the rollout's
        call key goes with it (``rollout.call_key``, URL-safe base64)."""
        live = self.live.live(name)
        with self.engine.connect() as conn:
            pinned, decl = version_provider(conn, name, live.version)
            found = active_rollout(conn, name)
            stable = version_config(conn, name, found.stable_version) if found else None
            providers = list_providers(conn)
        document = {
            "name": live.name,
            "version": live.version,
            "config": live.config,
            "config_hash": live.config_hash,
            **_declaration(live.config, pinned, decl, providers),
            "rollout": None,
            "etag": f'"{live.version}-{live.config_hash[:16]}-{found.id if found else 0}"',
        }
        if found is not None and stable is not None:
            declared = _declaration(stable["config"], bool(stable["provider_pinned"]), stable["provider"], providers)
            document["rollout"] = {**_route(found, stable), **declared}
            if call_key:
                document["rollout"]["call_key"] = base64.urlsafe_b64encode(self.call_key(found.id)).decode()
        return document


def _route(found: Rollout, stable: dict) -> dict:
    return {
        "id": found.id,
        "canary_percent": float(found.config.get("canary_percent", 10)),
        "stable_version": found.stable_version,
        "config": stable["config"],
        "config_hash": stable["config_hash"],
    }


def _declaration(config: dict, pinned: bool, decl: dict | None, providers) -> dict:
    """The provider a version's calls go to, as a declaration: the one pinned with it, else
    (a version live since before providers were pinned) the one declared now."""
    if not pinned:
        from gate.prompt.spec import parse_spec  # Jinja2 and YAML: loaded by what reads a config

        spec = parse_spec(config)
        now = resolve(spec.provider, spec.model, providers)
        decl = now.to_dict() if now else None
    return {"provider": decl, "provider_pinned": bool(pinned)}
