"""Metrics and bars: pure functions shared by finalize, reconcile and status (the verdict
over all bars is gate.verdict.update_outcome).

Bars compare the raw accuracy as an exact fraction: 95 of 100 clears a 0.95 bar, and no
float ever sits at the boundary. A zero denominator never reaches a division.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from gate.errors import CallFailure, UsageError
from gate.states import RunStatus, Verdict

from .reasons import errors_reason

INVALID_DECISION = "(invalid)"


def decimal_places(value: Decimal) -> int:
    """The decimal places a finite number is written with (0 for an integer's)."""
    exponent = value.as_tuple().exponent
    return -exponent if isinstance(exponent, int) and exponent < 0 else 0


def parse_bar(value: Any, what: str = "min accuracy") -> Decimal:
    try:
        bar = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise UsageError(f"{what} {value!r} is not a number: use a fraction in [0, 1], e.g. 0.9") from None
    if not bar.is_finite() or bar < 0 or bar > 1:
        raise UsageError(f"{what} {value!r} is outside [0, 1]: use a fraction such as 0.9 (not 90)")
    if decimal_places(bar) > 9:
        raise UsageError(f"{what} {value!r} has more than 9 decimal places")
    return bar


def clears(matches: int, scored: int, bar: Decimal) -> bool:
    if scored <= 0:
        return False
    return Fraction(matches, scored) >= Fraction(bar)


def metrics_from_breakdown(rows: Iterable[tuple[str, str, str | None, int]], confusion_matrix: bool = True) -> dict:
    """Counts, raw accuracy and the confusion matrix from (verdict, expected, actual, n)
    (none for a fields decision: its expected values are whole objects)."""
    counts = {v.value: 0 for v in Verdict}
    confusion: dict[str, dict[str, int]] = {}
    invalid = 0
    for verdict, expected, actual, n in rows:
        counts[verdict] = counts.get(verdict, 0) + n
        if verdict in (Verdict.MATCH, Verdict.MISMATCH):
            if confusion_matrix:
                row = confusion.setdefault(expected, {})
                row[actual or INVALID_DECISION] = row.get(actual or INVALID_DECISION, 0) + n
            if actual == INVALID_DECISION:
                invalid += n
    scored = counts[Verdict.MATCH] + counts[Verdict.MISMATCH]
    return {
        "total": sum(counts.values()),
        "scored": scored,
        "matches": counts[Verdict.MATCH],
        "mismatches": counts[Verdict.MISMATCH],
        "errors": counts[Verdict.ERROR],
        "pending": counts[Verdict.PENDING],
        "stopped": counts[Verdict.STOPPED],
        "invalid": invalid,
        "accuracy": (counts[Verdict.MATCH] / scored) if scored else None,
        "confusion": confusion,
    }


def run_end(
    metrics: dict,
    dataset_name: str,
    error_kinds: dict[str, int] | None = None,
    stopped: bool = False,
    budget: str | None = None,
    max_error_rate: Decimal = Decimal(0),
) -> tuple[RunStatus, str | None]:
    """How a fully scored run ends: DONE, or ERROR with a reason a person can act on: how
    many items could not be scored and of which kinds (``error_kinds``: kind -> items),
    never which items nor what they said (``gate.verdict.reasons``; ``budget``: the first budget
    error, the gate's own words of the run's template). A run that ``stopped``
    before its items were all called is DONE: its update's verdict is the stop's
    (gate/verdict.py), its errors are shown. Errors within the mapping's ``max_error_rate``
    (the share of items, compared exactly) leave the run DONE, judged on the items scored:
    never a template over its budget, which makes every item of the run unscorable."""
    if stopped:
        return RunStatus.DONE, None
    if metrics["total"] == 0:
        return RunStatus.ERROR, f"dataset {dataset_name} has no rows: nothing to score"
    errors, total = metrics["errors"], metrics["total"]
    if errors and within_error_budget(errors, total, max_error_rate, error_kinds):
        return RunStatus.DONE, None
    if errors:
        over = f"; more than its max_error_rate of {format_bar(max_error_rate)}" if max_error_rate else ""
        return RunStatus.ERROR, errors_reason(errors, total, dataset_name, error_kinds, budget) + over
    return RunStatus.DONE, None


def within_error_budget(errors: int, total: int, max_error_rate: Decimal, error_kinds: dict | None) -> bool:
    """Whether a run's ERROR items are within its error budget (see ``run_end``)."""
    if not max_error_rate or (error_kinds and error_kinds.get(CallFailure.BUDGET.value)):
        return False
    return Fraction(errors, total) <= Fraction(max_error_rate)


def format_pct(matches: int, scored: int, bar: Any = None) -> str:
    """``matches``/``scored`` as a percentage with one decimal; against ``bar``, with as many
    more decimals as it takes for the printed number to sit on the same side of the bar as
    the exact one (26/30 against 0.8667 prints 86.667%, never 86.7% "< bar 86.67%")."""
    if not scored:
        return "n/a"
    exact = Fraction(matches, scored)
    limit = None if bar is None else Fraction(Decimal(bar))
    for digits in range(1, 12):
        shown = (Decimal(matches) * 100 / Decimal(scored)).quantize(Decimal(1).scaleb(-digits), ROUND_HALF_EVEN)
        if limit is None or (Fraction(shown) >= limit * 100) == (exact >= limit):
            break
    return f"{shown}%"


def format_bar(bar: Decimal) -> str:
    """A bar as a percentage with the digits it was written with and no trailing zeros:
    0.8667 → 86.67%, 0.85 → 85%, 0.867 (stored 0.8670) → 86.7%."""
    return f"{(Decimal(bar) * 100).normalize():f}%"
