"""``Gate``: the service API over one gate database, what the CLI, the GitHub Action, the
demo and the production runtime call. Each public method is one transaction (or none) and
raises only GateError: this class is the boundary where a driver error becomes a
``DatabaseError`` (``boundary.driver_errors_become_gate_errors``)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from gate import db
from gate.api.release import (
    DEFAULT_RELEASE_MODE,
    SHA_POLL,
    of_mode,
    wait_for_release,
)
from gate.calls.providers import resolve
from gate.datasets.version_index import VersionIndexes
from gate.errors import Forbidden, UsageError
from gate.records import DatasetVersion, FleetCounts, Update, WorkerRow
from gate.report.update import SAMPLE_FAILURES, UpdateReport, run_report
from gate.settings import Settings
from gate.states import UPDATE_TERMINAL, Mode
from gate.store.answers import reuse_stats
from gate.store.datasets import get_dataset, list_mappings
from gate.store.fleet import fleet_counts
from gate.store.item_stats import failing_items, flipped_items, item_attempt_stats, run_counts
from gate.store.live import find_live, live_version
from gate.store.locks import ensure_prompt_lock, lock_prompt
from gate.store.providers import list_providers
from gate.store.ratelimits import rate_limit_stats
from gate.store.rollouts import pin_rollout
from gate.store.runs import BASELINE, insert_run, runs_of_update
from gate.store.trials import unstable_items
from gate.store.updates import (
    cancel_update,
    get_update,
    insert_update,
    list_updates,
    lock_update_owner,
    set_update_limits,
    superseded_updates,
    update_status,
    updates_for_sha,
)
from gate.store.versions import READY, get_version, lock_dataset
from gate.store.workers import live_workers
from gate.verdict.bars import Bars

from .boundary import driver_errors_become_gate_errors
from .config import ConfigMixin
from .conversations import with_last_turns
from .datasets import DatasetsMixin
from .live import LiveMixin, check_hold
from .proposed import proposed_mappings
from .releases import ReleasesMixin
from .retention import RetentionMixin
from .rollouts import RolloutsMixin
from .served import ServedMixin
from .spending import check_cost_bounded, gate_limits, pinned_limits, run_calls, update_spend
from .tokens import TokensMixin

if TYPE_CHECKING:
    from gate.prompt.spec import PromptSpec

# What only a submission or a dataset's diff uses (the prompt's parser, Jinja2 and YAML, the
# dataset importer, the judge and baseline rules) is imported where it is used: `status` and
# `wait` on the database load the store and the report, not those (tests/unit/test_cli_imports.py).

COMMIT_SHA_RE = re.compile(r"[0-9a-fA-F]{40}(?:[0-9a-fA-F]{24})?")


def check_commit_sha(sha: Any) -> None:
    """A submission's commit, when it names one: a full object id, SHA-1 (40 hex) or SHA-256
    (64 hex), what `wait --sha` and the Action look updates up by."""
    if sha not in (None, "") and not COMMIT_SHA_RE.fullmatch(str(sha)):
        raise UsageError(f"commit SHA {str(sha)[:80]!r} is not a full commit id: use its 40 or 64 hex characters")


def _broken_items(conn, run, limit: int) -> list:
    """The first items the live version answered right and the run wrong (none before the
    run is compared: reconcile pairs the answers, ``flip_counts``)."""
    metrics = run.metrics or {}
    live_run_id = (metrics.get("live") or {}).get("run_id")
    if not live_run_id or not limit or not (metrics.get("flips") or {}).get("broken"):
        return []  # nothing broken: no scan of the run's items for none
    return flipped_items(conn, run.id, live_run_id, limit)


def _unstable_items(conn, run, limit: int) -> list:
    """The first items whose trials disagree (a run with trials only: no scan otherwise)."""
    if not run.pinned.trials or not limit or (run.metrics or {}).get("unstable") == 0:
        return []
    return unstable_items(conn, run.id, limit)


@driver_errors_become_gate_errors
class Gate(
    DatasetsMixin, ConfigMixin, LiveMixin, ReleasesMixin, RetentionMixin, TokensMixin, ServedMixin, RolloutsMixin
):
    """A handle on one gate database."""

    def __init__(self, engine: Engine, settings: Settings):
        self.engine = engine
        self.settings = settings
        self.version_indexes = VersionIndexes(settings.diff_cache_bytes)  # what dry runs compare with

    @classmethod
    def connect(cls, database_url: str | None = None, settings: Settings | None = None, upgrade: bool = False) -> Gate:
        settings = settings or Settings.from_env()
        if database_url:
            settings = settings.with_(database_url=database_url)
        gate = cls(db.make_engine(settings.database_url), settings)
        if upgrade:
            gate.upgrade()
        return gate

    def close(self) -> None:
        self.engine.dispose()

    def upgrade(self) -> list[int]:
        return db.upgrade(self.engine)

    def ensure_schema(self) -> None:
        """An embedded SQLite database is brought up to date on first use; a server
        database is upgraded only by `promptgate db upgrade`, so say so."""
        pending = db.pending_versions(self.engine)
        if not pending:
            return
        if db.is_sqlite(self.engine):
            self.upgrade()
            return
        raise UsageError(
            f"the database schema lacks migration(s) {', '.join(map(str, pending))} (it is at version "
            f"{db.current_version(self.engine)}): run `promptgate db upgrade`"
        )

    # --- submissions ------------------------------------------------------------------

    def submit(
        self,
        spec: PromptSpec,
        mode: str = "check",
        source: dict | None = None,
        reuse: bool = True,
        *,
        submitted_by: str | None = None,
        full: bool = False,
        may_read: Callable[[Any], bool] | None = None,
        override_rollback: bool = False,
        proposed_bars: list[dict] | None = None,
    ) -> int:
        """Stage a candidate: the update, one run per mapped dataset and the latest-wins
        cancellation, in one transaction; returns the tracking id. Each run pins its dataset's
        current version, bar and what the verdict stands on (``gate.prompt.request_keys``) and
        the provider from the gate's declarations. ``reuse`` False: every item called afresh.
        ``submitted_by``: the service token (None: the CLI on the database). ``full``: no run
        stops early. ``may_read(version)``: may the submitter read a pinned version's rows (None:
        all). ``override_rollback``: apply a config a rollback left (``check_hold``).
        ``proposed_bars``: a pull request's bars for an ungated prompt (``proposed``)."""
        mode = _parse_mode(mode)
        source, source_key = _submission_source(source, submitted_by, override_rollback, proposed_bars is not None)
        read = _admitted(self.engine, spec)  # the item fields its templates read
        config = spec.to_config()

        def stage(conn) -> int:
            lock_prompt(conn, spec.name)  # submissions of the prompt serialize: latest wins
            check_hold(conn, spec, mode, override_rollback, submitted_by)  # an apply of a rolled-back config
            mappings = _mappings_of(conn, spec.name, mode, proposed_bars, may_read)
            provider = _provider_of(conn, spec)
            pinned, fields = _pin_versions(conn, spec, mappings, read, may_read)
            older = superseded_updates(conn, spec.name, mode, None if mode == Mode.APPLY else source_key, submitted_by)
            update_id = insert_update(
                conn,
                prompt_name=spec.name,
                mode=mode,
                config=config,
                config_hash=spec.config_hash,
                base_version=live_version(conn, spec.name),
                source=source,
                source_key=source_key,
                source_sha=source.get("sha"),
                provider=provider,
                reuse=reuse,
                submitted_by=submitted_by,
                full=full,
            )
            _stage_runs(conn, spec, update_id, pinned, fields, full, provider)
            if mode == Mode.APPLY:
                pin_rollout(conn, update_id, spec.name)  # a canary when it applies (gate config `rollout:`)
            for old_id in older:
                cancel_update(conn, old_id, f"superseded by update {update_id}")
            return update_id

        db.transaction(self.engine, lambda conn: ensure_prompt_lock(conn, spec.name))
        return db.transaction(self.engine, stage)

    def status(self, update_id: int, failures: int = SAMPLE_FAILURES) -> UpdateReport:
        with self.engine.connect() as conn:
            upd = get_update(conn, update_id)
            runs = runs_of_update(conn, update_id)
            counts = run_counts(conn, [r.id for r in runs])
            reused = reuse_stats(conn, [r.id for r in runs])
            reports = [
                run_report(
                    r,
                    counts[r.id],
                    with_last_turns(conn, r, upd.candidate_config, failing_items(conn, r.id, failures)),
                    reused[r.id],
                    _broken_items(conn, r, failures),
                    _unstable_items(conn, r, failures),
                )
                for r in runs
            ]
            ids = [r.id for r in runs]
            spend = update_spend(conn, upd, runs + runs_of_update(conn, update_id, BASELINE))
            return UpdateReport(upd, reports, {**item_attempt_stats(conn, ids), **rate_limit_stats(conn, ids)}, spend)

    def wait(
        self,
        update_id: int,
        timeout: float | None = None,
        poll: float = 0.25,
        on_poll: Callable[[UpdateReport], Any] | None = None,
    ) -> UpdateReport:
        """Poll until the update is terminal or ``timeout`` seconds pass, then build its
        report (at each poll as well for an ``on_poll`` callback)."""
        on_status = (lambda _status: on_poll(self.status(update_id))) if on_poll else None
        self.wait_status(update_id, timeout, poll, on_status)
        return self.status(update_id)

    def wait_status(
        self,
        update_id: int,
        timeout: float | None = None,
        poll: float = 0.25,
        on_status: Callable[[str], Any] | None = None,
    ) -> str:
        """Poll the update's status alone (release pipelines may wait on many updates) until
        it is terminal or ``timeout`` seconds pass; returns the last status read."""
        deadline = None if timeout is None else time.monotonic() + timeout
        reader = db.KeptConnection(self.engine)
        read = lambda conn: update_status(conn, update_id)  # noqa: E731
        try:
            while True:
                try:
                    status = reader.run(read)
                except DBAPIError:  # a dropped connection (server restart): once more on a fresh one
                    status = reader.run(read)
                if status in UPDATE_TERMINAL or (deadline is not None and time.monotonic() >= deadline):
                    return status
                if on_status:
                    on_status(status)
                time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))
        finally:
            reader.close()

    def updates_for_sha(self, sha: str, prompt_name: str | None = None, mode: str | None = None) -> list[Update]:
        """The commit's updates, oldest first (``mode``: those a release wait of that mode
        answers for, ``release.of_mode``)."""
        with self.engine.connect() as conn:
            found = updates_for_sha(conn, sha, prompt_name)
        return found if mode is None else of_mode(found, mode)[1]

    def wait_for_sha(
        self,
        sha: str,
        prompt: str | None = None,
        timeout: float | None = None,
        poll: float = SHA_POLL,
        mode: str | None = DEFAULT_RELEASE_MODE,
        on_select: Callable[[str], object] | None = None,
    ) -> tuple[int, list[UpdateReport]]:
        """For release pipelines: wait for the updates submitted for commit ``sha`` that
        ``release.release_updates`` picks for ``mode`` (apply, the default: its apply-mode
        updates only; a check never stands in for an apply), the latest one per prompt, and
        return (exit code, their reports): ``release.wait_for_release``, reading the
        database every ``poll`` seconds."""
        return wait_for_release(self, sha, prompt, timeout, poll, mode, on_select)

    def list_updates(
        self,
        limit: int = 20,
        prompt_name: str | None = None,
        *,
        status: str | None = None,
        sha_prefix: str | None = None,
        before_id: int | None = None,
    ) -> list[Update]:
        """Newest first, optionally of one prompt, in one status, of commits whose SHA
        starts with ``sha_prefix`` (hex digits), older than update ``before_id``."""
        if sha_prefix is not None and not re.fullmatch(r"[0-9a-fA-F]{1,64}", sha_prefix):
            raise UsageError(f"{sha_prefix[:80]!r} is not the start of a commit SHA (hex digits)")
        with self.engine.connect() as conn:
            return list_updates(conn, limit, prompt_name, status=status, sha_prefix=sha_prefix, before_id=before_id)

    def cancel(self, update_id: int, reason: str = "cancelled by a user", *, owner: str | None = None) -> None:
        """Cancel an open update. ``owner``: the caller may cancel only updates the token of
        that name submitted (a submit token through the service); else Forbidden. None:
        any (the CLI on the database, an admin token)."""

        def cancel(conn):
            submitted_by = lock_update_owner(conn, update_id)
            if owner is not None and submitted_by != owner:
                raise Forbidden(
                    f"update {update_id} was not submitted by this token: a submit token cancels only "
                    "its own updates (an admin token cancels any)"
                )
            cancel_update(conn, update_id, reason)

        db.transaction(self.engine, cancel)

    def fleet(self) -> FleetCounts:
        """Updates and runs by status, open runs' items by state, the oldest waiting
        submission, live workers and their stalest heartbeat (three beats count as live)."""
        with self.engine.connect() as conn:
            return fleet_counts(conn, self.settings.heartbeat_seconds * 3)

    def live_workers(self) -> list[WorkerRow]:
        """Worker processes whose heartbeat is fresh (three beats)."""
        with self.engine.connect() as conn:
            return live_workers(conn, self.settings.heartbeat_seconds * 3)


