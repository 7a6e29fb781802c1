"""The service's datasets and bars: registering a dataset imports its rows as a
version (``gate.datasets.importer``), a refresh imports again, and versions are listed, previewed
and compared. A run never reads a source: it reads the version its submission pinned."""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Mapping as TMapping
from pathlib import Path
from typing import Any, BinaryIO

from sqlalchemy.engine import Engine

from gate import db
from gate.datasets import importer
from gate.datasets.sources import (
    DEFAULT_ID_COLUMN,
    DEFAULT_LABEL_COLUMN,
    SourceOptions,
    absolute_source,
    open_source,
    resolve_path,
    scheme_of,
)
from gate.datasets.sources.files import text_kind
from gate.datasets.sources.upload import UPLOAD_SCHEME, UploadReader, check_repo_path, upload_uri
from gate.datasets.version_index import VersionIndexes, diff_against_index
from gate.errors import DatasetError, NotFound, SpecError, UsageError, first_line
from gate.prompt.call_settings import check_name
from gate.records import DataDiff, Dataset, DatasetMapping, DatasetPreview, DatasetVersion, Imported
from gate.settings import Settings
from gate.store.datasets import (
    delete_dataset,
    delete_mapping,
    ensure_dataset,
    get_dataset,
    list_datasets,
    list_mappings,
    upsert_mapping,
)
from gate.store.live import known_config
from gate.store.versions import (
    READY,
    find_version_by_number,
    get_version,
    list_versions,
    set_current_version,
    version_labels,
    version_rows,
)
from gate.verdict.bars import Bars

from .boundary import driver_errors_become_gate_errors

# A snapshot that names the content (a file's hash, an ETag): an import with the same one
# would read the same rows. A SQL source's snapshot names its query, not its rows.
log = logging.getLogger("promptgate.datasets")
CONTENT_SNAPSHOTS = ("sha256:", "etag:")
MAX_DIFF_ROWS = 200_000
SOURCE_OPTION_KEYS = (
    "id_column",
    "label_column",
    "base_dir",
    "declared_in",
)  # rows of a pull request's copy of a dataset compared with the stored version


