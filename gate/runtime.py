"""The production helper: the live prompt from the database, called the way the gate
evaluated it.

::

    from gate.runtime import PromptRuntime

    rt = PromptRuntime("mysql+pymysql://app:secret@db/promptgate", ttl=30)
    urgency = rt.prompt("ticket-urgency")
    result = urgency.decide({"subject": "Site down", "text": "Checkout returns 500"})
    print(urgency.version, result.decision)

``decide`` returns the ``CallResult``: the decision, the answer's text (``raw_output``) and,
for a prompt with tools, the calls the model made (``tool_calls``: each a name, its
arguments parsed, and their problem, if they were not JSON or not of the function's
schema), read as the gate read them when it judged the version::

    router = rt.prompt("support-router")
    result = router.decide({"messages": conversation})
    for call in result.tool_calls:
        handlers[call.name](**call.arguments)

``rt.prompt(name)`` returns a handle; the handle re-reads the live row at most once per
``ttl`` seconds, so an applied change reaches production within ``ttl``. ``decide`` goes
through ``gate.calls.llm.call_prompt``, the very function the executor scores candidates with,
rendering templates under the same budget, to the provider the live version was
evaluated with: the declaration pinned with the update that applied it (URL, models, the
*name* of the key's variable; the key from this process's environment). A later change of
the gate config's providers does not move production's calls; applying the prompt again
through the gate does. A version live since before the gate pinned providers has none on
record: its provider is resolved as the gate declares it now, and the log says so once.
If the database cannot be read on a refresh, the last loaded version keeps serving (and
the failure is logged); only the first load of a name raises.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gate.calls.llm import CallResult, call_prompt
from gate.calls.providers import Endpoint
from gate.errors import ModelCallError
from gate.prompt.spec import PromptSpec, parse_spec
from gate.prompt.tool_decision import ToolCall
from gate.settings import Settings

log = logging.getLogger(__name__)

__all__ = ["PromptRuntime", "RuntimePrompt", "LoadedPrompt", "CallResult", "ToolCall", "call_prompt"]


@dataclass(frozen=True)
class LoadedPrompt:
    """One live version, as loaded."""

    name: str
    version: int
    config_hash: str
    spec: PromptSpec
    loaded_at: float  # time.monotonic() of the load
    endpoint: Endpoint | None = None  # where its calls go


class PromptRuntime:
    def __init__(
        self, database_url: str | None = None, *, ttl: float = 30.0, settings: Settings | None = None, gate: Any = None
    ):
        """``gate`` is a ready ``gate.service.Gate`` (else one is connected to
        ``database_url``, default ``PROMPTGATE_DATABASE_URL``)."""
        self.settings = settings or Settings.from_env()
        self.ttl = float(ttl)
        self._database_url = database_url or self.settings.database_url
        self._gate = gate
        self._cache: dict[str, LoadedPrompt] = {}
        self._lock = threading.Lock()
        self._unpinned_said: set[tuple[str, int]] = set()  # (name, version) whose fallback was logged

    def prompt(self, name: str) -> RuntimePrompt:
        """A handle on the live prompt ``name``; raises NotFound when there is none."""
        self.load(name)
        return RuntimePrompt(self, name)

    def decide(self, name: str, item: Mapping[str, Any]) -> CallResult:
        loaded = self.load(name)
        return call_prompt(loaded.spec, item, settings=self.settings, endpoint=loaded.endpoint)

    def load(self, name: str) -> LoadedPrompt:
        """The cached live version, re-read when older than ``ttl``."""
        cached = self._cache.get(name)
        if cached is not None and time.monotonic() - cached.loaded_at < self.ttl:
            return cached
        with self._lock:
            cached = self._cache.get(name)
            if cached is not None and time.monotonic() - cached.loaded_at < self.ttl:
                return cached
            try:
                fresh = self._fetch(name)
            except Exception:
                if cached is None:
                    raise
                log.warning("cannot refresh prompt %s; serving version %s", name, cached.version, exc_info=True)
                fresh = LoadedPrompt(
                    cached.name, cached.version, cached.config_hash, cached.spec, time.monotonic(), cached.endpoint
                )
            self._cache[name] = fresh
            return fresh

    def invalidate(self, name: str | None = None) -> None:
        with self._lock:
            if name is None:
                self._cache.clear()
            else:
                self._cache.pop(name, None)

    def _fetch(self, name: str) -> LoadedPrompt:
        service = self._service()
        live = service.live(name)
        cached = self._cache.get(name)
        if cached is not None and cached.config_hash == live.config_hash:
            spec = cached.spec
        else:
            spec = parse_spec(live.config, file=f"live prompt {name}")
        endpoint, pinned = service.live_endpoint(live, spec)
        if not pinned and (live.name, live.version) not in self._unpinned_said:
            self._unpinned_said.add((live.name, live.version))
            log.warning(
                "prompt %s v%s has no provider pinned with it (it went live before the gate pinned providers): "
                "its calls go to provider %s as the gate declares it now; apply it again through the gate to pin it",
                live.name,
                live.version,
                endpoint.provider,
            )
        return LoadedPrompt(live.name, live.version, live.config_hash, spec, time.monotonic(), endpoint)

    def _service(self) -> Any:
        if self._gate is None:
            from gate.service import Gate  # imported late: the runtime needs no CLI deps

            self._gate = Gate.connect(self._database_url, settings=self.settings)
        return self._gate


class RuntimePrompt:
    """A live prompt by name; every attribute read is at most ``ttl`` seconds old."""

    def __init__(self, runtime: PromptRuntime, name: str):
        self._runtime, self.name = runtime, name

    @property
    def current(self) -> LoadedPrompt:
        return self._runtime.load(self.name)

    @property
    def version(self) -> int:
        return self.current.version

    @property
    def config_hash(self) -> str:
        return self.current.config_hash

    @property
    def spec(self) -> PromptSpec:
        return self.current.spec

    @property
    def labels(self) -> tuple[str, ...]:
        return self.current.spec.labels

    def decide(self, item: Mapping[str, Any]) -> CallResult:
        """Call the live version on one item (see ``gate.calls.llm.call_prompt``). A call that
        fails raises ModelCallError whose one line names the provider, its URL and where the URL
        came from (OPENAI_BASE_URL unset: the SDK's default), without the SDK's chained
        traceback behind it."""
        current = self.current
        try:
            return call_prompt(current.spec, item, settings=self._runtime.settings, endpoint=current.endpoint)
        except ModelCallError as exc:
            failure = exc
        failure.__cause__, failure.__suppress_context__ = None, True
        raise failure

    def __repr__(self) -> str:
        cached = self._runtime._cache.get(self.name)
        return f"RuntimePrompt({self.name!r}, version={cached.version if cached else None})"