def _admitted(engine: Engine, spec: PromptSpec) -> tuple[str, ...]:
    """A candidate's labels checked, and the item fields its templates read (admission)."""
    from .admission import check_labels, count_unknown_fields, fields_read

    check_labels(spec)
    read = fields_read(spec)
    if read:
        count_unknown_fields(engine, spec.name)
    return read


def _provider_of(conn, spec: PromptSpec) -> dict | None:
    """The provider declaration the gate has for the candidate's provider and model, pinned with it."""
    decl = resolve(spec.provider, spec.model, list_providers(conn))
    return decl.to_dict() if decl else None


def _parse_mode(mode: str) -> Mode:
    try:
        return Mode(mode)
    except ValueError:
        raise UsageError(f"mode {mode!r} is not check or apply") from None


def _submission_source(
    source: dict | None, submitted_by: str | None, override: bool = False, proposed: bool = False
) -> tuple[dict, str]:
    """Where a submission came from (with who submitted it, a service token's name, whether
    it overrides a rollback or is judged on proposed bars), its commit SHA checked, and the
    key of the check-mode submissions it replaces."""
    source = dict(source or {}, **({"submitted_by": submitted_by} if submitted_by else {}))
    source.update({k: True for k, on in (("override_rollback", override), ("proposed_bars", proposed)) if on})
    check_commit_sha(source.get("sha"))
    return source, _source_key(source)


