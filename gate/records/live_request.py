"""A request to change the live row, as the store returns it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LiveRequest:
    """A request to change the live row (``live_request``; ``gate.states.LiveRequestStatus``):
    a person's rollback (``kind`` 'rollback') or a canary's decision ('canary', with its
    ``rollout_id``, ``decision`` and ``figures``), carried out by the reconcile step.
    ``seen_version``: the live version the request saw; ``target_version``: the version whose
    config goes live. ``outcome``: what carrying it out did; ``refusal``: why it was not."""

    id: int
    prompt_name: str
    kind: str
    status: str
    seen_version: int
    target_version: int
    rollout_id: int | None = None
    decision: str | None = None
    figures: dict[str, Any] | None = None
    actor: str | None = None
    reason: str | None = None
    outcome: dict[str, Any] | None = None
    refusal: str | None = None
    age_seconds: float = 0.0  # since it was asked, by the database's clock (when claimed)
