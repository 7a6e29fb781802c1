"""The JSON API under ``/v1``: each route checks its scope (``auth.require``), calls the
domain API ``Gate`` and returns what it returned, encoded by ``gate.contract.codec`` (the client
decodes it back into the same dataclasses). Errors leave through the app's one boundary
(``app.py``) as ``{"error": one line, "exit_code": n}``.

Routes that block on the database are plain functions (FastAPI runs them on its thread
pool); the long-poll wait is a coroutine that holds no thread while it waits."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from gate.contract.codec import encode
from gate.datasets.readability import version_readable
from gate.errors import NotFound, UsageError
from gate.prompt.spec import parse_spec, parse_spec_text
from gate.prompt.text_file import MAX_FILE_BYTES
from gate.report.figures import update_outcome
from gate.states import UpdateStatus

from .api_commits import router as commits_router
from .api_datasets import router as datasets_router
from .api_served import router as served_router
from .auth import Caller, authorize, require
from .bodies import BODY, SUBMIT_BODY, RollbackBody, TokenBody, field_flag, field_text, gate_of, json_bytes, responses
from .body_limits import strict_json
from .dataset_access import history_shown, updates_shown
from .edge import MAX_ID, MAX_VERSION, in_range, update_id_path
from .watcher import UNKNOWN

router = APIRouter(prefix="/v1")
YAML_TYPES = {"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/plain"}
MAX_WAIT_SECONDS = 120.0


# --- submissions and their reports ----------------------------------------------------


@router.post(
    "/updates",
    status_code=202,
    summary="Submit a prompt (YAML or JSON body) for evaluation",
    responses=responses(403, 404, 409, *BODY),
    openapi_extra=SUBMIT_BODY,
)
async def submit(request: Request, caller: Caller = Depends(require("submit"))):
    """A YAML body is the prompt file (``mode``, ``source_key``, ``sha``, ``reuse``, ``full``
    as query parameters); a JSON body is ``{"prompt": <the file as YAML text or as an
    object>, "mode", "source_key", "sha", "reuse", "full", "repo", "pr", "path"}``. 202
    with the id. ``full``: no run stops early (every item is called).

    Check mode needs the submit scope (what pull-request CI holds); **apply mode needs
    admin**: it publishes to production when the bars clear, which only the default
    branch's job may ask for, and so does ``override_rollback`` (an apply of a config a
    rollback moved away from), and ``accept_unjudged`` (a first version no bar can judge, applied
    not judged: gate/domain/unjudged.py). The update records the token's name (``submitted_by``);
    a check replaces only the same token's open checks of the same key."""
    fields = await _submission(request)
    if fields["mode"] == "apply":
        authorize(request, "admin", why="apply mode (it goes live when every bar clears)")
    if fields["override_rollback"]:
        authorize(request, "admin", why="override_rollback (it applies a config a rollback moved away from)")
    if fields["accept_unjudged"]:
        authorize(request, "admin", why="accept_unjudged (it applies a version no bar judged)")
    spec = fields.pop("spec")
    source = {
        k: v
        for k, v in {
            "via": "api",
            "key": fields["source_key"],
            "sha": fields["sha"],
            "repo": fields["repo"],
            "pr": fields["pr"],
            "path": fields["path"],
        }.items()
        if v not in (None, "")
    }
    update_id = await run_in_threadpool(
        gate_of(request).submit,
        spec,
        fields["mode"],
        source,
        fields["reuse"],
        submitted_by=caller.name,
        full=fields["full"],
        may_read=lambda version: version_readable(caller.scope, version),  # no holdout's columns or values told
        override_rollback=fields["override_rollback"],
        proposed_bars=fields["proposed_bars"],
        accept_unjudged=fields["accept_unjudged"],
        scope=caller.scope,  # the domain checks the acceptance's authority too
    )  # its key is this token's: none replaces another's
    request.app.state.watcher.nudge()  # the checks it replaced ended: their waiters wake now
    return json_bytes(
        {
            "id": update_id,
            "prompt": spec.name,
            "mode": fields["mode"],
            "status_url": f"/v1/updates/{update_id}",
            "wait_url": f"/v1/updates/{update_id}/wait",
        },
        202,
    )


async def _submission(request: Request) -> dict:
    body = await request.body()
    kind = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError("the request body is not UTF-8") from None
    if kind == "application/json":
        data = _json_object(text)
        prompt = data.get("prompt")
        if not isinstance(prompt, str) and len(json.dumps(prompt)) > MAX_FILE_BYTES:  # as a YAML file's
            raise UsageError(f"the prompt is over the {MAX_FILE_BYTES // 1024} KiB limit")
        spec = parse_spec_text(prompt, "prompt") if isinstance(prompt, str) else parse_spec(prompt, "prompt")
        fields = data
    elif kind in YAML_TYPES:
        spec, fields = parse_spec_text(text, "prompt"), dict(request.query_params)
    else:
        raise UsageError('send the prompt as application/yaml or as application/json {"prompt": ...}')
    return {
        "spec": spec,
        "mode": field_text(fields, "mode") or "check",
        "source_key": field_text(fields, "source_key"),
        "sha": field_text(fields, "sha"),
        "repo": field_text(fields, "repo"),
        "path": field_text(fields, "path"),
        "pr": _pr(fields.get("pr")),
        "reuse": field_flag(fields.get("reuse", True), "reuse"),
        "full": field_flag(fields.get("full", False), "full"),
        "override_rollback": field_flag(fields.get("override_rollback", False), "override_rollback"),
        "accept_unjudged": field_flag(fields.get("accept_unjudged", False), "accept_unjudged"),
        "proposed_bars": fields.get("proposed_bars") if kind == "application/json" else None,
    }


