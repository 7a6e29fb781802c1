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

A judge decides only above the floors of each of the candidate's mappings (Youden's J for
the candidate's pass labels, κ, human items: ``gate.verdict.judge_floors``): below, submit
refuses in one line with the judge's figures and the floor that failed. A judge prompt's own
runs pin ``as_judge`` (its own gate holds it to its floors: ``update_outcome``), and
``below_floors`` names the live judges below them for ``sync --dry-run``.

The upper bound of the update's calls counts the judge: per item its trials (twice, in both
orders, for a comparison, plus live's answer), and per sentinel its trials; for a graded
candidate with a live version whose graded answers must be had, live's answer and the
judge's trials on it per item (``graded_live``). Under a cost
cap the judge's (and live's) calls need a price and a ``max_tokens`` like the candidate's.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gate.calls.providers import resolve
from gate.calls.spend_caps import SpendLimits
from gate.datasets.field_counts import rows_having
from gate.errors import NotFound, SpecError, UsageError
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
from gate.store.live import find_live, list_live, version_provider
from gate.store.providers import list_providers
from gate.store.runs import runs_of_update
from gate.store.sentinels import insert_sentinels
from gate.store.versions import get_version
from gate.verdict.bars import Bars
from gate.verdict.judge_floors import JudgeFigures, JudgeFloors, merged, own_figures, submit_figures
from gate.verdict.judge_stats import agreement, error_rates

from .baseline import baseline_of, model_price
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
    figures_shown: bool = True  # False: the submitter may not read a set it was evaluated on (a holdout)

    def graded_live_calls(self, rows: int) -> int:
        """The most calls grading live's answers on ``rows`` items takes (a graded candidate's
        baseline run): live's answer and the judge's trials on it, per item."""
        return rows * (1 + self.pinned.trials)

    def calls(self, rows: int, sentinels: int) -> int:
        """The most judging calls a run of ``rows`` items with ``sentinels`` makes."""
        trials = self.pinned.trials
        per_item = (self.kind.judge_calls(trials) if self.kind else trials) + (1 if self.live else 0)
        return rows * per_item + sentinels * trials


def judge_of(conn, spec: PromptSpec, limits: SpendLimits, may_read: MayRead | None = None) -> JudgePin | None:
    """The judge a judged candidate is graded by, refused in one line unless it has a live
    version evaluated on its mapped datasets; None for a prompt not judged. ``may_read``
    (None: all): may the submitter read a dataset version; a refusal names the judge's
    figures only when it may read every set the judge was evaluated on (``figures_readable``)."""
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
    confusion = merged([r.metrics.get("confusion") or {} for r in runs])
    pinned = _pin(conn, rule, judge, live, confusion, limits)
    evaluated = [(r.dataset_version_id, r.row_count) for r in runs]
    pin = JudgePin(rule.judge, live.version, judge, pinned, evaluated, kind=kind_of(spec.decision))
    pin.figures_shown = figures_readable(conn, runs, may_read)
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


MayRead = Callable[[Any], bool]
FIGURES_LEFT_OUT = (
    "its figures left out: it was evaluated on human-labelled rows this token may not read, whose per-label "
    "figures are admin's"
)


def figures_readable(conn, runs: list, may_read: MayRead | None) -> bool:
    """May a caller (``may_read``: of a dataset version; None: the CLI on the database, any)
    read every dataset version of ``runs`` (a judge's evaluations)? Its J, sensitivity,
    specificity and κ are per-label aggregates of those rows: a holdout's are admin's
    (issue 48)."""
    if may_read is None:
        return True
    for version_id in {r.dataset_version_id for r in runs}:
        try:
            if version_id is None or not may_read(get_version(conn, version_id)):
                return False
        except NotFound:
            return False
    return True


