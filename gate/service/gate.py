"""``Gate``: the service API over one gate database, what the CLI, the GitHub Action, the
demo and the production runtime call. Each public method is one transaction (or none) and
raises only GateError: this class is the boundary where a driver error becomes a
``DatabaseError`` (``_driver_errors_become_gate_errors``)."""

from __future__ import annotations

import functools
import re
import time
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Iterable

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from .. import db, store
from ..errors import DatabaseError, NotFound, UsageError
from ..models import Dataset, LivePrompt, Mapping, Update, WorkerRow
from ..providers import Endpoint, ProviderDecl, endpoint_for, resolve
from ..settings import Settings
from ..sources import DEFAULT_ID_COLUMN, DEFAULT_LABEL_COLUMN, SourceOptions, absolute_source, open_source
from ..sources.preview import DatasetPreview, preview
from ..spec import PromptSpec, check_name
from ..states import UPDATE_TERMINAL, Mode
from .reports import UpdateReport, run_report

SAMPLE_FAILURES = 5
SHA_RE = re.compile(r"[0-9a-fA-F]{7,64}")


def _driver_errors_become_gate_errors(cls):
    """Every public method of ``cls``: a driver error leaving it is a DatabaseError with the
    driver's first line (never SQL, never a traceback), the one place the service maps
    foreign errors, as httpx maps transport errors at one boundary."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_"):
            continue
        if isinstance(member, classmethod):
            setattr(cls, name, classmethod(_translated(member.__func__)))
        elif callable(member):
            setattr(cls, name, _translated(member))
    return cls


def _translated(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except DBAPIError as exc:
            raise DatabaseError.from_driver(exc) from exc
    return call


def combine_exit_codes(codes: Iterable[int]) -> int:
    """Several updates' exit codes as one: 2 (failed, cancelled, invalid) before 1
    (rejected) before 3 (still open) before 0."""
    codes = set(codes)
    for code in (2, 1, 3):
        if code in codes:
            return code
    return 0


def latest_per_prompt(updates: Iterable[Update]) -> list[Update]:
    """The newest update of each prompt (a re-run's submission replaces the earlier one),
    oldest first."""
    latest: dict[str, Update] = {}
    for u in updates:
        if u.prompt_name not in latest or u.id > latest[u.prompt_name].id:
            latest[u.prompt_name] = u
    return sorted(latest.values(), key=lambda u: u.id)


def parse_bar(value: Any) -> Decimal:
    try:
        bar = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise UsageError(f"min accuracy {value!r} is not a number: use a fraction in [0, 1], e.g. 0.9") from None
    if not bar.is_finite() or bar < 0 or bar > 1:
        raise UsageError(f"min accuracy {value!r} is outside [0, 1]: use a fraction such as 0.9 (not 90)")
    if bar.as_tuple().exponent < -9:
        raise UsageError(f"min accuracy {value!r} has more than 9 decimal places")
    return bar


@_driver_errors_become_gate_errors
class Gate:
    """A handle on one gate database."""

    def __init__(self, engine: Engine, settings: Settings):
        self.engine = engine
        self.settings = settings

    @classmethod
    def connect(cls, database_url: str | None = None, settings: Settings | None = None,
                upgrade: bool = False) -> "Gate":
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
        have, want = db.current_version(self.engine), db.latest_version(self.engine.dialect.name)
        if have >= want:
            return
        if db.is_sqlite(self.engine):
            self.upgrade()
            return
        raise UsageError(f"the database schema is at version {have}, this promptgate needs {want}: "
                         "run `promptgate db upgrade`")

    # --- datasets and bars ------------------------------------------------------

    def register_dataset(self, name: str, source_uri: str, *, id_column: str | None = None,
                         label_column: str | None = None, base_dir: str | Path | None = None) -> Dataset:
        """Register (or re-point) a dataset. A relative file path resolves against
        ``base_dir`` (the gate config's folder) or the current directory."""
        check_name(name, "dataset name")
        if not source_uri or not str(source_uri).strip():
            raise UsageError("a dataset needs a source URI (a path, file://, https://, s3:// or sql+...)")
        source_uri = absolute_source(str(source_uri).strip(), base_dir)
        options = {"id_column": id_column or DEFAULT_ID_COLUMN, "label_column": label_column or DEFAULT_LABEL_COLUMN,
                   "base_dir": str(Path(base_dir or Path.cwd()).resolve())}
        ds, _ = db.transaction(self.engine, lambda conn: store.upsert_dataset(conn, name, source_uri, options))
        return ds

    def map_dataset(self, prompt_name: str, dataset_name: str, min_accuracy: Any) -> Mapping:
        check_name(prompt_name, "prompt name")
        bar = parse_bar(min_accuracy)

        def map_it(conn) -> Dataset:
            ds = store.get_dataset(conn, dataset_name)
            store.upsert_mapping(conn, prompt_name, ds.id, bar)
            return ds
        ds = db.transaction(self.engine, map_it)
        return Mapping(prompt_name, ds.id, ds.name, bar)

    def unmap_dataset(self, prompt_name: str, dataset_name: str) -> bool:
        def unmap(conn) -> bool:
            return store.delete_mapping(conn, prompt_name, store.get_dataset(conn, dataset_name).id)
        return db.transaction(self.engine, unmap)

    def list_datasets(self) -> list[tuple[Dataset, list[Mapping]]]:
        with self.engine.connect() as conn:
            mappings = store.list_mappings(conn)
            return [(ds, [m for m in mappings if m.dataset_id == ds.id]) for ds in store.list_datasets(conn)]

    def mappings(self, prompt_name: str | None = None) -> list[Mapping]:
        with self.engine.connect() as conn:
            return store.list_mappings(conn, prompt_name)

    def get_dataset(self, name: str) -> Dataset:
        with self.engine.connect() as conn:
            return store.get_dataset(conn, name)

    def preview_dataset(self, name: str, rows: int = 10) -> DatasetPreview:
        """The first rows, the row count and the label distribution, read through the
        same reader materialize uses."""
        ds = self.get_dataset(name)
        reader = open_source(ds.source_uri, SourceOptions(max_row_bytes=self.settings.max_row_bytes, **ds.options))
        try:
            return preview(reader, rows)
        finally:
            reader.close()

    # --- providers ---------------------------------------------------------------------

    def providers(self) -> dict[str, ProviderDecl]:
        """The providers the gate config declared (``gate.providers``)."""
        with self.engine.connect() as conn:
            return store.list_providers(conn)

    def register_provider(self, decl: ProviderDecl) -> None:
        db.transaction(self.engine, lambda conn: store.upsert_provider(conn, decl))

    def remove_provider(self, name: str) -> bool:
        return db.transaction(self.engine, lambda conn: store.delete_provider(conn, name))

    def endpoint(self, spec: PromptSpec) -> Endpoint:
        """Where this process sends the calls of ``spec`` (the production runtime): its
        provider as declared now, the key from this process's environment."""
        return endpoint_for(resolve(spec.provider, spec.model, self.providers()))

    # --- submissions ------------------------------------------------------------------

    def submit(self, spec: PromptSpec, mode: str = "check", source: dict | None = None) -> int:
        """Stage a candidate: the update, one run per mapped dataset (bar copied in) and
        the latest-wins cancellation, in one transaction. Returns the tracking id. The
        prompt's provider is resolved from the gate's declarations and pinned in the
        update: the workers send its calls there, and nowhere a pull request chose."""
        try:
            mode = Mode(mode)
        except ValueError:
            raise UsageError(f"mode {mode!r} is not check or apply") from None
        source = dict(source or {})
        source_key = _source_key(source)
        config = spec.to_config()
        def stage(conn) -> int:
            mappings = store.list_mappings(conn, spec.name)
            if not mappings:
                raise UsageError(f"prompt {spec.name!r} has no mapped dataset, so nothing can clear it: map one with "
                                 f"`promptgate dataset map {spec.name} DATASET --min-accuracy 0.9`")
            provider = resolve(spec.provider, spec.model, store.list_providers(conn))
            older = store.superseded_updates(conn, spec.name, mode, None if mode == Mode.APPLY else source_key)
            update_id = store.insert_update(conn, prompt_name=spec.name, mode=mode, config=config,
                                            config_hash=spec.config_hash,
                                            base_version=store.live_version(conn, spec.name),
                                            source=source, source_key=source_key, source_sha=source.get("sha"),
                                            provider=provider.to_dict() if provider else None)
            for mapping in mappings:
                ds = store.get_dataset(conn, mapping.dataset_name)
                store.insert_run(conn, update_id, ds, mapping.min_accuracy)
            for old_id in older:
                store.cancel_update(conn, old_id, f"superseded by update {update_id}")
            return update_id

        update_id = db.transaction(self.engine, stage)
        return update_id

    def status(self, update_id: int, failures: int = SAMPLE_FAILURES) -> UpdateReport:
        with self.engine.connect() as conn:
            upd = store.get_update(conn, update_id)
            runs = store.runs_of_update(conn, update_id)
            counts = store.run_counts(conn, [r.id for r in runs])
            reports = [run_report(r, counts[r.id], store.failing_items(conn, r.id, failures)) for r in runs]
            ids = [r.id for r in runs]
            return UpdateReport(upd, reports, {**store.item_attempt_stats(conn, ids),
                                               **store.rate_limit_stats(conn, ids)})

    def wait(self, update_id: int, timeout: float | None = None, poll: float = 0.25,
             on_poll=None) -> UpdateReport:
        """Poll until the update is terminal or ``timeout`` seconds pass, then build its
        report (at each poll as well for an ``on_poll`` callback)."""
        on_status = (lambda _status: on_poll(self.status(update_id))) if on_poll else None
        self.wait_status(update_id, timeout, poll, on_status)
        return self.status(update_id)

    def wait_status(self, update_id: int, timeout: float | None = None, poll: float = 0.25,
                    on_status=None) -> str:
        """Poll the update's status alone (release pipelines may wait on many updates) until
        it is terminal or ``timeout`` seconds pass; returns the last status read."""
        deadline = None if timeout is None else time.monotonic() + timeout
        reader = db.KeptConnection(self.engine)
        read = lambda conn: store.update_status(conn, update_id)   # noqa: E731
        try:
            while True:
                try:
                    status = reader.run(read)
                except DBAPIError:      # a dropped connection (server restart): once more on a fresh one
                    status = reader.run(read)
                if status in UPDATE_TERMINAL or (deadline is not None and time.monotonic() >= deadline):
                    return status
                if on_status:
                    on_status(status)
                time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))
        finally:
            reader.close()

    def updates_for_sha(self, sha: str, prompt_name: str | None = None) -> list[Update]:
        with self.engine.connect() as conn:
            return store.updates_for_sha(conn, sha, prompt_name)

    def wait_for_sha(self, sha: str, prompt: str | None = None, timeout: float | None = None,
                     poll: float = 0.5) -> tuple[int, list[UpdateReport]]:
        """For release pipelines: wait for the updates submitted for commit ``sha`` (the
        latest one per prompt) and return (exit code as `wait ID` gives it, combined by
        ``combine_exit_codes``; their reports).

        Until an update for the commit appears, it is waited for up to ``timeout``; with no
        timeout, or when none appears in time, NotFound is raised."""
        sha = (sha or "").strip()
        if not SHA_RE.fullmatch(sha):
            raise UsageError(f"{sha!r} is not a commit SHA")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            updates = latest_per_prompt(self.updates_for_sha(sha, prompt))
            expired = deadline is not None and time.monotonic() >= deadline
            if updates:
                reports = [self.status(u.id) for u in updates]
                if expired or all(r.terminal for r in reports):
                    return combine_exit_codes(r.exit_code for r in reports), reports
            elif deadline is None or expired:
                what = f" for prompt {prompt}" if prompt else ""
                raise NotFound(f"no update was submitted for commit {sha}{what} (wait needs the full SHA the "
                               "Action or `promptgate submit --sha` used)")
            time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))

    def list_updates(self, limit: int = 20, prompt_name: str | None = None) -> list[Update]:
        with self.engine.connect() as conn:
            return store.list_updates(conn, limit, prompt_name)

    def cancel(self, update_id: int, reason: str = "cancelled by a user") -> None:
        def cancel(conn):
            store.get_update(conn, update_id)
            store.cancel_update(conn, update_id, reason)
        db.transaction(self.engine, cancel)

    def live(self, name: str) -> LivePrompt:
        with self.engine.connect() as conn:
            found = store.find_live(conn, name)
        if found is None:
            raise NotFound(f"prompt {name!r} has no live version yet: submit it with --mode apply")
        return found

    def history(self, name: str) -> list[dict]:
        with self.engine.connect() as conn:
            return store.prompt_history(conn, name)

    def live_workers(self) -> list[WorkerRow]:
        """Worker processes whose heartbeat is fresh (three beats)."""
        with self.engine.connect() as conn:
            return store.live_workers(conn, self.settings.heartbeat_seconds * 3)


def _source_key(source: dict) -> str:
    """Which check-mode submissions replace each other: the same repo and PR, or the
    same explicit key; submissions from the CLI without one share the key 'cli'."""
    if source.get("key"):
        return str(source["key"])[:255]
    if source.get("pr") is not None:
        return f"{source.get('repo', '')}#{source['pr']}"[:255]
    return "cli"