def _json_object(text: str) -> dict:
    try:
        data = strict_json(text)
    except ValueError as exc:
        raise UsageError(f"the request body is not JSON: {str(exc)[:120]}") from None
    if not isinstance(data, dict):
        raise UsageError("the request body must be a JSON object")
    return data


def _pr(value: Any) -> int | None:
    if value in (None, ""):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise UsageError("pr must be a pull request number") from None
    if not 0 < number < 2**31:
        raise UsageError("pr must be a pull request number")
    return number


UPDATE_STATUS_PATTERN = "^(" + "|".join(s.value for s in UpdateStatus) + ")$"
RELEASE_MODE = (
    "with sha: auto (its apply-mode updates when the commit has any, else its check-mode ones), "
    "apply or check; none: every update of the commit"
)


@router.get("/updates", summary="Updates, newest first (by commit SHA, prompt)", responses=responses())
def list_updates(
    request: Request,
    sha: str | None = None,
    prompt: str | None = None,
    limit: int = Query(20, ge=1, le=500),
    mode: str | None = Query(None, pattern="^(auto|apply|check)$", description=RELEASE_MODE),
    status: str | None = Query(None, pattern=UPDATE_STATUS_PATTERN, description="without sha: in this status"),
    sha_prefix: str | None = Query(
        None, pattern="^[0-9a-fA-F]{1,64}$", description="without sha: of commits whose SHA starts so"
    ),
    before_id: int | None = Query(None, ge=1, le=MAX_ID, description="without sha: older than this update"),
    caller: Caller = Depends(require("read")),
):
    """``Gate.list_updates`` (newest first), or with ``sha`` ``Gate.updates_for_sha``; each
    reason as the caller may read it (``dataset_access.updates_shown``)."""
    gate = gate_of(request)
    if not sha:
        if mode is not None:
            raise UsageError("mode goes with sha (which of a commit's updates a release waits for)")
        found = gate.list_updates(limit, prompt, status=status, sha_prefix=sha_prefix, before_id=before_id)
        return json_bytes(with_outcomes(gate, updates_shown(caller.scope, found, gate)))
    if (status, sha_prefix, before_id) != (None, None, None):
        raise UsageError("status, sha_prefix and before_id go without sha (a commit's updates are all listed)")
    return json_bytes(with_outcomes(gate, updates_shown(caller.scope, gate.updates_for_sha(sha, prompt, mode), gate)))


def with_outcomes(gate, updates: list) -> list[dict[str, Any]]:
    """Each update as its record, and ``outcome``: what the status document's outcome says —
    the status, or for an APPLIED one its canary's state (CANARY, PROMOTED, ROLLED_BACK, …) or
    NOT_JUDGED (issue 49.5: a rolled-back canary never lists as APPLIED alone). One read for
    the page of updates; a client that does not know the key ignores it."""
    states = gate.rollout_states([u.id for u in updates])
    return [{**encode(u), "outcome": update_outcome(u, states.get(u.id))} for u in updates]


REPORT_VIEWS = "status (default): the `promptgate status --json` document; wire: the client's encoding"


UpdateId = Annotated[int, Depends(update_id_path)]


@router.get("/updates/{update_id}", summary="An update's report", responses=responses(404))
async def report(
    request: Request,
    update_id: UpdateId,
    failures: int = Query(5, ge=0, le=100),
    view: str = Query("status", pattern="^(status|wire)$", description=REPORT_VIEWS),
    caller: Caller = Depends(require("read")),
):
    """A dataset's items (failing, broken samples) only for a reader who may read its rows."""
    reports = request.app.state.reports
    body = await reports.report_json(update_id, failures, view == "wire", caller.scope == "admin")
    return Response(body, media_type="application/json")


