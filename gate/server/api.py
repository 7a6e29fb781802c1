"""The JSON API under ``/v1``: each route checks its scope (``auth.require``), calls the
service API ``Gate`` and returns what it returned, encoded by ``gate.wire`` (the client
decodes it back into the same dataclasses). Errors leave through the app's one boundary
(``app.py``) as ``{"error": one line, "exit_code": n}``.

Routes that block on the database are plain functions (FastAPI runs them on its thread
pool); the long-poll wait is a coroutine that holds no thread while it waits."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from ..errors import Forbidden, NotFound, UsageError
from ..sources import scheme_of
from ..spec import parse_spec, parse_spec_text
from ..states import UpdateStatus
from ..wire import encode
from ..yamlfile import MAX_FILE_BYTES
from .auth import Caller, authorize, require
from .bodies import BODY, SUBMIT_BODY, DatasetBody, MappingBody, RollbackBody, SyncBody, TokenBody, responses
from .edge import MAX_ID, MAX_VERSION, in_range, update_id_path
from .limits import spool_upload, strict_json
from .sources import HOLDOUT_ROWS, check_remote_source, rows_readable, scrubbed, uploaded_source
from .watcher import UNKNOWN

router = APIRouter(prefix="/v1")
YAML_TYPES = {"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/plain"}
MAX_WAIT_SECONDS = 120.0


def gate_of(request: Request):
    return request.app.state.gate


def json_bytes(value: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(scrubbed(encode(value)), ensure_ascii=True, separators=(",", ":")),
        status_code=status,
        media_type="application/json",
    )


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
    branch's job may ask for. The update records the token's name (``submitted_by``);
    a check replaces only the same token's open checks of the same key."""
    fields = await _submission(request)
    if fields["mode"] == "apply":
        authorize(request, "admin", why="apply mode (it goes live when every bar clears)")
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
    )  # its key is this token's: none replaces another's
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
        "mode": _text(fields, "mode") or "check",
        "source_key": _text(fields, "source_key"),
        "sha": _text(fields, "sha"),
        "repo": _text(fields, "repo"),
        "path": _text(fields, "path"),
        "pr": _pr(fields.get("pr")),
        "reuse": _flag(fields.get("reuse", True), "reuse"),
        "full": _flag(fields.get("full", False), "full"),
    }


def _json_object(text: str) -> dict:
    try:
        data = strict_json(text)
    except ValueError as exc:
        raise UsageError(f"the request body is not JSON: {str(exc)[:120]}") from None
    if not isinstance(data, dict):
        raise UsageError("the request body must be a JSON object")
    return data


def _text(fields: dict, key: str, limit: int = 255) -> str | None:
    value = fields.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise UsageError(f"{key} must be text of at most {limit} characters")
    return value


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


def _flag(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "1", "yes", "false", "0", "no"):
        return value.lower() in ("true", "1", "yes")
    raise UsageError(f"{key} must be true or false")


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
    _caller: Caller = Depends(require("read")),
):
    """``Gate.list_updates`` (newest first), or with ``sha`` ``Gate.updates_for_sha``."""
    gate = gate_of(request)
    if not sha:
        if mode is not None:
            raise UsageError("mode goes with sha (which of a commit's updates a release waits for)")
        return json_bytes(gate.list_updates(limit, prompt, status=status, sha_prefix=sha_prefix, before_id=before_id))
    if (status, sha_prefix, before_id) != (None, None, None):
        raise UsageError("status, sha_prefix and before_id go without sha (a commit's updates are all listed)")
    return json_bytes(gate.updates_for_sha(sha, prompt, mode))


REPORT_VIEWS = "status (default): the `promptgate status --json` document; wire: the client's encoding"


UpdateId = Annotated[int, Depends(update_id_path)]


