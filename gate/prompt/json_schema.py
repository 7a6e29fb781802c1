"""JSON Schemas that a prompt file brings (a tool's ``parameters``, a strict
``response_format``): checked when the file is read, and used to check a model's answer
when it comes, both bounded.

A schema comes from a pull request and an answer from a model, so neither may buy
unbounded work:

* **When the file is read** (``check_schema``): the schema is a JSON Schema (draft 2020-12,
  checked against its metaschema by the ``jsonschema`` library), at most ``MAX_DEPTH``
  levels deep and ``MAX_NODES`` values large; every ``$ref`` is local (``#...``) and points
  at a part of the schema itself (no remote schema is ever fetched); ``$id``, ``$anchor``
  and the dynamic references, which would move the base of a reference, are refused, and
  so is ``patternProperties`` (the library matches it with Python's backtracking ``re``);
  every ``pattern`` compiles on RE2 (``gate.prompt.linear_regex``).
* **When an answer is checked** (``answer_problem``): ``pattern`` runs on RE2 (linear in
  the text), ``uniqueItems`` by hashing (the library falls back to comparing every pair:
  quadratic), and every keyword evaluated counts against ``MAX_STEPS`` (a schema that
  branches at every level — ``anyOf`` of two references to itself — costs 2^depth
  otherwise). An answer the gate cannot check within the budget is not valid: it was not
  judged, so it is not a match.

``jsonschema`` is imported when a schema is first checked: a prompt without one costs
nothing, and the CLI starts as fast as before.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from gate.errors import SpecError

from .linear_regex import PatternError, compile_pattern

MAX_DEPTH = 32  # levels of the schema, as nested JSON
MAX_NODES = 4000  # values in the schema (mappings, lists, scalars)
MAX_STEPS = 10_000  # keyword evaluations per answer checked
MAX_PROBLEM_CHARS = 200  # a problem, as an answer's marker holds it
DRAFT = "https://json-schema.org/draft/2020-12/schema"
REFUSED = ("$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "patternProperties")


SCHEMA_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
FORMAT_KEYS = ("name", "schema", "strict", "description")


class TooCostly(Exception):
    """The answer could not be checked within ``MAX_STEPS`` keyword evaluations."""


def check_schema(schema: Any, where: str, file: str | None) -> dict:
    """The schema, if the gate can check answers against it; else a SpecError naming
    ``where`` and the reason (one line)."""
    if not isinstance(schema, Mapping):
        raise SpecError(file, where, "must be a JSON Schema: a mapping such as {type: object, properties: {...}}")
    schema = dict(schema)
    _check_shape(schema, where, file)
    if schema.get("$schema", DRAFT) != DRAFT:
        raise SpecError(file, f"{where}.$schema", f"the gate checks JSON Schema draft 2020-12: leave it out or {DRAFT}")
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        at = "/".join(str(p) for p in exc.path)
        raise SpecError(
            file, where, f"is not a valid JSON Schema{f' at {at}' if at else ''}: {_short(exc.message)}"
        ) from None
    except RecursionError:
        raise SpecError(file, where, f"nests deeper than {MAX_DEPTH} levels") from None
    return schema


def parse_schema_format(value: Any, file: str | None) -> dict:
    """``response_format.json_schema``: name, schema (checked), strict, description."""
    where = "response_format.json_schema"
    if not isinstance(value, Mapping):
        raise SpecError(file, where, "is required for type json_schema: {name, schema, strict}")
    extra = [k for k in value if k not in FORMAT_KEYS]
    if extra:
        raise SpecError(file, f"{where}.{str(extra[0])[:40]}", f"unknown field; it has {', '.join(FORMAT_KEYS)}")
    name = value.get("name")
    if not isinstance(name, str) or not SCHEMA_NAME_RE.fullmatch(name):
        raise SpecError(file, f"{where}.name", "must be a name: letters, digits, _ and -, at most 64 characters")
    if "strict" in value and not isinstance(value["strict"], bool):
        raise SpecError(file, f"{where}.strict", "must be true or false")
    if "description" in value and not isinstance(value["description"], str):
        raise SpecError(file, f"{where}.description", "must be a string")
    return {**value, "schema": check_schema(value.get("schema"), f"{where}.schema", file)}


def _check_shape(schema: dict, where: str, file: str | None) -> None:
    """Depth, size, references and patterns, in one walk without recursion."""
    nodes, stack = 0, [(schema, 1, where)]
    while stack:
        node, depth, at = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH:
            raise SpecError(file, where, f"nests deeper than {MAX_DEPTH} levels")
        if nodes > MAX_NODES:
            raise SpecError(file, where, f"has more than {MAX_NODES} values: the gate checks answers against it")
        if isinstance(node, Mapping):
            _check_keywords(node, schema, at, file)
            stack.extend((v, depth + 1, f"{at}.{str(k)[:40]}") for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, depth + 1, f"{at}[{i}]") for i, v in enumerate(node))


def _check_keywords(node: Mapping, root: dict, at: str, file: str | None) -> None:
    for key in REFUSED:
        if key in node:
            raise SpecError(
                file,
                f"{at}.{key}",
                "is not supported: the gate checks answers only with local references (#/...) and RE2 patterns",
            )
    ref = node.get("$ref")
    if isinstance(ref, str) and _pointed(root, ref) is _NOWHERE:
        raise SpecError(file, f"{at}.$ref", f"{ref[:80]!r} is not a part of this schema: only local references (#/...)")
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        try:
            compile_pattern(pattern)
        except PatternError as exc:
            raise SpecError(file, f"{at}.pattern", f"invalid pattern: {exc}") from None


_NOWHERE = object()


def _pointed(root: dict, ref: str) -> Any:
    """What a local reference points at in ``root``, or ``_NOWHERE``."""
    if not ref.startswith("#"):
        return _NOWHERE
    node: Any = root
    pointer = unquote(ref[1:])
    if not pointer:
        return root
    if not pointer.startswith("/"):
        return _NOWHERE
    for part in pointer[1:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _NOWHERE
    return node


# --- checking answers ----------------------------------------------------------------------

_meter = threading.local()


def answer_problem(schema: Mapping[str, Any], instance: Any) -> str | None:
    """Why ``instance`` does not fit ``schema`` (checked with ``check_schema``; a frozen
    spec's mapping proxies count as mappings), in one short line (where in the answer, and
    what), or None when it fits."""
    validator = _validator(json.dumps(schema, sort_keys=True, separators=(",", ":"), default=dict))
    _meter.left = MAX_STEPS
    try:
        error = next(iter(validator.iter_errors(instance)), None)
    except TooCostly:
        return f"too costly to check (over {MAX_STEPS:,} steps of the schema)"
    except RecursionError:
        return "too deep to check"
    if error is None:
        return None
    at = "/".join(str(p) for p in error.absolute_path)
    return _short(f"{at}: {error.message}" if at else error.message)


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_PROBLEM_CHARS else text[: MAX_PROBLEM_CHARS - 1] + "…"


@lru_cache(maxsize=128)
def _validator(schema_text: str):
    from referencing import Registry

    return _validator_class()(json.loads(schema_text), registry=Registry())


@lru_cache(maxsize=1)
def _validator_class():
    """Draft 2020-12 with every keyword metered, ``pattern`` on RE2 and ``uniqueItems``
    by hashing."""
    from jsonschema import Draft202012Validator, validators

    keywords = dict(Draft202012Validator.VALIDATORS)
    keywords["pattern"] = _pattern
    keywords["uniqueItems"] = _unique_items
    return validators.extend(Draft202012Validator, {name: _metered(fn) for name, fn in keywords.items()})


def _metered(keyword):
    def run(validator, value, instance, schema):
        _meter.left = getattr(_meter, "left", MAX_STEPS) - 1
        if _meter.left < 0:
            raise TooCostly
        return keyword(validator, value, instance, schema)

    return run


def _pattern(validator, pattern, instance, schema):
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string"):
        try:
            found = compile_pattern(pattern).search(instance)
        except PatternError:
            found = None  # refused when the file was read; a stored schema from elsewhere fits nothing
        if found is None:
            yield ValidationError(f"{_short(repr(instance))} does not match {pattern[:80]!r}")


def _unique_items(validator, unique, instance, schema):
    from jsonschema.exceptions import ValidationError

    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[str] = set()
    for item in instance:
        key = json.dumps(_equal_form(item), sort_keys=True, separators=(",", ":"))
        if key in seen:
            yield ValidationError(f"has non-unique elements ({_short(key)})")
            return
        seen.add(key)


def _equal_form(value: Any) -> Any:
    """A value in the form JSON Schema's equality compares: 1 and 1.0 alike, true and 1 not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_equal_form(v) for v in value]
    if isinstance(value, dict):
        return {k: _equal_form(v) for k, v in value.items()}
    return value
