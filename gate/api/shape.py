"""``GateAPI``: the one shape of a gate as the CLI and the Action call it, which the
database's ``Gate`` (``gate.service``) and the service's ``RemoteGate`` (``gate.client.remote``)
both have, method by method, with the same parameters, defaults and answers. A command
written against it runs on either (`--database-url` or `--gate-url`) to the same output.

``tests/unit/test_api_shape.py`` holds both classes to it: every method here exists on
each with the same positional parameters (names, defaults, annotations) and return. An
implementation may add keyword-only parameters with defaults that only it takes:
``Gate.submit``'s ``submitted_by`` and ``Gate.cancel``'s ``owner`` (the service passes its
caller's token name), ``RemoteGate.refresh_dataset``'s ``file`` (rows uploaded from the
client). What only one side offers (prune, tokens, migrations on the database; uploads and
``sync_config`` through the service) is not part of the shape.

Its runtime imports are the client's own (``release``, ``update_report``): a `--gate-url`
command never loads SQLAlchemy (``tests/unit/test_cli_imports.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gate.report.update import SAMPLE_FAILURES

from .release import DEFAULT_RELEASE_MODE, SHA_POLL

if TYPE_CHECKING:
    from gate.prompt.spec import PromptSpec
    from gate.records import (
        CommitRecord,
        DataDiff,
        Dataset,
        DatasetPreview,
        DatasetVersion,
        Imported,
        LivePrompt,
        Mapping,
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

    def list_datasets(self) -> list[tuple[Dataset, list[Mapping]]]: ...

    def mappings(self, prompt_name: str | None = None) -> list[Mapping]: ...

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
    ) -> Mapping: ...

    def unmap_dataset(self, prompt_name: str, dataset_name: str) -> bool: ...

    def prices(self) -> dict[str, Price]: ...

    def live_workers(self) -> list[WorkerRow]: ...
