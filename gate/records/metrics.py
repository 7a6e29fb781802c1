"""What a run's figures hold (``prompt_run.metrics``), key by key: finalize writes the counts,
the calls, the cost and the spend; reconcile adds the comparison with live, the policy's
figures and a stop's confirmation. A TypedDict names the keys and what each holds (the
figures are handed out in reports as the JSON they are, merged with a stop's best case);
``RunFigures`` is the same as a record, with one codec (``gate.records.json_codec``): what
finalize and reconcile write is built as the record (``RunFigures.made``, ``extended``: keys
in the order written, as the dict it replaces was updated), and a figure is read off it by attribute
(``RunFigures.of(run.metrics).judge.sentinels``), never by a chain of ``.get``. A row
written before a key existed lacks it: every key is optional."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypedDict

from .json_codec import JSON, Convert, JsonRecord, decoded, encoded, extended, listed, made, tupled


class RunMetrics(TypedDict, total=False):
    # finalize: the counts (gate.verdict.scoring.metrics_from_breakdown)
    total: int  # items: the dataset version's rows (a stopped run's never copied counted)
    scored: int
    matches: int
    mismatches: int
    errors: int
    pending: int
    stopped: int  # items never answered: the run stopped first
    invalid: int  # answers that named no decision
    accuracy: float | None
    confusion: dict[str, dict[str, int]]  # expected -> actual -> items
    fields: dict[str, Any]  # a fields decision: per field (workers.figures.fields_metrics)
    checks: dict[str, Any]  # a decision with checks: per check, items passed (gate.kinds.checks)
    error_kinds: dict[str, int]  # kind -> items
    item_detail: dict[str, Any]  # what a reason leaves out (gate.verdict.reasons.ITEM_DETAIL)
    tool_calls: dict[str, Any]  # a tool_call decision's marked answers (workers.tool_figures)
    schema: dict[str, Any]  # answers off a strict schema
    # finalize: the calls and their cost (workers.finalize.call_metrics)
    calls: dict[str, Any]  # latency and tokens; reused
    cost_usd: str | None  # exact decimal text
    cost_note: str  # why there is no cost
    unstable: int  # items whose trials disagree
    calls_made: int
    calls_unrecorded: int
    calls_reused: int
    calls_saved: int
    judge: dict[str, Any]  # a judged run's figures (workers.judge_figures)
    # reconcile: the comparison with live, the policy, the stop
    flips: dict[str, int] | None  # fixed, broken, both right, both wrong, paired
    live: dict[str, Any]  # live's matches and scored, and which run
    baseline_note: str | None
    baseline_error: str | None
    field_flips: dict[str, Any]
    slices: dict[str, Any]
    protected: dict[str, Any]
    accepted_breaks: list[dict[str, Any]]
    stop: dict[str, Any]  # kind; once confirmed: sentence, missed, best


def _keys() -> Any:
    return field(default=(), repr=False)


def _extra() -> Any:
    return field(default_factory=lambda: MappingProxyType({}), repr=False)


@dataclass(frozen=True)
class SentinelFigures(JsonRecord):
    """The sentinels' test against the pinned agreement (``gate.verdict.judge_stats.drift``):
    the whole run's agreement with its Fisher p-value, the drift test over the sentinels in
    judge-call order, and the run's stated power (absent from runs finalized before)."""

    agreed: int = 0
    judged: int = 0
    planned: int = 0
    p_value: float | None = None
    drifted: bool = False
    settled: bool = False
    test: str | None = None
    pinned_accuracy: float | None = None
    pinned_n: int | None = None
    cusum: int | None = None  # the drift test's statistic: its largest value (gate.verdict.sentinel_drift)
    threshold: int | None = None  # ... and the value it alarms at
    power: dict[str, Any] | None = None  # what the run's sentinels could catch, and their false-alarm bound
    keys: tuple[str, ...] = _keys()
    extra: JSON = _extra()


@dataclass(frozen=True)
class PairwiseFigures(JsonRecord):
    """A comparison by the judge: wins, losses, ties (the inconsistent ones among them)."""

    live: bool = False  # was there a live version to compare with
    wins: int = 0
    losses: int = 0
    ties: int = 0
    inconsistent: int = 0
    compared: int = 0
    keys: tuple[str, ...] = _keys()
    extra: JSON = _extra()


def _record_json(value: Any) -> Any:
    return value.to_json() if hasattr(value, "to_json") else value


def _of(cls: Any) -> Any:
    return lambda value: None if value is None else cls.of(value)


_JUDGE_OF: Convert = {"pairwise": _of(PairwiseFigures), "sentinels": _of(SentinelFigures), "interval": tupled}
_JUDGE_JSON: Convert = {"pairwise": _record_json, "sentinels": _record_json, "interval": listed}


@dataclass(frozen=True)
class JudgeFigures(JsonRecord):
    """A judged run's figures (``workers.judge_figures``): the pass rate as judged with its
    interval, corrected for the judge's error rates (JSON: estimate, exact, interval), a
    comparison's counts, the sentinels' test and the calls by role (JSON)."""

    name: str = ""
    version: int = 0
    passed: int = 0
    scored: int = 0
    interval: tuple[float, float] | None = None
    corrected: JSON | None = None
    uncorrected: str | None = None  # why there is no corrected rate, naming the figure that failed
    pairwise: PairwiseFigures | None = None
    sentinels: SentinelFigures | None = None
    calls: JSON | None = None
    keys: tuple[str, ...] = _keys()
    extra: JSON = _extra()
    DECODE = _JUDGE_OF
    ENCODE = _JUDGE_JSON


