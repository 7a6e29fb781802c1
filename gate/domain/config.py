"""What the gate config declares beyond datasets and bars, on the domain API (``Config``, a
service of ``Gate``): providers, the price table, the spend caps and each prompt's optional fields."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

from gate import db
from gate.calls.providers import Endpoint, ProviderDecl, endpoint_for, resolve
from gate.calls.spend_caps import KEYS as SPEND_KEYS
from gate.calls.spend_caps import SpendLimits
from gate.errors import UsageError
from gate.prompt.call_settings import check_name
from gate.records import Price
from gate.store.prices import delete_price, list_prices, upsert_price
from gate.store.prompt_settings import list_optional_fields, set_optional_fields
from gate.store.providers import delete_provider, list_providers, upsert_provider
from gate.store.spend import delete_limit, list_limits, set_limit

from .boundary import driver_errors_become_gate_errors

if TYPE_CHECKING:  # the prompt's parser (Jinja2, YAML) is loaded by what reads a prompt, not by this module
    from gate.prompt.spec import PromptSpec


@driver_errors_become_gate_errors
class Config:
    """Providers, prices, limits and optional fields, on one gate database (``engine``)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def providers(self) -> dict[str, ProviderDecl]:
        """The providers the gate config declared (``gate.calls.providers``)."""
        with self.engine.connect() as conn:
            return list_providers(conn)

    def register_provider(self, decl: ProviderDecl) -> None:
        db.transaction(self.engine, lambda conn: upsert_provider(conn, decl))

    def remove_provider(self, name: str) -> bool:
        return db.transaction(self.engine, lambda conn: delete_provider(conn, name))

    def endpoint(self, spec: PromptSpec) -> Endpoint:
        """Where this process sends the calls of ``spec`` (the production runtime): its
        provider as declared now, the key from this process's environment."""
        return endpoint_for(resolve(spec.provider, spec.model, self.providers()))

    def prices(self) -> dict[str, Price]:
        """The price table the gate config declared (``gate.calls.prices``): model → Price."""
        with self.engine.connect() as conn:
            return list_prices(conn)

    def set_price(self, price: Price) -> bool:
        """Set (or change) a model's price; True when the model had none."""
        return db.transaction(self.engine, lambda conn: upsert_price(conn, price))

    def remove_price(self, model: str) -> bool:
        return db.transaction(self.engine, lambda conn: delete_price(conn, model))

    def limits(self) -> dict[str, str]:
        """The spend caps the gate config declared (``gate.calls.spend_caps``): name → value text."""
        with self.engine.connect() as conn:
            return list_limits(conn)

    def set_limit(self, name: str, value: str) -> bool:
        """Set (or change) one spend cap, checked as the gate config checks it."""
        if name not in SPEND_KEYS:
            raise UsageError(f"unknown limit {name!r}: use {', '.join(SPEND_KEYS)}")
        checked = SpendLimits.from_values(*(value if key == name else None for key in SPEND_KEYS)).rows()[name]
        return db.transaction(self.engine, lambda conn: set_limit(conn, name, checked))

    def remove_limit(self, name: str) -> bool:
        return db.transaction(self.engine, lambda conn: delete_limit(conn, name))

    def optional_fields(self) -> dict[str, list[str]]:
        """prompt → the item fields its templates may read although no dataset row has
        them (the gate config's ``optional_fields``; ``gate.domain.admission``)."""
        with self.engine.connect() as conn:
            return list_optional_fields(conn)

    def set_optional_fields(self, prompt_name: str, fields: list[str]) -> None:
        """Set a prompt's optional fields; none: cleared (the prompt's other settings, its
        rollout, stay)."""
        check_name(prompt_name, "prompt name")
        db.transaction(self.engine, lambda conn: set_optional_fields(conn, prompt_name, list(fields)))
