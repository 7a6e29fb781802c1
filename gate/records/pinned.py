"""What a run's verdict stands on, pinned with it at submit (``prompt_run.pinned``), as a
record: read once where the store reads the row, its keys attributes.

``gate.prompt.request_keys.pin`` writes the first keys (the dataset version, its rows, the bar,
model, config hash, decision rule, call path, trials); ``Gate.submit`` adds the bars beyond
accuracy, the price, the fields the templates read, whether it may stop early, what it is
compared with (``baseline``, ``baseline_note``, ``baseline_error``) and a judged run's
``judge``; a live version's run scored alongside carries ``live_version``. A row written
before a key existed reads it as None, and a key this record does not know is kept: ``stored``
is the JSON as it was read, so what reports show of it keeps its exact shape."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Pinned:
    dataset_version_id: int | None = None
    content_hash: str | None = None
    rows: int | None = None  # the version's rows
    bar: str | None = None  # min_accuracy, as decimal text
    model: str | None = None
    config_hash: str | None = None
    decision: dict[str, Any] | None = None  # the decision rule (gate.prompt.decision.decision_rule)
    call_path: str | None = None  # gate.prompt.request_keys.CALL_PATH_VERSION
    trials: dict[str, Any] | None = None  # n, rule, k, needed (gate.prompt.trials); absent: one call
    bars: dict[str, Any] | None = None  # the bars beyond min_accuracy (gate.verdict.bars)
    price: dict[str, Any] | None = None  # the model's price (gate.records.Price.to_dict); None: no price
    fields: dict[str, Any] | None = None  # the item fields the templates read (gate.service.admission)
    early_stop: bool | None = None  # may the run stop once its verdict is settled
    baseline: dict[str, Any] | None = None  # what it is compared with (gate.service.baseline)
    baseline_note: str | None = None  # why there is no comparison
    baseline_error: str | None = None  # why a bar needing one cannot be judged
    judge: dict[str, Any] | None = None  # a judged run's judge (gate.service.judging)
    live_version: int | None = None  # a live version's run scored alongside: its version
    stored: dict[str, Any] | None = field(default=None, repr=False, compare=False)  # the JSON read; None: NULL

    @classmethod
    def of(cls, stored: Mapping[str, Any] | None) -> Pinned:
        """The record of a run's stored ``pinned`` JSON (None: a row with none)."""
        data = stored or {}
        known = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name != "stored" and f.name in data}
        return cls(**known, stored=None if stored is None else dict(stored))
