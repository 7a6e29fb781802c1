"""The decision kinds, one module each: how a prompt's ``decision:`` is parsed, pinned, read,
scored, counted, checked and shown (``base.DecisionKind``), and the registry that maps a
stored decision to its kind (``registry.kind_of``). The rest of the code asks the kind."""

from .base import Decision, DecisionKind, FigureSource, Reading
from .registry import checks_of, kind_of, parse_rule, rule_of

__all__ = ["Decision", "DecisionKind", "FigureSource", "Reading", "checks_of", "kind_of", "parse_rule", "rule_of"]