def floor_missed(floors: JudgeFloors, figures: JudgeFigures, shown: bool) -> str | None:
    """The floor ``figures`` miss (None: none), with the figure when ``shown``, else which
    floor only ("below the floor Youden's J ≥ 0.5 (its figures left out: …)")."""
    missed = floors.miss(figures)
    if missed is None or shown:
        return missed
    if figures.items < floors.items:
        which = f"{floors.items} human items"
    elif missed.startswith("Cohen"):
        which = f"Cohen's κ ≥ {floors.kappa.normalize():f}"
    else:
        which = f"Youden's J ≥ {floors.j.normalize():f}"
    return f"below the floor {which} ({FIGURES_LEFT_OUT})"


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
    _check_floors(pin, mapping, bars)
    sentinels = min(bars.judge.sentinels, sum(rows for _, rows in pin.evaluated))
    pinned = extended(pin.pinned, sentinels=sentinels, corrected=bars.judge.corrected)
    return pinned, sentinels, pin.calls(version.row_count, sentinels)


def _check_floors(pin: JudgePin, mapping, bars: Bars) -> None:
    """A judge decides only when its pinned agreement clears the mapping's floors
    (``gate.verdict.judge_floors``): else the submit is refused in one line with its figures
    and the floor that failed."""
    figures = submit_figures(pin.pinned.agreement, pin.pinned.error_rates)
    missed = floor_missed(bars.judge.floors, figures, pin.figures_shown)
    if missed:
        said = f" (its figures: {figures.describe()})" if pin.figures_shown else ""
        raise UsageError(
            f"judge {pin.name} v{pin.version} cannot tell well enough to decide {mapping.prompt_name} × "
            f"{mapping.dataset_name}: {missed}{said}; give it a better prompt or more "
            "human-labelled items and apply it again"
        )


def as_judge(spec: PromptSpec) -> dict[str, Any]:
    """What a run of a judge prompt pins of it (``pinned["as_judge"]``): its own gate holds
    its agreement with the humans to the floors, a pairwise judge (labels A and B) on κ and
    items only (``gate.verdict.judge_floors.own_figures``); nothing for another prompt."""
    if spec.kind != "judge":
        return {}
    keys = {label_key(label) for label in spec.labels}
    return {"as_judge": {"pairwise": set(PAIR_LABELS) <= keys}}


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


def judged_baseline(conn, pin: JudgePin, bars: Bars, stage: BaselineStage) -> tuple[dict[str, Any], int]:
    """What a judged run is compared with, and the most calls it adds. A comparison by the
    judge (``compare: live``): live's answers read by the judge beside the candidate's (the
    kind's, no run of its own). Graded (``pass:``, ``DecisionKind.grades_live``): live's
    answers on the same dataset version graded by the same judge version, as the label kinds
    are compared (``graded_live``); no live version: n/a, said so."""
    assert pin.kind is not None  # a judged candidate's
    if not pin.kind.grades_live or stage.live is None:
        return pin.kind.judged_baseline(bool(pin.pinned.live), bars), 0
    return graded_live(conn, pin, stage)


@dataclass(frozen=True)
class BaselineStage:
    """Where a run's baseline would be staged (``Gate._stage_runs``'s, for ``baseline_of``)."""

    spec: PromptSpec
    provider: dict | None
    live: Any  # LivePrompt | None
    update_id: int
    ds: Any
    mapping: Any
    version: Any
    limits: SpendLimits


def graded_live(conn, pin: JudgePin, stage: BaselineStage) -> tuple[dict[str, Any], int]:
    """Live's answers on the candidate's dataset version graded by the candidate's pinned
    judge: the live version's run there when the same judging graded it (the update that
    applied it, or a baseline run an earlier update staged), else a baseline run staged
    now, pinned with the judge (no sentinels: its drift is watched on the candidate's run),
    whose answers and judge's verdicts are reused wherever the same requests were answered
    before. Its most calls: live's and the judge's on each item. A live version whose
    answers a judge cannot grade as the candidate's (another kind of decision): why, as a
    ``baseline_error`` (a live bar then fails rather than go unchecked)."""
    live = stage.live
    try:
        live_kind = kind_of(parse_spec(live.config).decision)
    except SpecError as exc:
        live_kind, why = None, f"the live version cannot be graded on this dataset version: {exc}"
    else:
        why = f"the live version v{live.version} is not graded by a judge (decision pass:): not compared"
    if live_kind is not pin.kind:
        return {"baseline": None, "baseline_note": why, "baseline_error": why}, 0
    judge = extended(pin.pinned, sentinels=0, corrected=False, live=None)
    compared, staged = baseline_of(
        conn,
        stage.spec,
        stage.provider,
        live,
        stage.update_id,
        stage.ds,
        stage.mapping,
        stage.version,
        stage.limits,
        judge,
    )
    return compared, pin.graded_live_calls(stage.version.row_count) if staged else 0


