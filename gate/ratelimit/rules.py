"""Limits: ``PROMPTGATE_RATE_LIMITS`` parsed (``parse_limits``), the buckets a call to a
model spends from (``Limits.buckets_for``) and a call's token cost (``estimate_tokens``).
The syntax is documented in ``gate.ratelimit``."""

from __future__ import annotations

import fnmatch
import hashlib
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gate.calls.spend_caps import output_bound
from gate.errors import UsageError

DEFAULT_HOST = "api.openai.com"
DEFAULT_COMPLETION_TOKENS = 16
KEY_LIMIT = 191  # bucket names fit an indexed VARCHAR(191)


@dataclass(frozen=True)
class Limit:
    """One entry of PROMPTGATE_RATE_LIMITS."""

    pattern: str
    host: str | None = None
    rpm: float | None = None
    tpm: float | None = None
    burst: float | None = None
    tpm_burst: float | None = None

    def matches(self, host: str, model: str) -> bool:
        if self.host is not None and self.host.lower() != host.lower():
            return False
        return fnmatch.fnmatchcase(model, self.pattern)

    @property
    def exact(self) -> bool:
        return not any(c in self.pattern for c in "*?[")


@dataclass(frozen=True)
class BucketSpec:
    """A bucket one call spends from: its shared name, size and refill rate."""

    key: str
    capacity: float
    refill_per_second: float
    unit: str  # "requests" or "tokens"


OPTIONS = ("rpm", "tpm", "burst", "tpm_burst")


def parse_limits(text: str | None) -> list[Limit]:
    """``PROMPTGATE_RATE_LIMITS`` as a list of limits; UsageError names the bad part."""
    limits = []
    for raw in (text or "").replace("\n", ";").split(";"):
        entry = raw.strip()
        if not entry:
            continue
        where = f"PROMPTGATE_RATE_LIMITS entry {entry!r}"
        if "=" not in entry:
            raise UsageError(f"{where}: expected MODEL=rpm:N,tpm:N (e.g. gpt-4o-mini=rpm:500,tpm:200000)")
        left, right = (part.strip() for part in entry.split("=", 1))
        pattern, _, at_host = left.partition("@")
        pattern, host = pattern.strip(), at_host.strip() or None
        if not pattern:
            raise UsageError(f"{where}: the model name (or * for every model) is missing")
        values: dict[str, float] = {}
        for option in filter(None, (o.strip() for o in right.split(","))):
            name, sep, value = (p.strip() for p in option.partition(":"))
            name = name.lower().replace("-", "_")
            if not sep or name not in OPTIONS:
                raise UsageError(f"{where}: unknown option {option!r}; use {', '.join(o + ':N' for o in OPTIONS)}")
            try:
                number = float(value)
            except ValueError:
                raise UsageError(f"{where}: {name} must be a number, got {value!r}") from None
            if not math.isfinite(number) or number <= 0:
                raise UsageError(f"{where}: {name} must be a positive number, got {value!r}")
            values[name] = number
        if "rpm" not in values and "tpm" not in values:
            raise UsageError(f"{where}: give rpm:N (requests per minute), tpm:N (tokens per minute) or both")
        if "burst" in values and "rpm" not in values or "tpm_burst" in values and "tpm" not in values:
            raise UsageError(f"{where}: burst goes with rpm and tpm_burst with tpm")
        limits.append(Limit(pattern, host, **values))
    return limits


class Limits:
    """The configured limits and the buckets a call to (host, model) spends from."""

    def __init__(self, limits: list[Limit], headroom: float = 0.97):
        if not 0 < headroom <= 1:
            raise UsageError(f"PROMPTGATE_RATE_LIMIT_HEADROOM must be in (0, 1], got {headroom}")
        self.limits = limits
        self.headroom = headroom
        self._cache: dict[tuple[str, str], list[BucketSpec]] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings) -> Limits:
        return cls(parse_limits(settings.rate_limits), settings.rate_limit_headroom)

    def __bool__(self) -> bool:
        return bool(self.limits)

    def match(self, host: str, model: str) -> Limit | None:
        exact = [lim for lim in self.limits if lim.exact and lim.matches(host, model)]
        found = exact or [lim for lim in self.limits if not lim.exact and lim.matches(host, model)]
        return found[0] if found else None

    def buckets_for(self, host: str, model: str) -> list[BucketSpec]:
        with self._lock:
            cached = self._cache.get((host, model))
        if cached is not None:
            return cached
        limit = self.match(host, model)
        buckets = []
        if limit is not None:
            for unit, rate, burst, suffix in (
                ("requests", limit.rpm, limit.burst, "rpm"),
                ("tokens", limit.tpm, limit.tpm_burst, "tpm"),
            ):
                if rate:
                    per_second = rate / 60.0
                    capacity = burst or max(1.0, math.ceil(per_second))
                    buckets.append(
                        BucketSpec(bucket_key(host, model, suffix), float(capacity), per_second * self.headroom, unit)
                    )
        with self._lock:
            self._cache[(host, model)] = buckets
        return buckets


def bucket_key(host: str, model: str, suffix: str) -> str:
    key = f"{host.lower()}|{model}|{suffix}"
    if len(key) > KEY_LIMIT:
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        key = f"{key[: KEY_LIMIT - 38]}~{digest}|{suffix}"
    return key


def endpoint_host(base_url: str | None) -> str:
    """host[:port] of the endpoint a call goes to (its provider's base_url, or the SDK's
    default)."""
    if not base_url:
        return DEFAULT_HOST
    return urlsplit(base_url).netloc or base_url


def estimate_tokens(spec, messages: Sequence[Mapping[str, Any]]) -> int:
    """A call's token cost before it is sent, from its rendered messages, their tool calls'
    arguments and the prompt's tools (see the ``gate.ratelimit`` docstring)."""
    completion = output_bound(getattr(spec, "params", None)) or DEFAULT_COMPLETION_TOKENS  # the larger of the two
    chars = sum(len(m.get("content") or "") for m in messages)
    chars += sum(len(c["function"]["arguments"]) for m in messages for c in m.get("tool_calls") or ())
    chars += sum(
        len(t.name) + len(t.description or "") + len(t.parameters_json or "") for t in getattr(spec, "tools", ())
    )
    return math.ceil(chars / 4) + 4 * len(messages) + int(completion)
