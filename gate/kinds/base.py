"""The one protocol every decision kind implements (``DecisionKind``), the records they share
(``Decision``: the parsed ``decision:``; ``Reading``: an answer's decision) and what a kind
asks of the store for its figures (``FigureSource``, implemented by ``workers.figures``).

A kind answers for a parsed ``Decision`` (a prompt's) or for a stored one (a mapping: a
config's or a run's pinned rule; None for a row without one)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gate.errors import SpecError
from gate.prompt.call_settings import parse_labels
from gate.prompt.checks import ChecksRule
from gate.prompt.judge import JudgeRule, bounded_answer
from gate.prompt.structured.expected_calls import check_fields_rows
from gate.prompt.structured.rule import FieldsRule
from gate.prompt.structured.summary import RuleMisfit
from gate.prompt.tool_decision import ToolCall
from gate.prompt.tools import Tool
from gate.records.metrics import RunFigures, RunMetrics
from gate.records.pinned import PinnedJudge
from gate.states import Verdict
from gate.verdict.bar_checks import BarCheck
from gate.verdict.bars import Bars
from gate.verdict.scoring import INVALID_DECISION, metrics_from_breakdown

from . import sections as sec
from .live import PAIRED_ITEMS, LiveComparison
from .validity import Invalid, InvalidKind

StoredDecision = Mapping[str, Any] | None  # a config's or a pinned run's decision, as stored

# The bars every kind's run computes: its items scored or not, its calls timed and priced,
# its slices and protected items counted (gate.verdict.bars; settings such as confidence,
# early_stop, min_slice_items, slice_by and accept_breaks are not bars).
EVERY_KIND_BARS = frozenset(
    {"min_accuracy", "max_latency_p95_ms", "max_cost_per_1k_items", "max_error_rate", "min_slice_accuracy", "protected"}
)
# The bars that read the paired comparison with live (its fixed and broken items).
LIVE_BARS = frozenset({"max_broken", "max_drop"})


@dataclass(frozen=True)
class Decision:
    type: str = "first_word"
    field: str | None = None  # json: the field holding the label (dotted path)
    pattern: str | None = None  # regex: the first match (group 1 if any) is the label
    fields: FieldsRule | None = None  # fields: each field of the answer and its comparator (gate.prompt.structured)
    judge: JudgeRule | None = None  # judge: a generative answer graded by a judge prompt (gate.prompt.judge)
    checks: ChecksRule | None = None  # checks (or before a judge): named deterministic checks (gate.prompt.checks)

    def to_dict(self) -> dict[str, Any]:
        """The rule as stored (in the config, pinned with a run): what is set."""
        out: dict[str, Any] = {"type": self.type}
        if self.field is not None:
            out["field"] = self.field
        if self.pattern is not None:
            out["pattern"] = self.pattern
        if self.fields is not None:
            out["fields"] = self.fields.to_dict()
        if self.judge is not None:
            out.update(self.judge.to_dict())
        if self.checks is not None:
            out["checks"] = self.checks.to_dict()
        return out


@dataclass(frozen=True)
class Reading:
    decision: str | None  # a label, a reading field by field (canonical JSON), a marker; None: no label
    valid: bool  # False: no label could be read (None, NOT_AN_OBJECT)
    calls: tuple[ToolCall, ...] = ()  # the tool calls the answer made


class SpecView(Protocol):
    """What a kind reads of a prompt (``gate.prompt.spec.PromptSpec``)."""

    @property
    def decision(self) -> Decision: ...
    @property
    def labels(self) -> tuple[str, ...]: ...
    @property
    def response_format(self) -> Mapping[str, Any] | None: ...


class FigureSource(Protocol):
    """The store's counts a kind's figures are made of (``workers.figures.StoreFigures``)."""

    def label_breakdown(self, run_id: int) -> Sequence[tuple[str, str, str | None, int]]: ...
    def fields_breakdown(self, run_id: int) -> Sequence[tuple[str, None, str | None, int]]: ...
    def check_counts(self, run_id: int, checks: int) -> dict[str, Any]: ...
    def fields_figures(self, run_id: int, rule: FieldsRule) -> dict[str, Any]: ...
    def call_figures(self, run_id: int, rule: FieldsRule) -> dict[str, Any]: ...
    def call_marks(self, run_id: int, with_fields: bool) -> dict[str, Any]: ...
    def field_flips(self, run_id: int, live_id: int, bits: list[tuple[int, int]]) -> list[Any]: ...
    def argument_flips(self, run_id: int, live_id: int, bits: list[tuple[int, int]]) -> list[Any]: ...


WrongFields = Callable[[str | None, str], Any]  # (answered, expected): the fields it got wrong


class DecisionKind(ABC):
    """One kind of decision. Parse and pin (``parse``, ``parse_labels``, ``keeps_labels``,
    ``pins_labels``, ``keyed_rule``, ``check_spec``), read and score an answer (``read``,
    ``score``), the stored rule (``fields_rule``, ``counts_by_label``, ``maps_row_labels``),
    what rows and labels it needs (``check_labels``, ``check_rows``), its figures
    (``counts``, ``figures``, ``marks``, ``field_flips``), its run's checks (``checks``) and
    its report (``report_sections``, ``sections``, ``shows_labels``, ``wrong_fields``)."""

    name: str = ""
    bar_scope: str = ""  # what the kind decides by, as a refused bar names it (gate.kinds.bar_fit)
    judge_may_decide: bool = True  # a judge prompt (kind: judge) may decide by it
    one_call_per_item: bool = False  # the candidate is called once per item (its trials are a judge's)
    # The report's sections of the kind's own figures, which the report renders for its runs
    # (gate.report.update.run_report): "labels" (per label), "fields" (per field), "tool_calls"
    # (marked answers), "judge" (the judge's figures). A kind's figures outside them are not shown.
    report_sections: frozenset[str] = frozenset({"labels"})

    @property
    def shows_labels(self) -> bool:
        """The report shows the run's label figures (a judged run's labels are its judge's)."""
        return "labels" in self.report_sections

    live: LiveComparison = PAIRED_ITEMS  # how the run is compared with live (gate.kinds.live)
    # Its first version has nothing to be judged against (a comparison with live): an admin may
    # accept it unjudged (`submit --accept-unjudged`, gate.domain.unjudged).
    first_unjudged: bool = False
    # The bars a run of the kind computes, as data: `dataset map`, `sync` and submit refuse the
    # others in one line naming the bar and the kind (gate.kinds.bar_fit).
    bars_computable: frozenset[str] = EVERY_KIND_BARS | LIVE_BARS | {"min_recall", "min_precision"}
    # Its items are scored against the rows' own labels (or expected objects): a dataset whose
    # rows give none (``dataset_version.fields["unlabelled"]``) is refused at submit (check_rows).
    needs_row_labels: bool = True

    # -- the prompt file
    @abstractmethod
    def parse(
        self, value: Mapping[str, Any], kind: str, file: str | None, has_labels: bool, tools: tuple[Tool, ...]
    ) -> Decision:
        """The ``decision:`` mapping, validated (``kind``: its type, normalized)."""

    def parse_labels(self, value: Any, tools: tuple[Tool, ...], file: str | None) -> tuple[str, ...]:
        """The prompt's ``labels:``."""
        return parse_labels(value, file)

    def keeps_labels(self, decision: Decision) -> bool:
        """Whether the stored config keeps the prompt's labels (a rule with fields has none)."""
        return decision.fields is None

    def pins_labels(self, decision: Decision) -> bool:
        """Whether the rule pinned (and keyed) names the labels it reads."""
        return decision.fields is None

    def keyed_rule(self, pinned_rule: dict[str, Any]) -> dict[str, Any]:
        """The rule an answer is kept under for reuse (``gate.prompt.request_keys``)."""
        return pinned_rule

    def check_spec(self, decision: Decision, trials: int, prompt_kind: str, file: str | None) -> None:
        """Refuse what the prompt asks beside the decision that the kind cannot do."""
        if self.one_call_per_item and trials != 1:
            raise SpecError(
                file, "trials", "a judged prompt is called once per item: ask the judge more (judge_trials)"
            )
        if prompt_kind == "judge" and not self.judge_may_decide:
            raise SpecError(file, "decision", "a judge decides with labels (first_word, json or regex)")

    # -- an answer
    @abstractmethod
    def read(self, spec: SpecView, text: str, calls: tuple[ToolCall, ...], too_many: bool) -> Reading:
        """The decision of one answer (``gate.prompt.answer_reading.read_reply``)."""

    def served(self, spec: SpecView, reading: Reading, raw: str) -> tuple[str, Invalid | None]:
        """What production gets of an answer the gate read as ``reading`` (its decision,
        ``INVALID_DECISION`` when None): the decision without the gate's marks, and why the
        answer is invalid (None: valid; ``gate.production.result``)."""
        if reading.valid and reading.decision is not None:
            return reading.decision, None
        return INVALID_DECISION, Invalid(InvalidKind.NO_LABEL, f"none of the labels {', '.join(spec.labels)}")

    def score(self, decision: Decision | None, actual: str, expected: str) -> dict[str, Any]:
        """An answer's verdict against the item's expected decision (``workers.execute.results``)."""
        return {"verdict": Verdict.MATCH if actual == expected else Verdict.MISMATCH}

    def score_item(
        self, decision: Decision | None, actual: str, expected: str, item: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """``score`` with the item's columns at hand (``item``: its input; a checks decision
        reads them: ``gate.kinds.checks``)."""
        return self.score(decision, actual, expected)

    def matcher(self, decision: Decision | None) -> Callable[[str, str], bool] | None:
        """Whether a trial's answer matches the expected decision, where that is not their
        equality (a rule with fields: ``gate.prompt.trials.judge``); None: equality."""
        if decision is None or decision.fields is None:
            return None
        return lambda actual, expected: self.score(decision, actual, expected)["verdict"] == Verdict.MATCH

    def judge_reads(self, decision: str | None, raw: str | None) -> str | None:
        """What a judge reads of an answer (its decision, its raw text): the raw text, bounded
        (``gate.prompt.judge.bounded_answer``)."""
        return bounded_answer(raw)

    def judge_calls(self, trials: int) -> int:
        """A judged kind: the judge's calls on one item (sentinels come on top); 0 for another."""
        return 0

    def judged_figures(
        self, pinned: PinnedJudge, passed: int, scored: int, confidence: float, figures: RunFigures
    ) -> dict[str, Any]:
        """finalize, a judged kind: its judge's figures of the kind by key, a part as its record
        (``workers.judge_figures``; ``figures``: the run's so far)."""
        return {}

    # submit, a judged kind: compared with live's answers graded by the same judge version (a
    # baseline run of live pinned with the judge: ``gate.domain.judging.judged_baseline``)
    grades_live: bool = False

    def first_version(self, decision: Decision) -> Decision | None:
        """submit, a compared kind: the decision its prompt's first version is graded by
        while it has no live version to compare with (its ``first:``); None: none."""
        return None

    def judged_baseline(self, live: bool, bars: Bars) -> dict[str, Any]:
        """submit, a judged kind: what a judged run is compared with when no baseline run
        grades live's answers (``gate.domain.judging``; ``live``: the candidate has a live
        version the judge compares it with)."""
        return {}

    # -- the stored rule
    def fields_rule(self, stored: StoredDecision) -> FieldsRule | None:
        """The fields rule of a stored decision; None: decided by one label."""
        return None

    def counts_by_label(self, stored: StoredDecision) -> bool:
        """Whether a run's items count by label (its tally, its confusion matrix)."""
        return self.fields_rule(stored) is None

    def maps_row_labels(self, stored: StoredDecision) -> bool:
        """Whether materialize maps the rows' labels to the prompt's spelling."""
        return self.fields_rule(stored) is None

    def check_labels(self, decision: Decision, labels: tuple[str, ...]) -> list[tuple[tuple[str, ...], str]]:
        """The label sets the decision step must tell apart, each with where it is declared:
        the prompt's, or with fields each label field's."""
        if decision.fields is None:
            return [(labels, "labels")]
        return [(f.labels, f"decision.fields.{f.name}.labels") for f in decision.fields.fields if f.type == "label"]

    def check_rows(self, rule: FieldsRule | None, version_fields: Mapping[str, Any] | None, dataset: str) -> None:
        """Refuse (RuleMisfit) a dataset version whose expected values the rule cannot read."""
        if self.needs_row_labels and (version_fields or {}).get("unlabelled"):
            raise RuleMisfit(
                f"dataset {dataset} gives no label (no label column, default expected_decision, and no "
                "expected object): a prompt decided by label or field needs one per row (the gate config's "
                "label_column names another column); only a judged prompt's dataset may leave it out",
                dataset,
            )
        check_fields_rows(rule, version_fields, dataset)

    # -- a run's figures
    def counts(self, source: FigureSource, run_id: int, stored: StoredDecision) -> dict[str, Any]:
        """finalize: the run's counts (``gate.verdict.scoring.metrics_from_breakdown``)."""
        return metrics_from_breakdown(source.label_breakdown(run_id))

    def figures(self, source: FigureSource, run_id: int, stored: StoredDecision) -> dict[str, Any]:
        """finalize: the figures beside the counts (a fields decision's ``fields``)."""
        return {}

    def marks(self, source: FigureSource, run_id: int, stored: StoredDecision) -> dict[str, Any]:
        """finalize: the marked answers the kind counts (a tool call's ``tool_calls``)."""
        return {}

    def field_flips(
        self, source: FigureSource, run_id: int, live_id: int, rule: FieldsRule, live_rule: FieldsRule | None
    ) -> dict[str, Any]:
        """reconcile: per field both decide (``rule``: the run's, ``live_rule``: live's),
        live's right answers, fixed, broken."""
        return {}

    # -- the verdict
    def checks(self, bars: Bars, metrics: RunMetrics, base_checks: list[BarCheck]) -> list[BarCheck]:
        """A run's checks (``gate.verdict.bar_checks.check``, given them as ``kind_checks``):
        the checks every kind makes (``base_checks``), as the kind holds its bars; by
        default unchanged."""
        return base_checks

    def call_view(self, stored: StoredDecision) -> str | None:
        """How the report shows a failing item's tool calls (``gate.report.tool_calls``):
        ``fields`` (the calls read), ``label`` (the functions called); None: it does not."""
        return None

    # -- the report
    def sections(self) -> tuple[sec.Section, ...]:
        """The report's sections of the kind's runs, in order, as both the comment and the
        status page render them (``gate.kinds.sections``): every kind's and the kind's own."""
        return sec.ordered([*sec.every_kind(), *self.own_sections()])

    def own_sections(self) -> tuple[sec.Section, ...]:
        """The sections of the kind's own figures (``report_sections``, titled)."""
        return (sec.LABELS,)

    def wrong_fields(self, stored: StoredDecision) -> WrongFields | None:
        """How a sample item's wrong fields are named; None: decided by one label."""
        return None
