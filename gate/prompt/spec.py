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
from gate.prompt.structured.rule import FieldsRule, parse_fields

from .call_settings import (  # NAME_RE and check_name: every name of the gate, checked alike
    DEFAULT_LABELS,
    check_name,
    parse_labels,
    parse_model,
    parse_params,
    parse_response_format,
    parse_trials,
)
from .conversation import parse_history
from .judge import ANSWER_NAMES, JudgeRule, parse_judge_rule, parse_kind
from .linear_regex import PatternError, compile_pattern
from .templating import ALLOWED_NAMES, TemplateProblem, check_template
from .templating import MAX_NODES as MAX_TEMPLATE_NODES
from .tools import Tool, call_labels, parse_call_rule, parse_parallel, parse_tool_choice, parse_tools, request_fields
from .trials import DEFAULT_RULE, TrialRule
from .yaml_file import parse_yaml, read_text_file

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
DECISION_TYPES = ("first_word", "json", "regex", "fields", "judge", "tool_call")
MAX_MESSAGES = 64
MAX_DESCRIPTION = 4000
MAX_JSON_FIELD = 256


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
class Decision:
    type: str = "first_word"
    field: str | None = None  # json: the field holding the label (dotted path)
    pattern: str | None = None  # regex: the first match (group 1 if any) is the label
    fields: FieldsRule | None = None  # fields: each field of the answer and its comparator (gate.prompt.structured)
    judge: JudgeRule | None = None  # judge: a generative answer graded by a judge prompt (gate.prompt.judge)

    def to_dict(self) -> dict[str, Any]:
        """The rule as stored (in the config, pinned with a run): what is set."""
        out: dict[str, Any] = {"type": self.type}
        if self.field is not None:
            out["field"] = self.field
        if self.pattern is not None:
            out["pattern"] = self.pattern
        if self.fields is not None:
            out["fields"] = self.fields.to_dict()
        if self.judge is not None:
            out.update(self.judge.to_dict())
        return out


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
        if self.decision.fields is not None or self.decision.judge is not None:  # no labels of its own
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
    decision = _parse_decision(data.get("decision"), file, "labels" in data, tools)
    spec = PromptSpec(
        name=check_name(data["name"], "name", file),
        model=parse_model(data["model"], file),
        description=_parse_description(data.get("description"), file),
        params=_freeze(parse_params(data.get("params"), file)),
        messages=_parse_messages(
            data["messages"], file, ALLOWED_NAMES | set(ANSWER_NAMES) if kind == "judge" else None
        ),
        labels=call_labels(data.get("labels"), tools, file)
        if decision.type == "tool_call"
        else parse_labels(data.get("labels"), file),
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
    """A judged prompt calls its candidate once per item (the judge's trials are its
    decision's ``judge_trials``); a judge decides with labels of its own."""
    if spec.decision.judge is not None and spec.trials != 1:
        raise SpecError(file, "trials", "a judged prompt is called once per item: ask the judge more (judge_trials)")
    if spec.kind == "judge" and spec.decision.type in ("fields", "judge"):
        raise SpecError(file, "decision", "a judge decides with labels (first_word, json or regex)")
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


def _parse_decision(value: Any, file: str | None, has_labels: bool = False, tools: tuple[Tool, ...] = ()) -> Decision:
    if value is None:
        return Decision()
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, Mapping):
        raise SpecError(
            file,
            "decision",
            "must be first_word, or a mapping with type json (field), regex (pattern) or fields (fields)",
        )
    if str(value.get("type")) == "judge":
        if has_labels:
            raise SpecError(
                file, "labels", "a judged prompt's answer is text: the judge's labels decide (decision.pass)"
            )
        return Decision("judge", judge=parse_judge_rule(value, file))
    extra = [k for k in value if k not in ("type", "field", "pattern", "fields")]
    if extra and str(value.get("type")) != "tool_call":
        raise SpecError(
            file, f"decision.{str(extra[0])[:80]}", "unknown field; decision has type, field, pattern, fields"
        )
    kind = str(value.get("type", "first_word")).replace("-", "_")
    if kind not in DECISION_TYPES:
        raise SpecError(file, "decision.type", f"must be one of {', '.join(DECISION_TYPES)}")
    if kind == "tool_call":
        return _call_decision(value, file, has_labels, tools)
    if (kind == "fields") != ("fields" in value):
        raise SpecError(file, "decision.fields", "goes with type fields, and type fields needs it")
    if kind == "fields":
        if has_labels:
            raise SpecError(
                file,
                "labels",
                "a fields decision has no labels of its own: give a label field its "
                "labels (decision.fields.<name>: {type: label, labels: [...]})",
            )
        return Decision("fields", fields=parse_fields(value["fields"], file))
    if kind == "json":
        fld = value.get("field", "decision")
        if not isinstance(fld, str) or not fld or len(fld) > MAX_JSON_FIELD:
            raise SpecError(file, "decision.field", "must name the JSON field that holds the label")
        return Decision("json", field=fld)
    if kind == "regex":
        pattern = value.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise SpecError(file, "decision.pattern", "is required for a regex decision")
        try:
            compile_pattern(pattern)
        except PatternError as exc:
            raise SpecError(file, "decision.pattern", f"invalid regular expression: {exc}") from None
        return Decision("regex", pattern=pattern)
    return Decision()


def _call_decision(value: Mapping, file: str | None, has_labels: bool, tools: tuple[Tool, ...]) -> Decision:
    """``decision: {type: tool_call}``: the called function is the label; with ``fields``,
    the call's arguments are compared too (gate.prompt.tools, gate.prompt.tool_decision)."""
    if not tools:
        raise SpecError(file, "decision.type", "tool_call reads the call of a tool: declare the tools (tools: [...])")
    extra = [k for k in value if k not in ("type", "fields")]
    if extra:
        raise SpecError(
            file, f"decision.{str(extra[0])[:80]}", "unknown field; a tool_call decision has type and fields"
        )
    if "fields" not in value:
        return Decision("tool_call")
    if has_labels:
        raise SpecError(
            file, "labels", "a tool_call decision with fields has no labels of its own: its function field has them"
        )
    return Decision("tool_call", fields=parse_call_rule(value["fields"], tools, file))


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