@router.get(
    "/updates/{update_id}/wait",
    summary="Long-poll: the report once terminal, or at the timeout",
    responses=responses(403, 404, 429),
)
async def wait(
    request: Request,
    update_id: UpdateId,
    timeout: float = Query(30.0, ge=0, le=MAX_WAIT_SECONDS),
    failures: int = Query(5, ge=0, le=100),
    view: str = Query("status", pattern="^(status|wire)$", description=REPORT_VIEWS),
    caller: Caller = Depends(require("read")),
):
    """Waiting is reading: the read scope (a release pipeline's token) suffices."""
    want = (failures, view == "wire", caller.scope == "admin")  # a holdout's items for admin only
    with request.app.state.wait_slots.hold(caller.name if caller.scope else None):  # per token (429); anonymous: one
        status = await request.app.state.watcher.wait(update_id, timeout, want=want)  # made before it wakes
    if status == UNKNOWN:
        raise NotFound(f"unknown update {update_id}")
    body = await request.app.state.reports.report_json(update_id, *want, recent_ok=status is None)  # timed out
    return Response(body, media_type="application/json")


@router.post("/updates/{update_id}/cancel", summary="Cancel an open update", responses=responses(403, 404, 409))
def cancel(request: Request, update_id: UpdateId, caller: Caller = Depends(require("submit"))):
    """A submit token cancels only the updates it submitted (403 otherwise); admin any."""
    owner = None if caller.scope == "admin" else caller.name
    gate_of(request).cancel(update_id, f"cancelled by {caller.name} through the service", owner=owner)
    return json_bytes({"id": update_id, "status": "CANCELLED"})


# --- prompts ----------------------------------------------------------------------------


@router.get(
    "/prompts/{name}/live", summary="A prompt's live version, and what production serves", responses=responses(404)
)
def live(request: Request, name: str, _caller: Caller = Depends(require("read"))):
    """The live version, with ``served`` (the versions production's processes serve, by how
    many, the stale ones named) and ``rollout`` (a canary rollout in progress, or null)."""
    gate = gate_of(request)
    found = gate.live(name)
    rollout = next((r for r in gate.rollouts(name, 1) if r["status"] == "CANARY"), None)
    return json_bytes({**encode(found), "served": gate.served(name), "rollout": rollout})


@router.get(
    "/prompts/{name}/history",
    summary="A prompt's live versions, with the update that made each",
    responses=responses(404),
)
def history(
    request: Request, name: str, limit: int = Query(50, ge=1, le=1000), caller: Caller = Depends(require("read"))
):
    gate = gate_of(request)
    return json_bytes(history_shown(caller.scope, gate.history(name, limit), gate))


@router.post(
    "/prompts/{name}/rollback",
    summary="Make an earlier version live again (no evaluation)",
    responses=responses(403, 404, 409, *BODY),
)
def rollback(request: Request, name: str, model: RollbackBody, caller: Caller = Depends(require("admin"))):
    """``{"reason": why (required), "to": version (default: the one before the live one),
    "seen_version": the live version the caller saw (default: the one read now)}``. The
    history records the token's name as who."""
    body = model.model_dump()
    to, seen = in_range(model.to, "version", MAX_VERSION), in_range(model.seen_version, "version", MAX_VERSION)
    actor = f"token {caller.name}" + (f" for {field_text(body, 'actor', 100)}" if body.get("actor") else "")
    return json_bytes(
        gate_of(request).rollback(
            name, reason=field_text(body, "reason", 2000) or "", actor=actor, to_version=to, seen_version=seen
        )
    )


# --- production: api_served.py (what a runtime loads, reports and feeds back; rollouts) ---

router.include_router(served_router)

# --- datasets and bars: api_datasets.py (mounted here, in this place of the API's order) ---

router.include_router(datasets_router)
router.include_router(commits_router)


@router.get("/prices", summary="The model price table", responses=responses())
def prices(request: Request, _caller: Caller = Depends(require("read"))):
    return json_bytes(gate_of(request).prices())


@router.get("/workers", summary="Live worker processes", responses=responses())
def workers(request: Request, _caller: Caller = Depends(require("read"))):
    return json_bytes(gate_of(request).live_workers())


# --- tokens -------------------------------------------------------------------------------


@router.get("/tokens", summary="The service's tokens (never the tokens themselves)", responses=responses(403))
def tokens(request: Request, _caller: Caller = Depends(require("admin"))):
    return json_bytes(
        [{k: v for k, v in encode(t).items() if k != "token_hash"} for t in gate_of(request).list_tokens()]
    )


@router.post(
    "/tokens",
    status_code=201,
    summary="Create a token: returned once, stored as a hash",
    responses=responses(403, 409, *BODY),
)
def create_token(request: Request, body: TokenBody, _caller: Caller = Depends(require("admin"))):
    name, scope = body.name, body.scope
    token = gate_of(request).create_token(name or "", scope or "", body.prompts)
    answer = {"name": name, "scope": scope, "token": token}
    if body.prompts is not None:
        answer["prompts"] = sorted(set(body.prompts))
    return json_bytes(answer, 201)


@router.post("/tokens/{name}/revoke", summary="Revoke a token", responses=responses(403, 404))
def revoke_token(request: Request, name: str, _caller: Caller = Depends(require("admin"))):
    revoked = gate_of(request).revoke_token(name)
    request.app.state.tokens.forget_all()
    return json_bytes({"name": name, "revoked": revoked})
