"""The JSON API's dataset routes under ``/v1``: datasets and their versions, uploads of a
file's rows, the bars that map a prompt to a dataset, and the sync of a gate config.
Mounted by ``api.router`` with the rest of the API; the same rules as there (each route
checks its scope, calls ``Gate``, answers through ``bodies.json_bytes``), and a dataset
source the service reads for a caller must be one it may read (``sources``)."""

from __future__ import annotations

from dataclasses import replace

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool

from gate.datasets.readability import version_readable
from gate.datasets.sources import scheme_of
from gate.errors import Forbidden, UsageError

from .auth import Caller, authorize, require
from .bodies import BODY, DatasetBody, MappingBody, SyncBody, field_flag, field_text, gate_of, json_bytes, responses
from .body_limits import spool_upload
from .dataset_access import HOLDOUT_ROWS, check_remote_source, uploaded_source, version_shown

router = APIRouter()


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
    name = field_text(body, "name", 128)
    source = field_text(body, "source", 2000)
    if not name or not source:
        raise UsageError("give the dataset's name and source")
    check_remote_source(source)
    ds = gate.register_dataset(
        name, source, id_column=field_text(body, "id_column"), label_column=field_text(body, "label_column")
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
    caller: Caller = Depends(require("submit")),
):
    """The body is the file's bytes, up to ``serve --max-upload-bytes``; ``path`` is the
    file's path in the repository, ``commit`` the commit it was read at. Before a byte of
    the body is read: the token's scope, the dataset's name, the path and format (and, for
    a dry run, that a gate config declares the dataset from that path), then an upload slot
    (``body_limits.UploadSlots``); the body is then streamed to a spooled temporary file at
    the pace ``body_limits.UploadPace`` asks, a dry run's within ``PROMPTGATE_DRY_RUN_SECONDS``.
    The rows are read as a local import reads a file (formats, row size, duplicate ids) and
    imported as the dataset's version (admin): the dataset is registered as
    ``upload://PATH`` when new. With ``dry_run=true`` (submit) nothing is stored: the
    answer is how the rows differ from the current version."""
    if not dry_run:
        authorize(request, "admin", why="an upload (it imports the rows as the dataset's version)")
    config, gate = request.app.state.config, gate_of(request)
    await run_in_threadpool(gate.check_upload, name, path, fmt, dry_run)
    with request.app.state.upload_slots.hold(caller.name, importing=not dry_run):
        spool = await spool_upload(
            request.stream(),
            config.max_upload_bytes,
            config.body_timeout,
            gate.settings.upload_min_rate,
            gate.settings.dry_run_seconds if dry_run else None,  # a pull request's copy: small, and soon here
        )
        try:
            return json_bytes(
                await run_in_threadpool(
                    _take_upload, gate, name, spool, path, fmt, dry_run, id_column, label_column, commit, declared_in
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
def sync_config(request: Request, model: SyncBody, caller: Caller = Depends(require("submit"))):
    """``{"config": the gate config's YAML text, "path": its path in the repository,
    "dry_run": only say what would change, "files": the file datasets whose rows the client
    uploads, "commit": the commit it was read at}``: ``gateconfig.sync`` (or ``diff``) on the service's gate. A dry
    run needs the
    submit scope (a pull request's check shows what its config would change); a sync needs
    admin. Every other dataset source must be one the service may read for a caller
    (``sources``), checked before the config is parsed. A dataset named in ``files`` is
    declared as ``upload://`` its file's repository path: a sync needs its rows uploaded
    first (``PUT /v1/datasets/{name}/rows``) and imports nothing for it."""
    from gate import gateconfig
    from gate.prompt.yaml_file import parse_yaml

    body = model.model_dump()
    dry_run = field_flag(body.get("dry_run", False), "dry_run")
    if not dry_run:
        authorize(request, "admin", why="a sync (it changes the gate's datasets, bars and providers)")
    path, text = field_text(body, "path") or "gate config", body.get("config")
    if not isinstance(text, str):
        raise UsageError("give the gate config's YAML text as config")
    files = body.get("files") or []
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise UsageError("files must be a list of dataset names")
    data = parse_yaml(text, path)
    declared = data.get("datasets") if isinstance(data, dict) else None
    declarations = declared if isinstance(declared, dict) else {}
    for name, decl in declarations.items():
        source = decl.get("source") if isinstance(decl, dict) else decl
        if name in files and isinstance(source, str) and scheme_of(source.strip()) == "file":
            declarations[name] = (
                {**decl, "source": uploaded_source(path, source)}
                if isinstance(decl, dict)
                else uploaded_source(path, source)
            )
        elif isinstance(source, str) and source.strip():
            check_remote_source(source, f"{path}: datasets.{str(name)[:80]}.source: ")
    cfg = gateconfig.parse_config(data, file=path)
    gate = gate_of(request)
    if dry_run:
        return json_bytes(gateconfig.diff(gate, cfg, may_read=lambda version: version_readable(caller.scope, version)))
    missing = gateconfig.uploads_missing(gate, cfg)
    if missing:
        raise UsageError(
            f"{path}: dataset {missing[0]}: its rows were not uploaded (the client uploads each file "
            "dataset to PUT /v1/datasets/NAME/rows before the sync): nothing was changed"
        )
    return json_bytes(gateconfig.sync(gate, cfg, commit=body.get("commit")))


@router.get("/datasets/{name}/versions", summary="A dataset's versions", responses=responses(404))
def dataset_versions(request: Request, name: str, caller: Caller = Depends(require("read"))):
    ds, versions = gate_of(request).dataset_versions(name)
    return json_bytes({"dataset": ds, "versions": [version_shown(caller.scope, v) for v in versions]})


@router.get(
    "/datasets/{name}/versions/{version}", summary="One version of a dataset (current if 0)", responses=responses(404)
)
def dataset_version(request: Request, name: str, version: str, caller: Caller = Depends(require("read"))):
    """``version``: "v3" (the dataset's third version), a version id, or 0 (the current one)."""
    gate = gate_of(request)
    found = gate.dataset_version(name, None if version.strip() in ("", "0") else version)
    return json_bytes(version_shown(caller.scope, found))


@router.get("/datasets/{name}/preview", summary="A version's first rows and label counts", responses=responses(404))
def preview(
    request: Request,
    name: str,
    rows: int = Query(10, ge=0, le=1000),
    version: str | None = None,
    caller: Caller = Depends(require("read")),
):
    """Rows of a version no repository holds (a holdout's) need admin
    (``readability.version_readable``, decided on the version shown); its counts
    (``rows=0``) any reader."""
    gate = gate_of(request)
    shown = gate.dataset_version(name, version)
    if rows and not version_readable(caller.scope, shown):
        raise Forbidden(HOLDOUT_ROWS.format(name=name, version=shown.label))
    found = gate.preview_dataset(name, rows, shown.id)
    return json_bytes(replace(found, version=version_shown(caller.scope, found.version)))


@router.get("/datasets/{name}/diff", summary="How two versions of a dataset differ", responses=responses(404))
def diff(request: Request, name: str, old: str, new: str, caller: Caller = Depends(require("read"))):
    """The counts for any reader; the example rows for one who may read both versions'
    rows (admin's only when either is a holdout's)."""
    gate = gate_of(request)
    found = gate.diff_versions(name, old, new)
    if not all(version_readable(caller.scope, gate.dataset_version(name, v)) for v in (old, new)):
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
