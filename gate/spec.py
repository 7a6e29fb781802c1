"""The prompt YAML format: parsed and validated into a frozen PromptSpec.

Every problem is a SpecError naming the file, the field and the reason; a file with an
unknown field is refused with that field's name. The JSON Schema shipped in
``gate/schemas/prompt.schema.json`` describes the same format for editors.

A prompt file arrives in a pull request, so everything in it is bounded here, before
anything is stored or sent: the file's size, YAML's expansions (``gate.yamlfile``), every
parameter's type and range (no NaN, no ``max_tokens`` of 10**12), the labels (none may
look like the gate's own markers, such as ``(invalid)``), the decision pattern (RE2: it
cannot backtrack), and the provider, which a prompt may only *name*: where requests go and
which key they carry are declared by the gate (see ``gate.providers``), never by the file.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import SpecError
from .linear_regex import PatternError, compile_pattern
from .structured.rule import FieldsRule, parse_fields
from .templating import MAX_NODES as MAX_TEMPLATE_NODES
from .templating import TemplateProblem, check_template
from .trials import DEFAULT_RULE, MAX_TRIALS, TRIAL_RULES, TrialRule
from .yamlfile import parse_yaml, read_text_file

NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")  # fullmatch: "$" would let "name\n" through
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
)
ROLES = ("system", "developer", "user", "assistant")
# No classification needs more; each call's estimate spends the shared token budget
# (gate.ratelimit), so a pull request must not set it huge.
MAX_TOKENS = 1 << 14
INT64 = (-(1 << 63), (1 << 63) - 1)
PARAMS = {
    "temperature": (float, 0.0, 2.0),
    "top_p": (float, 0.0, 1.0),
    "max_tokens": (int, 1, MAX_TOKENS),
    "max_completion_tokens": (int, 1, MAX_TOKENS),
    "seed": (int, *INT64),
    "stop": (list, None, None),
    "frequency_penalty": (float, -2.0, 2.0),
    "presence_penalty": (float, -2.0, 2.0),
    "n": (int, 1, 1),
    "logit_bias": (dict, None, None),
    "reasoning_effort": (str, None, None),
}
MAX_STOP = 4
MAX_LOGIT_BIAS = 300
DECISION_TYPES = ("first_word", "json", "regex", "fields")
DEFAULT_LABELS = ("yes", "no")
MAX_LABELS = 256
MAX_MESSAGES = 64
MAX_DESCRIPTION = 4000
MAX_JSON_FIELD = 256
MAX_RESPONSE_FORMAT_BYTES = 64 * 1024
RESPONSE_FORMAT_TYPES = ("text", "json_object", "json_schema")
MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,255}")
REASONING_EFFORT_RE = re.compile(r"[a-z]{1,16}")
# A label in parentheses reads like the gate's own markers ("(invalid)" marks an answer
# outside the labels); control characters would reach terminals and logs.
RESERVED_LABEL_RE = re.compile(r"\(.*\)", re.DOTALL)
LABEL_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def check_name(value: Any, what: str = "name", file: str | None = None) -> str:
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise SpecError(
            file,
            what,
            f"{value!r} is not a valid name: use lowercase letters, digits, "
            "'.', '_' or '-', starting with a letter or digit, at most 128 characters",
        )
    return value


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


@dataclass(frozen=True)
class Decision:
    type: str = "first_word"
    field: str | None = None  # json: the field holding the label (dotted path)
    pattern: str | None = None  # regex: the first match (group 1 if any) is the label
    fields: FieldsRule | None = None  # fields: each field of the answer and its comparator (gate.structured)

    def to_dict(self) -> dict[str, Any]:
        """The rule as stored (in the config, pinned with a run): what is set."""
        out: dict[str, Any] = {"type": self.type}
        if self.field is not None:
            out["field"] = self.field
        if self.pattern is not None:
            out["pattern"] = self.pattern
        if self.fields is not None:
            out["fields"] = self.fields.to_dict()
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
    trials: int = 1  # calls per item (gate.trials), and the rule over them
    trial_rule: str = DEFAULT_RULE
    k: int | None = None  # k_of_n only

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
            "messages": [{"role": m.role, "content": m.content} for m in self.messages],
            "labels": list(self.labels),
            "decision": self.decision.to_dict(),
        }
        if self.decision.fields is not None:  # each label field has its own labels
            del config["labels"]
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
        raise SpecError(file, str(unknown[0])[:80], f"unknown field; known fields are {', '.join(TOP_FIELDS)}")
    for required in ("name", "model", "messages"):
        if data.get(required) in (None, "", []):
            raise SpecError(file, required, "is required")
    return PromptSpec(
        name=check_name(data["name"], "name", file),
        model=_parse_model(data["model"], file),
        description=_parse_description(data.get("description"), file),
        params=_freeze(_parse_params(data.get("params"), file)),
        messages=_parse_messages(data["messages"], file),
        labels=_parse_labels(data.get("labels"), file),
        decision=_parse_decision(data.get("decision"), file, "labels" in data),
        response_format=_freeze(_parse_response_format(data.get("response_format"), file)),
        provider=_parse_provider(data.get("provider"), file),
        **_parse_trials(data, file),
    )


def _parse_model(value: Any, file: str | None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(file, "model", "must be a non-empty string")
    if not MODEL_RE.fullmatch(value):
        raise SpecError(
            file, "model", "must be a model name: letters, digits and . _ : / @ + -, at most 256 characters"
        )
    return value


def _parse_description(value: Any, file: str | None) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SpecError(file, "description", "must be a string")
    if len(value) > MAX_DESCRIPTION:
        raise SpecError(file, "description", f"is longer than {MAX_DESCRIPTION} characters")
    return value


def _parse_mapping(value: Any, where: str, file: str | None) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SpecError(file, where, "must be a mapping")
    return dict(value)


def _parse_params(value: Any, file: str | None) -> dict[str, Any]:
    params = _parse_mapping(value, "params", file) or {}
    for key, val in params.items():
        if key not in PARAMS:
            raise SpecError(file, f"params.{str(key)[:80]}", f"unknown parameter; known are {', '.join(PARAMS)}")
        params[key] = _parse_param(key, val, file)
    return params


def _parse_param(key: str, val: Any, file: str | None) -> Any:
    """One parameter, of its type and in its range (NaN and infinities are no number)."""
    where = f"params.{key}"
    if key == "stop":
        return _parse_stop(val, where, file)
    if key == "logit_bias":
        return _parse_logit_bias(val, where, file)
    kind, low, high = PARAMS[key]
    if kind is float and isinstance(val, int) and not isinstance(val, bool):
        val = float(val)
    if not isinstance(val, kind) or isinstance(val, bool):
        raise SpecError(file, where, f"must be a {kind.__name__}")
    if isinstance(val, float) and not math.isfinite(val):
        raise SpecError(file, where, "must be a finite number")
    if low is not None and val < low or high is not None and val > high:
        raise SpecError(
            file,
            where,
            f"must be between {low if low is not None else 'any'} and {high if high is not None else 'any'}",
        )
    if key == "reasoning_effort" and not REASONING_EFFORT_RE.fullmatch(val):
        raise SpecError(file, where, "must be a word such as low, medium or high")
    return val


def _parse_stop(val: Any, where: str, file: str | None) -> list[str]:
    if isinstance(val, str):
        val = [val]
    if not isinstance(val, list) or not all(isinstance(s, str) and s for s in val):
        raise SpecError(file, where, "must be a string or a list of strings")
    if len(val) > MAX_STOP or any(len(s) > 256 for s in val):
        raise SpecError(file, where, f"at most {MAX_STOP} stop sequences of at most 256 characters")
    return val


def _parse_logit_bias(val: Any, where: str, file: str | None) -> dict[str, Any]:
    if not isinstance(val, Mapping) or len(val) > MAX_LOGIT_BIAS:
        raise SpecError(file, where, f"must be a mapping of at most {MAX_LOGIT_BIAS} token ids to numbers")
    for token, bias in val.items():
        if not re.fullmatch(r"[0-9]{1,10}", str(token)):
            raise SpecError(file, where, f"{str(token)[:40]!r} is not a token id")
        if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not -100 <= bias <= 100:
            raise SpecError(file, where, f"the bias of token {token} must be a number between -100 and 100")
    return dict(val)


def _parse_messages(value: Any, file: str | None) -> tuple[Message, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError(file, "messages", "must be a non-empty list of {role, content}")
    if len(value) > MAX_MESSAGES:
        raise SpecError(file, "messages", f"at most {MAX_MESSAGES} messages")
    messages, nodes = [], 0
    for i, msg in enumerate(value):
        message, size = _parse_message(msg, f"messages[{i}]", file)
        nodes += size
        if nodes > MAX_TEMPLATE_NODES:
            raise SpecError(
                file,
                f"messages[{i}].content",
                f"the messages' templates have more than {MAX_TEMPLATE_NODES} expressions and tags together",
            )
        messages.append(message)
    return tuple(messages)


def _parse_message(msg: Any, where: str, file: str | None) -> tuple[Message, int]:
    if not isinstance(msg, Mapping):
        raise SpecError(file, where, "must be a mapping with role and content")
    extra = [k for k in msg if k not in ("role", "content")]
    if extra:
        raise SpecError(file, f"{where}.{str(extra[0])[:80]}", "unknown field; a message has role and content")
    role, content = msg.get("role"), msg.get("content")
    if role not in ROLES:
        raise SpecError(file, f"{where}.role", f"must be one of {', '.join(ROLES)}")
    if not isinstance(content, str) or not content.strip():
        raise SpecError(file, f"{where}.content", "must be a non-empty string")
    try:
        nodes = check_template(content)
    except TemplateProblem as exc:
        raise SpecError(file, f"{where}.content", str(exc)) from None
    return Message(role, content), nodes


def _parse_labels(value: Any, file: str | None) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_LABELS
    if not isinstance(value, list) or len(value) < 2:
        raise SpecError(file, "labels", "must be a list of two or more labels")
    if len(value) > MAX_LABELS:
        raise SpecError(file, "labels", f"at most {MAX_LABELS} labels")
    seen = set()
    for label in value:
        _check_label(label, file)
        if label.casefold() in seen:
            raise SpecError(file, "labels", f"{label!r} is listed twice (labels compare case-insensitively)")
        seen.add(label.casefold())
    return tuple(value)


def _check_label(label: Any, file: str | None) -> None:
    if not isinstance(label, str) or not label.strip() or label != label.strip():
        raise SpecError(
            file, "labels", f"{str(label)[:40]!r} is not a label: use non-empty strings without surrounding spaces"
        )
    if len(label) > 128:
        raise SpecError(file, "labels", f"{label[:20]!r}... is longer than 128 characters")
    if LABEL_CONTROL_RE.search(label):
        raise SpecError(file, "labels", f"{label[:40]!r} holds a control character")
    if RESERVED_LABEL_RE.fullmatch(label):
        raise SpecError(
            file,
            "labels",
            f"{label!r} is reserved: labels in parentheses are the gate's own "
            "markers, e.g. (invalid) for an answer outside the labels",
        )


def _parse_decision(value: Any, file: str | None, has_labels: bool = False) -> Decision:
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
    extra = [k for k in value if k not in ("type", "field", "pattern", "fields")]
    if extra:
        raise SpecError(
            file, f"decision.{str(extra[0])[:80]}", "unknown field; decision has type, field, pattern, fields"
        )
    kind = str(value.get("type", "first_word")).replace("-", "_")
    if kind not in DECISION_TYPES:
        raise SpecError(file, "decision.type", f"must be one of {', '.join(DECISION_TYPES)}")
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


def _parse_response_format(value: Any, file: str | None) -> dict | None:
    data = _parse_mapping(value, "response_format", file)
    if data is None:
        return None
    if data.get("type") not in RESPONSE_FORMAT_TYPES:
        raise SpecError(file, "response_format.type", f"must be one of {', '.join(RESPONSE_FORMAT_TYPES)}")
    try:
        size = len(json.dumps(data, allow_nan=False).encode())
    except (TypeError, ValueError, RecursionError):
        raise SpecError(
            file,
            "response_format",
            "must hold only JSON values (strings, finite numbers, booleans, null, lists, mappings with string keys)",
        ) from None
    if size > MAX_RESPONSE_FORMAT_BYTES:
        raise SpecError(file, "response_format", f"is over {MAX_RESPONSE_FORMAT_BYTES // 1024} KiB as JSON")
    return data


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


def _parse_trials(data: Mapping[str, Any], file: str | None) -> dict[str, Any]:
    """``trials`` (1..MAX_TRIALS), ``trial_rule`` and, for k_of_n only, ``k`` (a majority:
    trials // 2 + 1 .. trials)."""
    trials = data.get("trials", 1)
    if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= MAX_TRIALS:
        raise SpecError(file, "trials", f"must be a whole number from 1 to {MAX_TRIALS} (calls per item)")
    rule = data.get("trial_rule", DEFAULT_RULE)
    rule = rule.replace("-", "_") if isinstance(rule, str) else rule
    if rule not in TRIAL_RULES:
        raise SpecError(file, "trial_rule", f"must be one of {', '.join(TRIAL_RULES)}")
    k = data.get("k")
    if rule != "k_of_n":
        if k is not None:
            raise SpecError(file, "k", "is only for trial_rule: k_of_n")
    elif isinstance(k, bool) or not isinstance(k, int) or not trials // 2 + 1 <= k <= trials:
        # a rule the prompt file chooses must not clear a bar on a minority of its trials:
        # production calls once, and "1 of 20 right" passes a coin flip (docs/security.md, 6)
        raise SpecError(
            file,
            "k",
            f"trial_rule k_of_n needs k, a majority of the trials: a whole number from "
            f"{trials // 2 + 1} to trials ({trials})",
        )
    return {"trials": trials, "trial_rule": rule, "k": k}


def request_kwargs(spec: PromptSpec, messages: list[dict[str, str]]) -> dict[str, Any]:
    """The chat request body of the prompt over rendered ``messages``: what is sent, and
    what an answer is kept under for reuse (``gate.reuse.request_key``)."""
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
