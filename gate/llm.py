"""The model call path: the one function the executor and production both use.

``call_prompt(spec, item)`` renders the prompt's messages over the item (sandboxed),
calls the model through the official ``openai`` SDK and reads the decision.

The request goes through the SDK client's documented generic ``post`` (endpoint
``/chat/completions``, answer as a plain dict) rather than ``chat.completions.create``:
the same client, auth, headers, timeout and error classes, without the typed-parameter
transform and the response model, which cost ~2.4 of ~5 ms of CPU per call here (a gate
run makes thousands of calls per process; see bench/README.md).

* Endpoint and key: the prompt's ``provider`` block (``base_url``, ``api_key_env``), else
  ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``; with no key at all a placeholder is sent, so
  local servers that want none work. The SDK's own retries are off: the executor owns
  retries. The timeout is ``Settings.request_timeout``.
* An answer outside the labels is not an error: the result has
  ``decision == INVALID_DECISION`` and ``valid`` False.
* Failures raise ``ModelCallError`` with ``retryable`` and ``kind``:

  =============================  =========  ==============
  failure                        retryable  kind
  =============================  =========  ==============
  timeout, HTTP 408              yes        timeout
  connection refused/reset       yes        connection
  HTTP 429 (``retry_after``)     yes        rate_limit
  HTTP 5xx (``retry_after``)     yes        server
  response without a choice      yes        bad_response
  HTTP 401, 403                  no         auth
  other HTTP 4xx                 no         bad_request
  template cannot render item    no         template
  provider key env var unset     no         config
  =============================  =========  ==============
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from datetime import datetime, timezone
from typing import Any, Mapping

import openai

from .decision import parse_decision
from .errors import ModelCallError
from .settings import Settings
from .spec import PromptSpec
from .templating import TemplateProblem, render

INVALID_DECISION = "(invalid)"
PLACEHOLDER_API_KEY = "sk-no-key-required"


@dataclass(frozen=True)
class CallResult:
    decision: str                   # a label as the spec spells it, or INVALID_DECISION
    valid: bool
    raw_output: str
    latency_ms: int
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def call_prompt(spec: PromptSpec, item: Mapping[str, Any], *, settings: Settings | None = None) -> CallResult:
    """Render, call, parse. Raises ModelCallError (see the module docstring)."""
    settings = settings or Settings.from_env()
    messages = render_messages(spec, item)
    client = get_client(*resolve_endpoint(spec), settings.request_timeout)
    started = time.perf_counter()
    try:
        completion = client.post("/chat/completions", cast_to=dict, body=request_kwargs(spec, messages))
    except openai.OpenAIError as exc:
        raise classify_error(exc) from exc
    except ValueError as exc:   # a JSON content type over a body that is not JSON
        raise ModelCallError(f"the model endpoint answered with malformed JSON: {exc}", retryable=True,
                             kind="bad_response") from None
    latency_ms = round((time.perf_counter() - started) * 1000)
    return _result(spec, completion, latency_ms)


def render_messages(spec: PromptSpec, item: Mapping[str, Any]) -> list[dict[str, str]]:
    try:
        return [{"role": m.role, "content": render(m.content, item)} for m in spec.messages]
    except TemplateProblem as exc:
        raise ModelCallError(str(exc), retryable=False, kind="template") from None
    except Exception as exc:      # e.g. TypeError comparing a str field with a number
        raise ModelCallError(f"template cannot render this item: {type(exc).__name__}: {exc}",
                             retryable=False, kind="template") from None


def request_kwargs(spec: PromptSpec, messages: list[dict[str, str]]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"model": spec.model, "messages": messages}
    kwargs.update(_plain(spec.params))
    if spec.response_format is not None:
        kwargs["response_format"] = _plain(spec.response_format)
    return kwargs


def _plain(value: Any) -> Any:
    """Frozen spec values (mapping proxies, tuples) back to JSON-able dicts and lists."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _result(spec: PromptSpec, completion: Any, latency_ms: int) -> CallResult:
    """Read a chat completion (the JSON body as a dict)."""
    choices = completion.get("choices") if isinstance(completion, dict) else None
    message = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) \
        else None
    if not isinstance(message, dict):
        raise ModelCallError("the model returned no choices", retryable=True, kind="bad_response")
    raw = message.get("content") or ""
    if not isinstance(raw, str):   # content parts: the text ones, in order
        raw = "".join(part.get("text") or "" for part in raw if isinstance(part, dict)) if isinstance(raw, list) \
            else str(raw)
    label = parse_decision(spec, spec.labels, raw)
    usage = completion.get("usage") if isinstance(completion.get("usage"), dict) else {}
    return CallResult(
        decision=label if label is not None else INVALID_DECISION,
        valid=label is not None,
        raw_output=raw,
        latency_ms=latency_ms,
        prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
        completion_tokens=_int_or_none(usage.get("completion_tokens")),
    )


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ----------------------------------------------------------------------------- clients

