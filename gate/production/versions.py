"""The versions one runtime process serves of a prompt: the live one (``LoadedPrompt``) and,
during a canary rollout, the stable one beside it (``CanaryRoute``), and which of them
answers a call (``route``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gate.calls.providers import Endpoint
from gate.prompt.spec import PromptSpec
from gate.rollout.routing import goes_to_canary


@dataclass(frozen=True)
class ServedVersion:
    version: int
    config_hash: str
    spec: PromptSpec
    endpoint: Endpoint | None = None


@dataclass(frozen=True)
class CanaryRoute:
    """A rollout in progress: ``percent`` of calls go to the live version (the canary), the
    others to ``stable``."""

    rollout_id: int
    percent: float
    stable: ServedVersion
    call_key: bytes | None = field(default=None, repr=False)  # the rollout's call key (a runtime token's load)


@dataclass(frozen=True)
class LoadedPrompt:
    """One live version, as loaded (and during a canary rollout, the stable one beside it)."""

    name: str
    version: int
    config_hash: str
    spec: PromptSpec
    loaded_at: float  # time.monotonic() of the last load (a refresh that found it unchanged too)
    endpoint: Endpoint | None = None  # where its calls go
    canary: CanaryRoute | None = None  # a rollout in progress: this version is its canary
    since: float = 0.0  # time.monotonic() when this process began serving this version (and route)
    etag: str | None = None  # through the service: what an unchanged prompt's conditional request sends

    def rollout_id(self) -> int | None:
        return None if self.canary is None else self.canary.rollout_id


def route(loaded: LoadedPrompt, key: object | None) -> tuple[ServedVersion, str | None]:
    """The version that answers a call with ``key`` (None: at random) and its arm."""
    canary = loaded.canary
    live = ServedVersion(loaded.version, loaded.config_hash, loaded.spec, loaded.endpoint)
    if canary is None:
        return live, None
    if goes_to_canary(key, canary.rollout_id, canary.percent):
        return live, "canary"
    return canary.stable, "stable"
