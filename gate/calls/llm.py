"""The model call path: the one function the executor and production both use.

``call_prompt(spec, item)`` renders the prompt's messages over the item (sandboxed),
calls the model through the official ``openai`` SDK and reads the decision.

The request goes through the SDK client's documented generic ``post`` (endpoint
``/chat/completions``, answer as a plain dict) rather than ``chat.completions.create``:
the same client, auth, headers, timeout and error classes, without the typed-parameter
transform and the response model, which were about half of the SDK's CPU per call (a gate
run makes thousands of calls per process; the figures are in bench/README.md).

* Messages: the templates rendered over the item through ``gate.prompt.sandbox`` (a budget of
  CPU time and memory per item), unless the caller rendered them already.
* Endpoint and key: an ``Endpoint`` the caller resolved from the gate's provider
  declarations (``gate.calls.providers``: the executor uses the one its update pinned), else the
  prompt's provider from ``PROMPTGATE_PROVIDERS``, else ``OPENAI_BASE_URL`` /
  ``OPENAI_API_KEY``; with no key at all a placeholder is sent, so local servers that want
  none work. The SDK's own retries are off: the executor owns retries. The timeout is
  ``Settings.request_timeout``.
* An answer outside the labels is not an error: the result has
  ``decision == INVALID_DECISION`` and ``valid`` False. Every decision is read by
  ``gate.prompt.answer_reading``: a label, fields, the tool call (``tool_calls``: the calls
  the answer made, name and parsed arguments), each after a strict schema's check.
* Messages: a ``history`` entry inserts the item's conversation where it stands
  (``gate.prompt.conversation``; one that is not a conversation is the item's error, kind
  template, not retryable).
* Failure messages have a fixed form (``HTTP 400 from provider azure-east
  (invalid_request_error)``): a provider's response text, or the text of a connection
  error naming hosts of the worker's network, never reaches a report that a pull request's
  author reads. The workers' log has the whole text.
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
  template over its budget       no         budget
  provider key env var unset     no         config
  =============================  =========  ==============
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import openai

from gate.errors import CallFailure, ModelCallError, UsageError
from gate.prompt.answer_reading import read_reply
from gate.prompt.conversation import ConversationProblem, conversation_of
from gate.prompt.judge import own_variables
from gate.prompt.sandbox import BudgetExceeded, RenderPool, default_pool
from gate.prompt.spec import PromptSpec, request_kwargs
from gate.prompt.templating import TemplateProblem
from gate.prompt.tool_decision import ToolCall
from gate.settings import Settings
from gate.untrusted import storable
from gate.verdict.scoring import INVALID_DECISION  # one definition, where the figures read it

from .providers import Endpoint, default_endpoint, endpoint_for, env_providers

log = logging.getLogger("promptgate.llm")
ERROR_TYPE_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True)
class CallResult:
    decision: str  # a label as the spec spells it, or INVALID_DECISION; for a fields
    # decision the fields read (canonical JSON), or NOT_AN_OBJECT; a tool call's reading
    valid: bool
    raw_output: str
    latency_ms: int
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tool_calls: tuple[
        ToolCall, ...
    ] = ()  # the calls the answer made: name, parsed arguments (gate.prompt.tool_decision)

    @property
    def output(self) -> str:
        """The answer as the gate keeps and shows it: its text, then each call on a line."""
        calls = "\n".join(f"→ {c.shown()}" for c in self.tool_calls)
        return "\n".join(p for p in (self.raw_output, calls) if p)


def call_prompt(
    spec: PromptSpec,
    item: Mapping[str, Any],
    *,
    settings: Settings | None = None,
    messages: list[dict[str, str]] | None = None,
    endpoint: Endpoint | None = None,
    renderer: RenderPool | None = None,
) -> CallResult:
    """Render (unless ``messages`` are given), call, parse. Raises ModelCallError (see the
    module docstring)."""
    settings = settings or Settings.from_env()
    if messages is None:
        messages = render_messages(spec, item, renderer)
    endpoint = endpoint or resolve_endpoint(spec)
    client = get_client(endpoint.base_url, endpoint.api_key, settings.request_timeout)
    started = time.perf_counter()
    try:
        completion = client.post("/chat/completions", cast_to=dict, body=request_kwargs(spec, messages))
    except openai.OpenAIError as exc:
        raise classify_error(exc, endpoint.provider, endpoint.where()) from exc
    except ValueError:  # a JSON content type over a body that is not JSON
        raise ModelCallError(
            f"provider {endpoint.provider} answered with malformed JSON", retryable=True, kind=CallFailure.BAD_RESPONSE
        ) from None
    latency_ms = round((time.perf_counter() - started) * 1000)
    return _result(spec, completion, latency_ms)


def render_messages(
    spec: PromptSpec, item: Mapping[str, Any], renderer: RenderPool | None = None, skip=None, variables=None
) -> list[dict[str, str]]:
    """The prompt's messages over one item, rendered under the sandbox's budget (``skip``:
    see ``RenderPool.render_many``; ``variables``: a judge's answers to grade). Raises
    ModelCallError (template or budget)."""
    (result,) = render_messages_many(spec, [item], renderer, skip, variables=None if variables is None else [variables])
    if isinstance(result, ModelCallError):
        raise result
    return result


def render_messages_many(
    spec: PromptSpec,
    items: Sequence[Mapping[str, Any]],
    renderer: RenderPool | None = None,
    skip=None,
    spent: list | None = None,
    variables: Sequence[Mapping[str, str]] | None = None,
) -> list[list[dict[str, str]] | ModelCallError]:
    """The prompt's messages over each item (one sandbox request for all of them), or the
    ModelCallError (kind template or budget, not retryable) of an item that has none. A
    judge's templates also read the answers it grades (``variables``; in its own
    evaluation, its dataset's answer columns: ``gate.prompt.judge.own_variables``)."""
    if variables is None:
        variables = own_variables(spec, items)
    templates = [m.content for m in spec.messages if m.history is None]
    rendered = (renderer or default_pool()).render_many(templates, items, skip, spent, variables)
    return [_as_messages(spec, texts, item) for texts, item in zip(rendered, items)]


def _as_messages(spec: PromptSpec, texts, item: Mapping[str, Any]) -> list[dict[str, Any]] | ModelCallError:
    """The rendered templates in order, and at each ``history`` entry the item's
    conversation (gate.prompt.conversation)."""
    if isinstance(texts, BudgetExceeded):
        return ModelCallError(str(texts), retryable=False, kind=CallFailure.BUDGET)
    if isinstance(texts, TemplateProblem):
        return ModelCallError(str(texts), retryable=False, kind=CallFailure.TEMPLATE)
    rendered, out = iter(texts), []
    for m in spec.messages:
        if m.history is None:
            out.append({"role": m.role, "content": next(rendered)})
            continue
        try:
            out += conversation_of(item, m.history)
        except ConversationProblem as exc:
            return ModelCallError(f"conversation: {exc}", retryable=False, kind=CallFailure.TEMPLATE)
    return out


def _result(spec: PromptSpec, completion: Any, latency_ms: int) -> CallResult:
    """Read a chat completion (the JSON body as a dict)."""
    choices = completion.get("choices") if isinstance(completion, dict) else None
    message = (
        choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    )
    if not isinstance(message, dict):
        raise ModelCallError("the model returned no choices", retryable=True, kind=CallFailure.BAD_RESPONSE)
    raw = message.get("content") or ""
    if not isinstance(raw, str):  # content parts: the text ones, in order
        raw = (
            "".join(part.get("text") or "" for part in raw if isinstance(part, dict))
            if isinstance(raw, list)
            else str(raw)
        )
    raw = storable(raw)
    reading = read_reply(spec, raw, message)
    usage = completion.get("usage") if isinstance(completion.get("usage"), dict) else {}
    return CallResult(
        decision=reading.decision if reading.decision is not None else INVALID_DECISION,
        valid=reading.valid,
        raw_output=raw,
        latency_ms=latency_ms,
        prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
        completion_tokens=_int_or_none(usage.get("completion_tokens")),
        tool_calls=reading.calls,
    )


def _int_or_none(value: Any) -> int | None:
    """A token count as the provider reported it, or None (absent, not an integer, or
    outside 0..2**31-1: a count the database column and the cost could not take)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31 else None


# ----------------------------------------------------------------------------- clients


def resolve_endpoint(spec: PromptSpec) -> Endpoint:
    """The endpoint of a caller that brings none: the default provider, or the prompt's
    provider as this process's PROMPTGATE_PROVIDERS declares it."""
    try:
        if spec.provider is None:
            return default_endpoint()
        decl = env_providers().get(spec.provider)
        if decl is None:
            raise UsageError(f"provider {spec.provider} of prompt {spec.name} is not declared in this process")
        return endpoint_for(decl)
    except UsageError as exc:
        raise ModelCallError(str(exc), retryable=False, kind=CallFailure.CONFIG) from None


def prepare_default_client(timeout: float) -> None:
    """Build the default endpoint's client now. The first client of a process is slow (the
    SDK's lazy imports, an SSL context; bench/README.md); a worker pays for it at start,
    not on the first call of the first submission it sees."""
    endpoint = default_endpoint()
    get_client(endpoint.base_url, endpoint.api_key, timeout)


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


def classify_error(exc: Exception, provider: str = "default", where: str | None = None) -> ModelCallError:
    """An SDK exception as a ModelCallError that says whether to retry, in the fixed form
    of the module docstring (the whole text goes to the log only)."""
    log.info("model call to provider %s failed: %s", provider, _cause(exc))
    if isinstance(exc, openai.APITimeoutError):
        return ModelCallError(f"model call to provider {provider} timed out", retryable=True, kind=CallFailure.TIMEOUT)
    if isinstance(exc, openai.APIConnectionError):
        at = f" at {where}" if where else ""  # the configured URL and its origin: no other host
        return ModelCallError(
            f"cannot reach provider {provider} ({_connection_reason(exc)}){at}",
            retryable=True,
            kind=CallFailure.CONNECTION,
        )
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, provider)
    return ModelCallError(
        f"model call to provider {provider} failed ({type(exc).__name__})", retryable=False, kind=CallFailure.ERROR
    )


