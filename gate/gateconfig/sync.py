"""``sync``: make the gate's providers, prices, limits, datasets and bars match a gate config (the
package docstring says how)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gate.calls.prices import apply_price_change
from gate.datasets.sources import DEFAULT_ID_COLUMN, DEFAULT_LABEL_COLUMN, scheme_of
from gate.datasets.sources.upload import UPLOAD_SCHEME
from gate.errors import UsageError
from gate.verdict.bars import Bars
from gate.verdict.item_policy import COMMIT_RE

from .changes import Change, SyncResult
from .diff import as_config, diff
from .parse import GateConfig

if TYPE_CHECKING:  # the database's Gate: only its annotations here, so a sync
    from gate.domain import Gate  # through the service (gateconfig.remote) never loads SQLAlchemy


def sync(gate: Gate, config: str | Path | GateConfig, commit: str | None = None) -> SyncResult:
    """Make the gate's providers, prices, datasets and bars match the file (see the module
    docstring): register declared providers and datasets (importing their rows), import
    the rows of the others again (a new version when they changed), map declared bars,
    remove undeclared providers and unmap every mapping a gate config declared that the
    file no longer declares, including those of prompts the file does not list (a mapping
    the CLI added, `dataset map`, is left alone: ``diff`` lists it as kept). Idempotent. ``commit``: the
    commit the file was read at (full hex id), recorded with each break the file newly
    accepts (``accept_breaks``)."""
    commit = check_commit(commit)
    cfg = as_config(config)
    planned = diff(gate, cfg)
    planned = SyncResult(planned.path, planned.changes + tuple(_refresh(gate, cfg, planned)))
    bars = {(b.prompt, b.dataset): b for b in cfg.bars}
    for change in planned.changes:
        if change.kind in ("provider-added", "provider-changed"):
            gate.register_provider(cfg.providers[change.key[0]])
        elif change.kind == "provider-removed":
            gate.remove_provider(change.key[0])
        elif change.kind.startswith("price-"):
            apply_price_change(gate, change.kind, change.key[0], cfg.prices)
        elif change.kind == "limit-removed":
            gate.remove_limit(change.key[0])
        elif change.kind.startswith("limit-"):
            gate.set_limit(change.key[0], cfg.limits.rows()[change.key[0]])
    for change in planned.changes:
        if change.kind in ("dataset-added", "dataset-changed"):
            decl = cfg.datasets[change.key[0]]
            gate.register_dataset(
                decl.name,
                decl.source,
                id_column=decl.id_column,
                label_column=decl.label_column,
                base_dir=decl.base_dir,
                declared_in=cfg.path,
            )
    mapped = (
        {(m.prompt_name, m.dataset_name): m for m in gate.mappings()}
        if any(c.kind == "bar-changed" for c in planned.changes)
        else {}
    )
    for change in planned.changes:
        if change.kind in ("bar-added", "bar-changed"):
            prompt_name, dataset_name = change.key  # a bar's change: (prompt, dataset)
            bar = bars[(prompt_name, dataset_name)]
            gate.map_dataset(
                prompt_name,
                dataset_name,
                bar.min_accuracy,
                bars=_stamped(bar, mapped.get((prompt_name, dataset_name)), commit),
                declared_in=cfg.path,
            )
        elif change.kind == "bar-removed":
            gate.unmap_dataset(*change.key)
        elif change.kind == "optional-fields":
            gate.set_optional_fields(change.key[0], list(cfg.optional_fields.get(change.key[0], ())))
        elif change.kind == "rollout":
            declared = cfg.rollouts.get(change.key[0])
            gate.set_rollout(change.key[0], declared.to_json() if declared else None)
    return SyncResult(planned.path, planned.changes, applied=True)


def check_commit(commit: str | None) -> str | None:
    """A commit's full hex id (lower case), or None; anything else is a UsageError."""
    if commit in (None, ""):
        return None
    text = str(commit).strip().lower()
    if not COMMIT_RE.fullmatch(text):
        raise UsageError(f"commit {str(commit)[:80]!r} is not a full commit id: use its 40 or 64 hex characters")
    return text


def _stamped(bar, before, commit: str | None) -> dict | None:
    """The declared bars with each accepted break's commit: the one recorded before for the
    same item and reason, else this sync's. A pull request's config is only diffed, so only
    the default branch accepts a break."""
    if not bar.bars or "accept_breaks" not in bar.bars:
        return bar.bars
    previous = Bars.parse(before.min_accuracy, before.bars).policy if before is not None else None
    policy = Bars.parse(bar.min_accuracy, bar.bars).policy.stamped(previous, commit)
    return {**bar.bars, **policy.to_json()}


def _refresh(gate: Gate, cfg: GateConfig, planned: SyncResult) -> list[Change]:
    """Import again the declared datasets the plan does not register anyway: a changed
    file (or remote source) becomes a new version."""
    registering = {c.key[0] for c in planned.changes if c.kind in ("dataset-added", "dataset-changed")}
    changes = []
    for name in sorted(set(cfg.datasets) - registering - set(_uploaded(cfg))):
        current = gate.get_dataset(name).current_version_id
        before = gate.dataset_version(name).label if current is not None else "none"
        _, imported = gate.refresh_dataset(name)
        if imported is not None and imported.version.id != current:
            v = imported.version
            changes.append(Change("dataset-version", name, before, f"{v.label} ({v.row_count} rows)", (name,)))
    return changes


def _uploaded(cfg: GateConfig) -> list[str]:
    """The declared datasets whose rows a client uploads (``upload://``): their versions
    come with the uploads, never from a refresh."""
    return [name for name, decl in cfg.datasets.items() if scheme_of(decl.source_uri) == UPLOAD_SCHEME]


def uploads_missing(gate: Gate, cfg: GateConfig) -> list[str]:
    """The uploaded datasets of ``cfg`` the gate does not hold as declared (source and
    columns): a sync must not go ahead without their rows."""
    registered = {ds.name: ds for ds, _ in gate.list_datasets()}
    missing = []
    for name in sorted(_uploaded(cfg)):
        decl, ds = cfg.datasets[name], registered.get(name)
        if ds is None or (
            ds.source_uri,
            ds.options.get("id_column", DEFAULT_ID_COLUMN),
            ds.options.get("label_column", DEFAULT_LABEL_COLUMN),
        ) != (decl.source_uri, decl.id_column, decl.label_column):
            missing.append(name)
    return missing