@driver_errors_become_gate_errors
class Datasets:
    """Datasets, their versions and the bars, on one gate database (``engine``), read and
    imported within ``settings``' bounds."""

    def __init__(self, engine: Engine, settings: Settings):
        self.engine = engine
        self.settings = settings
        self.version_indexes = VersionIndexes(settings.diff_cache_bytes)  # what dry runs compare with
        # Set by the HTTP service (``gate.datasets.sources.egress.Egress``, through ``Gate.source_egress``):
        # sources are then read for callers, with no ${VAR} filled in and connections only where the policy allows.
        self.source_egress: Any = None

    # --- registering and refreshing: a version of the rows ---------------------------------

    def register_dataset(
        self,
        name: str,
        source_uri: str,
        *,
        id_column: str | None = None,
        label_column: str | None = None,
        base_dir: str | Path | None = None,
        declared_in: str | None = None,
    ) -> Dataset:
        """Register (or re-point) a dataset and import its rows as its current version. A
        relative file path resolves against ``base_dir`` (the gate config's folder) or the
        current directory; the rows are read now, not when a run needs them.
        ``declared_in``: the gate config (its path in the repository) that declares it, when
        registered by ``sync``; a pull request's changes to its file are shown against it."""
        check_name(name, "dataset name")
        if not source_uri or not str(source_uri).strip():
            raise UsageError("a dataset needs a source URI (a path, file://, https://, s3:// or sql+...)")
        source_uri = absolute_source(str(source_uri).strip(), base_dir)
        options = {
            "id_column": id_column or DEFAULT_ID_COLUMN,
            "label_column": label_column or DEFAULT_LABEL_COLUMN,
            "base_dir": str(Path(base_dir or Path.cwd()).resolve()),
            **({"declared_in": declared_in} if declared_in else {}),
        }
        self._register(name, source_uri, options)
        return self.get_dataset(name)

    def _register(self, name: str, source_uri: str, options: dict, reader=None) -> importer.Imported | None:
        """The dataset registered (or re-pointed) with its rows imported; a dataset whose first
        import failed is not left registered."""
        ds, created = db.transaction(self.engine, lambda conn: ensure_dataset(conn, name, source_uri, options))
        try:
            return self._import(ds, source_uri, options, reader)
        except BaseException:
            if created:
                try:
                    db.transaction(self.engine, lambda conn: delete_dataset(conn, ds.id))
                except Exception as exc:  # (mapped meanwhile): keep the import's error, the useful one
                    log.warning("dataset %s: could not remove it after its import failed: %s", name, first_line(exc))
            raise

    def import_upload(
        self,
        name: str,
        stream: BinaryIO,
        repo_path: str,
        *,
        kind: str | None = None,
        id_column: str | None = None,
        label_column: str | None = None,
        commit: str | None = None,
        declared_in: str | None = None,
    ) -> tuple[Dataset, importer.Imported | None]:
        """Import the rows of an uploaded file (a client's copy of ``repo_path``, an open
        binary stream) as the dataset's version, exactly as a local import of that file: the
        same readers and limits, the same content hash, no new version when nothing changed
        (None then). The dataset is registered (or re-pointed) as ``upload://repo_path``;
        its options say where the rows came from (``upload_path``, ``upload_commit``) and
        which gate config declares it (``declared_in``)."""
        check_name(name, "dataset name")
        repo_path = check_repo_path(repo_path)
        options = {
            "id_column": id_column or DEFAULT_ID_COLUMN,
            "label_column": label_column or DEFAULT_LABEL_COLUMN,
            "upload_path": repo_path,
            **({"upload_commit": commit} if commit else {}),
            **({"declared_in": declared_in} if declared_in else {}),
        }
        reader = UploadReader(stream, repo_path, self._source_options(options), kind)
        imported = self._register(name, upload_uri(repo_path), options, reader)
        return self.get_dataset(name), imported

    def _source_options(self, options: dict) -> SourceOptions:
        """A reader's options from a dataset's (which also say where an upload came from)."""
        return SourceOptions(
            max_row_bytes=self.settings.max_row_bytes,
            page_bytes=self.settings.page_bytes,
            **{k: v for k, v in options.items() if k in SOURCE_OPTION_KEYS},
            expand_env=self.source_egress is None,
            egress=self.source_egress,
        )

    def refresh_dataset(self, name: str) -> tuple[Dataset, Imported | None]:
        """Import the dataset's source again: a new version when its rows changed (a run
        already submitted keeps the version it pinned). None when the source says it has
        not changed since the current version was imported."""
        ds = self.get_dataset(name)
        imported = self._import(ds, ds.source_uri, ds.options)
        return self.get_dataset(name), imported

    def _import(self, ds: Dataset, source_uri: str, options: dict, reader=None) -> importer.Imported | None:
        if reader is None:
            reader = open_source(source_uri, self._source_options(options))
        try:
            if self._unchanged(ds, source_uri, options, reader):
                return None
            imported = importer.import_version(
                self.engine,
                ds.id,
                ds.name,
                source_uri,
                options,
                reader,
                self.settings.page_size,
                self.settings.page_bytes,
                max_row_bytes=self.settings.max_row_bytes,
                max_version_bytes=self.settings.max_version_bytes,
            )
        finally:
            reader.close()
        made_current = db.transaction(
            self.engine,
            lambda conn: set_current_version(
                conn, ds.id, imported.version.id, source_uri, options, seen=ds.current_version_id
            ),
        )
        if not made_current:
            raise DatasetError(
                f"dataset {ds.name} changed while it was being imported (another sync or refresh "
                f"finished first): run `promptgate dataset refresh {ds.name}` again"
            )
        return imported

    def _unchanged(self, ds: Dataset, source_uri: str, options: dict, reader) -> bool:
        """The source says it has not changed since the current version was imported (a
        content snapshot: a file's hash, an ETag). A current version that is not READY any
        more counts as changed, so a refresh repairs it."""
        if ds.current_version_id is None:
            return False
        with self.engine.connect() as conn:
            try:
                current = get_version(conn, ds.current_version_id)
            except NotFound:
                return False
        if current.status != READY:
            return False
        snapshot = reader.snapshot_version()
        return (current.source_uri, _same_rows(current.source_options), current.source_version) == (
            source_uri,
            _same_rows(options),
            snapshot,
        ) and snapshot.startswith(CONTENT_SNAPSHOTS)

    # --- bars --------------------------------------------------------------------------------

    def map_dataset(
        self,
        prompt_name: str,
        dataset_name: str,
        min_accuracy: Any,
        *,
        bars: dict[str, Any] | None = None,
        declared_in: str | None = None,
    ) -> DatasetMapping:
        """Gate ``prompt_name`` on ``dataset_name``: ``min_accuracy`` and the optional
        ``bars`` beyond it (``gate.verdict.bars.EXTRA_KEYS``), validated by ``Bars.parse``. The
        mapping's bars are replaced as a whole: a bar left out is dropped. ``declared_in``:
        the gate config declaring it (a sync's; it manages those), None for the CLI's
        `dataset map` (a sync leaves those alone)."""
        check_name(prompt_name, "prompt name")
        parsed = Bars.parse(min_accuracy, bars)
        extra = parsed.extra()

        def map_it(conn) -> Dataset:
            ds = get_dataset(conn, dataset_name)
            why = bar_refusal(conn, prompt_name, ds.name, parsed)
            if why:
                raise UsageError(why)
            _check_bar_labels(parsed, ds, version_labels(conn, ds.current_version_id) if ds.current_version_id else {})
            upsert_mapping(conn, prompt_name, ds.id, parsed.min_accuracy, extra, declared_in)
            return ds

        ds = db.transaction(self.engine, map_it)
        return DatasetMapping(prompt_name, ds.id, ds.name, parsed.min_accuracy, extra, declared_in)

    def bar_refusal(self, prompt_name: str, dataset_name: str, min_accuracy: Any, bars: dict | None) -> str | None:
        """Why a mapping's bars do not fit its prompt's kind (one line), or None (``sync``'s
        plan asks: ``gate.gateconfig.diff``)."""
        parsed = Bars.parse(min_accuracy, bars)
        return db.read(self.engine, lambda conn: bar_refusal(conn, prompt_name, dataset_name, parsed))

    def unmap_dataset(self, prompt_name: str, dataset_name: str) -> bool:
        def unmap(conn) -> bool:
            return delete_mapping(conn, prompt_name, get_dataset(conn, dataset_name).id)

        return db.transaction(self.engine, unmap)

    def list_datasets(self) -> list[tuple[Dataset, list[DatasetMapping]]]:
        with self.engine.connect() as conn:
            mappings = list_mappings(conn)
            return [(ds, [m for m in mappings if m.dataset_id == ds.id]) for ds in list_datasets(conn)]

    def mappings(self, prompt_name: str | None = None) -> list[DatasetMapping]:
        with self.engine.connect() as conn:
            return list_mappings(conn, prompt_name)

    def get_dataset(self, name: str) -> Dataset:
        with self.engine.connect() as conn:
            return get_dataset(conn, name)

    # --- versions --------------------------------------------------------------------------

    def dataset_versions(self, name: str) -> tuple[Dataset, list[DatasetVersion]]:
        """The dataset and its versions, newest first."""
        with self.engine.connect() as conn:
            ds = get_dataset(conn, name)
            return ds, list_versions(conn, ds.id)

    def dataset_version(self, name: str, version: int | str | None = None) -> DatasetVersion:
        """A version of the dataset: the current one when ``version`` is None, else as
        ``version_ref`` reads it ("v3": its third version; 12 or "12": the version with
        global id 12, as accepted before versions had numbers)."""
        ref = version_ref(version)
        with self.engine.connect() as conn:
            ds = get_dataset(conn, name)
            found: DatasetVersion | None
            if ref is None:
                if ds.current_version_id is None:
                    raise NotFound(f"dataset {name} has no version: import it with `promptgate dataset refresh {name}`")
                found = get_version(conn, ds.current_version_id)
            elif ref[0] == "number":
                found = find_version_by_number(conn, ds.id, ref[1])
                if found is None:
                    raise NotFound(f"dataset {name} has no version v{ref[1]}")
            else:
                found = get_version(conn, ref[1])
        if found.dataset_id != ds.id or found.status != READY:
            raise NotFound(f"dataset {name} has no version with id {found.id}")
        return found

    def preview_dataset(self, name: str, rows: int = 10, version: int | str | None = None) -> DatasetPreview:
        """A stored version's first rows, row count and label counts."""
        found = self.dataset_version(name, version)
        with self.engine.connect() as conn:
            return DatasetPreview(found, version_rows(conn, found.id, -1, max(0, rows)))

    def diff_versions(self, name: str, old: int | str, new: int | str) -> DataDiff:
        """How version ``new`` of the dataset differs from version ``old``."""
        base, proposed = self.dataset_version(name, old), self.dataset_version(name, new)
        return importer.diff_ordered(
            importer.version_keys(self.engine, base.id), importer.version_keys(self.engine, proposed.id)
        )

    def diff_source(self, name: str, source_uri: str, options: dict) -> importer.DataDiff:
        """How the rows of ``source_uri`` (a pull request's copy of the dataset) differ from
        the dataset's current version. Nothing is stored."""
        self.dataset_version(name)  # one to compare with, before the file is opened
        if scheme_of(source_uri) != "file":
            raise DatasetError(f"dataset {name}: only local files are compared in a pull request")
        settings = self.settings
        options_read = SourceOptions(max_row_bytes=settings.max_row_bytes, page_bytes=settings.page_bytes, **options)
        reader = open_source(source_uri, options_read)
        try:
            return self._diff_current(name, self._proposed_rows(name, reader))
        finally:
            reader.close()

    def check_upload(self, name: str, repo_path: str, kind: str | None = None, dry_run: bool = False) -> Dataset | None:
        """What an upload names, checked before a byte of it is read: the dataset's name,
        the file's repository path and format and, for a dry run (a pull request's), that a
        gate config declares the dataset from that very path, never one registered from
        elsewhere (a private holdout). The dataset a dry run compares with, or None."""
        check_name(name, "dataset name")
        repo_path = check_repo_path(repo_path)
        text_kind(repo_path, repo_path, kind)
        if not dry_run:
            return None
        ds = self.get_dataset(name)
        if registered_repo_path(ds) != repo_path:
            raise DatasetError(
                f"dataset {name} is not registered from {repo_path} by a gate config: a pull request "
                "compares only the dataset files its gate config declares"
            )
        return ds

    def diff_upload(self, name: str, stream: BinaryIO, repo_path: str, kind: str | None = None) -> importer.DataDiff:
        """How an uploaded copy of a dataset's file (a pull request's) differs from the
        dataset's current version (the dataset as ``check_upload`` allows). Nothing is stored."""
        ds = self.check_upload(name, repo_path, kind, dry_run=True)
        assert ds is not None  # a dry run's check answers the dataset it compares with
        reader = UploadReader(stream, repo_path, self._source_options(ds.options), kind)
        return self._diff_current(name, self._proposed_rows(name, reader))

    def _diff_current(self, name: str, rows) -> importer.DataDiff:
        """``rows`` (a copy's) against the dataset's current version: its keys as kept in
        memory (``version_index``; read from the database once), or, for a version too big
        to keep, streamed from there."""
        current = self.dataset_version(name)
        index = self.version_indexes.index_of(current, lambda: importer.version_keys(self.engine, current.id))
        if index is None:
            return importer.diff_against(self.engine, current.id, rows, MAX_DIFF_ROWS)
        return diff_against_index(index, rows, MAX_DIFF_ROWS)

    def _proposed_rows(self, name: str, reader):
        """A proposed copy's rows for ``importer.diff_against``, read within the bounds an
        import of them would meet (a dry run reads no more than it would store)."""
        s = self.settings
        stored = importer.StoredBytes(name, s.max_version_bytes)
        return importer.source_rows(reader, s.page_size, s.page_bytes, s.max_row_bytes, stored)


