"""Providers: where model requests go and which key they carry, declared by the gate.

A prompt file comes from a pull request, so it may only *name* a provider (``provider:
azure-east``) or leave it out (the default provider: ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY`` of the process that calls). Before, a prompt file could carry
``base_url`` and ``api_key_env`` itself: a pull request sent the workers' requests, with
the value of any environment variable as the bearer token, to a server of its choosing.

Declarations come from places a pull request cannot write:

* the gate config synced from the default branch (``providers:``, next to the bars)::

      providers:
        azure-east:
          base_url: https://east.example.openai.azure.com/openai/v1
          api_key_env: AZURE_EAST_KEY          # the NAME of the variable; never the key
          models: [gpt-4o*, gpt-4.1-mini]      # optional globs; default: any model

* the environment of the process, ``PROMPTGATE_PROVIDERS`` as a JSON object of the same
  shape (``{"local": {"base_url": "http://127.0.0.1:8000/v1"}}``); it wins over a gate
  config entry of the same name.

A submission resolves the name (an unknown name, or a model the provider does not serve,
is refused with one line) and the update pins the declaration it was judged with; the
workers read only the key variable that declaration names. Key variables may not be the
gate's own (``PROMPTGATE_*``) or the CI's (``GITHUB_*``, ``ACTIONS_*``, ``RUNNER_*``,
``INPUT_*``).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from gate.errors import SpecError, UsageError

DEFAULT = "default"
PLACEHOLDER_API_KEY = "sk-no-key-required"
FIELDS = ("base_url", "api_key_env", "models")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")  # fullmatch
RESERVED_ENV_PREFIXES = ("PROMPTGATE_", "GITHUB_", "ACTIONS_", "RUNNER_", "INPUT_")
NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")


@dataclass(frozen=True)
class ProviderDecl:
    """One declared provider: its name, endpoint, key variable and the models it serves."""

    name: str
    base_url: str
    api_key_env: str | None = None
    models: tuple[str, ...] = ()  # globs; empty: any model

    def serves(self, model: str) -> bool:
        return not self.models or any(fnmatch.fnmatchcase(model, glob) for glob in self.models)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "models": list(self.models),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProviderDecl:
        return cls(data["name"], data["base_url"], data.get("api_key_env"), tuple(data.get("models") or ()))


@dataclass(frozen=True)
class Endpoint:
    """Where one call goes: the provider's name (for messages), URL (None: the SDK's
    default) and key, and where the URL came from (for a connection error's message)."""

    provider: str
    base_url: str | None
    api_key: str
    origin: str = "its declaration"

    def where(self) -> str:
        """The URL calls go to and where it came from, without credentials, query or
        fragment: "https://api.openai.com/v1, OPENAI_BASE_URL is unset: the OpenAI SDK's
        default"."""
        return f"{display_url(self.base_url or OPENAI_DEFAULT_URL)}, {self.origin}"


OPENAI_DEFAULT_URL = "https://api.openai.com/v1"  # the OpenAI SDK's, when OPENAI_BASE_URL is unset
UNSET_ORIGIN = "OPENAI_BASE_URL is unset: the OpenAI SDK's default"


def display_url(url: str) -> str:
    """A configured URL fit for a message: scheme, host, port and path only."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an unreadable URL)"
    return f"{parts.scheme}://{host}{port}{parts.path}"[:200]


def parse_decl(name: Any, data: Any, file: str | None, where: str) -> ProviderDecl:
    """A declaration from a gate config or PROMPTGATE_PROVIDERS; SpecError names the field."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or name == DEFAULT:
        raise SpecError(
            file,
            where,
            f"{str(name)[:40]!r} is not a provider name (lowercase letters, digits, "
            f"'.', '_', '-'; '{DEFAULT}' is the provider of prompts that name none)",
        )
    if not isinstance(data, Mapping):
        raise SpecError(file, where, "must be a mapping with base_url (and optionally api_key_env, models)")
    extra = [k for k in data if k not in FIELDS]
    if extra:
        raise SpecError(file, f"{where}.{str(extra[0])[:40]}", f"unknown field; a provider has {', '.join(FIELDS)}")
    return ProviderDecl(
        name,
        _base_url(data.get("base_url"), file, where),
        _key_env(data.get("api_key_env"), file, where),
        _models(data.get("models"), file, where),
    )


def _base_url(value: Any, file: str | None, where: str) -> str:
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecError(file, f"{where}.base_url", "must be an http:// or https:// URL")
    if parts.username or parts.password:
        raise SpecError(file, f"{where}.base_url", "must not hold credentials: name the key's variable in api_key_env")
    return value.rstrip("/")


def _key_env(value: Any, file: str | None, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not ENV_NAME_RE.fullmatch(value):
        raise SpecError(
            file,
            f"{where}.api_key_env",
            "must be the name of an environment variable (the key itself never goes in a file)",
        )
    if value.upper().startswith(RESERVED_ENV_PREFIXES):
        raise SpecError(
            file,
            f"{where}.api_key_env",
            f"{value} is reserved: variables starting with "
            f"{', '.join(RESERVED_ENV_PREFIXES)} hold the gate's or the CI's own secrets",
        )
    return value


def _models(value: Any, file: str | None, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(m, str) and 0 < len(m) <= 256 for m in value):
        raise SpecError(file, f"{where}.models", "must be a list of model names or globs")
    return tuple(value)


def env_providers(environ: Mapping[str, str] | None = None) -> dict[str, ProviderDecl]:
    """The providers PROMPTGATE_PROVIDERS declares (a JSON object name → declaration)."""
    raw = (environ if environ is not None else os.environ).get("PROMPTGATE_PROVIDERS", "").strip()
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise UsageError(f"PROMPTGATE_PROVIDERS is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError('PROMPTGATE_PROVIDERS must be a JSON object: {"name": {"base_url": ...}}')
    return {name: parse_decl(name, decl, "PROMPTGATE_PROVIDERS", str(name)[:40]) for name, decl in data.items()}


def default_endpoint(environ: Mapping[str, str] | None = None) -> Endpoint:
    """The provider of a prompt that names none: the OpenAI SDK's environment variables."""
    env = environ if environ is not None else os.environ
    url = env.get("OPENAI_BASE_URL") or None
    return Endpoint(
        DEFAULT, url, env.get("OPENAI_API_KEY") or PLACEHOLDER_API_KEY, "from OPENAI_BASE_URL" if url else UNSET_ORIGIN
    )


def endpoint_warning(environ: Mapping[str, str] | None = None) -> str | None:
    """What a worker says at start when the default provider has no endpoint configured
    (neither OPENAI_BASE_URL nor OPENAI_API_KEY): every call of a prompt that names no
    provider would fail to connect, or be refused, at the OpenAI SDK's default URL."""
    env = environ if environ is not None else os.environ
    if env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_KEY"):
        return None
    return (
        f"warning: no model endpoint configured: OPENAI_BASE_URL and OPENAI_API_KEY are unset, so prompts "
        f"that name no provider call {OPENAI_DEFAULT_URL} without a key; for the local model server: "
        "export OPENAI_BASE_URL=http://127.0.0.1:8000/v1"
    )


def endpoint_for(decl: ProviderDecl | None, environ: Mapping[str, str] | None = None) -> Endpoint:
    """The endpoint of a declaration (None: the default provider), with the key read from
    the variable the declaration names; UsageError when that variable is not set."""
    if decl is None:
        return default_endpoint(environ)
    env = environ if environ is not None else os.environ
    key = PLACEHOLDER_API_KEY
    if decl.api_key_env:
        key = env.get(decl.api_key_env) or ""
        if not key:
            raise UsageError(f"provider {decl.name}: environment variable {decl.api_key_env} is not set")
    try:
        from_env = decl.name in env_providers(env)
    except UsageError:
        from_env = False
    return Endpoint(
        decl.name,
        decl.base_url,
        key,
        "declared in PROMPTGATE_PROVIDERS" if from_env else "declared under providers: in the gate config",
    )


def resolve(
    name: str | None, model: str, registered: Mapping[str, ProviderDecl], environ: Mapping[str, str] | None = None
) -> ProviderDecl | None:
    """The declaration a prompt naming ``name`` (None: the default) uses for ``model``:
    PROMPTGATE_PROVIDERS first, then ``registered`` (the gate config's). UsageError for a
    name nobody declared or a model the provider does not serve."""
    if name is None or name == DEFAULT:
        return None
    decl = env_providers(environ).get(name) or registered.get(name)
    if decl is None:
        known = sorted(set(registered) | set(env_providers(environ)))
        raise UsageError(
            f"provider {name!r} is not declared: declare it under providers: in the gate config "
            f"(known: {', '.join(known) or 'none'})"
        )
    if not decl.serves(model):
        raise UsageError(f"provider {name} does not serve model {model!r} (its models: {', '.join(decl.models)})")
    return decl