@router.get("/updates/{update_id}", summary="An update's report", responses=responses(404))
async def report(
    request: Request,
    update_id: UpdateId,
    failures: int = Query(5, ge=0, le=100),
    view: str = Query("status", pattern="^(status|wire)$", description=REPORT_VIEWS),
    _caller: Caller = Depends(require("read")),
):
    body = await request.app.state.reports.report_json(update_id, failures, view == "wire")
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
    wire = view == "wire"
    with request.app.state.wait_slots.hold(caller.name if caller.scope else None):  # per token (429); anonymous: one
        status = await request.app.state.watcher.wait(update_id, timeout, want=(failures, wire))  # made before it wakes
    if status == UNKNOWN:
        raise NotFound(f"unknown update {update_id}")
    body = await request.app.state.reports.report_json(update_id, failures, wire)
    return Response(body, media_type="application/json")


@router.post("/updates/{update_id}/cancel", summary="Cancel an open update", responses=responses(403, 404, 409))
def cancel(request: Request, update_id: UpdateId, caller: Caller = Depends(require("submit"))):
    """A submit token cancels only the updates it submitted (403 otherwise); admin any."""
    owner = None if caller.scope == "admin" else caller.name
    gate_of(request).cancel(update_id, f"cancelled by {caller.name} through the service", owner=owner)
    return json_bytes({"id": update_id, "status": "CANCELLED"})


# --- prompts ----------------------------------------------------------------------------


@router.get("/prompts/{name}/live", summary="A prompt's live version", responses=responses(404))
def live(request: Request, name: str, _caller: Caller = Depends(require("read"))):
    return json_bytes(gate_of(request).live(name))


@router.get(
    "/prompts/{name}/history",
    summary="A prompt's live versions, with the update that made each",
    responses=responses(404),
)
def history(
    request: Request, name: str, limit: int = Query(50, ge=1, le=1000), _caller: Caller = Depends(require("read"))
):
    return json_bytes(gate_of(request).history(name, limit))


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
    actor = f"token {caller.name}" + (f" for {_text(body, 'actor', 100)}" if body.get("actor") else "")
    return json_bytes(
        gate_of(request).rollback(
            name, reason=_text(body, "reason", 2000) or "", actor=actor, to_version=to, seen_version=seen
        )
    )


# --- datasets and bars ----------------------------------------------------------------


@router.get("/datasets", summary="Datasets and the prompts mapped to each", responses=responses())
def datasets(request: Request, _caller: Caller = Depends(require("read"))):
    return json_bytes([{"dataset": ds, "mappings": maps} for ds, maps in gate_of(request).list_datasets()])


@router.post(
    "/datasets",
    summary="Register a dataset (its rows imported as its current version)",
    responses=responses(403, 404, 409, *BODY),
)
def register_dataset(request: Request, model: DatasetBody, _caller: Caller = Depends(require("admin"))):
    gate, body = gate_of(request), model.model_dump()
    name = _text(body, "name", 128)
    source = _text(body, "source", 2000)
    if not name or not source:
        raise UsageError("give the dataset's name and source")
    check_remote_source(source)
    ds = gate.register_dataset(
        name, source, id_column=_text(body, "id_column"), label_column=_text(body, "label_column")
    )
    return json_bytes({"dataset": ds, "version": gate.dataset_version(name)})


@router.post("/datasets/{name}/refresh", summary="Import a dataset's source again", responses=responses(403, 404, 409))
def refresh_dataset(request: Request, name: str, _caller: Caller = Depends(require("admin"))):
    gate = gate_of(request)
    ds = gate.get_dataset(name)
    check_remote_source(ds.source_uri, f"dataset {name}: ")  # as if sent now: no file, no ${VAR}
    ds, imported = gate.refresh_dataset(name)
    return json_bytes({"dataset": ds, "version": gate.dataset_version(name), "imported": imported})


