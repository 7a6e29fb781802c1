"""The prompt YAML format: parsed and validated into a frozen PromptSpec.

Every problem is a SpecError naming the file, the field and the reason; a file with an
unknown field is refused with that field's name. The JSON Schema shipped in
``gate/schemas/prompt.schema.json`` describes the same format for editors.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import yaml

from .errors import SpecError
from .templating import TemplateProblem, check_template

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")
TOP_FIELDS = ("name", "description", "model", "params", "messages", "labels", "decision",
              "response_format", "provider")
ROLES = ("system", "developer", "user", "assistant")
PARAMS = {
    "temperature": (float, 0.0, 2.0), "top_p": (float, 0.0, 1.0),
    "max_tokens": (int, 1, None), "max_completion_tokens": (int, 1, None),
    "seed": (int, None, None), "stop": (list, None, None),
    "frequency_penalty": (float, -2.0, 2.0), "presence_penalty": (float, -2.0, 2.0),
    "n": (int, 1, 1), "logit_bias": (dict, None, None), "reasoning_effort": (str, None, None),
}
DECISION_TYPES = ("first_word", "json", "regex")
DEFAULT_LABELS = ("yes", "no")


def check_name(value: Any, what: str = "name", file: str | None = None) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise SpecError(file, what, f"{value!r} is not a valid name: use lowercase letters, digits, "
                        "'.', '_' or '-', starting with a letter or digit, at most 128 characters")
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
    field: str | None = None        # json: the field holding the label (dotted path)
    pattern: str | None = None      # regex: the first match (group 1 if any) is the label


@dataclass(frozen=True)
class Provider:
    base_url: str | None = None
    api_key_env: str | None = None


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
    provider: Provider | None = None

    def to_config(self) -> dict[str, Any]:
        """The canonical dict stored in the database (defaults filled in)."""
        config: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "model": self.model,
            "params": _thaw(self.params),
            "messages": [{"role": m.role, "content": m.content} for m in self.messages],
            "labels": list(self.labels),
            "decision": {k: v for k, v in vars(self.decision).items() if v is not None},
        }
        if self.response_format is not None:
            config["response_format"] = _thaw(self.response_format)
        if self.provider is not None:
            config["provider"] = {k: v for k, v in vars(self.provider).items() if v is not None}
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


def read_text_file(path: str | Path, file: str) -> str:
    """A file's text, or a SpecError that names ``file`` and says why it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(file, None, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(file, None, f"cannot read the file: {exc}") from None


