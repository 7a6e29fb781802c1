"""Spend caps: the gate config's ``limits:`` (default branch only, like the bars and the
prices) bound what one update may spend on model calls::

    limits:
      max_calls_per_update: 2000         # model calls, every run of the update (baselines too)
      max_cost_per_update_usd: 5         # US dollars, at the prices: of the gate config

Both are pinned with the update at submit (a pull request cannot raise its own cap: its
config is only diffed), with the upper bound of its calls (items × trials of every run,
less the runs known to need none: a live version already scored on the pinned dataset
version). The executor reserves every call before it makes it, atomically across every
worker process (``store.spend.reserve_spend``: one conditional UPDATE of the update's row): the
call count by one, the cost by the most the call can cost — its request's bytes as input
tokens (a token is at least a byte) plus framing, and its ``max_tokens`` as output, at the
model's price — settled to the real cost when the answer comes. So execution never
exceeds a cap; the update that needs a call beyond one stops (its remaining items are not
called) and ends FAILED, saying which cap and the figures.

A cost cap needs every call's cost bounded before it is made: the model must have a price
and the prompt a ``max_tokens`` (or ``max_completion_tokens``); a submission whose
candidate, or whose live version scored alongside it, has neither is refused.

This module parses, describes and computes; the store reserves, the executor calls
(workers/execute/spend.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from gate.errors import SpecError, UsageError

NANO = Decimal(10) ** 9  # reservations count US dollars in units of 1e-9 (whole numbers, exact)
KEYS = ("max_calls_per_update", "max_cost_per_update_usd")
MAX_CALLS = 10**12
MAX_COST = Decimal(10**9)
FRAMING_TOKENS = 16  # the request's framing beyond its bytes, per call and per message
CHANGE_TEXT = {
    "limit-added": "limit {subject}: new, {after}",
    "limit-changed": "limit {subject}: {before} → {after}",
    "limit-removed": "limit {subject}: removed (was {before})",
}


@dataclass(frozen=True)
class SpendLimits:
    max_calls_per_update: int | None = None
    max_cost_per_update_usd: Decimal | None = None

    def __bool__(self) -> bool:
        return self.max_calls_per_update is not None or self.max_cost_per_update_usd is not None

    @classmethod
    def parse(cls, raw: Any, file: str | None = None) -> SpendLimits:
        """The ``limits:`` section (None: none); a wrong value is a SpecError naming it."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise SpecError(
                file, "limits", "must be a mapping with max_calls_per_update and/or max_cost_per_update_usd"
            )
        unknown = [k for k in raw if k not in KEYS]
        if unknown:
            raise SpecError(file, f"limits.{str(unknown[0])[:40]}", f"unknown field; limits are {', '.join(KEYS)}")
        try:
            return cls.from_values(raw.get("max_calls_per_update"), raw.get("max_cost_per_update_usd"))
        except UsageError as exc:
            raise SpecError(file, f"limits.{exc.args[0].split()[0]}", str(exc)) from None

    @classmethod
    def from_values(cls, calls: Any, cost: Any) -> SpendLimits:
        return cls(_calls(calls), _cost(cost))

    @classmethod
    def from_rows(cls, rows: Mapping[str, str]) -> SpendLimits:
        """From the gate's table (``store.spend.list_limits``)."""
        return cls.from_values(rows.get("max_calls_per_update"), rows.get("max_cost_per_update_usd"))

    def rows(self) -> dict[str, str]:
        out = {}
        if self.max_calls_per_update is not None:
            out["max_calls_per_update"] = str(self.max_calls_per_update)
        if self.max_cost_per_update_usd is not None:
            out["max_cost_per_update_usd"] = f"{self.max_cost_per_update_usd:f}"
        return out

    @property
    def max_cost_nanousd(self) -> int | None:
        return None if self.max_cost_per_update_usd is None else int(self.max_cost_per_update_usd * NANO)


def _calls(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise UsageError(f"max_calls_per_update {value!r} is not a whole number of calls ≥ 1")
    calls = int(str(value).strip())
    if not 1 <= calls <= MAX_CALLS:
        raise UsageError(f"max_calls_per_update {value!r} is out of range: 1 to {MAX_CALLS}")
    return calls


def _cost(value: Any) -> Decimal | None:
    if value is None:
        return None
    try:
        amount = (
            Decimal(str(value).strip())
            if isinstance(value, (int, float, str)) and not isinstance(value, bool)
            else Decimal("NaN")
        )
    except (InvalidOperation, ValueError):
        raise UsageError(f"max_cost_per_update_usd {value!r} is not a number of US dollars") from None
    exponent = amount.as_tuple().exponent  # an int; 'n', 'N' or 'F' when not finite (refused first)
    if not amount.is_finite() or amount <= 0 or amount > MAX_COST or (isinstance(exponent, int) and exponent < -9):
        raise UsageError(
            f"max_cost_per_update_usd {value!r} is out of range: above 0, at most {MAX_COST:,} "
            "dollars, at most 9 decimals"
        )
    return Decimal(format(amount.normalize(), "f"))


def describe(name: str, value: str) -> str:
    return f"${value}" if name == "max_cost_per_update_usd" else f"{int(value):,} calls"


def limit_changes(registered: Mapping[str, str], declared: Mapping[str, str]) -> list[tuple]:
    """What syncing ``declared`` over ``registered`` changes, as ``gateconfig.Change`` fields."""
    out: list[tuple] = []
    for name in KEYS:
        have, want = registered.get(name), declared.get(name)
        if have is None and want is not None:
            out.append(("limit-added", name, None, describe(name, want), (name,)))
        elif have is not None and want is None:
            out.append(("limit-removed", name, describe(name, have), None, (name,)))
        elif have is not None and want is not None and Decimal(have) != Decimal(want):
            out.append(("limit-changed", name, describe(name, have), describe(name, want), (name,)))
    return out


# --- what a call may cost -------------------------------------------------------------------------


def output_bound(params: Mapping[str, Any] | None) -> int | None:
    """The most output tokens a call may take: its max_tokens or max_completion_tokens, the
    larger when it sets both (providers differ in which one they honour: vLLM takes
    max_completion_tokens first)."""
    params = params or {}
    found = [int(params[k]) for k in ("max_tokens", "max_completion_tokens") if params.get(k)]
    return max(found) if found else None


def usd_nano(tokens_in: int, tokens_out: int, price: Mapping[str, str]) -> int:
    """A call's cost at ``price`` (a pinned ``Price.to_dict()``) in nano-dollars, rounded up."""
    cost = (
        tokens_in * Decimal(price["input_per_million"]) + tokens_out * Decimal(price["output_per_million"])
    ) / 1_000_000
    return math.ceil(cost * NANO)


def call_bound(request: Mapping[str, Any], max_output: int, price: Mapping[str, str]) -> int:
    """The most one call of ``request`` (its body: model, messages, parameters) can cost:
    every byte of the body an input token, plus framing, and ``max_output`` output tokens."""
    body = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
    messages = len(request.get("messages") or ())
    return usd_nano(len(body) + FRAMING_TOKENS * (messages + 1), max_output, price)


def nano_text(nanousd: int) -> str:
    """Nano-dollars as exact dollars: "2.4981"."""
    return format((Decimal(nanousd) / NANO).normalize(), "f")