def _status_error(exc: openai.APIStatusError, provider: str) -> ModelCallError:
    status = exc.status_code
    kind_text = _error_type(exc)
    message = f"HTTP {status} from provider {provider}" + (f" ({kind_text})" if kind_text else "")
    if status == 429 or status >= 500:
        kind = CallFailure.RATE_LIMIT if status == 429 else CallFailure.SERVER
        return ModelCallError(
            message,
            retryable=True,
            retry_after=retry_after_seconds(exc.response.headers),
            status_code=status,
            kind=kind,
        )
    if status == 408:
        return ModelCallError(message, retryable=True, status_code=status, kind=CallFailure.TIMEOUT)
    kind = CallFailure.AUTH if status in (401, 403) else CallFailure.BAD_REQUEST
    return ModelCallError(message, retryable=False, status_code=status, kind=kind)


def _error_type(exc: openai.APIStatusError) -> str | None:
    """The provider's error type (``invalid_request_error``) or code, when it is a short
    identifier; never its free text."""
    body = exc.body
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    if isinstance(inner, Mapping):
        for key in ("type", "code"):
            value = inner.get(key)
            if isinstance(value, str) and ERROR_TYPE_RE.fullmatch(value):
                return value
    return None


CONNECTION_REASONS = (
    ("refused", "connection refused"),
    ("reset", "connection reset"),
    ("name or service not known", "unknown host"),
    ("nodename nor servname", "unknown host"),
    ("temporary failure in name resolution", "unknown host"),
    ("certificate", "TLS error"),
    ("ssl", "TLS error"),
    ("timed out", "connect timeout"),
    ("unreachable", "network unreachable"),
)


def _connection_reason(exc: BaseException) -> str:
    """What kind of connection failure, from a fixed vocabulary."""
    text = _cause(exc).lower()
    return next((reason for needle, reason in CONNECTION_REASONS if needle in text), "connection failed")


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
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
