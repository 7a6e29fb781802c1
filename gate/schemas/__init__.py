"""JSON Schemas shipped with the package (pyproject.toml: package data ``gate.schemas/*.json``):
``prompt.schema.json`` (a prompt file, for editors) and ``status.schema.json`` (what
``status --json`` prints: the contract release pipelines parse)."""

from __future__ import annotations

import json
from importlib.resources import files


def status_schema() -> dict:
    """The JSON Schema (draft 2020-12) of ``UpdateReport.to_dict``, i.e. ``status --json``."""
    return json.loads(files(__name__).joinpath("status.schema.json").read_text(encoding="utf-8"))
