"""The gate config: one YAML file that declares the datasets and the bars of every gated
prompt, kept in the prompts' repository and synced into the gate from the default branch.

::

    # gate.yaml (sources are relative to this file's folder)
    providers:                     # optional: where prompts that name one send their calls
      azure-east: {base_url: "https://east.example/openai/v1", api_key_env: AZURE_EAST_KEY}
    prices: {gpt-4o-mini: {input: 0.15, output: 0.60}}   # optional: USD per 1M tokens (gate.prices)
    datasets:
      urgency-regression: {source: datasets/urgency-regression.csv}
      urgency-hard: {source: datasets/urgency-hard.jsonl, id_column: id, label_column: label}
    prompts:
      ticket-urgency:
        - {dataset: urgency-regression, min_accuracy: 0.90}
        - {dataset: urgency-hard, min_accuracy: 0.80, max_broken: 0, min_recall: {urgent: 0.9}}

``load_config`` validates the file (every problem is a SpecError naming the file, the field
and the reason; nothing touches the database). ``diff`` says what a sync would change
without changing anything (a pull request shows it as "takes effect after merge").
``sync`` makes the gate match the file:

* every declared dataset is registered (or re-pointed when its source or columns changed);
  relative file sources resolve against the config file's folder;
* every declared bar is mapped (or its bars changed). Besides ``min_accuracy`` an entry may
  carry ``max_broken``, ``min_recall`` / ``min_precision`` (label → fraction),
  ``max_latency_p95_ms`` and ``max_cost_per_1k_items`` (see ``gate.bars``); a bar left out
  of the entry is dropped from the mapping;
* **the file is the whole truth for the gate's bars**: every mapping the file does not
  declare is unmapped, including every mapping of a prompt the file does not list at all
  (such a prompt is no longer gated, and a submission of it is refused until a bar is
  declared again);
* datasets the file no longer declares stay registered (past runs refer to them) but no
  prompt is gated on them any more; ``diff`` lists them so nobody is surprised;
* every declared provider is registered (or changed), and a registered provider the file
  no longer declares is removed: prompts that name it are refused at submit. Providers
  say where model calls go and which key variable they carry, which is why they live
  here, on the default branch, and never in a prompt file (see ``gate.providers``). Prices
  likewise: every declared one is set (or changed), an undeclared one removed.

Sync is idempotent: a second sync of the same file changes nothing and reports nothing.
It calls the service API one step at a time after the whole file has been validated, so
a database error half-way leaves a partial sync that the next sync completes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable, Mapping as TMapping


from .bars import EXTRA_KEYS, Bars
from .errors import DatasetError, SpecError, UsageError
from .models import Price
from .prices import CHANGE_TEXT as PRICE_TEXT, apply_price_change, parse_prices, price_changes
from .providers import ProviderDecl, parse_decl
from .service import Gate, parse_bar
from .sources import DEFAULT_ID_COLUMN, DEFAULT_LABEL_COLUMN, absolute_source, resolve_path, scheme_of
from .spec import check_name
from .yamlfile import parse_yaml, read_text_file

TOP_FIELDS = ("providers", "prices", "datasets", "prompts")
DATASET_FIELDS = ("source", "id_column", "label_column")
BAR_FIELDS = ("dataset", "min_accuracy", *EXTRA_KEYS)


@dataclass(frozen=True)
class DatasetDecl:
    name: str
    source: str                 # as written in the file
    source_uri: str             # resolved (absolute path for a local file)
    id_column: str = DEFAULT_ID_COLUMN
    label_column: str = DEFAULT_LABEL_COLUMN
    base_dir: str | None = None  # the config file's folder


@dataclass(frozen=True)
class BarDecl:
    prompt: str
    dataset: str
    min_accuracy: Decimal
    bars: dict | None = field(default=None, hash=False)    # the bars beyond min_accuracy (Bars.extra)


@dataclass(frozen=True)
class GateConfig:
    path: str
    datasets: dict[str, DatasetDecl]
    bars: tuple[BarDecl, ...]
    providers: dict[str, ProviderDecl] = field(default_factory=dict)
    base_dir: str | None = None          # the file's folder: relative sources resolve here
    prices: dict[str, Price] = field(default_factory=dict)

    @property
    def prompts(self) -> list[str]:
        return sorted({b.prompt for b in self.bars})


CHANGE_TEXT = {
    "dataset-added": "dataset {subject}: new, source {after}",
    "dataset-changed": "dataset {subject}: {before} → {after}",
    "dataset-undeclared": "dataset {subject}: no longer declared (stays registered, gates nothing)",
    "bar-added": "bar {subject}: new, min accuracy {after}",
    "bar-changed": "bar {subject}: min accuracy {before} → {after}",
    "bar-removed": "bar {subject}: removed (was {before})",
    "provider-added": "provider {subject}: new, {after}",
    "provider-changed": "provider {subject}: {before} → {after}",
    "provider-removed": "provider {subject}: removed (was {before})",
    "dataset-rows": "dataset {subject}: {after} against the gate's version {before}",
    "dataset-version": "dataset {subject}: new version {after} (was {before})", **PRICE_TEXT,
}


@dataclass(frozen=True)
class Change:
    """One difference between the file and the gate. ``kind`` is one of dataset-added,
    dataset-changed, dataset-undeclared, bar-added, bar-changed, bar-removed,
    provider-added, provider-changed, provider-removed, price-added, price-changed,
    price-removed; dataset-rows (a pull request changes a dataset's file: its rows against
    the gate's version) and dataset-version (a sync imported changed rows as a new version)."""
    kind: str
    subject: str                # dataset name, or "prompt × dataset"
    before: str | None = None
    after: str | None = None
    key: tuple[str, ...] = ()   # (dataset,) or (prompt, dataset)
    details: tuple[str, ...] = ()   # example rows of a dataset-rows change

    def __str__(self) -> str:
        template = CHANGE_TEXT.get(self.kind, "{kind} {subject}")
        return template.format(kind=self.kind, subject=self.subject, before=self.before, after=self.after)


@dataclass(frozen=True)
class SyncResult:
    """What ``sync`` changed (``applied``) or what it would change (``diff``)."""
    path: str
    changes: tuple[Change, ...] = ()
    applied: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def lines(self) -> list[str]:
        return [str(c) for c in self.changes]

    def __str__(self) -> str:
        if not self.changes:
            return f"{self.path}: no change"
        verb = "changed" if self.applied else "would change"
        return f"{self.path}: {verb} {len(self.changes)}: " + "; ".join(self.lines())


# --- loading ----------------------------------------------------------------------------------

def load_config(path: str | Path, display_path: str | None = None) -> GateConfig:
    """Read and validate a gate config file. ``display_path`` is the name errors use
    (e.g. the repository-relative path); relative sources resolve against the file's folder."""
    file = display_path or str(path)
    data = parse_yaml(read_text_file(path, file), file)
    return parse_config(data, file=file, base_dir=Path(path).resolve().parent)


def parse_config(data: Any, file: str | None = None, base_dir: str | Path | None = None) -> GateConfig:
    if not isinstance(data, TMapping):
        raise SpecError(file, None, "a gate config must be a mapping with datasets and prompts")
    unknown = [k for k in data if k not in TOP_FIELDS]
    if unknown:
        raise SpecError(file, str(unknown[0])[:80], f"unknown field; known fields are {', '.join(TOP_FIELDS)}")
    providers = _parse_providers(_section(data, "providers", "provider name → {base_url, api_key_env?, models?}",
                                          file), file)
    datasets = _parse_datasets(_section(data, "datasets", "dataset name → {source, id_column?, label_column?}",
                                        file), file, base_dir)
    bars = _parse_bars(_section(data, "prompts", "prompt name → list of {dataset, min_accuracy}", file),
                       datasets, file)
    return GateConfig(file or "", datasets, bars, providers, str(base_dir) if base_dir is not None else None,
                      parse_prices(data.get("prices"), file))


def _section(data: TMapping, key: str, shape: str, file: str | None) -> TMapping:
    value = data.get(key) or {}
    if not isinstance(value, TMapping):
        raise SpecError(file, key, f"must be a mapping of {shape}")
    return value


def _parse_providers(raw: TMapping, file: str | None) -> dict[str, ProviderDecl]:
    return {name: parse_decl(name, decl, file, f"providers.{str(name)[:40]}") for name, decl in raw.items()}


def _parse_datasets(raw: TMapping, file: str | None, base_dir: str | Path | None) -> dict[str, DatasetDecl]:
    datasets: dict[str, DatasetDecl] = {}
    for name, decl in raw.items():
        where = f"datasets.{name}"
        _check_name(name, where, "dataset name", file)
        if isinstance(decl, str):
            decl = {"source": decl}
        if not isinstance(decl, TMapping):
            raise SpecError(file, where, "must be a mapping with source (and optionally id_column, label_column)")
        extra = [k for k in decl if k not in DATASET_FIELDS]
        if extra:
            raise SpecError(file, f"{where}.{str(extra[0])[:80]}",
                            f"unknown field; a dataset has {', '.join(DATASET_FIELDS)}")
        source = decl.get("source")
        if not isinstance(source, str) or not source.strip():
            raise SpecError(file, f"{where}.source", "is required: a path relative to this file, file://, "
                            "https://, s3:// or sql+...")
        columns = {col: _column(decl.get(col), f"{where}.{col}", file) for col in ("id_column", "label_column")}
        source = source.strip()
        source_uri = absolute_source(source, base_dir)
        if scheme_of(source) == "file" and not Path(source_uri).is_file():
            raise SpecError(file, f"{where}.source", f"no such file: {source} (relative sources resolve against "
                            "the config file's folder)")
        datasets[name] = DatasetDecl(name, source, source_uri, columns["id_column"] or DEFAULT_ID_COLUMN,
                                     columns["label_column"] or DEFAULT_LABEL_COLUMN,
                                     str(base_dir) if base_dir is not None else None)
    return datasets


def _column(value: Any, where: str, file: str | None) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise SpecError(file, where, "must be a column name")
    return value


def _parse_bars(raw: TMapping, datasets: dict[str, DatasetDecl], file: str | None) -> tuple[BarDecl, ...]:
    bars: list[BarDecl] = []
    for prompt, entries in raw.items():
        where = f"prompts.{prompt}"
        _check_name(prompt, where, "prompt name", file)
        if not isinstance(entries, list) or not entries:
            raise SpecError(file, where, "must be a non-empty list of {dataset, min_accuracy} (to stop gating a "
                            "prompt, remove it from the file)")
        seen: set[str] = set()
        for i, entry in enumerate(entries):
            bar = _parse_bar_entry(entry, f"{where}[{i}]", prompt, datasets, file)
            if bar.dataset in seen:
                raise SpecError(file, f"{where}[{i}].dataset", f"{bar.dataset!r} is listed twice for {prompt}")
            seen.add(bar.dataset)
            bars.append(bar)
    return tuple(bars)


def _parse_bar_entry(entry: Any, at: str, prompt: str, datasets: dict[str, DatasetDecl],
                     file: str | None) -> BarDecl:
    if not isinstance(entry, TMapping):
        raise SpecError(file, at, "must be a mapping with dataset and min_accuracy")
    extra = [k for k in entry if k not in BAR_FIELDS]
    if extra:
        raise SpecError(file, f"{at}.{str(extra[0])[:80]}", f"unknown field; a bar has {', '.join(BAR_FIELDS)}")
    ds = entry.get("dataset")
    if not isinstance(ds, str) or not ds:
        raise SpecError(file, f"{at}.dataset", "is required")
    if ds not in datasets:
        raise SpecError(file, f"{at}.dataset", f"{ds!r} is not declared under datasets")
    if "min_accuracy" not in entry or entry["min_accuracy"] is None:
        raise SpecError(file, f"{at}.min_accuracy", "is required: a fraction in [0, 1], e.g. 0.9")
    try:
        bar = parse_bar(entry["min_accuracy"])
    except UsageError as exc:
        raise SpecError(file, f"{at}.min_accuracy", str(exc)) from None
    return BarDecl(prompt, ds, bar, _parse_extra_bars(entry, at, file))


def _parse_extra_bars(entry: TMapping, at: str, file: str | None) -> dict | None:
    """The entry's bars beyond min_accuracy as JSON (``Bars.extra``). Each is checked on
    its own first, so an error names its field."""
    for key in EXTRA_KEYS:
        try:
            Bars.parse(0, {key: entry.get(key)})
        except UsageError as exc:
            raise SpecError(file, f"{at}.{key}", str(exc)) from None
    return Bars.parse(0, {key: entry.get(key) for key in EXTRA_KEYS}).extra()


def _check_name(value: Any, where: str, what: str, file: str | None) -> None:
    try:
        check_name(value, what, file)
    except SpecError as exc:
        raise SpecError(file, where, exc.reason) from None


# --- diff and sync ------------------------------------------------------------------------------

def _as_config(source: str | Path | GateConfig) -> GateConfig:
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


_SECRET_RE = re.compile(r"(://[^/:@\s]*):[^/@\s]*@")


def redact(uri: str) -> str:
    """A source URI fit for a report: a password in it is replaced by ***."""
    return _SECRET_RE.sub(r"\1:***@", uri)


def diff(gate: Gate, config: str | Path | GateConfig, changed_files: Iterable[str | Path] = ()) -> SyncResult:
    """What ``sync`` would change, without changing anything. ``changed_files`` (absolute
    paths a pull request changes): a declared dataset whose file is among them is read
    from there and its rows compared with the gate's version (dataset-rows)."""
    cfg = _as_config(config)
    registered = {ds.name: (ds, maps) for ds, maps in gate.list_datasets()}
    changes = (_provider_changes(gate, cfg) + [Change(*c) for c in price_changes(gate.prices(), cfg.prices)]
               + _dataset_changes(registered, cfg) + _bar_changes(gate, cfg)
               + _undeclared_datasets(registered, cfg) + _row_changes(gate, cfg, registered, changed_files))
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
        _refuse_links(proposed, Path(cfg.base_dir))
        options = {k: ds.options[k] for k in ("id_column", "label_column") if k in ds.options}
        rows = gate.diff_source(name, str(proposed), options)
        if rows.any:
            details = tuple(f"{kind}: {', '.join(examples)}" for kind, examples in rows.examples.items() if examples)
            changes.append(Change("dataset-rows", name, f"{ds.current_version_id}", rows.summary(), (name,), details))
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
            raise DatasetError(f"{path.relative_to(base)}: a symbolic link; a dataset file is compared only as a "
                               "regular file in the checkout")
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
            changes.append(Change("provider-changed", name, _describe_provider(have), _describe_provider(decl),
                                  (name,)))
    for name in sorted(registered.keys() - cfg.providers.keys()):
        changes.append(Change("provider-removed", name, _describe_provider(registered[name]), None, (name,)))
    return changes


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
        have = (ds.source_uri, ds.options.get("id_column", DEFAULT_ID_COLUMN),
                ds.options.get("label_column", DEFAULT_LABEL_COLUMN))
        if want != have:
            changes.append(Change("dataset-changed", name, _describe(*have), _describe(*want), (name,)))
    return changes


def _undeclared_datasets(registered: dict, cfg: GateConfig) -> list[Change]:
    """Registered datasets the file no longer declares that still gate something: after a
    sync they gate nothing."""
    return [Change("dataset-undeclared", name, key=(name,))
            for name in sorted(registered.keys() - cfg.datasets.keys()) if registered[name][1]]


def _bar_changes(gate: Gate, cfg: GateConfig) -> list[Change]:
    declared = {(b.prompt, b.dataset): b for b in cfg.bars}
    current = {(m.prompt_name, m.dataset_name): m for m in gate.mappings()}
    changes = []
    for key in sorted(declared.keys() | current.keys()):
        subject = f"{key[0]} × {key[1]}"
        want, have = declared.get(key), current.get(key)
        if have is None:
            changes.append(Change("bar-added", subject, None, _fmt_bars(want.min_accuracy, want.bars), key))
        elif want is None:
            changes.append(Change("bar-removed", subject, _fmt_bars(have.min_accuracy, have.bars), None, key))
        elif not _same_bars(have, want):
            changes.append(Change("bar-changed", subject, _fmt_bars(have.min_accuracy, have.bars),
                                  _fmt_bars(want.min_accuracy, want.bars), key))
    return changes


def _describe(uri: str, id_column: str, label_column: str) -> str:
    text = redact(uri)
    if (id_column, label_column) != (DEFAULT_ID_COLUMN, DEFAULT_LABEL_COLUMN):
        text += f" (id {id_column}, label {label_column})"
    return text


def sync(gate: Gate, config: str | Path | GateConfig) -> SyncResult:
    """Make the gate's providers, prices, datasets and bars match the file (see the module
    docstring): register declared providers and datasets (importing their rows), import
    the rows of the others again (a new version when they changed), map declared bars,
    remove undeclared providers and unmap every mapping the file does not declare,
    including all mappings of prompts the file does not list. Idempotent."""
    cfg = _as_config(config)
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
    for change in planned.changes:
        if change.kind in ("dataset-added", "dataset-changed"):
            decl = cfg.datasets[change.key[0]]
            gate.register_dataset(decl.name, decl.source, id_column=decl.id_column,
                                  label_column=decl.label_column, base_dir=decl.base_dir, declared_in=cfg.path)
    for change in planned.changes:
        if change.kind in ("bar-added", "bar-changed"):
            bar = bars[change.key]
            gate.map_dataset(*change.key, bar.min_accuracy, bars=bar.bars)
        elif change.kind == "bar-removed":
            gate.unmap_dataset(*change.key)
    return SyncResult(planned.path, planned.changes, applied=True)


def _refresh(gate: Gate, cfg: GateConfig, planned: SyncResult) -> list[Change]:
    """Import again the declared datasets the plan does not register anyway: a changed
    file (or remote source) becomes a new version."""
    registering = {c.key[0] for c in planned.changes if c.kind in ("dataset-added", "dataset-changed")}
    changes = []
    for name in sorted(set(cfg.datasets) - registering):
        before = gate.get_dataset(name).current_version_id
        _, imported = gate.refresh_dataset(name)
        if imported is not None and imported.version.id != before:
            v = imported.version
            changes.append(Change("dataset-version", name, str(before), f"{v.id} ({v.row_count} rows)", (name,)))
    return changes


__all__ = ["BarDecl", "Change", "DatasetDecl", "GateConfig", "SyncResult", "diff",
           "load_config", "parse_config", "redact", "sync"]
