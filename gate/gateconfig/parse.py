"""Reading a gate config: the file's datasets, bars, providers, prices and limits as declarations,
validated (every problem a SpecError naming the file, the field and the reason); nothing
touches the database."""

from __future__ import annotations

from collections.abc import Mapping as TMapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from gate.calls.prices import parse_prices
from gate.calls.providers import ProviderDecl, parse_decl
from gate.calls.spend_caps import SpendLimits
from gate.datasets.field_counts import MAX_FIELD_CHARS
from gate.datasets.sources import DEFAULT_ID_COLUMN, DEFAULT_LABEL_COLUMN, absolute_source, scheme_of
from gate.errors import SpecError, UsageError, did_you_mean
from gate.prompt.spec import check_name
from gate.prompt.text_file import read_text_file
from gate.prompt.yaml_file import parse_yaml
from gate.records import Price
from gate.rollout.rule import RolloutConfig
from gate.verdict.bars import EXTRA_KEYS, ITEM_KEYS, Bars
from gate.verdict.scoring import parse_bar

TOP_FIELDS = ("providers", "prices", "datasets", "prompts", "optional_fields", "limits", "rollout")
MAX_OPTIONAL_FIELDS = 100  # per prompt
DATASET_FIELDS = ("source", "id_column", "label_column")
BAR_FIELDS = ("dataset", "min_accuracy", *EXTRA_KEYS, *ITEM_KEYS)


@dataclass(frozen=True)
class DatasetDecl:
    name: str
    source: str  # as written in the file
    source_uri: str  # resolved (absolute path for a local file)
    id_column: str = DEFAULT_ID_COLUMN
    label_column: str = DEFAULT_LABEL_COLUMN
    base_dir: str | None = None  # the config file's folder


@dataclass(frozen=True)
class BarDecl:
    prompt: str
    dataset: str
    min_accuracy: Decimal
    bars: dict | None = field(default=None, hash=False)  # the bars beyond min_accuracy (Bars.extra)


@dataclass(frozen=True)
class GateConfig:
    path: str
    datasets: dict[str, DatasetDecl]
    bars: tuple[BarDecl, ...]
    providers: dict[str, ProviderDecl] = field(default_factory=dict)
    base_dir: str | None = None  # the file's folder: relative sources resolve here
    prices: dict[str, Price] = field(default_factory=dict)
    # prompt -> item fields its templates may read although no dataset row has them
    optional_fields: dict[str, tuple[str, ...]] = field(default_factory=dict)
    limits: SpendLimits = field(default_factory=SpendLimits)  # spend caps per update (gate.calls.spend_caps)
    rollouts: dict[str, RolloutConfig] = field(default_factory=dict)  # prompt → its canary rollout (gate.rollout)

    @property
    def prompts(self) -> list[str]:
        return sorted({b.prompt for b in self.bars})


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
        hint = did_you_mean(unknown[0], TOP_FIELDS)
        raise SpecError(file, str(unknown[0])[:80], f"unknown field{hint}; known fields are {', '.join(TOP_FIELDS)}")
    providers = _parse_providers(
        _section(data, "providers", "provider name → {base_url, api_key_env?, models?}", file), file
    )
    datasets = _parse_datasets(
        _section(data, "datasets", "dataset name → {source, id_column?, label_column?}", file), file, base_dir
    )
    bars = _parse_bars(_section(data, "prompts", "prompt name → list of {dataset, min_accuracy}", file), datasets, file)
    optional = _parse_optional_fields(
        _section(data, "optional_fields", "prompt name → list of item fields", file), file
    )
    return GateConfig(
        file or "",
        datasets,
        bars,
        providers,
        str(base_dir) if base_dir is not None else None,
        parse_prices(data.get("prices"), file),
        optional,
        SpendLimits.parse(data.get("limits"), file),
        _parse_rollouts(_section(data, "rollout", "prompt name → {canary_percent, min_feedback, …}", file), file),
    )


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
            raise SpecError(
                file,
                f"{where}.{str(extra[0])[:80]}",
                f"unknown field{did_you_mean(extra[0], DATASET_FIELDS)}; a dataset has {', '.join(DATASET_FIELDS)}",
            )
        source = decl.get("source")
        if not isinstance(source, str) or not source.strip():
            raise SpecError(
                file,
                f"{where}.source",
                "is required: a path relative to this file, file://, https://, s3:// or sql+...",
            )
        columns = {col: _column(decl.get(col), f"{where}.{col}", file) for col in ("id_column", "label_column")}
        source = source.strip()
        source_uri = absolute_source(source, base_dir)
        if scheme_of(source) == "file" and not Path(source_uri).is_file():
            raise SpecError(
                file,
                f"{where}.source",
                f"no such file: {source} (relative sources resolve against the config file's folder)",
            )
        datasets[name] = DatasetDecl(
            name,
            source,
            source_uri,
            columns["id_column"] or DEFAULT_ID_COLUMN,
            columns["label_column"] or DEFAULT_LABEL_COLUMN,
            str(base_dir) if base_dir is not None else None,
        )
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
            raise SpecError(
                file,
                where,
                "must be a non-empty list of {dataset, min_accuracy} (to stop gating a "
                "prompt, remove it from the file)",
            )
        seen: set[str] = set()
        for i, entry in enumerate(entries):
            bar = _parse_bar_entry(entry, f"{where}[{i}]", prompt, datasets, file)
            if bar.dataset in seen:
                raise SpecError(file, f"{where}[{i}].dataset", f"{bar.dataset!r} is listed twice for {prompt}")
            seen.add(bar.dataset)
            bars.append(bar)
    return tuple(bars)


