"""Which of a mapping's bars its prompt's kind can compute (``DecisionKind.bars_computable``),
asked where a mapping is made or used: `dataset map` and `sync` refuse a bar the kind
cannot compute, `sync --dry-run` warns of one a mapping holds already, and submit refuses
it; each in one line naming the bar and the kind (issue 46.4). Settings kept with the bars
(``confidence``, ``early_stop``, ``slice_by``, ...) are no bars and never refused."""

from __future__ import annotations

from gate.verdict.bars import Bars

from .base import DecisionKind
from .compared import COMPARED
from .registry import KINDS

# Every bar some kind computes: a mapping's key outside it is a setting.
ALL_BARS = frozenset().union(*(k.bars_computable for k in (*KINDS.values(), COMPARED)))


def bars_set(bars: Bars) -> list[str]:
    """The bars a mapping sets, in their stored order (``min_accuracy`` first: every mapping's)."""
    return ["min_accuracy", *(name for name in bars.extra() or {} if name in ALL_BARS)]


def uncomputable(kind: DecisionKind, bars: Bars) -> list[str]:
    """The bars a mapping sets that a run of ``kind`` cannot compute."""
    return [name for name in bars_set(bars) if name not in kind.bars_computable]


def refusal(prompt: str, dataset: str, kind: DecisionKind, bars: Bars) -> str | None:
    """One line naming the first bar ``kind`` cannot compute (and how many more), or None."""
    missing = uncomputable(kind, bars)
    if not missing:
        return None
    more = f" (and {', '.join(missing[1:])})" if missing[1:] else ""
    return (
        f"{prompt} × {dataset}: bar {missing[0]}{more} cannot be computed for a {kind.name} prompt "
        f"({kind.bar_scope}): drop it from the mapping"
    )
