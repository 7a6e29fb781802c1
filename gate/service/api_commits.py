"""The JSON API's commit records under ``/v1``: what the Action's push job did for a commit
(``Gate.record_commit``), which `wait --sha` answers from for a commit with no apply-mode
update. Writing one is admin's (the push job's token): a record of "nothing to gate" lets a
release go ahead, so no pull request's submit token may claim one. Reading is anyone's with
a read token (a release pipeline's), but a not-gated record's ``detail`` is the line the push
job's admin token was refused with, which may name a holdout's fields and count its rows
(``RuleMisfit``: admin gets the detail a submit token gets withheld): it is admin's, and
other readers get a fixed line (``shown_record``)."""

from __future__ import annotations

from dataclasses import replace

from fastapi import APIRouter, Depends, Path, Request

from gate.errors import NotFound
from gate.records import CommitRecord

from .auth import Caller, require
from .bodies import BODY, CommitRecordBody, gate_of, json_bytes, responses

router = APIRouter()
WITHHELD_DETAIL = "see the push job's log (what its admin token was told is shown to admin only)"
Sha = Path(pattern="^[0-9a-fA-F]{40}([0-9a-fA-F]{24})?$", description="a full commit id (40 or 64 hex)")


@router.put(
    "/commits/{sha}/record",
    summary="Record what the push job did for a commit (admin)",
    responses=responses(403, 409, *BODY),
)
def record_commit(
    request: Request, model: CommitRecordBody, sha: str = Sha, caller: Caller = Depends(require("admin"))
):
    """``{"outcome": submitted|nothing|not-gated, "update_ids": [...], "detail": one line,
    "repo", "ref"}``; a re-run of the push job replaces the commit's record."""
    record = gate_of(request).record_commit(
        sha, model.outcome or "", model.update_ids or (), model.detail, model.repo, model.ref, recorded_by=caller.name
    )
    return json_bytes(record)


@router.get("/commits/{sha}/record", summary="What the push job recorded for a commit", responses=responses(404))
def commit_record(request: Request, sha: str = Sha, caller: Caller = Depends(require("read"))):
    record = gate_of(request).commit_record(sha)
    if record is None:
        raise NotFound(f"no record of commit {sha}")
    return json_bytes(shown_record(record, caller))


def shown_record(record: CommitRecord, caller: Caller) -> CommitRecord:
    """The record as ``caller`` may read it: its detail to admin only (see the module docstring)."""
    if caller.scope == "admin" or record.detail is None:
        return record
    return replace(record, detail=WITHHELD_DETAIL)
