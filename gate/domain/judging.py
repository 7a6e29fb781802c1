"""What a judged submission stands on, resolved and pinned at submit (``Gate.submit``).

A prompt decided by a judge (gate/prompt/judge.py) is graded by the judge's **live**
version, never by a judge a pull request brings: the judge must be a prompt of kind judge
with a live version that an update applied after evaluating it on the judge's mapped,
human-labelled datasets. Submit refuses any other judge in one line naming it. Pinned with
each run (``pinned["judge"]``): the judge's name, live version, config hash and provider,
its agreement with the humans on those evaluations (items, accuracy, recall per label,
Cohen's κ, and for the candidate's pass labels its sensitivity and specificity as counts),
how many sentinels the run mixes in (copied now, server side, from the rows the judge was
evaluated on: ``store.sentinels.insert_sentinels``) and, for a comparison, the live version
of the candidate's own prompt that it is compared with.

The upper bound of the update's calls counts the judge: per item its trials (twice, in both
orders, for a comparison, plus live's answer), and per sentinel its trials. Under a cost
cap the judge's (and live's) calls need a price and a ``max_tokens`` like the candidate's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from gate.calls.providers import resolve
from gate.calls.spend_caps import SpendLimits
from gate.datasets.field_counts import rows_having
from gate.errors import SpecError, UsageError
from gate.kinds import DecisionKind, kind_of
from gate.prompt.decision import label_key
from gate.prompt.judge import PAIR_LABELS
from gate.prompt.spec import PromptSpec, parse_spec
from gate.prompt.template_fields import template_fields
from gate.records.json_codec import extended, made
from gate.records.metrics import RunFigures
from gate.records.pinned import PinnedJudge, PinnedLive
from gate.states import RunStatus
from gate.store.datasets import list_mappings
from gate.store.judges import version_record
from gate.store.live import find_live, version_provider
from gate.store.providers import list_providers
from gate.store.runs import runs_of_update
from gate.store.sentinels import insert_sentinels
from gate.verdict.bars import Bars
from gate.verdict.judge_stats import agreement, error_rates

from .baseline import model_price
from .spending import check_cost_bounded


@dataclass
class JudgePin:
    """A judged submission's judge, resolved once for all its runs."""

    name: str
    version: int
    spec: PromptSpec
    pinned: PinnedJudge  # what its runs pin of it (each adds its sentinels: ``run_pin``)
    evaluated: list[tuple[int, int]] = field(
        default_factory=list
    )  # (dataset version id, rows) the judge was evaluated on
    live: dict[str, Any] | None = None  # a comparison: the candidate prompt's live version
    live_spec: PromptSpec | None = None
    kind: DecisionKind | None = None  # the candidate's decision's kind (judged, or compared with live)

    def calls(self, rows: int, sentinels: int) -> int:
        """The most judging calls a run of ``rows`` items with ``sentinels`` makes."""
        trials = self.pinned.trials
        per_item = (self.kind.judge_calls(trials) if self.kind else trials) + (1 if self.live else 0)
        return rows * per_item + sentinels * trials


def judge_of(conn, spec: PromptSpec, limits: SpendLimits) -> JudgePin | None:
    """The judge a judged candidate is graded by, refused in one line unless it has a live
    version evaluated on its mapped datasets; None for a prompt not judged."""
    rule = spec.decision.judge
    if rule is None:
        return None
    live = find_live(conn, rule.judge)
    if live is None:
        raise UsageError(
            f"judge {rule.judge} has no live version: a prompt is judged only by a judge applied "
            f"through its mapped datasets (submit {rule.judge} in apply mode first)"
        )
    try:
        judge = parse_spec(live.config)
    except SpecError as exc:
        raise UsageError(f"judge {rule.judge}'s live version cannot be read: {exc}") from None
    if judge.kind != "judge":
        raise UsageError(f"prompt {rule.judge} is not a judge: its live version does not say kind: judge")
    _check_labels(rule, judge)
    runs = _evaluations(conn, rule.judge, live.version)
    confusion = _merged([r.metrics.get("confusion") or {} for r in runs])
    pinned = _pin(conn, rule, judge, live, confusion, limits)
    evaluated = [(r.dataset_version_id, r.row_count) for r in runs]
    pin = JudgePin(rule.judge, live.version, judge, pinned, evaluated, kind=kind_of(spec.decision))
    if rule.pairwise:
        _compared_with_live(conn, spec, pin, limits)
    return pin


def first_version(conn, spec: PromptSpec) -> PromptSpec:
    """The candidate its runs are pinned and judged as: a compared prompt with no live version
    whose decision names a judge for its first version (``first:``) is graded by it
    (``gate.kinds.first``: the rule pinned says so), its judge resolved by ``judge_of`` like
    any; any other candidate as it is. Read under the prompt's lock (``Gate.submit``), and
    the update's base version is none: a version applied meanwhile fails its apply."""
    graded = kind_of(spec.decision).first_version(spec.decision)
    if graded is None or find_live(conn, spec.name) is not None:
        return spec
    return replace(spec, decision=graded)


def _evaluations(conn, name: str, version: int) -> list:
    """The finished runs, on the judge's currently mapped datasets, of the update that made
    its live version live; refused when there are none."""
    record = version_record(conn, name, version)
    mapped = {m.dataset_id for m in list_mappings(conn, name)}
    runs = runs_of_update(conn, record["update_id"]) if record and record["update_id"] else []
    runs = [
        r
        for r in runs
        if r.status == RunStatus.DONE and r.dataset_id in mapped and not r.stopped and RunFigures.of(r.metrics).scored
    ]
    if not runs:
        raise UsageError(
            f"judge {name} has no live version applied through its mapped datasets: its live version v{version} "
            f"was not evaluated on a dataset mapped to it (map its human-labelled dataset and apply it again)"
        )
    return runs