@dataclass(frozen=True)
class StopFigures(JsonRecord):
    """A stopped run's stop: its kind; once reconcile confirmed it, the sentence, the bars
    missed and the best completion's figures (early stop), or the cap (spend cap)."""

    kind: str | None = None
    sentence: str | None = None
    missed: list[Any] | None = None
    best: JSON | None = None
    keys: tuple[str, ...] = _keys()
    extra: JSON = _extra()


@dataclass(frozen=True)
class CallFigures(JsonRecord):
    """The calls' latency (ms: p50, p95, max, timed) and tokens, and the answers reused
    (``workers.finalize.call_metrics``); with trials, how many calls."""

    latency_ms: JSON | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reused: int | None = None
    calls: int | None = None
    keys: tuple[str, ...] = _keys()
    extra: JSON = _extra()

    @property
    def timed(self) -> bool:
        """Were the calls timed (a run whose answers were all reused was not)."""
        return bool(self.latency_ms and self.latency_ms.get("timed"))

    @property
    def p95_ms(self) -> Any:
        """The calls' 95th percentile latency in ms (None: not timed)."""
        return self.latency_ms.get("p95") if self.latency_ms else None


@dataclass(frozen=True)
class LiveFigures(JsonRecord):
    """The live version's side of a comparison: its matches and items scored, and what the
    run pinned of it (``gate.records.pinned.PinnedBaseline``)."""

    matches: int | None = None
    scored: int | None = None
    run_id: int | None = None
    update_id: int | None = None
    live_version: int | None = None
    scored_now: bool | None = None
    same_config: bool | None = None
    keys: tuple[str, ...] = _keys()
    extra: JSON = _extra()


_RUN_OF: Convert = {
    "judge": _of(JudgeFigures),
    "stop": _of(StopFigures),
    "calls": _of(CallFigures),
    "live": _of(LiveFigures),
}
_RUN_JSON: Convert = {"judge": _record_json, "stop": _record_json, "calls": _record_json, "live": _record_json}


def _parts(values: Mapping[str, Any]) -> dict[str, Any]:
    """Figures by attribute, a part (judge, stop, calls, live) given as its JSON read as its
    record (``_RUN_OF``); a record, or None, as given."""
    return {k: _RUN_OF[k](v) if k in _RUN_OF and isinstance(v, Mapping) else v for k, v in values.items()}


@dataclass(frozen=True)
class RunFigures:
    """A run's figures (``RunMetrics``) as a record, with one codec: ``of`` reads the stored
    JSON, ``to_json`` writes it back key for key in the order stored (finalize and reconcile
    write through it). Absent keys read as None."""

    total: int | None = None
    scored: int | None = None
    matches: int | None = None
    mismatches: int | None = None
    errors: int | None = None
    pending: int | None = None
    stopped: int | None = None
    invalid: int | None = None
    accuracy: float | None = None
    confusion: JSON | None = None
    fields: JSON | None = None
    checks: JSON | None = None
    error_kinds: JSON | None = None
    item_detail: JSON | None = None
    tool_calls: JSON | None = None
    schema: JSON | None = None
    calls: CallFigures | None = None
    cost_usd: str | None = None
    cost_note: str | None = None
    unstable: int | None = None
    calls_made: int | None = None
    calls_unrecorded: int | None = None
    calls_reused: int | None = None
    calls_saved: int | None = None
    judge: JudgeFigures | None = None
    flips: JSON | None = None
    live: LiveFigures | None = None
    baseline_note: str | None = None
    baseline_error: str | None = None
    field_flips: JSON | None = None
    slices: JSON | None = None
    protected: JSON | None = None
    accepted_breaks: list[Any] | None = None
    stop: StopFigures | None = None
    keys: tuple[str, ...] = _keys()
    extra: JSON = _extra()

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> RunFigures:
        """The record of a run's stored metrics (None: a run not finalized: no figures)."""
        return decoded(cls, data or {}, _RUN_OF)

    def to_json(self) -> dict[str, Any]:
        return encoded(self, _RUN_JSON)

    @classmethod
    def made(cls, **values: Any) -> RunFigures:
        """The figures written with ``values`` (by key, in the order given: as a dict of them
        was written; a part given as its JSON is read by its codec)."""
        return made(cls, **_parts(values))

    def extended(self, **values: Any) -> RunFigures:
        """The figures with ``values`` written: a key it had keeps its place, a new one comes
        after the rest, in the order given (as ``dict.update`` writes them)."""
        return extended(self, **_parts(values))

    def flipped(self, key: str) -> int:
        """The comparison with live's count of ``key`` (fixed, broken, ...; 0: not compared)."""
        return int(self.flips.get(key) or 0) if self.flips else 0

    @property
    def drifted(self) -> bool:
        """Did the run's judge drift on its sentinels."""
        return bool(self.judge and self.judge.sentinels and self.judge.sentinels.drifted)
