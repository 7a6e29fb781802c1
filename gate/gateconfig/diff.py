"""``diff``: what a sync of a gate config would change, without changing anything (a pull
request shows it as "takes effect after merge"), with the rows of the dataset files a pull
request changes compared with the gate's versions."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.calls.prices import price_changes
from gate.calls.providers import ProviderDecl, display_url
from gate.calls.spend_caps import limit_changes
from gate.datasets.readability import repository_holds
from gate.datasets.sources import DEFAULT_ID_COLUMN, DEFAULT_LABEL_COLUMN, resolve_path, scheme_of, shown_source
from gate.datasets.sources.upload import UPLOAD_SCHEME
from gate.errors import DatasetError, UsageError
from gate.rollout.rule import RolloutConfig
from gate.verdict.bars import Bars

from .changes import Change, SyncResult, redact, rows_change
from .parse import BarDecl, GateConfig, load_config

if TYPE_CHECKING:  # the database's Gate: only its annotations here, so a sync
    from gate.domain import Gate  # through the service (gateconfig.remote) never loads SQLAlchemy


def as_config(source: str | Path | GateConfig) -> GateConfig:
    return source if isinstance(source, GateConfig) else load_config(source)


def _fmt_bar(bar: Decimal) -> str:
    return format(Decimal(bar).normalize(), "f")


def _fmt_bars(min_accuracy: Decimal, extra: dict | None) -> str:
    """A mapping's bars as a plan shows them: "0.9" when accuracy is its only bar (as
    before the other bars existed), else e.g. "0.9, max broken 0"."""
    return ", ".join([_fmt_bar(min_accuracy), *Bars.parse(min_accuracy, extra).describe()])


def _same_bars(have, want: BarDecl) -> bool:
    """Compared as values: 0.90 and 0.9, or a stored "0.10" and a declared 0.1, are the same."""
    return Bars.parse(have.min_accuracy, have.bars) == Bars.parse(want.min_accuracy, want.bars)


def diff(
    gate: Gate,
    config: str | Path | GateConfig,
    changed_files: Iterable[str | Path] = (),
    may_read: Callable[[Any], bool] | None = None,
) -> SyncResult:
    """What ``sync`` would change, without changing anything. ``changed_files`` (absolute
    paths a pull request changes): a declared dataset whose file is among them is read
    from there and its rows compared with the gate's version (dataset-rows). ``may_read``: may
    the caller read a dataset version (a judge's figures on a holdout are named for admin only)."""
    cfg = as_config(config)
    registered = {ds.name: (ds, maps) for ds, maps in gate.list_datasets()}
    changes = (
        _provider_changes(gate, cfg)
        + [Change(*c) for c in price_changes(gate.prices(), cfg.prices)]
        + [Change(*c) for c in limit_changes(gate.limits(), cfg.limits.rows())]
        + _dataset_changes(registered, cfg)
        + _bar_changes(gate, cfg)
        + _optional_field_changes(gate, cfg)
        + _rollout_changes(gate, cfg)
        + _undeclared_datasets(registered, cfg)
        + _row_changes(gate, cfg, registered, changed_files)
        + _judges_below_floors(gate, cfg, may_read)
    )
    return SyncResult(cfg.path, tuple(changes), applied=False)


def _row_changes(gate: Gate, cfg: GateConfig, registered: dict, changed_files: Iterable[str | Path]) -> list[Change]:
    """How the rows of each dataset file a pull request changes differ from the gate's
    current version of that dataset. Only shown: the run uses the gate's version.

    Which file, and read how, comes from the gate, never from the pull request's config: a
    dataset synced from a gate config (``declared_in``: repository data) whose registered
    source is a file below that config's folder is compared with the file at the same place
    below this config's folder in the pull request's checkout, with the registered columns,
    and only a regular file there (no symbolic link on the way) is read. A pull request cannot aim the comparison at a
    file outside its checkout, nor at the stored rows of a dataset the repository does not
    hold (a private holdout registered from elsewhere)."""
    changed = {_real_folder(Path(p)) for p in changed_files}
    changes = []
    for name, (ds, _) in sorted(registered.items()):
        proposed = _proposed_copy(ds, cfg)
        if proposed is None or _real_folder(proposed) not in changed:
            continue
        assert cfg.base_dir is not None  # _proposed_copy finds no copy without it
        _refuse_links(proposed, Path(cfg.base_dir))
        options = {k: ds.options[k] for k in ("id_column", "label_column") if k in ds.options}
        rows = gate.diff_source(name, str(proposed), options)
        if rows.any:
            changes.append(rows_change(name, gate.dataset_version(name).label, rows))
    return changes


def _proposed_copy(ds, cfg: GateConfig) -> Path | None:
    """Where the pull request's copy of a registered dataset's file is, or None when the
    dataset is not a file synced by a gate config from below its folder."""
    base = ds.options.get("base_dir")
    if not ds.options.get("declared_in") or not base or not cfg.base_dir or scheme_of(ds.source_uri) != "file":
        return None
    registered = Path(resolve_path(ds.source_uri, base))
    try:
        relative = registered.relative_to(base)
    except ValueError:
        return None
    return (Path(cfg.base_dir) / relative).absolute()


def _real_folder(path: Path) -> str:
    """The path with its folder's links resolved but not the file's own (so a linked file
    is still seen, and refused, as a link)."""
    return str(path.absolute().parent.resolve() / path.name)


def _refuse_links(path: Path, base: Path) -> None:
    """Every step from the config's folder down to ``path`` is a real directory or file."""
    step = path
    while step != base and base in step.parents:
        if step.is_symlink():
            raise DatasetError(
                f"{path.relative_to(base)}: a symbolic link; a dataset file is compared only as a "
                "regular file in the checkout"
            )
        step = step.parent
    if not path.is_file():
        raise DatasetError(f"{path.relative_to(base)}: not a regular file")


def _provider_changes(gate: Gate, cfg: GateConfig) -> list[Change]:
    registered = gate.providers()
    changes = []
    for name, decl in sorted(cfg.providers.items()):
        have = registered.get(name)
        if have is None:
            changes.append(Change("provider-added", name, None, _describe_provider(decl), (name,)))
        elif have != decl:
            changes.append(
                Change("provider-changed", name, _describe_provider(have), _describe_provider(decl), (name,))
            )
    for name in sorted(registered.keys() - cfg.providers.keys()):
        changes.append(Change("provider-removed", name, _describe_provider(registered[name]), None, (name,)))
    return changes + _pinned_live(gate, cfg, [c.subject for c in changes])


def _pinned_live(gate: Gate, cfg: GateConfig, changed: list[str]) -> list[Change]:
    """For each provider the file changes (or adds back, or removes): the live prompts
    pinned to another declaration of it. Production keeps calling the declaration a live
    version was evaluated with (``gate.runtime``) until an update applies the prompt again
    through the gate; the plan says so, so nobody expects the sync to move their calls."""
    if not changed:
        return []
    pinned = [(prompt, ProviderDecl.from_dict(decl)) for prompt, decl in sorted(gate.live_providers().items()) if decl]
    notes = []
    for name in changed:
        kept = [
            f"{prompt} at {display_url(decl.base_url)}"
            for prompt, decl in pinned
            if decl.name == name and decl != cfg.providers.get(name)
        ]
        if kept:
            notes.append(Change("provider-pinned", name, None, ", ".join(kept), (name,)))
    return notes


def _judges_below_floors(gate: Gate, cfg: GateConfig, may_read=None) -> list[Change]:
    """The live judges below the floors the file's bars (or the gate's, for the mappings it
    does not declare) set: a warning each, in one line (issue 46.2)."""
    declared = {(b.prompt, b.dataset): Bars.parse(b.min_accuracy, b.bars) for b in cfg.bars}
    return [
        Change("judge-below-floors", name, None, why, (name,))
        for name, why in gate.judges_below_floors(declared, may_read)
    ]


def _describe_provider(decl: ProviderDecl) -> str:
    text = f"{decl.base_url} (key {decl.api_key_env or 'none'}"
    return text + (f", models {', '.join(decl.models)})" if decl.models else ")")


def _dataset_changes(registered: dict, cfg: GateConfig) -> list[Change]:
    changes = []
    for name, decl in sorted(cfg.datasets.items()):
        found = registered.get(name)
        if found is None:
            changes.append(Change("dataset-added", name, None, redact(decl.source), (name,)))
            continue
        ds = found[0]
        want = (decl.source_uri, decl.id_column, decl.label_column)
        have = (
            ds.source_uri,
            ds.options.get("id_column", DEFAULT_ID_COLUMN),
            ds.options.get("label_column", DEFAULT_LABEL_COLUMN),
        )
        if want != have:  # what is registered, as a reader sees it: a pull request's plan shows it
            shown = (shown_source(ds.source_uri), *have[1:])
            changes.append(Change("dataset-changed", name, _describe(*shown), _describe(*want), (name,)))
            if _publishes(ds, decl):
                changes.append(Change("dataset-published", name, None, redact(decl.source), (name,)))
    return changes


def _publishes(ds, decl) -> bool:
    """Would registering ``decl`` point a holdout (rows the operator registered from outside
    the repository) at a repository's file, whose versions every token reads
    (``gate.datasets.readability``)?"""
    return not repository_holds(ds.source_uri, ds.options) and scheme_of(decl.source_uri) in ("file", UPLOAD_SCHEME)


def _undeclared_datasets(registered: dict, cfg: GateConfig) -> list[Change]:
    """Registered datasets the file no longer declares that still gate something: after a
    sync they gate nothing."""
    return [
        Change("dataset-undeclared", name, key=(name,))
        for name in sorted(registered.keys() - cfg.datasets.keys())
        if registered[name][1]
    ]


def _bar_changes(gate: Gate, cfg: GateConfig) -> list[Change]:
    declared = {(b.prompt, b.dataset): b for b in cfg.bars}
    current = {(m.prompt_name, m.dataset_name): m for m in gate.mappings()}
    changes = []
    for key in sorted(declared.keys() | current.keys()):
        subject = f"{key[0]} × {key[1]}"
        want, have = declared.get(key), current.get(key)
        if want is not None and (have is None or not _same_bars(have, want)):
            _refuse_unfit(gate, key, want)
        elif have is not None:
            changes += _unfit(gate, key, subject, have)
        if have is None:
            assert want is not None  # the key is declared, registered, or both
            changes.append(Change("bar-added", subject, None, _fmt_bars(want.min_accuracy, want.bars), key))
        elif want is None and have.declared_in is None:  # the CLI's (`dataset map`): not the file's to remove
            continue
        elif want is None:
            changes.append(Change("bar-removed", subject, _fmt_bars(have.min_accuracy, have.bars), None, key))
        elif not _same_bars(have, want):
            changes.append(
                Change(
                    "bar-changed",
                    subject,
                    _fmt_bars(have.min_accuracy, have.bars),
                    _fmt_bars(want.min_accuracy, want.bars),
                    key,
                )
            )
    return changes


def _refuse_unfit(gate: Gate, key: tuple[str, str], want: BarDecl) -> None:
    """A declared mapping, new or changed, with a bar its prompt's kind cannot compute: the
    whole sync (and its dry run) refused in one line, before anything changes."""
    why = gate.bar_refusal(key[0], key[1], want.min_accuracy, want.bars)
    if why:
        raise UsageError(why)


def _unfit(gate: Gate, key: tuple[str, str], subject: str, have) -> list[Change]:
    """A mapping the gate holds already with a bar its prompt's kind cannot compute: said in
    one line (``bar-unfit``, not a change); its prompt's submit is refused until it goes."""
    why = gate.bar_refusal(key[0], key[1], have.min_accuracy, have.bars)
    return [Change("bar-unfit", subject, None, why, key)] if why else []


def _optional_field_changes(gate: Gate, cfg: GateConfig) -> list[Change]:
    """Prompts whose optional fields the file declares otherwise than the gate has them
    (a prompt the file does not list has none)."""
    have = {p: tuple(sorted(f)) for p, f in gate.optional_fields().items()}
    want = cfg.optional_fields
    return [
        Change(
            "optional-fields", prompt, _describe_fields(have.get(prompt)), _describe_fields(want.get(prompt)), (prompt,)
        )
        for prompt in sorted(have.keys() | want.keys())
        if have.get(prompt, ()) != want.get(prompt, ())
    ]


def _rollout_changes(gate: Gate, cfg: GateConfig) -> list[Change]:
    """Prompts whose canary rollout the file declares otherwise than the gate has it (a
    prompt the file does not list goes live at 100 %)."""
    have = {p: RolloutConfig.from_json(c) for p, c in gate.rollout_settings().items()}
    want = cfg.rollouts
    return [
        Change("rollout", prompt, _describe_rollout(have.get(prompt)), _describe_rollout(want.get(prompt)), (prompt,))
        for prompt in sorted(have.keys() | want.keys())
        if have.get(prompt) != want.get(prompt)
    ]


def _describe_rollout(config: RolloutConfig | None) -> str:
    return config.describe() if config else "none (live at 100 %)"


def _describe_fields(fields) -> str:
    return ", ".join(fields) if fields else "none"


def _describe(uri: str, id_column: str, label_column: str) -> str:
    text = redact(uri)
    if (id_column, label_column) != (DEFAULT_ID_COLUMN, DEFAULT_LABEL_COLUMN):
        text += f" (id {id_column}, label {label_column})"
    return text