def below_floors(
    conn, declared: Mapping[tuple[str, str], Bars], may_read: MayRead | None = None
) -> list[tuple[str, str]]:
    """The live judges whose agreement with the humans is below floors (issue 46.2): their
    own (their mappings', as at their own gate) or those of a live prompt they judge (for
    its pass labels, its mappings' floors). ``declared``: bars by (prompt, dataset) that
    replace the gate's (a gate config about to be synced). (judge, one line saying which
    figure failed where), one per judge, for ``sync --dry-run``; submit refuses the prompts
    it judges (``run_pin``). ``may_read`` (None: all): a judge evaluated on a set the caller
    may not read is named with the floor it misses, not its figures (``floor_missed``)."""
    found = {row["name"]: find_live(conn, row["name"]) for row in list_live(conn)}
    live = {name: _spec_of(version) for name, version in found.items()}
    out = []
    for name, judge in sorted(live.items()):
        version = found[name]
        if judge is None or judge.kind != "judge" or version is None:
            continue
        try:
            runs = _evaluations(conn, name, version.version)
        except UsageError:
            continue  # no evaluation on its mapped datasets: submit refuses it, saying so
        confusion = merged(r.metrics.get("confusion") or {} for r in runs)
        shown = figures_readable(conn, runs, may_read)
        missed = _own_miss(conn, name, judge, confusion, declared, shown)
        missed = missed or _judged_miss(conn, name, live, confusion, declared, shown)
        if missed:
            out.append((name, f"live v{version.version} is below the floors of {missed}"))
    return out


def _spec_of(live) -> PromptSpec | None:
    try:
        return parse_spec(live.config) if live is not None else None
    except SpecError:
        return None


def _floors_of(conn, prompt: str, declared: Mapping[tuple[str, str], Bars]) -> list[tuple[str, JudgeFloors]]:
    """(dataset, floors) of each of the prompt's mappings, as declared or else as mapped."""
    mapped = {m.dataset_name: Bars.parse(m.min_accuracy, m.bars) for m in list_mappings(conn, prompt)}
    mapped.update({ds: bars for (p, ds), bars in declared.items() if p == prompt})
    return [(ds, bars.judge.floors) for ds, bars in sorted(mapped.items())]


def _own_miss(conn, name: str, judge: PromptSpec, confusion: dict, declared, shown: bool) -> str | None:
    pairwise = bool(as_judge(judge)["as_judge"]["pairwise"])
    figures = own_figures(confusion, pairwise)
    for dataset, floors in _floors_of(conn, name, declared):
        missed = floor_missed(floors, figures, shown)
        if missed:
            return f"its own gate ({name} × {dataset}): {missed}"
    return None


def _judged_miss(
    conn, name: str, live: Mapping[str, PromptSpec | None], confusion: dict, declared, shown: bool
) -> str | None:
    figures = agreement(confusion)
    for prompt, spec in sorted(live.items()):
        rule = spec.decision.judge if spec is not None else None
        if rule is None or rule.judge != name:
            continue
        rates = None if rule.pairwise else error_rates(confusion, rule.passing)
        for dataset, floors in _floors_of(conn, prompt, declared):
            missed = floor_missed(floors, submit_figures(figures, rates), shown)
            if missed:
                return f"{prompt} × {dataset}, which it judges: {missed}"
    return None