def _parse_bar_entry(entry: Any, at: str, prompt: str, datasets: dict[str, DatasetDecl], file: str | None) -> BarDecl:
    if not isinstance(entry, TMapping):
        raise SpecError(file, at, "must be a mapping with dataset and min_accuracy")
    extra = [k for k in entry if k not in BAR_FIELDS]
    if extra:
        hint = did_you_mean(extra[0], BAR_FIELDS)
        raise SpecError(file, f"{at}.{str(extra[0])[:80]}", f"unknown field{hint}; a bar has {', '.join(BAR_FIELDS)}")
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
    """The entry's bars beyond min_accuracy (and what it says of items: slices, protected
    ids, accepted breaks) as JSON (``Bars.extra``). Each is checked on its own first, so an
    error names its field."""
    keys = EXTRA_KEYS + ITEM_KEYS
    for key in keys:
        alone = {key: entry.get(key)}
        if key in ("min_slice_accuracy", "min_slice_items"):
            alone["slice_by"] = "slice"  # needed beside it; checked together below
        try:
            Bars.parse(0, alone)
        except UsageError as exc:
            raise SpecError(file, f"{at}.{key}", str(exc)) from None
    try:
        return Bars.parse(0, {key: entry.get(key) for key in keys}).extra()
    except UsageError as exc:
        raise SpecError(file, at, str(exc)) from None


def _parse_optional_fields(raw: TMapping, file: str | None) -> dict[str, tuple[str, ...]]:
    """``optional_fields: {prompt: [field, ...]}``: the fields a prompt's templates may
    read although no row of its datasets has them (the submission is otherwise refused:
    ``gate.domain.admission``)."""
    declared: dict[str, tuple[str, ...]] = {}
    for prompt, fields in raw.items():
        where = f"optional_fields.{prompt}"
        _check_name(prompt, where, "prompt name", file)
        if not isinstance(fields, list) or len(fields) > MAX_OPTIONAL_FIELDS:
            raise SpecError(file, where, f"must be a list of at most {MAX_OPTIONAL_FIELDS} item field names")
        for name in fields:
            if not isinstance(name, str) or not name or len(name) > MAX_FIELD_CHARS or not name.isprintable():
                raise SpecError(
                    file,
                    where,
                    f"{str(name)[:40]!r} is not an item field name (a column of the "
                    f"datasets: printable text of at most {MAX_FIELD_CHARS} characters)",
                )
        if len(set(fields)) < len(fields):
            raise SpecError(file, where, "lists a field twice")
        if fields:
            declared[prompt] = tuple(sorted(fields))
    return declared


def _parse_rollouts(raw: TMapping, file: str | None) -> dict[str, RolloutConfig]:
    """``rollout: {prompt: {canary_percent, min_feedback, max_drop, confidence, max_hours}}``:
    an apply of the prompt that clears every bar goes live as a canary (``gate.rollout``)."""
    rollouts: dict[str, RolloutConfig] = {}
    for prompt, entry in raw.items():
        where = f"rollout.{prompt}"
        _check_name(prompt, where, "prompt name", file)
        try:
            rollouts[prompt] = RolloutConfig.parse(entry, where)
        except UsageError as exc:
            field, _, reason = str(exc).partition(": ")
            raise SpecError(file, field, reason) from None
    return rollouts


def _check_name(value: Any, where: str, what: str, file: str | None) -> None:
    try:
        check_name(value, what, file)
    except SpecError as exc:
        raise SpecError(file, where, exc.reason) from None
