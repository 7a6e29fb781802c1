"""A run's pin as submit writes it (``Gate.submit``): the stored record with what is parsed of
it beside it, once per run: the mapping's bars (``gate.verdict.bars.Bars``) and the candidate's
decision with its kind.

``Pinned`` (``gate.records.pinned``) stays the stored record and its one codec, on the lowest
floor: the store reads every row through it and the ``Run`` record holds it, and neither may
import the verdict's ``Bars``. This record is the write side's, on the kinds' floor, which may
import both: what submit decides of a run (whether it may stop early) reads the parsed bars off
it, and what it stores is ``stored.to_json()``, the keys in the order they were written."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gate.records.json_codec import extended
from gate.records.pinned import Pinned, PinnedJudge
from gate.verdict.bars import Bars

from .base import Decision, DecisionKind
from .registry import kind_of


@dataclass(frozen=True)
class RunPin:
    stored: Pinned  # what prompt_run.pinned holds (its codec: gate.records.json_codec)
    bars: Bars  # the mapping's bars, parsed once for the run
    rule: Decision  # the candidate's decision, as its prompt parsed it
    kind: DecisionKind  # the decision's kind

    @classmethod
    def begun(cls, head: Pinned, bars: Bars, stored_bars: Mapping[str, Any] | None, rule: Decision) -> RunPin:
        """The pin's first keys (``gate.prompt.request_keys.pin``) and the bars beyond
        accuracy as the mapping stores them (None: none), parsed (``bars``)."""
        return cls(extended(head, bars=stored_bars or None), bars, rule, kind_of(rule))

    def extended(self, **values: Any) -> RunPin:
        """The pin with more keys written, after the ones it has (``json_codec.extended``)."""
        return replace(self, stored=extended(self.stored, **values))

    def may_stop_early(self, full: bool, judge: PinnedJudge | None) -> bool:
        """Whether the run may stop once its verdict is settled: its bars allow it, the
        submitter did not ask for every item (``full``), and no corrected pass rate is barred
        (``judge``: the judge pinned with it)."""
        return self.bars.early_stop and not full and not (judge and judge.corrected)
