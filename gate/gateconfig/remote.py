"""A gate config synced, or diffed, through the gate's service (``RemoteGate``): the
service reads the remote sources (https, s3, sql) itself, and the client sends the rows of
the file datasets, which only it has (its checkout).

A sync uploads each file dataset first (``PUT /v1/datasets/{name}/rows``: one version,
whole or absent, made current; nothing new when its rows are unchanged), then asks the
service to sync the config with those datasets marked as uploaded (``files``): the
service checks that each is there as declared, then changes the bars, providers and
prices. A failure half-way leaves each dataset either at its old version or at its new one
and the bars untouched; the next sync uploads again (no new version for rows already
there) and completes it.

A pull request's dry run compares the rows of each dataset file it changes with the
gate's version: which files, and which dataset each is compared with, come from the gate
(a dataset a gate config declared from that repository path), never from the pull
request's config; the service refuses any other comparison."""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

from gate.datasets.sources import scheme_of
from gate.datasets.sources.upload import repo_path_of
from gate.errors import UsageError

from .changes import Change, SyncResult, rows_change
from .parse import DatasetDecl, GateConfig


def file_datasets(cfg: GateConfig, config_path: str) -> dict[str, tuple[DatasetDecl, str]]:
    """The config's file datasets: name → (declaration, the file's repository path), the
    config being at ``config_path`` in the repository."""
    found = {}
    for name, decl in sorted(cfg.datasets.items()):
        if scheme_of(decl.source) == "file":
            repo_path = repo_path_of(config_path, decl.source)
            _below(decl.source_uri, cfg.base_dir, repo_path)
            found[name] = (decl, repo_path)
    return found


def _below(file: str, base_dir: str | None, repo_path: str) -> None:
    """The file, its links resolved, is below the config's folder (what it uploads is the
    repository's file, not one a link points at elsewhere)."""
    if base_dir is None:
        return
    base = Path(base_dir).resolve()
    if base not in Path(file).resolve().parents:
        raise UsageError(f"{repo_path}: resolves outside the gate config's folder (a symbolic link?): not uploaded")


def sync_remote(
    gate,
    cfg: GateConfig,
    text: str,
    *,
    dry_run: bool = False,
    commit: str | None = None,
    config_path: str | None = None,
) -> SyncResult:
    """``gateconfig.sync`` (or ``diff``) of ``cfg`` (whose YAML is ``text``) through the
    service, the file datasets' rows uploaded from this machine (see the module docstring).
    ``config_path``: the config's path in the repository (default ``cfg.path``), which the
    uploads are recorded under; the result names the file as ``cfg.path``."""
    repo_config = config_path or cfg.path
    files = file_datasets(cfg, repo_config)
    if dry_run:
        planned = gate.sync_config(text, repo_config, True, files=sorted(files))
        return SyncResult(cfg.path, planned.changes, applied=planned.applied)
    before = {ds.name: ds.current_version_id for ds, _ in gate.list_datasets()}
    labels = {name: gate.dataset_version(name).label for name, current in before.items() if current is not None}
    uploaded = []
    for name, (decl, repo_path) in files.items():
        _, imported = gate.upload_rows(
            name,
            decl.source_uri,
            repo_path,
            id_column=decl.id_column,
            label_column=decl.label_column,
            commit=commit,
            declared_in=repo_config,
        )
        if name not in before:
            uploaded.append(Change("dataset-added", name, None, f"upload of {repo_path}", (name,)))
        elif imported is not None and imported.version.id != before[name]:
            v = imported.version
            uploaded.append(
                Change("dataset-version", name, labels.get(name, "none"), f"{v.label} ({v.row_count} rows)", (name,))
            )
    result = gate.sync_config(text, repo_config, False, files=sorted(files), commit=commit)
    return SyncResult(cfg.path, tuple(uploaded) + result.changes, applied=True)


def row_changes_remote(gate, changed: Collection[str], locate: Callable[[str], Path]) -> list[Change]:
    """How the rows of the dataset files a pull request changes (their repository paths;
    ``locate`` gives a path's copy in the checkout) differ from the gate's versions,
    compared by the service without storing anything. Only datasets a gate config declared
    from that path are compared."""
    changes = []
    for ds, _ in sorted(gate.list_datasets(), key=lambda pair: pair[0].name):
        path = ds.options.get("upload_path")
        if not ds.options.get("declared_in") or path not in changed:
            continue
        rows = gate.diff_upload(ds.name, locate(path), path)
        if rows.any:
            changes.append(rows_change(ds.name, gate.dataset_version(ds.name).label, rows))
    return changes
