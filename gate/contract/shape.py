"""The API, declared once: every operation's method (its parameters and answer) and the HTTP
route that serves it (``OPERATIONS``).

``GateAPI`` is the shape of a gate as the CLI and the Action call it, which the database's
``Gate`` (``gate.domain``) and the service's ``RemoteGate`` (``gate.client.remote``) both have,
method by method, with the same parameters, defaults and answers. A command written against it
runs on either (`--database-url` or `--gate-url`) to the same output. ``ServiceOnly`` is what
only ``RemoteGate`` offers (uploads, ``sync_config``), ``RuntimeAPI`` what production's
``ServedClient`` (``gate.client.served``) sends.

``OPERATIONS`` is the table of the operations: each one's name (its method in those
protocols; none for what only HTTP offers), its route (HTTP method and path; none when the
client composes it of other operations) and the least scope the route needs.
``tests/unit/test_api_shape.py`` holds every side to it: ``Gate`` and ``RemoteGate`` have each
method of ``GateAPI`` with the same positional parameters (names, defaults, annotations) and
return, ``RemoteGate`` and ``ServedClient`` those of theirs; the HTTP service has exactly the
routes of the table under ``/v1``, each needing the scope the table says; the client's methods
are exactly the table's and each calls its route, and no path the table lacks (and the auth
matrix, ``tests/integration/test_service_auth.py``, calls each route with each scope). An
implementation may add keyword-only parameters with defaults that only it takes:
``Gate.submit``'s ``submitted_by`` and ``Gate.cancel``'s ``owner`` (the service passes its
caller's token name), ``RemoteGate.refresh_dataset``'s ``file`` (rows uploaded from the
client). What only the database offers (prune, tokens, migrations) is not part of the shape.

Its runtime imports are the client's own (``release``, ``update_report``): a `--gate-url`
command never loads SQLAlchemy (``tests/unit/test_cli_imports.py``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gate.report import SAMPLE_FAILURES

from .release import DEFAULT_RELEASE_MODE, SHA_POLL

if TYPE_CHECKING:
    from gate.prompt.spec import PromptSpec
    from gate.records import (
        CommitRecord,
        DataDiff,
        Dataset,
        DatasetMapping,
        DatasetPreview,
        DatasetVersion,
        Imported,
        LivePrompt,
        Price,
        Update,
        WorkerRow,
    )
    from gate.report.update import UpdateReport

HISTORY_LIMIT = 50  # live versions ``history`` lists by default


class GateAPI(Protocol):
    """What the CLI (``gate.cli.common.open_gate``) and the Action (``gate.action.run``)
    call on a gate."""

    def close(self) -> None: ...

    # --- submissions and their reports -------------------------------------------------------

    def submit(
        self,
        spec: PromptSpec,
        mode: str = "check",
        source: dict | None = None,
        reuse: bool = True,
        *,
        full: bool = False,
        override_rollback: bool = False,
        proposed_bars: list[dict] | None = None,
        accept_unjudged: bool = False,
    ) -> int: ...

    def status(self, update_id: int, failures: int = SAMPLE_FAILURES) -> UpdateReport: ...

    def wait(
        self,
        update_id: int,
        timeout: float | None = None,
        poll: float = 0.25,
        on_poll: Callable[[UpdateReport], Any] | None = None,
    ) -> UpdateReport: ...

    def wait_status(
        self,
        update_id: int,
        timeout: float | None = None,
        poll: float = 0.25,
        on_status: Callable[[str], Any] | None = None,
    ) -> str: ...

    def updates_for_sha(self, sha: str, prompt_name: str | None = None, mode: str | None = None) -> list[Update]: ...

    def wait_for_sha(
        self,
        sha: str,
        prompt: str | None = None,
        timeout: float | None = None,
        poll: float = SHA_POLL,
        mode: str | None = DEFAULT_RELEASE_MODE,
        on_select: Callable[[str], object] | None = None,
    ) -> tuple[int, list[UpdateReport]]: ...

    def record_commit(
        self,
        sha: str,
        outcome: str,
        update_ids: list[int] | tuple[int, ...] = (),
        detail: str | None = None,
        repo: str | None = None,
        ref: str | None = None,
    ) -> CommitRecord: ...

    def commit_record(self, sha: str) -> CommitRecord | None: ...

    def list_updates(
        self,
        limit: int = 20,
        prompt_name: str | None = None,
        *,
        status: str | None = None,
        sha_prefix: str | None = None,
        before_id: int | None = None,
    ) -> list[Update]: ...

    def cancel(self, update_id: int, reason: str = "cancelled by a user") -> None: ...

    # --- prompts ---------------------------------------------------------------------------------

    def live(self, name: str) -> LivePrompt: ...

    def history(self, name: str, limit: int = HISTORY_LIMIT) -> list[dict]: ...

    def rollback(
        self, name: str, reason: str, actor: str, to_version: int | None = None, seen_version: int | None = None
    ) -> dict: ...

    # --- after the merge: what production serves, canary rollouts (issue 39) ---------------------

    def served(self, name: str) -> dict: ...

    def rollouts(self, name: str, limit: int = 20) -> list[dict]: ...

    def rollout_of_update(self, update_id: int) -> dict | None: ...

    def list_live(self) -> list[dict]: ...

    # --- datasets, bars, prices, workers ---------------------------------------------------------

    def list_datasets(self) -> list[tuple[Dataset, list[DatasetMapping]]]: ...

    def mappings(self, prompt_name: str | None = None) -> list[DatasetMapping]: ...

    def get_dataset(self, name: str) -> Dataset: ...

    def register_dataset(
        self,
        name: str,
        source_uri: str,
        *,
        id_column: str | None = None,
        label_column: str | None = None,
        base_dir: str | Path | None = None,
        declared_in: str | None = None,
    ) -> Dataset: ...

    def refresh_dataset(self, name: str) -> tuple[Dataset, Imported | None]: ...

    def dataset_versions(self, name: str) -> tuple[Dataset, list[DatasetVersion]]: ...

    def dataset_version(self, name: str, version: int | str | None = None) -> DatasetVersion: ...

    def preview_dataset(self, name: str, rows: int = 10, version: int | str | None = None) -> DatasetPreview: ...

    def diff_versions(self, name: str, old: int | str, new: int | str) -> DataDiff: ...

    def map_dataset(
        self, prompt_name: str, dataset_name: str, min_accuracy: Any, *, bars: dict[str, Any] | None = None
    ) -> DatasetMapping: ...

    def unmap_dataset(self, prompt_name: str, dataset_name: str) -> bool: ...

    def prices(self) -> dict[str, Price]: ...

    def live_workers(self) -> list[WorkerRow]: ...


class ServiceOnly(Protocol):
    """What only ``RemoteGate`` offers: a file's rows uploaded, and the gate config synced, by
    the service (``gate.gateconfig.remote``)."""

    def upload_rows(
        self,
        name: str,
        file: str | Path,
        repo_path: str,
        *,
        id_column: str | None = None,
        label_column: str | None = None,
        commit: str | None = None,
        declared_in: str | None = None,
    ) -> tuple[Dataset, Imported | None]: ...

    def diff_upload(self, name: str, file: str | Path, repo_path: str) -> DataDiff: ...

    def sync_config(
        self, text: str, path: str, dry_run: bool = False, files: list[str] | None = None, commit: str | None = None
    ): ...


class RuntimeAPI(Protocol):
    """What production's runtime sends the service (``gate.client.served.ServedClient``)."""

    def serve_document(self, name: str, etag: str | None = None) -> dict | None: ...

    def report_served(self, rows: list[dict]) -> dict: ...

    def send_feedback(self, events: list[dict]) -> dict: ...