@router.put(
    "/datasets/{name}/rows",
    summary="Upload a dataset file's rows (CSV or JSONL body): a version, or a diff",
    responses=responses(403, 404, 409, *BODY),
)
async def upload_rows(
    request: Request,
    name: str,
    path: str = Query(..., max_length=500),
    fmt: str | None = Query(None, alias="format", pattern="^(csv|jsonl|ndjson)$"),
    id_column: str | None = Query(None, max_length=255),
    label_column: str | None = Query(None, max_length=255),
    commit: str | None = Query(None, max_length=64),
    declared_in: str | None = Query(None, max_length=255),
    dry_run: bool = False,
    _caller: Caller = Depends(require("submit")),
):
    """The body is the file's bytes, up to ``serve --max-upload-bytes``, streamed to a
    spooled temporary file once the token has been checked; ``path`` is the file's path in
    the repository, ``commit`` the commit it was read at. The rows are read as a local
    import reads a file (formats, row size, duplicate ids) and imported as the dataset's
    version (admin): the dataset is registered as ``upload://PATH`` when new. With
    ``dry_run=true`` (submit) nothing is stored: the answer is how the rows differ from the
    current version, for a dataset a gate config declares from that path only."""
    if not dry_run:
        authorize(request, "admin", why="an upload (it imports the rows as the dataset's version)")
    config = request.app.state.config
    with request.app.state.upload_slots.hold(None):  # at most --max-uploads at once, server-wide (429)
        spool = await spool_upload(request.stream(), config.max_upload_bytes, config.body_timeout)
        try:
            return json_bytes(
                await run_in_threadpool(
                    _take_upload,
                    gate_of(request),
                    name,
                    spool,
                    path,
                    fmt,
                    dry_run,
                    id_column,
                    label_column,
                    commit,
                    declared_in,
                )
            )
        finally:
            spool.close()


def _take_upload(gate, name, spool, path, fmt, dry_run, id_column, label_column, commit, declared_in):
    """An upload's rows: compared with the current version (a dry run), or imported."""
    if dry_run:
        return gate.diff_upload(name, spool, path, fmt)
    ds, imported = gate.import_upload(
        name,
        spool,
        path,
        kind=fmt,
        id_column=id_column,
        label_column=label_column,
        commit=commit,
        declared_in=declared_in,
    )
    return {"dataset": ds, "version": gate.dataset_version(name), "imported": imported}


@router.post(
    "/sync",
    summary="Make the datasets, bars, providers and prices match a gate config",
    responses=responses(403, 404, 409, *BODY),
)
def sync_config(request: Request, model: SyncBody, _caller: Caller = Depends(require("submit"))):
    """``{"config": the gate config's YAML text, "path": its path in the repository,
    "dry_run": only say what would change, "files": the file datasets whose rows the client
    uploads, "commit": the commit it was read at}``: ``gateconfig.sync`` (or ``diff``) on the service's gate. A dry
    run needs the
    submit scope (a pull request's check shows what its config would change); a sync needs
    admin. Every other dataset source must be one the service may read for a caller
    (``sources``), checked before the config is parsed. A dataset named in ``files`` is
    declared as ``upload://`` its file's repository path: a sync needs its rows uploaded
    first (``PUT /v1/datasets/{name}/rows``) and imports nothing for it."""
    from .. import gateconfig
    from ..yamlfile import parse_yaml

    body = model.model_dump()
    dry_run = _flag(body.get("dry_run", False), "dry_run")
    if not dry_run:
        authorize(request, "admin", why="a sync (it changes the gate's datasets, bars and providers)")
    path, text = _text(body, "path") or "gate config", body.get("config")
    if not isinstance(text, str):
        raise UsageError("give the gate config's YAML text as config")
    files = body.get("files") or []
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise UsageError("files must be a list of dataset names")
    data = parse_yaml(text, path)
    declared = data.get("datasets") if isinstance(data, dict) else None
    for name, decl in declared.items() if isinstance(declared, dict) else ():
        source = decl.get("source") if isinstance(decl, dict) else decl
        if name in files and isinstance(source, str) and scheme_of(source.strip()) == "file":
            declared[name] = (
                {**decl, "source": uploaded_source(path, source)}
                if isinstance(decl, dict)
                else uploaded_source(path, source)
            )
        elif isinstance(source, str) and source.strip():
            check_remote_source(source, f"{path}: datasets.{str(name)[:80]}.source: ")
    cfg = gateconfig.parse_config(data, file=path)
    gate = gate_of(request)
    if dry_run:
        return json_bytes(gateconfig.diff(gate, cfg))
    missing = gateconfig.uploads_missing(gate, cfg)
    if missing:
        raise UsageError(
            f"{path}: dataset {missing[0]}: its rows were not uploaded (the client uploads each file "
            "dataset to PUT /v1/datasets/NAME/rows before the sync): nothing was changed"
        )
    return json_bytes(gateconfig.sync(gate, cfg, commit=body.get("commit")))


