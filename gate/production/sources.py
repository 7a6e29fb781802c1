"""Where the runtime loads a live prompt from, reports what it serves and sends feedback:
the gate's database (``DatabaseSource``: a ``gate.domain.Gate``) or its HTTP service
(``ServiceSource``: a read token, no database credentials; SQLAlchemy is never imported).

Through the service a prompt is read with a conditional request: the ETag of what was last
loaded goes in ``If-None-Match`` and an unchanged prompt costs one round trip answered 304,
no body. Each of the three uses (loading, reporting, feedback) has its own connection, as
each runs on its own thread."""

from __future__ import annotations

import base64
import logging
import time
from dataclasses import replace
from typing import Any

from gate.calls.providers import ProviderDecl, endpoint_for
from gate.errors import DatabaseError, GateError
from gate.prompt.spec import parse_spec

from .versions import CanaryRoute, LoadedPrompt, ServedVersion

log = logging.getLogger("gate.runtime")


class UnpinnedNote:
    """Says once per (prompt, version) that a version has no provider pinned with it."""

    def __init__(self):
        self.said: set[tuple[str, int]] = set()

    def __call__(self, name: str, version: int, provider: str) -> None:
        if (name, version) in self.said:
            return
        self.said.add((name, version))
        log.warning(
            "prompt %s v%s has no provider pinned with it (it went live before the gate pinned providers): "
            "its calls go to provider %s as the gate declares it now; apply it again through the gate to pin it",
            name,
            version,
            provider,
        )


def spec_of(config: dict, config_hash: str, name: str, cached: LoadedPrompt | None):
    """The parsed config, reused from the cache when its hash is the same."""
    if cached is not None:
        if cached.config_hash == config_hash:
            return cached.spec
        if cached.canary is not None and cached.canary.stable.config_hash == config_hash:
            return cached.canary.stable.spec
    return parse_spec(config, file=f"live prompt {name}")


def loaded(name: str, version: int, config_hash: str, spec, endpoint, canary, cached, etag=None) -> LoadedPrompt:
    """A fresh load; ``since`` kept when it serves what the cache served."""
    now = time.monotonic()
    same = (
        cached is not None
        and cached.version == version
        and (cached.canary is None) == (canary is None)
        and (canary is None or cached.canary.rollout_id == canary.rollout_id)
    )
    return LoadedPrompt(name, version, config_hash, spec, now, endpoint, canary, cached.since if same else now, etag)


class DatabaseSource:
    """The gate's database: ``gate`` (a ready ``gate.domain.Gate``), else one connected to
    ``database_url`` when first needed."""

    def __init__(self, database_url: str | None, settings, gate: Any = None):
        self.database_url, self.settings, self.gate = database_url, settings, gate
        self.unpinned = UnpinnedNote()

    def service(self) -> Any:
        if self.gate is None:
            from gate.domain import Gate  # imported late: the runtime needs no CLI deps

            self.gate = Gate.connect(self.database_url, settings=self.settings)
        return self.gate

    def fetch(self, name: str, cached: LoadedPrompt | None) -> LoadedPrompt:
        service = self.service()
        live = service.live(name)
        spec = spec_of(live.config, live.config_hash, name, cached)
        endpoint, pinned = service.live_endpoint(live, spec)
        if not pinned:
            self.unpinned(live.name, live.version, endpoint.provider)
        route = service.canary_of(name)
        canary = None
        if route is not None:
            stable_spec = spec_of(route["config"], route["config_hash"], name, cached)
            stable = ServedVersion(route["stable_version"], route["config_hash"], stable_spec, route["endpoint"])
            canary = CanaryRoute(route["id"], route["canary_percent"], stable)
        return loaded(live.name, live.version, live.config_hash, spec, endpoint, canary, cached)

    def report(self, rows: list[dict]) -> None:
        self.service().report_served(rows)

    def feedback(self, events: list[dict]) -> None:
        self.service().record_feedback(events)

    @staticmethod
    def retryable(exc: BaseException) -> bool:
        return isinstance(exc, DatabaseError) or not isinstance(exc, GateError)

    def after_fork_in_child(self) -> None:
        """The pool's connections are the parent's: the child opens its own (left open for
        the parent, as SQLAlchemy's ``dispose(close=False)`` is meant for)."""
        engine = getattr(self.gate, "engine", None)
        if engine is not None:
            engine.dispose(close=False)

    def close(self) -> None:
        pass


class ServiceSource:
    """The gate's service at ``url``: ``token`` (a runtime token for the prompts served, or a
    read token) loads and reports, ``feedback_token`` (feedback scope, or submit) sends
    feedback; it defaults to ``token``. Only a runtime token's load carries a canary's call
    key, so only its calls' feedback counts (issue 48)."""

    def __init__(self, url: str, token: str | None, feedback_token: str | None = None):
        from gate.client.served import ServedClient

        self.loader, self.reporter = ServedClient(url, token), ServedClient(url, token)
        self.sender = ServedClient(url, feedback_token or token)
        self.unpinned = UnpinnedNote()

    def fetch(self, name: str, cached: LoadedPrompt | None) -> LoadedPrompt:
        doc = self.loader.serve_document(name, cached.etag if cached is not None else None)
        if doc is None:  # 304: unchanged since the last load
            assert cached is not None  # a 304 answers the etag of a cached prompt
            return replace(cached, loaded_at=time.monotonic())
        spec = spec_of(doc["config"], doc["config_hash"], name, cached)
        endpoint = self._endpoint(name, doc["version"], doc)
        canary = None
        if doc.get("rollout"):
            r = doc["rollout"]
            stable_spec = spec_of(r["config"], r["config_hash"], name, cached)
            stable = ServedVersion(
                r["stable_version"], r["config_hash"], stable_spec, self._endpoint(name, r["stable_version"], r)
            )
            key = base64.urlsafe_b64decode(r["call_key"]) if isinstance(r.get("call_key"), str) else None
            canary = CanaryRoute(int(r["id"]), float(r["canary_percent"]), stable, key)
        return loaded(doc["name"], doc["version"], doc["config_hash"], spec, endpoint, canary, cached, doc["etag"])

    def _endpoint(self, name: str, version: int, declared: dict):
        decl = ProviderDecl.from_dict(declared["provider"]) if declared.get("provider") else None
        endpoint = endpoint_for(decl)
        if not declared.get("provider_pinned", True):
            self.unpinned(name, version, endpoint.provider)
        return endpoint

    def report(self, rows: list[dict]) -> None:
        self.reporter.report_served(rows)

    def feedback(self, events: list[dict]) -> None:
        self.sender.send_feedback(events)

    @staticmethod
    def retryable(exc: BaseException) -> bool:
        from gate.client.session import Unreachable

        return isinstance(exc, (Unreachable, DatabaseError)) or not isinstance(exc, GateError)

    def after_fork_in_child(self) -> None:
        """A connection kept for the next read is the parent's: the child connects anew."""
        for client in (self.loader, self.reporter, self.sender):
            client.http.forget()

    def close(self) -> None:
        for client in (self.loader, self.reporter, self.sender):
            client.close()