def _mappings_of(conn, prompt_name: str, mode: str = "check", proposed=None, may_read=None) -> list:
    """The prompt's mapped datasets (or the bars a pull request proposes for it:
    ``proposed_mappings``); none is refused: nothing could clear the prompt."""
    if proposed is not None:
        return proposed_mappings(conn, prompt_name, mode, proposed, may_read)
    mappings = list_mappings(conn, prompt_name)
    if not mappings:
        raise UsageError(
            f"prompt {prompt_name!r} has no mapped dataset, so nothing can clear it: map one with "
            f"`promptgate dataset map {prompt_name} DATASET --min-accuracy 0.9`"
        )
    return mappings


def _pin_versions(conn, spec: PromptSpec, mappings: list, read: tuple[str, ...], may_read=None) -> tuple[list, dict]:
    """Each mapping with its dataset and the version a submission pins, the candidate's
    decision checked against their expected values (in words the submitter may read), and
    the coverage of the item fields its templates read (``read``), counted on the datasets
    the submitter may read."""
    from .admission import check_expected, field_coverage

    datasets = [get_dataset(conn, m.dataset_name) for m in mappings]
    pinned = [(m, ds, _current_version(conn, ds)) for m, ds in zip(mappings, datasets)]
    hidden = {ds.name for _, ds, version in pinned if may_read is not None and not may_read(version)}
    check_expected(spec, [(ds.name, version) for _, ds, version in pinned], hidden)
    fields = field_coverage(conn, spec, read, [(ds.name, version) for _, ds, version in pinned], hidden)
    return pinned, fields


