"""Reading YAML that arrives in pull requests (prompt files, gate configs): bounded, plain.

A YAML file from a pull request is code-like input from someone the team does not
control, and YAML has features that cost far more than the text they take:

* **anchors and aliases** (``&a`` / ``*a``) let 478 bytes expand to gigabytes (the
  "billion laughs"), and ``&a {x: *a}`` builds a cycle that recursion never leaves. A
  prompt file has no use for them: both are refused, with the line that holds them.
* **nesting** is composed recursively: 5,000 ``[`` ran PyYAML into a RecursionError.
  Nesting deeper than ``MAX_DEPTH`` is refused before that.
* **size**: a file over ``MAX_FILE_BYTES`` is refused, and only that much is ever read
  (``submit /dev/zero`` ends at once).
* **duplicate keys** silently kept the last value; they are refused, naming the key.
* **long numbers**: an integer of 100,000 digits took Python's own refusal, which names
  its internals; a number longer than ``MAX_NUMBER_CHARS`` is refused with its line.
* **YAML 1.1 scalars**: ``yes``/``no``/``on``/``off`` were booleans and ``2024-01-01`` a
  date. Values here follow YAML 1.2's core schema: only ``true``/``false`` are booleans
  and dates stay strings, so ``labels: [yes, no]`` means the two labels it shows.

Every refusal is a ``SpecError`` naming the file and the line, never a traceback.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from gate.errors import SpecError

from .text_file import MAX_FILE_BYTES

MAX_DEPTH = 32
MAX_NUMBER_CHARS = 100

BOOL_TAG = "tag:yaml.org,2002:bool"
TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


class Refused(yaml.YAMLError):
    """A YAML feature a file from a pull request may not use; ``mark`` says where."""

    def __init__(self, problem: str, mark):
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark


class UntrustedLoader(yaml.SafeLoader):
    """SafeLoader without anchors, aliases, deep nesting or duplicate keys, with YAML 1.2
    booleans and no timestamps (see the module docstring)."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in (BOOL_TAG, TIMESTAMP_TAG)]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, stream):
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise Refused(f"YAML alias *{event.anchor} is not allowed: spell every value out", event.start_mark)
        if getattr(event, "anchor", None) is not None:
            raise Refused(f"YAML anchor &{event.anchor} is not allowed: spell every value out", event.start_mark)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Refused(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def fetch_flow_collection_start(self, TokenClass):
        """Deep ``[`` / ``{`` nesting refused as the scanner meets it: the scanner reads about
        a thousand tokens ahead of ``compose_node``'s check, and re-checks every open bracket
        on each (quadratic: 0.2 s of CPU for ``[`` * 5000, over a second on a loaded machine)."""
        if self.flow_level >= MAX_DEPTH:
            raise Refused(f"nested deeper than {MAX_DEPTH} levels", self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    def construct_yaml_int(self, node):
        self._bounded_number(node)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        self._bounded_number(node)
        return super().construct_yaml_float(node)

    def _bounded_number(self, node) -> None:
        """A number longer than ``MAX_NUMBER_CHARS`` is refused with its line: Python's own
        refusal of an integer past 4,300 digits names its internals, and no field needs more."""
        if len(str(node.value)) > MAX_NUMBER_CHARS:
            raise Refused(f"a number longer than {MAX_NUMBER_CHARS} characters", node.start_mark)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                except TypeError:  # an unhashable key: the base class says so
                    break
                if duplicate:
                    raise Refused(f"duplicate key {str(key)[:80]!r}", key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)


# the resolver lists above are copies: adding to them leaves SafeLoader as it is
UntrustedLoader.add_implicit_resolver(BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


UntrustedLoader.add_constructor("tag:yaml.org,2002:int", UntrustedLoader.construct_yaml_int)
UntrustedLoader.add_constructor("tag:yaml.org,2002:float", UntrustedLoader.construct_yaml_float)


def parse_yaml(text: str, file: str | None, limit: int = MAX_FILE_BYTES) -> Any:
    """The YAML document, or a SpecError with the line and column of the problem."""
    if len(text) > limit or len(text.encode("utf-8", "surrogatepass")) > limit:
        raise SpecError(file, None, f"the text is over the {limit // 1024} KiB limit")
    try:
        return yaml.load(text, Loader=UntrustedLoader)  # noqa: S506  (a SafeLoader subclass)
    except Refused as exc:
        raise SpecError(file, None, f"{_where(exc)}{exc.problem}") from None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(file, None, f"malformed YAML: {_where(exc)}{problem}") from None
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. an integer of 5,000 digits
        raise SpecError(file, None, f"malformed YAML: {type(exc).__name__}: {str(exc)[:200]}") from None


def _where(exc) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
