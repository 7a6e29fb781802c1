"""``Gate``: the domain API over one gate database, what the CLI, the GitHub Action, the
demo and the production runtime call. Each public method is one transaction (or none) and
raises only GateError: this class is the boundary where a driver error becomes a
``DatabaseError`` (``boundary.driver_errors_become_gate_errors``)."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from gate import db
from gate.calls.providers import resolve
from gate.contract.delegation import delegate
from gate.contract.release import DEFAULT_RELEASE_MODE, SHA_POLL, wait_for_release
from gate.errors import UsageError, first_line
from gate.records import DatasetVersion
from gate.report.update import UpdateReport
from gate.settings import Settings
from gate.states import Mode
from gate.store.datasets import get_dataset, list_mappings
from gate.store.live import find_live, live_version
from gate.store.locks import ensure_prompt_lock, lock_prompt
from gate.store.providers import list_providers
from gate.store.rollouts import pin_rollout
from gate.store.runs import insert_run
from gate.store.updates import cancel_update, insert_update, set_update_limits, superseded_updates
from gate.store.versions import READY, get_version, lock_dataset
from gate.store.wake import can_knock, knock
from gate.verdict.bars import Bars
from gate.verdict.update_outcome import ACCEPTED_UNJUDGED as ACCEPTED

from .boundary import driver_errors_become_gate_errors
from .config import Config
from .datasets import Datasets
from .live import Live, check_hold
from .proposed import proposed_mappings
from .releases import Releases
from .retention import Retention
from .rollouts import Rollouts
from .served import Served
from .spending import check_cost_bounded, gate_limits, pinned_limits, run_calls
from .tokens import Tokens
from .updates import Updates

if TYPE_CHECKING:
    from gate.prompt.spec import PromptSpec

# What only a submission or a dataset's diff uses (the prompt's parser, Jinja2 and YAML, the
# dataset importer, the judge and baseline rules) is imported where it is used: `status` and
# `wait` on the database load the store and the report, not those (tests/unit/test_cli_imports.py).

log = logging.getLogger("promptgate.gate")
COMMIT_SHA_RE = re.compile(r"[0-9a-fA-F]{40}(?:[0-9a-fA-F]{24})?")


def check_commit_sha(sha: Any) -> None:
    """A submission's commit, when it names one: a full object id, SHA-1 (40 hex) or SHA-256
    (64 hex), what `wait --sha` and the Action look updates up by."""
    if sha not in (None, "") and not COMMIT_SHA_RE.fullmatch(str(sha)):
        raise UsageError(f"commit SHA {str(sha)[:80]!r} is not a full commit id: use its 40 or 64 hex characters")


@driver_errors_become_gate_errors
class Gate:
    """A handle on one gate database: the services over it, each built with what it needs
    (the engine, the settings, the other services it asks), and every public method of the
    domain API. ``submit``, ``wait_for_sha`` and the engine's (``connect``, ``close``,
    ``upgrade``, ``ensure_schema``) are its own; each of the others is one service's
    (``delegate``), grouped below by service."""

    def __init__(self, engine: Engine, settings: Settings):
        self.engine = engine
        self.settings = settings
        self._config = Config(engine)
        self._datasets = Datasets(engine, settings)
        self._live = Live(engine, self._config, settings.heartbeat_seconds * 3)
        self._releases = Releases(engine)
        self._retention = Retention(engine)
        self._rollouts = Rollouts(engine, self._config, self._live)
        self._served = Served(engine)
        self._tokens = Tokens(engine)
        self._updates = Updates(engine, settings)

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
        accept_unjudged: bool = False,
        scope: str | None = None,
    ) -> int:
        """Stage a candidate: the update, one run per mapped dataset and the latest-wins cancellation, in one
        transaction; returns the tracking id. Each run pins its dataset's current version, bar and what the verdict
        stands on (``gate.prompt.request_keys``) and the provider from the gate's declarations. ``reuse`` False:
        every item called afresh. ``submitted_by``: the service token (None: the CLI on the database; ``scope``:
        its scope). ``full``: no run stops early. ``may_read(version)``: may the submitter read a pinned version's
        rows (None: all). ``override_rollback``: apply a config a rollback left (``check_hold``). ``proposed_bars``:
        a pull request's bars for an ungated prompt (``proposed``). ``accept_unjudged``: an admin accepts a first
        version no bar can judge (``unjudged``)."""
        mode = _parse_mode(mode)
        source, source_key = _submission_source(source, submitted_by, override_rollback, proposed_bars, accept_unjudged)
        read = _admitted(self.engine, spec)  # the item fields its templates read

        def stage(conn) -> int:
            lock_prompt(conn, spec.name)  # submissions of the prompt serialize: latest wins
            check_hold(conn, spec, mode, override_rollback)  # an apply of a rolled-back config
            _check_authority(conn, spec, mode, scope, accept_unjudged)  # acceptances; what decides the prompt
            mappings = _mappings_of(conn, spec.name, mode, proposed_bars, may_read)
            provider = _provider_of(conn, spec)
            pinned, fields = _pin_versions(conn, spec, mappings, read, may_read)
            older = superseded_updates(conn, spec.name, mode, None if mode == Mode.APPLY else source_key, submitted_by)
            update_id = insert_update(
                conn,
                prompt_name=spec.name,
                mode=mode,
                config=spec.to_config(),
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
            _stage_runs(conn, spec, update_id, pinned, fields, full, provider, may_read)
            if mode == Mode.APPLY:
                pin_rollout(conn, update_id, spec.name)  # a canary when it applies (gate config `rollout:`)
            for old_id in older:
                cancel_update(conn, old_id, f"superseded by update {update_id}")
            return update_id

        db.transaction(self.engine, lambda conn: ensure_prompt_lock(conn, spec.name))
        return _idle_workers_woken(self.engine, db.transaction(self.engine, stage))

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

    # --- an update once submitted: gate/domain/updates.py ---------------------------------

    status = delegate("_updates", Updates.status)
    wait = delegate("_updates", Updates.wait)
    wait_status = delegate("_updates", Updates.wait_status)
    updates_for_sha = delegate("_updates", Updates.updates_for_sha)
    list_updates = delegate("_updates", Updates.list_updates)
    unreadable_datasets = delegate("_updates", Updates.unreadable_datasets)
    cancel = delegate("_updates", Updates.cancel)
    fleet = delegate("_updates", Updates.fleet)
    live_workers = delegate("_updates", Updates.live_workers)

    # --- what the push job did for a commit: gate/domain/releases.py ----------------------

    record_commit = delegate("_releases", Releases.record_commit)
    commit_record = delegate("_releases", Releases.commit_record)

    # --- datasets and bars: gate/domain/datasets.py --------------------------------------

    register_dataset = delegate("_datasets", Datasets.register_dataset)
    import_upload = delegate("_datasets", Datasets.import_upload)
    refresh_dataset = delegate("_datasets", Datasets.refresh_dataset)
    map_dataset = delegate("_datasets", Datasets.map_dataset)
    unmap_dataset = delegate("_datasets", Datasets.unmap_dataset)
    bar_refusal = delegate("_datasets", Datasets.bar_refusal)
    list_datasets = delegate("_datasets", Datasets.list_datasets)
    mappings = delegate("_datasets", Datasets.mappings)
    get_dataset = delegate("_datasets", Datasets.get_dataset)
    dataset_versions = delegate("_datasets", Datasets.dataset_versions)
    dataset_version = delegate("_datasets", Datasets.dataset_version)
    preview_dataset = delegate("_datasets", Datasets.preview_dataset)
    diff_versions = delegate("_datasets", Datasets.diff_versions)
    diff_source = delegate("_datasets", Datasets.diff_source)
    check_upload = delegate("_datasets", Datasets.check_upload)
    diff_upload = delegate("_datasets", Datasets.diff_upload)

    @property
    def source_egress(self) -> Any:
        """Where sources read for a caller may connect (set by the HTTP service; None: the
        CLI's own reads, ${VAR} filled in): ``Datasets.source_egress``."""
        return self._datasets.source_egress

    @source_egress.setter
    def source_egress(self, egress: Any) -> None:
        self._datasets.source_egress = egress

    # --- providers, prices, limits, optional fields: gate/domain/config.py ----------------

    providers = delegate("_config", Config.providers)
    register_provider = delegate("_config", Config.register_provider)
    remove_provider = delegate("_config", Config.remove_provider)
    endpoint = delegate("_config", Config.endpoint)
    prices = delegate("_config", Config.prices)
    set_price = delegate("_config", Config.set_price)
    remove_price = delegate("_config", Config.remove_price)
    limits = delegate("_config", Config.limits)
    set_limit = delegate("_config", Config.set_limit)
    remove_limit = delegate("_config", Config.remove_limit)
    optional_fields = delegate("_config", Config.optional_fields)
    set_optional_fields = delegate("_config", Config.set_optional_fields)

    # --- the live version, its history, rollback: gate/domain/live.py ---------------------

    live = delegate("_live", Live.live)
    live_endpoint = delegate("_live", Live.live_endpoint)
    live_providers = delegate("_live", Live.live_providers)
    judges_below_floors = delegate("_live", Live.judges_below_floors)
    history = delegate("_live", Live.history)
    holds = delegate("_live", Live.holds)
    rollback = delegate("_live", Live.rollback)

    # --- what production serves: gate/domain/served.py ------------------------------------

    report_served = delegate("_served", Served.report_served)
    served = delegate("_served", Served.served)
    served_counts = delegate("_served", Served.served_counts)
    stale_processes = delegate("_served", Served.stale_processes)
    list_live = delegate("_served", Served.list_live)

    # --- canary rollouts and what the runtime loads: gate/domain/rollouts.py --------------

    record_feedback = delegate("_rollouts", Rollouts.record_feedback)
    rollouts = delegate("_rollouts", Rollouts.rollouts)
    rollout_of_update = delegate("_rollouts", Rollouts.rollout_of_update)
    rollout_states = delegate("_rollouts", Rollouts.rollout_states)
    rollout_settings = delegate("_rollouts", Rollouts.rollout_settings)
    set_rollout = delegate("_rollouts", Rollouts.set_rollout)
    canary_of = delegate("_rollouts", Rollouts.canary_of)
    serve_tag = delegate("_rollouts", Rollouts.serve_tag)
    serve_document = delegate("_rollouts", Rollouts.serve_document)

    # --- retention: gate/domain/retention.py ------------------------------------------------

    prune = delegate("_retention", Retention.prune)

    # --- the HTTP service's tokens and sessions: gate/domain/tokens.py --------------------

    create_token = delegate("_tokens", Tokens.create_token)
    list_tokens = delegate("_tokens", Tokens.list_tokens)
    revoke_token = delegate("_tokens", Tokens.revoke_token)
    authenticate = delegate("_tokens", Tokens.authenticate)
    open_session = delegate("_tokens", Tokens.open_session)
    session_token = delegate("_tokens", Tokens.session_token)
    close_session = delegate("_tokens", Tokens.close_session)


def _idle_workers_woken(engine: Engine, update_id: int) -> int:
    """``update_id``, committed, once the idle fleet's probes were knocked on (``gate.store.wake``):
    the work is picked up now, not at their next probe. Best effort: a refused or failed knock
    leaves the work to the next probe, and the submission stands."""
    if can_knock(engine):
        try:
            with engine.connect() as conn:
                knock(conn)
        except DBAPIError as exc:
            log.info("no knock on the idle workers: %s", first_line(exc))
    return update_id


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


def _check_accept(conn, spec: PromptSpec, mode: str, scope: str | None, accept: bool) -> None:
    """An admin's acceptance of a first version no bar can judge, refused unless it may be
    made (``gate.domain.unjudged``; imported only then: it loads the kinds)."""
    if accept:
        from .unjudged import check_accept

        check_accept(conn, spec, mode, scope)


def _check_authority(conn, spec: PromptSpec, mode: str, scope: str | None, accept: bool) -> None:
    """An acceptance of a first version unjudged (``_check_accept``), and a token's candidate
    that reads no row label where live does, refused but for admin (``gate.domain.label_drop``;
    imported only for a token's submission: it loads the kinds)."""
    _check_accept(conn, spec, mode, scope, accept)
    if scope is not None and scope != "admin":
        from .label_drop import check_labels_kept

        check_labels_kept(conn, spec, scope)


def _parse_mode(mode: str) -> Mode:
    try:
        return Mode(mode)
    except ValueError:
        raise UsageError(f"mode {mode!r} is not check or apply") from None


def _submission_source(
    source: dict | None, submitted_by: str | None, override: bool = False, proposed_bars=None, accept=False
) -> tuple[dict, str]:
    """Where a submission came from (with who submitted it, a service token's name, whether
    it overrides a rollback, is judged on proposed bars or accepted unjudged: said by the
    flags only), its commit SHA checked, and the key of the check-mode submissions it replaces."""
    source = dict(source or {}, **({"submitted_by": submitted_by} if submitted_by else {}))
    source.pop(ACCEPTED, None)
    flags = (("override_rollback", override), ("proposed_bars", proposed_bars is not None), (ACCEPTED, accept))
    source.update({k: True for k, on in flags if on})
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
    conn, spec: PromptSpec, update_id: int, pinned: list, fields: dict, full: bool, provider: dict | None, may_read=None
) -> None:
    """The update's runs: per mapping, the candidate's run (its pin, ``gate.kinds.pin.RunPin``:
    its bars parsed once, price, fields read and whether it may stop early) and what it is
    compared with (``baseline_of``); then
    the gate's spend caps and the upper bound of the update's calls, pinned with it."""
    from gate.kinds import kind_of
    from gate.kinds.bar_fit import refusal
    from gate.kinds.pin import RunPin
    from gate.prompt.request_keys import pin
    from gate.records.json_codec import extended

    from .baseline import baseline_of, model_price
    from .judging import BaselineStage, as_judge, first_version, judge_of, judged_baseline, run_pin, stage_sentinels

    limits, price = gate_limits(conn), model_price(conn, spec.model)
    check_cost_bounded(limits, spec, price, "the candidate")
    judged_as = first_version(conn, spec)  # a compared prompt's first version: graded by its first: judge
    live, calls, judge = find_live(conn, spec.name), 0, judge_of(conn, judged_as, limits, may_read)
    for mapping, ds, version in pinned:
        bars = Bars.parse(mapping.min_accuracy, mapping.bars)  # once per run
        unfit = refusal(spec.name, ds.name, kind_of(spec.decision), bars)
        if unfit:  # a bar the run could not compute: refused now, not "could not be scored" after the calls
            raise UsageError(unfit)
        head = pin(spec, version, mapping.min_accuracy)
        if judged_as is not spec:  # the rule it is judged by; the config hash stays the candidate's
            head = extended(head, decision=pin(judged_as, version, mapping.min_accuracy).decision)
        run = RunPin.begun(head, bars, mapping.bars, judged_as.decision)
        if judge:  # graded by a judge: compared with live by the judge, or not at all (gate/domain/judging.py)
            judged, sentinels, judging = run_pin(judge, mapping, version, bars)
            stage = BaselineStage(spec, provider, live, update_id, ds, mapping, version, limits)
            baseline, staged = judged_baseline(conn, judge, bars, stage)
        else:
            judged, sentinels, judging = None, 0, 0
            baseline, staged = baseline_of(conn, spec, provider, live, update_id, ds, mapping, version, limits)
        calls += staged + run_calls(spec, version.row_count) + judging
        run = run.extended(
            price=price,
            fields=fields[ds.name],
            early_stop=run.may_stop_early(full, judged),
            **baseline,
            **({"judge": judged} if judged is not None else {}),
            **as_judge(spec),
        )
        run_id = insert_run(
            conn,
            update_id,
            ds,
            mapping.min_accuracy,
            version,
            run.stored.to_json() or {},
            baseline_run_id=run.stored.baseline.run_id if run.stored.baseline else None,
        )
        if judge and sentinels:
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
