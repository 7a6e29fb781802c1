"""A candidate that stops reading its rows' labels (review of issues 49/50): a prompt whose
live version is decided by its dataset rows' labels (or expected objects) changed by a pull
request into one that reads none — ``decision: checks`` with a check every answer passes, or a
judge — had every bar cleared on the very datasets whose labels no answer was compared with
("d 100.0% ≥ 90% the share of items passing every check"), and the push job then applied it.
The gate never says yes about what was not judged: such a change is an admin's (the CLI on the
database, or an admin token), refused to a pull request's token in one line naming both kinds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gate.errors import Forbidden
from gate.kinds import kind_of
from gate.store.live import find_live

if TYPE_CHECKING:
    from gate.prompt.spec import PromptSpec


def check_labels_kept(conn, spec: PromptSpec, scope: str | None) -> None:
    """Refuse (403) a submit token's candidate whose decision reads no row label when the live
    version's does (``DecisionKind.needs_row_labels``); ``scope`` None: the CLI on the database."""
    if scope is None or scope == "admin":
        return
    live = find_live(conn, spec.name)
    if live is None:
        return
    before, after = kind_of((live.config or {}).get("decision")), kind_of(spec.decision)
    if before.needs_row_labels and not after.needs_row_labels:
        raise Forbidden(
            f"prompt {spec.name}'s live version v{live.version} is decided by its rows' labels ({before.name}); this "
            f"candidate's decision ({after.name}) reads none, so no bar would compare an answer with a label: "
            "a change of what decides the prompt needs an admin token"
        )
