"""A report's failing items of a prompt that inserts the row's conversation (``history:
item.messages``, ``gate.prompt.conversation``): each shown with the conversation's last
turns, read from its dataset row. The items are the report's sample, and a reader who may
not read the dataset's rows gets no sample at all (``gate.service.dataset_access``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gate.prompt.conversation import HISTORY_RE, last_turns
from gate.records import ItemSample, Run
from gate.store.conversations import row_fields, row_inputs


def history_field(config: dict[str, Any] | None) -> str | None:
    """The item field the config's first ``history`` entry inserts, or None."""
    for message in (config or {}).get("messages") or ():
        found = HISTORY_RE.fullmatch(str(message.get("history"))) if isinstance(message, dict) else None
        if found:
            return found.group(1)
    return None


def with_last_turns(conn, run: Run, config: dict[str, Any] | None, samples: list[ItemSample]) -> list[ItemSample]:
    field = history_field(config)
    if field is None or not samples or run.dataset_version_id is None:
        return samples
    found = row_fields(conn, run.dataset_version_id, [s.item_id for s in samples], field)
    return [replace(s, turns=last_turns(found[s.item_id])) if s.item_id in found else s for s in samples]


def with_inputs(conn, run: Run, samples: list[Any]) -> list[Any]:
    """The report's sample items (failing, broken) each with its row's input, which the report
    shows the first lines of (``gate.report.item_rows``)."""
    if not samples or run.dataset_version_id is None:
        return samples
    found = row_inputs(conn, run.dataset_version_id, [s.item_id for s in samples])
    return [replace(s, input=found[s.item_id]) if s.item_id in found else s for s in samples]