@router.get("/datasets/{name}/versions", summary="A dataset's versions", responses=responses(404))
def dataset_versions(request: Request, name: str, _caller: Caller = Depends(require("read"))):
    ds, versions = gate_of(request).dataset_versions(name)
    return json_bytes({"dataset": ds, "versions": versions})


@router.get(
    "/datasets/{name}/versions/{version}", summary="One version of a dataset (current if 0)", responses=responses(404)
)
def dataset_version(request: Request, name: str, version: str, _caller: Caller = Depends(require("read"))):
    """``version``: "v3" (the dataset's third version), a version id, or 0 (the current one)."""
    return json_bytes(gate_of(request).dataset_version(name, None if version.strip() in ("", "0") else version))


@router.get("/datasets/{name}/preview", summary="A version's first rows and label counts", responses=responses(404))
def preview(
    request: Request,
    name: str,
    rows: int = Query(10, ge=0, le=1000),
    version: str | None = None,
    caller: Caller = Depends(require("read")),
):
    """Rows of a dataset no repository holds (a holdout) need admin (``sources.rows_readable``);
    its counts (``rows=0``) any reader."""
    gate = gate_of(request)
    if rows and not rows_readable(caller.scope, gate.get_dataset(name)):
        raise Forbidden(HOLDOUT_ROWS.format(name=name))
    return json_bytes(gate.preview_dataset(name, rows, version))


@router.get("/datasets/{name}/diff", summary="How two versions of a dataset differ", responses=responses(404))
def diff(request: Request, name: str, old: str, new: str, caller: Caller = Depends(require("read"))):
    """The counts for any reader; the example rows of a holdout for admin only."""
    gate = gate_of(request)
    found = gate.diff_versions(name, old, new)
    if not rows_readable(caller.scope, gate.get_dataset(name)):
        found.examples = {kind: [] for kind in found.examples}
    return json_bytes(found)


@router.put(
    "/prompts/{prompt}/datasets/{dataset}",
    summary="Map a prompt to a dataset with its bars",
    responses=responses(403, 404, 409, *BODY),
)
def map_dataset(
    request: Request, prompt: str, dataset: str, body: MappingBody, _caller: Caller = Depends(require("admin"))
):
    return json_bytes(gate_of(request).map_dataset(prompt, dataset, body.min_accuracy, bars=body.bars))


@router.delete(
    "/prompts/{prompt}/datasets/{dataset}", summary="Unmap a prompt from a dataset", responses=responses(403, 404, 409)
)
def unmap_dataset(request: Request, prompt: str, dataset: str, _caller: Caller = Depends(require("admin"))):
    return json_bytes({"removed": gate_of(request).unmap_dataset(prompt, dataset)})


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
    token = gate_of(request).create_token(name or "", scope or "")
    return json_bytes({"name": name, "scope": scope, "token": token}, 201)


@router.post("/tokens/{name}/revoke", summary="Revoke a token", responses=responses(403, 404))
def revoke_token(request: Request, name: str, _caller: Caller = Depends(require("admin"))):
    revoked = gate_of(request).revoke_token(name)
    request.app.state.tokens.forget_all()
    return json_bytes({"name": name, "revoked": revoked})