def _same_rows(options: dict | None) -> dict:
    """A source's options less the commit an upload came from: the same file's bytes at
    another commit are the same rows."""
    return {k: v for k, v in (options or {}).items() if k != "upload_commit"}


def registered_repo_path(ds: Dataset) -> str | None:
    """The repository path of the file a dataset declared in a gate config was registered
    from: an upload's path, or a synced file's place below the config's folder. None for
    any other dataset."""
    declared_in, options = ds.options.get("declared_in"), ds.options
    if not declared_in:
        return None
    if scheme_of(ds.source_uri) == UPLOAD_SCHEME:
        return options.get("upload_path")
    base = options.get("base_dir")
    if scheme_of(ds.source_uri) != "file" or not base:
        return None
    try:
        relative = Path(resolve_path(ds.source_uri, base)).relative_to(base)
    except ValueError:
        return None
    return posixpath.normpath(posixpath.join(posixpath.dirname(declared_in), relative.as_posix()))


def bar_refusal(conn, prompt_name: str, dataset_name: str, bars: Bars) -> str | None:
    """One line naming a bar the prompt's kind cannot compute (``gate.kinds.bar_fit``), the
    kind read from the config the gate knows (its live version's, else its latest
    submission's); None when every bar fits or the prompt was never submitted (submit
    checks it then)."""
    from gate.kinds import kind_of
    from gate.kinds.bar_fit import refusal
    from gate.prompt.spec import parse_spec

    config = known_config(conn, prompt_name)
    if config is None:
        return None
    try:
        kind = kind_of(parse_spec(config).decision)
    except (SpecError, UsageError):  # a config this code cannot read: its submit says why
        return None
    return refusal(prompt_name, dataset_name, kind, bars)