def parse_yaml(text: str, file: str | None) -> Any:
    """YAML, or a SpecError with the line and column of the problem."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(file, None, f"malformed YAML: {where}{problem}") from None


def parse_spec(data: Any, file: str | None = None) -> PromptSpec:
    """Validate a mapping (from YAML or from the database) into a PromptSpec."""
    if not isinstance(data, Mapping):
        raise SpecError(file, None, "a prompt file must be a mapping of fields")
    unknown = [k for k in data if k not in TOP_FIELDS]
    if unknown:
        raise SpecError(file, str(unknown[0]), f"unknown field; known fields are {', '.join(TOP_FIELDS)}")
    for required in ("name", "model", "messages"):
        if data.get(required) in (None, "", []):
            raise SpecError(file, required, "is required")
    name = check_name(data["name"], "name", file)
    model = data["model"]
    if not isinstance(model, str) or not model.strip():
        raise SpecError(file, "model", "must be a non-empty string")
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise SpecError(file, "description", "must be a string")
    return PromptSpec(
        name=name, model=model, description=description,
        params=_freeze(_parse_params(data.get("params"), file)),
        messages=_parse_messages(data["messages"], file),
        labels=_parse_labels(data.get("labels"), file),
        decision=_parse_decision(data.get("decision"), file),
        response_format=_freeze(_parse_mapping(data.get("response_format"), "response_format", file)),
        provider=_parse_provider(data.get("provider"), file),
    )


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
            raise SpecError(file, f"params.{key}", f"unknown parameter; known are {', '.join(PARAMS)}")
        kind, low, high = PARAMS[key]
        where = f"params.{key}"
        if key == "stop":
            if isinstance(val, str):
                params[key] = val = [val]
            if not isinstance(val, list) or not all(isinstance(s, str) for s in val):
                raise SpecError(file, where, "must be a string or a list of strings")
            continue
        if kind is float and isinstance(val, int) and not isinstance(val, bool):
            params[key] = val = float(val)
        if not isinstance(val, kind) or isinstance(val, bool):
            raise SpecError(file, where, f"must be a {kind.__name__}")
        if low is not None and val < low or high is not None and val > high:
            raise SpecError(file, where, f"must be between {low} and {high if high is not None else 'any'}")
    return params


def _parse_messages(value: Any, file: str | None) -> tuple[Message, ...]:
    if not isinstance(value, list) or not value:
        raise SpecError(file, "messages", "must be a non-empty list of {role, content}")
    messages = []
    for i, msg in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(msg, Mapping):
            raise SpecError(file, where, "must be a mapping with role and content")
        extra = [k for k in msg if k not in ("role", "content")]
        if extra:
            raise SpecError(file, f"{where}.{extra[0]}", "unknown field; a message has role and content")
        role, content = msg.get("role"), msg.get("content")
        if role not in ROLES:
            raise SpecError(file, f"{where}.role", f"must be one of {', '.join(ROLES)}")
        if not isinstance(content, str) or not content.strip():
            raise SpecError(file, f"{where}.content", "must be a non-empty string")
        try:
            check_template(content)
        except TemplateProblem as exc:
            raise SpecError(file, f"{where}.content", str(exc)) from None
        messages.append(Message(role, content))
    return tuple(messages)


def _parse_labels(value: Any, file: str | None) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_LABELS
    if not isinstance(value, list) or len(value) < 2:
        raise SpecError(file, "labels", "must be a list of two or more labels")
    seen = set()
    for label in value:
        if not isinstance(label, str) or not label.strip() or label != label.strip():
            raise SpecError(file, "labels", f"{label!r} is not a label: use non-empty strings without surrounding spaces")
        if len(label) > 128:
            raise SpecError(file, "labels", f"{label[:20]!r}... is longer than 128 characters")
        if label.casefold() in seen:
            raise SpecError(file, "labels", f"{label!r} is listed twice (labels compare case-insensitively)")
        seen.add(label.casefold())
    return tuple(value)


def _parse_decision(value: Any, file: str | None) -> Decision:
    if value is None:
        return Decision()
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, Mapping):
        raise SpecError(file, "decision", "must be first_word, or a mapping with type json (field) or regex (pattern)")
    extra = [k for k in value if k not in ("type", "field", "pattern")]
    if extra:
        raise SpecError(file, f"decision.{extra[0]}", "unknown field; decision has type, field, pattern")
    kind = str(value.get("type", "first_word")).replace("-", "_")
    if kind not in DECISION_TYPES:
        raise SpecError(file, "decision.type", f"must be one of {', '.join(DECISION_TYPES)}")
    if kind == "json":
        fld = value.get("field", "decision")
        if not isinstance(fld, str) or not fld:
            raise SpecError(file, "decision.field", "must name the JSON field that holds the label")
        return Decision("json", field=fld)
    if kind == "regex":
        pattern = value.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise SpecError(file, "decision.pattern", "is required for a regex decision")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SpecError(file, "decision.pattern", f"invalid regular expression: {exc}") from None
        return Decision("regex", pattern=pattern)
    return Decision()


def _parse_provider(value: Any, file: str | None) -> Provider | None:
    data = _parse_mapping(value, "provider", file)
    if data is None:
        return None
    extra = [k for k in data if k not in ("base_url", "api_key_env")]
    if extra:
        raise SpecError(file, f"provider.{extra[0]}", "unknown field; provider has base_url, api_key_env")
    for key in ("base_url", "api_key_env"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise SpecError(file, f"provider.{key}", "must be a string")
    if data.get("api_key_env") is not None and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", data["api_key_env"]):
        raise SpecError(file, "provider.api_key_env", "must be an environment variable name (the key itself never goes in the file)")
    return Provider(data.get("base_url"), data.get("api_key_env"))