@dataclass(frozen=True)
class Operation:
    """One operation: ``name``, its method in ``api`` (None: the route is HTTP's only), its
    route (``verb`` and ``path``; None: no route of its own, the client composes it of other
    operations) and the least scope the route needs (``gate.service.auth.require``; a route
    may ask more of some calls, as an apply-mode submit asks admin)."""

    name: str
    verb: str | None
    path: str | None
    scope: str | None
    api: type | None = GateAPI


UPDATE = "/v1/updates/{update_id}"
PROMPT = "/v1/prompts/{name}"
DATASET = "/v1/datasets/{name}"
MAPPING = "/v1/prompts/{prompt}/datasets/{dataset}"
COMMIT = "/v1/commits/{sha}/record"

OPERATIONS: tuple[Operation, ...] = (
    Operation("close", None, None, None),  # the client's connection
    # submissions and their reports
    Operation("submit", "POST", "/v1/updates", "submit"),
    Operation("status", "GET", UPDATE, "read"),
    Operation("wait", "GET", UPDATE + "/wait", "read"),
    Operation("wait_status", None, None, None),  # wait
    Operation("updates_for_sha", "GET", "/v1/updates", "read"),
    Operation("wait_for_sha", None, None, None),  # updates_for_sha, commit_record, status, wait
    Operation("record_commit", "PUT", COMMIT, "admin"),
    Operation("commit_record", "GET", COMMIT, "read"),
    Operation("list_updates", "GET", "/v1/updates", "read"),
    Operation("cancel", "POST", UPDATE + "/cancel", "submit"),
    # prompts
    Operation("live", "GET", PROMPT + "/live", "read"),
    Operation("history", "GET", PROMPT + "/history", "read"),
    Operation("rollback", "POST", PROMPT + "/rollback", "admin"),
    # after the merge: what production serves, canary rollouts
    Operation("served", "GET", PROMPT + "/live", "read"),
    Operation("rollouts", "GET", PROMPT + "/rollouts", "read"),
    Operation("rollout_of_update", "GET", UPDATE + "/rollout", "read"),
    Operation("list_live", "GET", "/v1/prompts", "read"),
    # datasets, bars, prices, workers
    Operation("list_datasets", "GET", "/v1/datasets", "read"),
    Operation("mappings", None, None, None),  # list_datasets
    Operation("get_dataset", None, None, None),  # dataset_versions
    Operation("register_dataset", "POST", "/v1/datasets", "admin"),
    Operation("refresh_dataset", "POST", DATASET + "/refresh", "admin"),
    Operation("dataset_versions", "GET", DATASET + "/versions", "read"),
    Operation("dataset_version", "GET", DATASET + "/versions/{version}", "read"),
    Operation("preview_dataset", "GET", DATASET + "/preview", "read"),
    Operation("diff_versions", "GET", DATASET + "/diff", "read"),
    Operation("map_dataset", "PUT", MAPPING, "admin"),
    Operation("unmap_dataset", "DELETE", MAPPING, "admin"),
    Operation("prices", "GET", "/v1/prices", "read"),
    Operation("live_workers", "GET", "/v1/workers", "read"),
    # through the service only: uploads (a dry run's needs submit, an import admin) and the gate config
    Operation("upload_rows", "PUT", DATASET + "/rows", "submit", ServiceOnly),
    Operation("diff_upload", "PUT", DATASET + "/rows", "submit", ServiceOnly),
    Operation("sync_config", "POST", "/v1/sync", "submit", ServiceOnly),  # a sync, not a dry run: admin
    # production's runtime
    Operation("serve_document", "GET", PROMPT + "/serve", "serve", RuntimeAPI),  # read, or runtime (issue 48)
    Operation("report_served", "POST", "/v1/served", "serve", RuntimeAPI),
    Operation("send_feedback", "POST", "/v1/feedback", "feedback", RuntimeAPI),
    # HTTP only: the service's tokens (the CLI manages them on the database)
    Operation("list_tokens", "GET", "/v1/tokens", "admin", None),
    Operation("create_token", "POST", "/v1/tokens", "admin", None),
    Operation("revoke_token", "POST", "/v1/tokens/{name}/revoke", "admin", None),
)