def _check_bar_labels(bars: Bars, ds: Dataset, labels: TMapping[str, int]) -> None:
    """A per-label bar names a label the dataset has (compared case-insensitively, as
    answers are): a typo would otherwise leave the bar n/a for ever."""
    have = {label.casefold() for label in labels}
    for name, per_label in (("min_recall", bars.min_recall), ("min_precision", bars.min_precision)):
        unknown = sorted(label for label in per_label if label.casefold() not in have)
        if unknown and have:
            raise UsageError(
                f"{name}: dataset {ds.name} has no item labelled {unknown[0][:60]!r} "
                f"(its labels: {', '.join(sorted(labels)[:20])})"
            )


MAX_VERSION_ID = 2**63 - 1  # BIGINT: a larger id names no version (a 404, not a database error)
MAX_VERSION_NUMBER = 2**31 - 1  # INT


def _in_range(number: int, high: int, prefix: str = "") -> int:
    if not 1 <= number <= high:
        raise NotFound(f"no dataset version {prefix}{number}"[:120])
    return number


def version_ref(value: int | str | None) -> tuple[str, int] | None:
    """A dataset version as a caller names it: None (the current one); "v3" (number 3 in
    its dataset, as every output shows it); an integer or its digits (the version's global
    id, as accepted before versions were numbered). Nothing else."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return ("id", _in_range(value, MAX_VERSION_ID))
    text = str(value).strip()
    numbered = re.fullmatch(r"[vV]([0-9]{1,40})", text)
    if numbered:
        return ("number", _in_range(int(numbered.group(1)), MAX_VERSION_NUMBER, "v"))
    if re.fullmatch(r"[0-9]{1,40}", text):
        return ("id", _in_range(int(text), MAX_VERSION_ID))
    raise UsageError(f"version {text[:40]!r}: give v3 (the dataset's third version) or a version id (12)")
