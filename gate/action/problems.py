"""An invalid file as the Action reports it: a ``::error`` annotation on its file and line
(values escaped as GitHub's toolkit escapes command data and properties) and a row of the
report."""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from gate.errors import SpecError
from gate.prompt.yaml_file import UntrustedLoader


@dataclass(frozen=True)
class Problem:
    """An invalid file: an ::error annotation and a row of the report."""

    file: str
    line: int | None
    field: str | None
    reason: str
    severity: str = "error"

    def annotation(self) -> str:
        props = f"file={command_property(self.file)}"
        if self.line:
            props += f",line={self.line}"
        props += ",title=prompt-gate"
        where = f"{self.field}: " if self.field else ""
        return f"::{self.severity} {props}::{command_data(where + self.reason)}"


def command_data(text: str) -> str:
    """A workflow command's message, escaped as GitHub's toolkit escapes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def command_property(text: str) -> str:
    """A workflow command's property value (``file=...``), escaped as GitHub's toolkit does."""
    return command_data(text).replace(":", "%3A").replace(",", "%2C")


_YAML_LINE = re.compile(r"line (\d+), column \d+")
_FIELD_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def field_line(text: str, field: str | None) -> int | None:
    """The 1-based line of a field path such as ``messages[0].content`` in a YAML
    text (the deepest part that exists), or None."""
    if not field:
        return None
    try:
        node = yaml.compose(text, Loader=UntrustedLoader)  # no aliases, bounded nesting
    except yaml.YAMLError:
        return None
    line = None
    for m in _FIELD_PART.finditer(field):
        key, index = m.group(1), m.group(2)
        if isinstance(node, yaml.MappingNode) and key is not None:
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == key:
                    line, node = k.start_mark.line + 1, v
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and index is not None and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def problem_from(exc: SpecError, path: str, text: str | None) -> Problem:
    line = None
    m = _YAML_LINE.search(exc.reason or "")
    if m:
        line = int(m.group(1))
    elif text is not None:
        line = field_line(text, exc.field)
    return Problem(path, line, exc.field, exc.reason)
