"""What a sync changes, or would change: one ``Change`` per difference between a gate
config and the gate, and the ``SyncResult`` that lists them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gate.calls.prices import CHANGE_TEXT as PRICE_TEXT
from gate.calls.spend_caps import CHANGE_TEXT as LIMIT_TEXT

CHANGE_TEXT = {
    "dataset-added": "dataset {subject}: new, source {after}",
    "dataset-changed": "dataset {subject}: {before} → {after}",
    "dataset-undeclared": "dataset {subject}: no longer declared (stays registered, gates nothing)",
    "dataset-published": "dataset {subject}: a holdout now (registered from outside the repository, its rows "
    "for admin only); declared from {after}, its new versions' rows are readable by every token (its older "
    "versions, and the items of the runs on them, stay admin-only)",
    "bar-added": "bar {subject}: new, min accuracy {after}",
    "bar-changed": "bar {subject}: min accuracy {before} → {after}",
    "bar-removed": "bar {subject}: removed (was {before})",
    "bar-unfit": "warning: {after}; until then its submits are refused",
    "provider-added": "provider {subject}: new, {after}",
    "provider-changed": "provider {subject}: {before} → {after}",
    "provider-removed": "provider {subject}: removed (was {before})",
    "provider-pinned": "provider {subject}: live prompts keep calling the declaration they were evaluated with "
    "until an update applies them again through the gate: {after}",
    "dataset-rows": "dataset {subject}: {after} against the gate's version {before}",
    "dataset-version": "dataset {subject}: new version {after} (was {before})",
    **PRICE_TEXT,
    **LIMIT_TEXT,
    "optional-fields": "prompt {subject}: optional fields {before} → {after}",
    "rollout": "prompt {subject}: rollout {before} → {after}",
    "judge-below-floors": "judge {subject}: warning: {after}; every prompt it judges is refused at submit "
    "until it is applied again above them (CHANGELOG: judge floors)",
}


@dataclass(frozen=True)
class Change:
    """One difference between the file and the gate. ``kind`` is one of dataset-added,
    dataset-changed, dataset-undeclared, bar-added, bar-changed, bar-removed,
    provider-added, provider-changed, provider-removed, provider-pinned (not a change: the
    live prompts pinned to another declaration of a provider the file changes, which keep
    calling it), price-added, price-changed,
    price-removed; limit-added, limit-changed, limit-removed (``limits:``); dataset-published
    (not a change: a dataset-changed that points a holdout, registered from outside the
    repository, at a repository's file, so that its next versions are anyone's to read); optional-fields
    (the fields a prompt's templates may read although no dataset row has them; "none"
    before or after); rollout (a prompt's canary rollout, ``rollout:``); judge-below-floors
    (not a change: a live judge whose agreement with the humans is below the floors of the
    bars the file declares or the gate keeps, ``gate.verdict.judge_floors``); bar-unfit (not a
    change: a mapping the gate holds with a bar its prompt's kind cannot compute, said once);
    dataset-rows (a pull request changes a dataset's file: its rows
    against the gate's version) and dataset-version (a sync imported changed rows as a new
    version)."""

    kind: str
    subject: str  # dataset name, "prompt × dataset", or a prompt name
    before: str | None = None
    after: str | None = None
    key: tuple[str, ...] = ()  # (dataset,) or (prompt, dataset)
    details: tuple[str, ...] = ()  # example rows of a dataset-rows change

    def __str__(self) -> str:
        template = CHANGE_TEXT.get(self.kind, "{kind} {subject}")
        return template.format(kind=self.kind, subject=self.subject, before=self.before, after=self.after)


@dataclass(frozen=True)
class SyncResult:
    """What ``sync`` changed (``applied``) or what it would change (``diff``)."""

    path: str
    changes: tuple[Change, ...] = ()
    applied: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def lines(self) -> list[str]:
        return [str(c) for c in self.changes]

    def __str__(self) -> str:
        if not self.changes:
            return f"{self.path}: no change"
        verb = "changed" if self.applied else "would change"
        return f"{self.path}: {verb} {len(self.changes)}: " + "; ".join(self.lines())


def rows_change(name: str, version: str, rows) -> Change:
    """A dataset-rows change: how a pull request's copy of a dataset's file (``rows``, an
    ``importer.DataDiff``) differs from the gate's version ``version`` (as outputs name it: "v3")."""
    details = tuple(f"{kind}: {', '.join(examples)}" for kind, examples in rows.examples.items() if examples)
    return Change("dataset-rows", name, version, rows.summary(), (name,), details)


_SECRET_RE = re.compile(r"(://[^/:@\s]*):[^/@\s]*@")


def redact(uri: str) -> str:
    """A source URI fit for a report: a password in it is replaced by ***."""
    return _SECRET_RE.sub(r"\1:***@", uri)