def _stage_runs(
    conn, spec: PromptSpec, update_id: int, pinned: list, fields: dict, full: bool, provider: dict | None
) -> None:
    """The update's runs: per mapping, the candidate's run (its bars, price, fields read and
    whether it may stop early pinned) and what it is compared with (``baseline_of``); then
    the gate's spend caps and the upper bound of the update's calls, pinned with it."""
    from gate.prompt.request_keys import pin
    from gate.records.pinned import Pinned

    from .baseline import baseline_of, model_price
    from .judging import judge_of, judged_baseline, run_pin, stage_sentinels

    limits, price = gate_limits(conn), model_price(conn, spec.model)
    check_cost_bounded(limits, spec, price, "the candidate")
    live, calls, judge = find_live(conn, spec.name), 0, judge_of(conn, spec, limits)
    for mapping, ds, version in pinned:
        bars = Bars.parse(mapping.min_accuracy, mapping.bars)  # once per run
        judged, sentinels, judging = run_pin(judge, mapping, version, bars) if judge else ({}, 0, 0)
        if judge:  # graded by a judge: compared with live by the judge, or not at all (gate/service/judging.py)
            baseline = judged_baseline(judge, bars)
        else:
            baseline = baseline_of(conn, spec, provider, live, update_id, ds, mapping, version, limits)
        calls += baseline.pop("calls", 0) + run_calls(spec, version.row_count) + judging
        early = bars.early_stop and not full and not judged.get("corrected")
        run = Pinned.of(
            {
                **pin(spec, version, mapping.min_accuracy),
                "bars": mapping.bars or None,
                "price": price,
                "fields": fields[ds.name],
                "early_stop": early,
                **baseline,
                **({"judge": judged} if judge else {}),
            }
        )
        run_id = insert_run(
            conn,
            update_id,
            ds,
            mapping.min_accuracy,
            version,
            run.to_json() or {},
            baseline_run_id=run.baseline.run_id if run.baseline else None,
        )
        if sentinels:
            stage_sentinels(conn, judge, run_id, sentinels, version.row_count, seed=run_id)
    set_update_limits(conn, update_id, pinned_limits(limits, calls))


def _current_version(conn, ds) -> DatasetVersion:
    """The version a submission pins: the dataset's current one, read under a shared lock
    of the dataset's row (so prune, which needs it exclusively, cannot take the version
    before this transaction's run pinning it commits), and READY."""
    current = lock_dataset(conn, ds.id, share=True)
    if current is None:
        raise UsageError(f"dataset {ds.name} has no imported version: run `promptgate dataset refresh {ds.name}`")
    version = get_version(conn, current)
    if version.status != READY:
        raise UsageError(
            f"dataset {ds.name}'s current version {current} is not ready ({version.status}): run "
            f"`promptgate dataset refresh {ds.name}`"
        )
    return version


def _source_key(source: dict) -> str:
    """Which check-mode submissions replace each other: the same repo and PR, or the
    same explicit key; submissions from the CLI without one share the key 'cli'."""
    if source.get("key"):
        return str(source["key"])[:255]
    if source.get("pr") is not None:
        return f"{source.get('repo', '')}#{source['pr']}"[:255]
    return "cli"