def resolve_endpoint(spec: PromptSpec) -> tuple[str | None, str]:
    """(base_url or None for the SDK default, api_key) for this prompt."""
    provider = spec.provider
    default_url, default_key = default_endpoint()
    base_url = (provider.base_url if provider and provider.base_url else None) or default_url
    if provider and provider.api_key_env:
        key = os.environ.get(provider.api_key_env)
        if not key:
            raise ModelCallError(f"environment variable {provider.api_key_env} (provider.api_key_env of "
                                 f"prompt {spec.name}) is not set", retryable=False, kind="config")
        return base_url, key
    return base_url, default_key


def default_endpoint() -> tuple[str | None, str]:
    """The endpoint of a prompt without a ``provider``: the SDK's environment variables."""
    return os.environ.get("OPENAI_BASE_URL") or None, os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_API_KEY


def prepare_default_client(timeout: float) -> None:
    """Build the default endpoint's client now. The first client of a process costs ~110 ms
    (the SDK's lazy imports, an SSL context), measured; a worker pays it at start, not on
    the first call of the first submission it sees."""
    get_client(*default_endpoint(), timeout)


_clients: dict[tuple[str | None, str, float], openai.OpenAI] = {}
_clients_lock = threading.Lock()


def get_client(base_url: str | None, api_key: str, timeout: float) -> openai.OpenAI:
    """One SDK client per (base_url, api_key, timeout), shared by all threads."""
    key = (base_url, api_key, float(timeout))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            kwargs: dict[str, Any] = {"api_key": api_key, "timeout": float(timeout), "max_retries": 0}
            if base_url:
                kwargs["base_url"] = base_url
            client = _clients[key] = openai.OpenAI(**kwargs)
        return client


# ----------------------------------------------------------------------------- errors

def classify_error(exc: Exception) -> ModelCallError:
    """An SDK exception as a ModelCallError that says whether to retry."""
    if isinstance(exc, openai.APITimeoutError):
        return ModelCallError(f"model call timed out: {exc}", retryable=True, kind="timeout")
    if isinstance(exc, openai.APIConnectionError):
        return ModelCallError(f"cannot reach the model endpoint: {_cause(exc)}", retryable=True,
                              kind="connection")
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc)
    return ModelCallError(f"model call failed: {exc}", retryable=False, kind="error")


def _status_error(exc: openai.APIStatusError) -> ModelCallError:
    status = exc.status_code
    message = f"HTTP {status} from the model endpoint: {_message(exc)}"
    if status == 429 or status >= 500:
        kind = "rate_limit" if status == 429 else "server"
        return ModelCallError(message, retryable=True, retry_after=retry_after_seconds(exc.response.headers),
                              status_code=status, kind=kind)
    if status == 408:
        return ModelCallError(message, retryable=True, status_code=status, kind="timeout")
    kind = "auth" if status in (401, 403) else "bad_request"
    return ModelCallError(message, retryable=False, status_code=status, kind=kind)


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])[:500]
    return str(getattr(exc, "message", exc))[:500]


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return f"{exc} ({cause})" if cause else str(exc)


def retry_after_seconds(headers: Mapping[str, str] | None, now: datetime | None = None) -> float | None:
    """The provider's retry hint: ``retry-after-ms``, else ``Retry-After`` in seconds or as
    an HTTP date. None when absent or unreadable; never negative."""
    if not headers:
        return None
    headers = {str(k).lower(): v for k, v in headers.items()}
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())