def _check_labels(rule, judge: PromptSpec) -> None:
    keys = {label_key(label) for label in judge.labels}
    if rule.pairwise:
        if not set(PAIR_LABELS) <= keys:
            raise UsageError(
                f"judge {rule.judge} cannot compare two answers: its labels must include A (the first answer is "
                "better) and B (the second is); any other label is a tie"
            )
        return
    unknown = [p for p in rule.passing if label_key(p) not in keys]
    if unknown:
        raise UsageError(f"decision.pass names {unknown[0][:60]!r}, which is not a label of judge {rule.judge}")


def _merged(confusions: list[dict]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for confusion in confusions:
        for expected, row in confusion.items():
            merged = out.setdefault(expected, {})
            for actual, n in row.items():
                merged[actual] = merged.get(actual, 0) + int(n)
    return out


def _pin(conn, rule, judge: PromptSpec, live, confusion: dict, limits: SpendLimits) -> PinnedJudge:
    pinned, provider = version_provider(conn, rule.judge, live.version)
    if not pinned:  # live since before providers were pinned: as production resolves it
        decl = resolve(judge.provider, judge.model, list_providers(conn))
        provider = decl.to_dict() if decl else None
    price = model_price(conn, judge.model)
    check_cost_bounded(limits, judge, price, f"the judge {rule.judge} (v{live.version})")
    figures = agreement(confusion)
    return made(
        PinnedJudge,
        name=rule.judge,
        version=live.version,
        config_hash=live.config_hash,
        provider=provider,
        model=judge.model,
        price=price,
        passing=tuple(rule.passing) if not rule.pairwise else None,  # stored as "pass"
        compare=rule.compare,
        trials=rule.trials,
        agreement=figures,  # aggregates only: the judge's dataset may be a holdout
        error_rates=None if rule.pairwise else tuple(error_rates(confusion, rule.passing)),
    )


def _compared_with_live(conn, spec: PromptSpec, pin: JudgePin, limits: SpendLimits) -> None:
    """A comparison: the candidate prompt's live version (none yet: n/a, said so)."""
    live = find_live(conn, spec.name)
    if live is None:
        pin.pinned = extended(pin.pinned, live=None)
        return
    try:
        live_spec = parse_spec(live.config)
    except SpecError as exc:
        raise UsageError(f"the live version of {spec.name} cannot be compared with: {exc}") from None
    pinned, provider = version_provider(conn, spec.name, live.version)
    if not pinned:
        decl = resolve(live_spec.provider, live_spec.model, list_providers(conn))
        provider = decl.to_dict() if decl else None
    price = model_price(conn, live_spec.model)
    check_cost_bounded(limits, live_spec, price, f"the live version (v{live.version}), compared with,")
    pin.live, pin.live_spec = {"version": live.version, "config_hash": live.config_hash}, live_spec
    live_pin = made(
        PinnedLive,
        version=live.version,
        config_hash=live.config_hash,
        provider=provider,
        price=price,
        model=live_spec.model,
    )
    pin.pinned = extended(pin.pinned, live=live_pin)


def run_pin(pin: JudgePin, mapping, version, bars: Bars) -> tuple[PinnedJudge, int, int]:
    """What one run pins of the judge (``pinned["judge"]``), the sentinels it mixes in, and
    the most judging calls it makes. A judge that reads an item field no row of the run's
    dataset version has is refused: it would judge every item on a template error (``bars``:
    the mapping's, parsed once for the run)."""
    for name in template_fields(m.content for m in pin.spec.messages):
        if version.fields is not None and not rows_having(version.fields, name):
            raise UsageError(
                f"judge {pin.name} reads item field {name}, which no row of dataset {mapping.dataset_name} has"
            )
    sentinels = min(bars.judge.sentinels, sum(rows for _, rows in pin.evaluated))
    pinned = extended(pin.pinned, sentinels=sentinels, corrected=bars.judge.corrected)
    return pinned, sentinels, pin.calls(version.row_count, sentinels)


def stage_sentinels(conn, pin: JudgePin, run_id: int, count: int, rows: int, seed: int) -> int:
    """Copy ``count`` of the judge's evaluated rows as the run's sentinels, drawn without
    repetition (seeded by the run), each judged beside one of the run's ``rows`` items,
    spread evenly over them."""
    if not count or not rows:
        return 0
    pool = [(version_id, position) for version_id, n in pin.evaluated for position in range(n)]
    picked = random.Random(seed).sample(pool, count)
    staged = 0
    for version_id in sorted({v for v, _ in picked}):
        picks = [
            (k, position, (2 * k + 1) * rows // (2 * count))
            for k, (v, position) in enumerate(picked)
            if v == version_id
        ]
        staged += insert_sentinels(conn, run_id, picks, version_id)
    return staged


def judged_baseline(pin: JudgePin, bars: Bars) -> dict[str, Any]:
    """What a judged run is compared with: live's answers, by the judge (a comparison); for
    a graded run nothing, and a bar that needs live's answers (max_broken, max_drop) fails
    rather than go unchecked."""
    assert pin.kind is not None  # a judged candidate's
    return pin.kind.judged_baseline(bool(pin.pinned.live), bars)
