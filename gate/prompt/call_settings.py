"""A prompt file's call settings and labels, each parsed and bounded (``gate.prompt.spec`` reads
the rest of the file and builds the PromptSpec from these): the model's name, every
parameter's type and range (no NaN, no ``max_tokens`` of 10**12), the response format
(JSON values only, bounded in size), the labels (none may look like the gate's own
markers, such as ``(invalid)``), and the trials with their rule. Every problem is a
SpecError naming the file, the field and the reason."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from gate.errors import SpecError, did_you_mean

from .json_schema import parse_schema_format
from .trials import DEFAULT_RULE, MAX_TRIALS, TRIAL_RULES

# No classification needs more; each call's estimate spends the shared token budget
# (gate.ratelimit), so a pull request must not set it huge.
MAX_TOKENS = 1 << 14
INT64 = (-(1 << 63), (1 << 63) - 1)
PARAMS: dict[str, tuple[type[Any], float | None, float | None]] = {  # (type, lowest, highest)
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
DEFAULT_LABELS = ("yes", "no")
MAX_LABELS = 256
MAX_RESPONSE_FORMAT_BYTES = 64 * 1024
RESPONSE_FORMAT_TYPES = ("text", "json_object", "json_schema")
MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,255}")
REASONING_EFFORT_RE = re.compile(r"[a-z]{1,16}")
# A label in parentheses reads like the gate's own markers ("(invalid)" marks an answer
# outside the labels); control characters would reach terminals and logs.
RESERVED_LABEL_RE = re.compile(r"\(.*\)", re.DOTALL)
LABEL_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")  # fullmatch: "$" would let "name\n" through


def check_name(value: Any, what: str = "name", file: str | None = None) -> str:
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise SpecError(
            file,
            what,
            f"{value!r} is not a valid name: use lowercase letters, digits, "
            "'.', '_' or '-', starting with a letter or digit, at most 128 characters",
        )
    return value


def parse_model(value: Any, file: str | None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(file, "model", "must be a non-empty string")
    if not MODEL_RE.fullmatch(value):
        raise SpecError(
            file, "model", "must be a model name: letters, digits and . _ : / @ + -, at most 256 characters"
        )
    return value


def _parse_mapping(value: Any, where: str, file: str | None) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SpecError(file, where, "must be a mapping")
    return dict(value)


def parse_params(value: Any, file: str | None) -> dict[str, Any]:
    params = _parse_mapping(value, "params", file) or {}
    for key, val in params.items():
        if key not in PARAMS:
            hint = did_you_mean(key, PARAMS)
            raise SpecError(file, f"params.{str(key)[:80]}", f"unknown parameter{hint}; known are {', '.join(PARAMS)}")
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


def parse_labels(value: Any, file: str | None) -> tuple[str, ...]:
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


def parse_response_format(value: Any, file: str | None) -> dict | None:
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
    if data["type"] == "json_schema":  # strict structured output: a schema the gate checks answers against
        data["json_schema"] = parse_schema_format(data.get("json_schema"), file)
    return data


def parse_trials(data: Mapping[str, Any], file: str | None) -> dict[str, Any]:
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
