"""A row's conversations, checked at import: a column named ``messages`` or
``<name>_messages`` holds a conversation (``gate.prompt.conversation``: turns, roles, tool
calls and their results, bounded), a JSON list in a JSONL row, its JSON text in a CSV
cell (decoded here, so a template and a ``history`` entry see the list). A problem is one
line naming the row and the column; the turn by its number, never its text."""

from __future__ import annotations

from typing import Any

from gate.errors import DatasetError
from gate.prompt.conversation import ConversationProblem, check_conversation, decoded, is_conversation_field


def checked_conversations(inputs: dict[str, Any], where: str) -> dict[str, Any]:
    """``inputs`` with each conversation column checked (and decoded from its text);
    DatasetError naming ``where`` (the row) and the column."""
    found = [
        k for k, v in inputs.items() if k.endswith("messages") and v not in (None, "") and is_conversation_field(k)
    ]
    for name in found:
        try:
            check_conversation(inputs[name])
            inputs[name] = decoded(inputs[name])
        except ConversationProblem as exc:
            raise DatasetError(f"{where}: column {name}: {exc}") from None
    return inputs
