"""The prompt YAML format: parsed and validated into a frozen PromptSpec.

Every problem is a SpecError naming the file, the field and the reason; a file with an
unknown field is refused with that field's name. The JSON Schema shipped in
``gate/schemas/prompt.schema.json`` describes the same format for editors.

A prompt file arrives in a pull request, so everything in it is bounded before anything
is stored or sent: the file's size, YAML's expansions (``gate.prompt.yaml_file``), the messages'
templates, the decision pattern (RE2: it cannot backtrack), and the provider, which a
prompt may only *name*: where requests go and which key they carry are declared by the
gate (see ``gate.calls.providers``), never by the file. The model, every parameter's type and
range, the response format, the labels and the trials are bounded in
``gate.prompt.call_settings``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gate.errors import SpecError, did_you_mean
from gate.kinds import Decision, kind_of, parse_rule

from .call_settings import (  # NAME_RE and check_name: every name of the gate, checked alike
    DEFAULT_LABELS,
    check_name,
    parse_model,
    parse_params,
    parse_response_format,
    parse_trials,
)
from .conversation import parse_history
from .judge import ANSWER_NAMES, parse_kind
from .templating import ALLOWED_NAMES, TemplateProblem, check_template
from .templating import MAX_NODES as MAX_TEMPLATE_NODES
from .text_file import read_text_file
from .tools import Tool, parse_parallel, parse_tool_choice, parse_tools, request_fields
from .trials import DEFAULT_RULE, TrialRule
from .yaml_file import parse_yaml

TOP_FIELDS = (
    "name",
    "description",
    "model",
    "params",
    "messages",
    "labels",
    "decision",
    "response_format",
    "provider",
    "trials",
    "trial_rule",
    "k",
    "kind",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
)
ROLES = ("system", "developer", "user", "assistant")
MAX_MESSAGES = 64
MAX_DESCRIPTION = 4000


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    history: str | None = None  # ``- history: item.<field>``: the row's conversation here (gate.prompt.conversation)

    def to_dict(self) -> dict[str, str]:
        return (
            {"history": f"item.{self.history}"}
            if self.history is not None
            else {"role": self.role, "content": self.content}
        )


@dataclass(frozen=True)
class PromptSpec:
    name: str
    model: str
    messages: tuple[Message, ...]
    labels: tuple[str, ...] = DEFAULT_LABELS
    description: str = ""
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    decision: Decision = Decision()
    response_format: Mapping[str, Any] | None = None
    provider: str | None = None  # the name of a provider the gate declares; None: the default
    trials: int = 1  # calls per item (gate.prompt.trials), and the rule over them
    trial_rule: str = DEFAULT_RULE
    k: int | None = None  # k_of_n only
    kind: str = "prompt"  # or "judge": a prompt that grades answers (gate.prompt.judge)
    tools: tuple[Tool, ...] = ()  # function tools the model may call (gate.prompt.tools)
    tool_choice: Any = None  # auto, none, required, or one function (OpenAI's form)
    parallel_tool_calls: bool | None = None

    @property
    def rule(self) -> TrialRule:
        return TrialRule(self.trials, self.trial_rule, self.k)

    def to_config(self) -> dict[str, Any]:
        """The canonical dict stored in the database (defaults filled in)."""
        config: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "model": self.model,
            "params": _thaw(self.params),
            "messages": [m.to_dict() for m in self.messages],
            "labels": list(self.labels),
            "decision": self.decision.to_dict(),
        }
        if not kind_of(self.decision).keeps_labels(self.decision):  # no labels of its own
            del config["labels"]
        if self.tools:  # only when set: the config (and hash) of a prompt without tools is unchanged
            config.update(_thaw(request_fields(self.tools, self.tool_choice, self.parallel_tool_calls)))
        if self.response_format is not None:
            config["response_format"] = _thaw(self.response_format)
        if self.provider is not None:
            config["provider"] = self.provider
        # only when not the default: the config (and hash) of a prompt without trials is unchanged
        if self.trials != 1:
            config["trials"] = self.trials
        if self.trial_rule != DEFAULT_RULE:
            config["trial_rule"] = self.trial_rule
        if self.k is not None:
            config["k"] = self.k
        if self.kind != "prompt":
            config["kind"] = self.kind
        return config

    @property
    def config_hash(self) -> str:
        return config_hash(self.to_config())


def config_hash(config: Mapping[str, Any]) -> str:
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def load_spec(path: str | Path) -> PromptSpec:
    """Read and validate one prompt file."""
    return parse_spec_text(read_text_file(path, str(path)), file=str(path))


def parse_spec_text(text: str, file: str | None = None) -> PromptSpec:
    return parse_spec(parse_yaml(text, file), file=file)


def parse_spec(data: Any, file: str | None = None) -> PromptSpec:
    """Validate a mapping (from YAML or from the database) into a PromptSpec."""
    if not isinstance(data, Mapping):
        raise SpecError(file, None, "a prompt file must be a mapping of fields")
    unknown = [k for k in data if k not in TOP_FIELDS]
    if unknown:
        hint = did_you_mean(unknown[0], TOP_FIELDS)
        raise SpecError(file, str(unknown[0])[:80], f"unknown field{hint}; known fields are {', '.join(TOP_FIELDS)}")
    for required in ("name", "model", "messages"):
        if data.get(required) in (None, "", []):
            raise SpecError(file, required, "is required")
    kind = parse_kind(data.get("kind"), file)
    tools = parse_tools(data.get("tools"), file)
    decision = parse_rule(data.get("decision"), file, "labels" in data, tools)
    spec = PromptSpec(
        name=check_name(data["name"], "name", file),
        model=parse_model(data["model"], file),
        description=_parse_description(data.get("description"), file),
        params=_freeze(parse_params(data.get("params"), file)),
        messages=_parse_messages(
            data["messages"], file, ALLOWED_NAMES | set(ANSWER_NAMES) if kind == "judge" else None
        ),
        labels=kind_of(decision).parse_labels(data.get("labels"), tools, file),
        decision=decision,
        response_format=_freeze(parse_response_format(data.get("response_format"), file)),
        provider=_parse_provider(data.get("provider"), file),
        kind=kind,
        tools=tools,
        tool_choice=_freeze(parse_tool_choice(data.get("tool_choice"), tools, file)),
        parallel_tool_calls=parse_parallel(data.get("parallel_tool_calls"), tools, file),
        **parse_trials(data, file),
    )
    return _judged_checked(spec, file)


def _judged_checked(spec: PromptSpec, file: str | None) -> PromptSpec:
    """What the decision's kind cannot do beside the rest of the file (a judged prompt is
    called once per item; a judge decides with labels of its own): refused by the kind."""
    kind_of(spec.decision).check_spec(spec.decision, spec.trials, spec.kind, file)
    return spec


def _parse_description(value: Any, file: str | None) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SpecError(file, "description", "must be a string")
    if len(value) > MAX_DESCRIPTION:
        raise SpecError(file, "description", f"is longer than {MAX_DESCRIPTION} characters")
    return value


def _parse_messages(value: Any, file: str | None, names: frozenset[str] | None = None) -> tuple[Message, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError(file, "messages", "must be a non-empty list of {role, content}")
    if len(value) > MAX_MESSAGES:
        raise SpecError(file, "messages", f"at most {MAX_MESSAGES} messages")
    messages, nodes = [], 0
    for i, msg in enumerate(value):
        message, size = _parse_message(msg, f"messages[{i}]", file, names or ALLOWED_NAMES)
        nodes += size
        if nodes > MAX_TEMPLATE_NODES:
            raise SpecError(
                file,
                f"messages[{i}].content",
                f"the messages' templates have more than {MAX_TEMPLATE_NODES} expressions and tags together",
            )
        messages.append(message)
    return tuple(messages)


def _parse_message(
    msg: Any, where: str, file: str | None, names: frozenset[str] = ALLOWED_NAMES
) -> tuple[Message, int]:
    if not isinstance(msg, Mapping):
        raise SpecError(file, where, "must be a mapping with role and content")
    if "history" in msg:
        if len(msg) != 1:
            raise SpecError(file, where, "a history entry has history alone: - history: item.messages")
        return Message("history", "", parse_history(msg["history"], f"{where}.history", file)), 0
    extra = [k for k in msg if k not in ("role", "content")]
    if extra:
        hint = did_you_mean(extra[0], ("role", "content"))
        raise SpecError(file, f"{where}.{str(extra[0])[:80]}", f"unknown field{hint}; a message has role and content")
    role, content = msg.get("role"), msg.get("content")
    if role not in ROLES:
        raise SpecError(file, f"{where}.role", f"must be one of {', '.join(ROLES)}")
    if not isinstance(content, str) or not content.strip():
        raise SpecError(file, f"{where}.content", "must be a non-empty string")
    try:
        nodes = check_template(content, names)
    except TemplateProblem as exc:
        raise SpecError(file, f"{where}.content", str(exc)) from None
    return Message(role, content), nodes


def _parse_provider(value: Any, file: str | None) -> str | None:
    """A prompt names a provider; it never says where requests go or which key they carry."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise SpecError(
            file,
            "provider",
            "must name a provider the gate declares (the gate config's providers: "
            "or PROMPTGATE_PROVIDERS); a prompt file may not carry a URL or a key variable",
        )
    return check_name(value, "provider", file)


def request_kwargs(spec: PromptSpec, messages: list[dict[str, str]]) -> dict[str, Any]:
    """The chat request body of the prompt over rendered ``messages``: what is sent, and
    what an answer is kept under for reuse (``gate.prompt.request_keys.request_key``)."""
    kwargs: dict[str, Any] = {"model": spec.model, "messages": messages}
    kwargs.update(_plain(spec.params))
    if spec.response_format is not None:
        kwargs["response_format"] = _plain(spec.response_format)
    kwargs.update(request_fields(spec.tools, _plain(spec.tool_choice), spec.parallel_tool_calls))
    return kwargs


def _plain(value: Any) -> Any:
    """Frozen spec values (mapping proxies, tuples) back to JSON-able dicts and lists."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
