"""The gate config's price table (``prices:``): US dollars per million input and output
tokens of each model, named exactly as prompts name it in ``model:``::

    prices:
      gpt-4o-mini: {input: 0.15, output: 0.60}

Like the providers, the table comes only from the gate config on the default branch (a
pull request's config is only diffed); workers compute a run's cost with the price its
submission pinned. The file is untrusted input: every wrong value is a SpecError naming
the field. Amounts are exact ``Decimal`` values, read from the scalar's text (a YAML float
through its shortest round-trip text, so ``0.15`` is 0.15, not 0.1499999...).

This module parses, describes and plans; ``gate.gateconfig`` wraps the plan in its
``Change`` and ``sync`` applies it through the service (``set_price``, ``remove_price``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from gate.errors import SpecError
from gate.prompt.call_settings import MODEL_RE
from gate.records import Price

FIELDS = ("input", "output")
MAX_MODELS = 1_000
MAX_MODEL_CHARS = 128
MAX_PRICE = Decimal(1_000_000)
MAX_DECIMALS = 9
NUMBER_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
SHAPE = "model → {input: USD per 1M input tokens, output: USD per 1M output tokens}"

# the plan's lines, merged into gateconfig.CHANGE_TEXT
CHANGE_TEXT = {
    "price-added": "price {subject}: new, {after}",
    "price-changed": "price {subject}: {before} → {after}",
    "price-removed": "price {subject}: removed (was {before})",
}


def parse_prices(raw: Any, file: str | None = None) -> dict[str, Price]:
    """The ``prices:`` section (None or absent: no prices) as model → Price."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SpecError(file, "prices", f"must be a mapping of {SHAPE}")
    if len(raw) > MAX_MODELS:
        raise SpecError(file, "prices", f"declares {len(raw)} models: at most {MAX_MODELS}")
    return {model: _parse_price(model, decl, file) for model, decl in raw.items()}


def _parse_price(model: Any, decl: Any, file: str | None) -> Price:
    where = f"prices.{str(model)[:40]}"
    if not isinstance(model, str) or not model or len(model) > MAX_MODEL_CHARS or not MODEL_RE.fullmatch(model):
        raise SpecError(
            file,
            where,
            f"{str(model)[:40]!r} is not a model name (as prompts write it in model: "
            f"letters, digits and . _ : / @ + -, at most {MAX_MODEL_CHARS} characters)",
        )
    if not isinstance(decl, Mapping):
        raise SpecError(
            file, where, "must be a mapping with input and output (USD per 1M tokens), e.g. {input: 0.15, output: 0.60}"
        )
    extra = [k for k in decl if k not in FIELDS]
    if extra:
        raise SpecError(file, f"{where}.{str(extra[0])[:40]}", f"unknown field; a price has {', '.join(FIELDS)}")
    amounts = {key: _amount(decl.get(key), f"{where}.{key}", file) for key in FIELDS}
    return Price(model, amounts["input"], amounts["output"])


def _amount(value: Any, where: str, file: str | None) -> Decimal:
    if value is None:
        raise SpecError(file, where, "is required: US dollars per 1M tokens, e.g. 0.15")
    try:
        text = str(value).strip() if isinstance(value, (int, float, str)) and not isinstance(value, bool) else ""
    except ValueError:  # an int of more than 4,300 digits
        raise SpecError(file, where, f"is out of range: 0 to {MAX_PRICE:,} dollars per 1M tokens") from None
    if not NUMBER_RE.fullmatch(text):
        if isinstance(value, float):  # .inf, .nan
            raise SpecError(file, where, f"{text} is not a finite number: 0 to {MAX_PRICE:,} dollars per 1M tokens")
        shown = repr(value[:40]) if isinstance(value, str) else f"a {type(value).__name__}"
        raise SpecError(file, where, f"{shown} is not a number of US dollars per 1M tokens, e.g. 0.15")
    try:
        amount = Decimal(text)
    except (InvalidOperation, ValueError):
        raise SpecError(file, where, f"{text[:40]!r} is not a number of US dollars per 1M tokens") from None
    if amount < 0 or amount > MAX_PRICE:
        raise SpecError(file, where, f"{text[:40]} is out of range: 0 to {MAX_PRICE:,} dollars per 1M tokens")
    if amount == 0:
        return Decimal(0)
    _, digits, exponent = amount.as_tuple()
    assert isinstance(exponent, int)  # finite: NaN and the infinities were refused above
    if exponent + len(digits) - len("".join(map(str, digits)).rstrip("0")) < -MAX_DECIMALS:
        raise SpecError(file, where, f"{text[:40]} has more than {MAX_DECIMALS} decimal places")
    return Decimal(format(amount.normalize(), "f"))  # 1E+3 → 1000, 0.150 → 0.15


def money(amount: Decimal) -> str:
    """ "$0.15", "$0.60", "$3.00", "$0.000125": cents always shown, more digits when there are."""
    amount = Decimal(amount)
    if amount == amount.quantize(Decimal("0.01")):
        return f"${amount:.2f}"
    return "$" + format(amount.normalize(), "f")


def describe_price(price: Price) -> str:
    """ "$0.15 in / $0.60 out per 1M tokens"."""
    return f"{money(price.input_per_million)} in / {money(price.output_per_million)} out per 1M tokens"


def same_price(a: Price, b: Price) -> bool:
    """Compared as values: a stored "0.150" and a declared 0.15 are the same price."""
    return (Decimal(a.input_per_million), Decimal(a.output_per_million)) == (
        Decimal(b.input_per_million),
        Decimal(b.output_per_million),
    )


def price_changes(
    registered: Mapping[str, Price], declared: Mapping[str, Price]
) -> list[tuple[str, str, str | None, str | None, tuple[str]]]:
    """What syncing ``declared`` (the file) over ``registered`` (the gate) changes, as
    (kind, model, before, after, key) — the fields of ``gateconfig.Change``."""
    changes: list[tuple[str, str, str | None, str | None, tuple[str]]] = []
    for model, want in sorted(declared.items()):
        have = registered.get(model)
        if have is None:
            changes.append(("price-added", model, None, describe_price(want), (model,)))
        elif not same_price(have, want):
            changes.append(("price-changed", model, describe_price(have), describe_price(want), (model,)))
    for model in sorted(registered.keys() - declared.keys()):
        changes.append(("price-removed", model, describe_price(registered[model]), None, (model,)))
    return changes


def apply_price_change(gate: Any, kind: str, model: str, declared: Mapping[str, Price]) -> None:
    """Carry out one planned change through the service (``gate``: a ``Gate``)."""
    if kind == "price-removed":
        gate.remove_price(model)
    elif kind in ("price-added", "price-changed"):
        gate.set_price(declared[model])


__all__ = [
    "CHANGE_TEXT",
    "FIELDS",
    "MAX_MODELS",
    "apply_price_change",
    "describe_price",
    "money",
    "parse_prices",
    "price_changes",
    "same_price",
]
