"""What a run's verdict stands on, pinned with it at submit (``prompt_run.pinned``), as a
record with one codec: ``Pinned.of`` reads the stored JSON once where the store reads the row,
``Pinned.to_json`` writes it (at submit, and for what reports show of it), key for key and in
the order it was stored, so a row re-encodes byte for byte (the fingerprint compares it).

``gate.prompt.request_keys.pin`` gives the first keys (the dataset version, its rows, the bar,
model, config hash, decision rule, call path, trials); ``Gate.submit`` adds the bars beyond
accuracy, the price, the fields the templates read, whether it may stop early, what it is
compared with (``baseline``, ``baseline_note``, ``baseline_error``) and a judged run's
``judge`` (``PinnedJudge``); a live version's run scored alongside carries ``live_version``;
a run of a judge prompt (kind judge) on its human-labelled dataset carries ``as_judge``.
A row written before a key existed reads it as None and writes it back absent (``keys``: the
keys as stored, in their order); a key this record does not know is kept as it was
(``extra``). The values that are other records' JSON stay JSON (``JSON``: the decision rule,
read by its kind, ``gate.kinds``; the mapping's bars, parsed by ``gate.verdict.bars``; a price;
a provider's declaration; figures)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .json_codec import JSON, Convert, JsonRecord, decoded, encoded, listed, tupled

_EMPTY: JSON = MappingProxyType({})


@dataclass(frozen=True)
class PinnedTrials(JsonRecord):
    """A run's trials (``gate.prompt.trials.TrialRule.pinned``)."""

    n: int = 1
    rule: str | None = None
    k: int | None = None
    needed: int | None = None
    keys: tuple[str, ...] = field(default=(), repr=False)
    extra: JSON = field(default_factory=lambda: _EMPTY, repr=False)


@dataclass(frozen=True)
class PinnedBaseline(JsonRecord):
    """What a run is compared with (``gate.domain.baseline.baseline_of``)."""

    run_id: int | None = None  # the run whose answers are live's
    update_id: int | None = None  # the update that made the live version live
    live_version: int | None = None
    scored_now: bool | None = None  # a baseline run staged in this update
    same_config: bool | None = None  # the candidate is the live config: its own answers are live's
    keys: tuple[str, ...] = field(default=(), repr=False)
    extra: JSON = field(default_factory=lambda: _EMPTY, repr=False)


@dataclass(frozen=True)
class PinnedLive(JsonRecord):
    """A judge's comparison: the candidate prompt's live version it is compared with."""

    version: int = 0
    config_hash: str | None = None
    provider: JSON | None = None  # the provider's declaration (the workers' only)
    price: JSON | None = None
    model: str | None = None
    keys: tuple[str, ...] = field(default=(), repr=False)
    extra: JSON = field(default_factory=lambda: _EMPTY, repr=False)


def _live_of(value: Any) -> PinnedLive | None:
    return None if value is None else PinnedLive.of(value)


def _live_json(value: PinnedLive | None) -> Any:
    return None if value is None else value.to_json()


_JUDGE_JSON: Convert = {"passing": listed, "error_rates": listed, "live": _live_json}
_JUDGE_OF: Convert = {"passing": tupled, "error_rates": tupled, "live": _live_of}


@dataclass(frozen=True)
class PinnedJudge(JsonRecord):
    """A judged run's judge (``gate.domain.judging``): its live version, provider, model and
    price, the candidate's pass labels or its comparison, its trials, its agreement with the
    humans (aggregates) and error rates, a comparison's live version, the sentinels mixed in
    and whether the corrected pass rate is barred."""

    name: str = ""
    version: int = 0
    config_hash: str | None = None
    provider: JSON | None = None  # the provider's declaration (the workers' only)
    model: str | None = None
    price: JSON | None = None
    passing: tuple[str, ...] | None = None  # stored as "pass"; None for a comparison
    compare: str | None = None
    trials: int = 1
    agreement: JSON | None = None  # n, agreed, accuracy, recall, kappa (gate.verdict.judge_stats)
    error_rates: tuple[int, ...] | None = None  # sensitivity and specificity as counts
    live: PinnedLive | None = None  # a comparison's live version (None: none yet)
    sentinels: int = 0
    corrected: bool = False
    keys: tuple[str, ...] = field(default=(), repr=False)
    extra: JSON = field(default_factory=lambda: _EMPTY, repr=False)
    DECODE = _JUDGE_OF
    ENCODE = _JUDGE_JSON


def _judge_of(value: Any) -> PinnedJudge | None:
    return None if value is None else PinnedJudge.of(value)


def _trials_of(value: Any) -> PinnedTrials | None:
    return None if value is None else PinnedTrials.of(value)


def _baseline_of(value: Any) -> PinnedBaseline | None:
    return None if value is None else PinnedBaseline.of(value)


_PINNED_OF: Convert = {"judge": _judge_of, "trials": _trials_of, "baseline": _baseline_of}


def _record_json(value: Any) -> Any:
    return value.to_json() if hasattr(value, "to_json") else value


_PINNED_JSON: Convert = {"judge": _record_json, "trials": _record_json, "baseline": _record_json}


@dataclass(frozen=True)
class Pinned:
    dataset_version_id: int | None = None
    content_hash: str | None = None
    rows: int | None = None  # the version's rows
    bar: str | None = None  # min_accuracy, as decimal text
    model: str | None = None
    config_hash: str | None = None
    decision: JSON | None = None  # the decision rule as stored (its kind reads it: gate.kinds.kind_of)
    call_path: str | None = None  # gate.prompt.request_keys.CALL_PATH_VERSION
    trials: PinnedTrials | None = None  # absent: one call
    bars: JSON | None = None  # the mapping's bars beyond min_accuracy, as stored (gate.verdict.bars parses them)
    price: JSON | None = None  # the model's price (gate.records.Price.to_dict); None: no price
    fields: JSON | None = None  # the item fields the templates read (gate.domain.admission)
    early_stop: bool | None = None  # may the run stop once its verdict is settled
    baseline: PinnedBaseline | None = None  # what it is compared with (gate.domain.baseline)
    baseline_note: str | None = None  # why there is no comparison
    baseline_error: str | None = None  # why a bar needing one cannot be judged
    judge: PinnedJudge | None = None  # a judged run's judge (gate.domain.judging)
    live_version: int | None = None  # a live version's run scored alongside: its version
    as_judge: JSON | None = None  # a judge prompt's own run: {"pairwise": bool} (its floors: gate.verdict.judge_floors)
    keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)  # None: a row with NULL
    extra: JSON = field(default_factory=lambda: _EMPTY, repr=False, compare=False)
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)  # what is parsed once of it

    @classmethod
    def of(cls, stored: Mapping[str, Any] | None) -> Pinned:
        """The record of a run's stored ``pinned`` JSON (None: a row with none)."""
        if stored is None:
            return cls()
        return decoded(cls, stored, _PINNED_OF)

    def to_json(self) -> dict[str, Any] | None:
        """The stored JSON (None for a row with none), as ``of`` read it."""
        return None if self.keys is None else encoded(self, _PINNED_JSON)

    @property
    def stored(self) -> dict[str, Any] | None:
        return self.to_json()

    @property
    def calls_per_item(self) -> int:
        """The candidate's calls per item: its trials (one without)."""
        return int(self.trials.n) if self.trials else 1
