"""``RemoteGate``: the gate's HTTP service (``gate.service``) behind the methods of ``Gate``
the CLI calls, so `promptgate --gate-url URL ...` runs the very commands it runs on a
database, to the same output and exit codes.

Every answer is decoded by ``gate.contract.codec`` into the same dataclasses ``Gate`` returns (the
CLI renders them with the same code); every refusal becomes the GateError ``Gate`` raises
(the request and the judging of its answer: ``gate.client.session``).

Waiting uses the service's long-poll (``/v1/updates/{id}/wait``): each request holds at
most ``LONG_POLL`` seconds (``POLL_SLICE`` when the caller watches progress, ``on_poll``)
and the loop honours the caller's overall timeout."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gate.contract.delegation import delegate
from gate.contract.release import DEFAULT_RELEASE_MODE, SHA_POLL, deadline_after, expired, time_left, wait_for_release
from gate.contract.shape import HISTORY_LIMIT
from gate.errors import NotFound, UsageError
from gate.report import SAMPLE_FAILURES

from .datasets import RemoteDatasets
from .served import ServedRemote
from .session import TIMEOUTS, ServiceSession, Unreachable, decode, path_segment

if TYPE_CHECKING:
    from gate.prompt.spec import PromptSpec  # (jinja2, yaml, re2: the caller has loaded it to read the file)
    from gate.records import CommitRecord, LivePrompt, Price, Update, WorkerRow
    from gate.report.update import UpdateReport

# The answers' dataclasses (gate.records, gate.report) are imported by the methods that decode
# them: `submit` through the service sends its request before loading them (~50 ms).


LONG_POLL = 60.0  # seconds one long-poll request may hold (the server allows 120)
POLL_SLICE = 2.0  # ... when the caller shows progress at each poll
RECONNECT = 30.0  # seconds a wait tries again when the service that answered it goes away (a restart)
# The public names of ``gate.domain.Gate`` (tests/unit/test_cli_imports.py keeps this in step):
# one the service does not offer is refused in one line, without importing Gate (SQLAlchemy).
GATE_NAMES = frozenset(
    {
        "authenticate",
        "bar_refusal",
        "canary_of",
        "cancel",
        "check_upload",
        "close",
        "close_session",
        "commit_record",
        "connect",
        "create_token",
        "dataset_version",
        "dataset_versions",
        "diff_source",
        "diff_upload",
        "diff_versions",
        "endpoint",
        "ensure_schema",
        "fleet",
        "get_dataset",
        "history",
        "judges_below_floors",
        "holds",
        "import_upload",
        "limits",
        "list_datasets",
        "list_live",
        "list_tokens",
        "list_updates",
        "live",
        "live_endpoint",
        "live_providers",
        "live_workers",
        "map_dataset",
        "mappings",
        "open_session",
        "optional_fields",
        "preview_dataset",
        "prices",
        "providers",
        "prune",
        "record_commit",
        "record_feedback",
        "refresh_dataset",
        "register_dataset",
        "register_provider",
        "remove_limit",
        "remove_price",
        "remove_provider",
        "report_served",
        "revoke_token",
        "rollback",
        "rollout_of_update",
        "rollout_settings",
        "rollout_states",
        "rollouts",
        "serve_document",
        "serve_tag",
        "served",
        "served_counts",
        "session_token",
        "set_limit",
        "set_optional_fields",
        "set_price",
        "set_rollout",
        "source_egress",
        "stale_processes",
        "status",
        "submit",
        "unmap_dataset",
        "unreadable_datasets",
        "updates_for_sha",
        "upgrade",
        "wait",
        "wait_for_sha",
        "wait_status",
    }
)


def _history_row(row: dict) -> dict:
    """A history row with its times as datetimes again (an untyped dict on the wire)."""
    if isinstance(row.get("applied_at"), str):
        row["applied_at"] = dt.datetime.fromisoformat(row["applied_at"])
    update = row.get("update")
    if isinstance(update, dict) and isinstance(update.get("finished_at"), str):
        update["finished_at"] = dt.datetime.fromisoformat(update["finished_at"])
    hold = row.get("hold")
    if isinstance(hold, dict) and isinstance(hold.get("at"), str):
        hold["at"] = dt.datetime.fromisoformat(hold["at"])
    return row


class RemoteGate(ServiceSession):
    """The Gate's methods, each one request to the gate's service at ``url`` (called with
    bearer ``token``; None: anonymous, what a server with --public-read allows for reads).
    Its parts make their requests with this session's: the datasets' (``RemoteDatasets``)
    and the reads of what production serves (``ServedRemote``)."""

    def __init__(self, url: str, token: str | None = None):
        super().__init__(url, token)
        self._datasets = RemoteDatasets(self._call)
        self._served = ServedRemote(self._call)

    def __getattr__(self, name: str):
        """A ``Gate`` method the service does not offer fails in one line, not a traceback."""
        if name.startswith("_") or name not in GATE_NAMES:
            raise AttributeError(name)

        def database_only(*_args, **_kwargs):
            raise UsageError(
                f"this works on the gate's database, not through its service ({name}): give "
                "--database-url URL (or PROMPTGATE_DATABASE_URL)"
            )

        return database_only

    # --- submissions and their reports -----------------------------------------------------

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
    ) -> int:
        """Submit the prompt (its canonical config, which the server parses as it parses a
        file). ``source``: its ``key``, ``sha``, ``path`` (and ``repo``, ``pr``) as the local
        gate takes them; the service records who submitted it."""
        source = source or {}
        body = {
            "prompt": spec.to_config(),
            "mode": mode,
            "reuse": reuse,
            "full": full or None,
            "override_rollback": override_rollback or None,
            "accept_unjudged": accept_unjudged or None,
            "proposed_bars": proposed_bars,
            "source_key": source.get("key"),
            **{k: source.get(k) for k in ("sha", "repo", "pr", "path")},
        }
        return int(self._call("POST", "/v1/updates", body={k: v for k, v in body.items() if v is not None})["id"])

    def status(self, update_id: int, failures: int = SAMPLE_FAILURES) -> UpdateReport:
        from gate.report.update import UpdateReport

        data = self._call("GET", f"/v1/updates/{int(update_id)}", params={"failures": failures, "view": "wire"})
        return decode(UpdateReport, data)

    def _long_poll(
        self, update_id: int, seconds: float, failures: int = SAMPLE_FAILURES, patient: bool = False
    ) -> UpdateReport:
        """The report once the update is terminal, or after ``seconds``. ``patient``: the
        service answered this wait before, so a service that goes away (a restart) is
        asked again for up to ``RECONNECT`` seconds before the wait gives up."""
        from gate.report.update import UpdateReport

        give_up = time.monotonic() + (RECONNECT if patient else 0.0)
        while True:
            try:
                data = self._call(
                    "GET",
                    f"/v1/updates/{int(update_id)}/wait",
                    timeout=seconds + TIMEOUTS.read,
                    params={"timeout": round(seconds, 3), "failures": failures, "view": "wire"},
                )
                return decode(UpdateReport, data)
            except Unreachable:
                if time.monotonic() >= give_up:
                    raise
                time.sleep(1.0)

    def wait(
        self,
        update_id: int,
        timeout: float | None = None,
        poll: float = 0.25,
        on_poll: Callable[[UpdateReport], Any] | None = None,
    ) -> UpdateReport:
        """Long-poll until the update is terminal or ``timeout`` seconds pass. With ``on_poll``
        the polls are short (``POLL_SLICE``) and it is called with each open report."""
        deadline = deadline_after(timeout)
        step = LONG_POLL if on_poll is None else POLL_SLICE
        report = None
        while True:
            report = self._long_poll(update_id, time_left(deadline, step), patient=report is not None)
            if report.terminal or expired(deadline):
                return report
            if on_poll is not None:
                on_poll(report)

    def wait_status(
        self,
        update_id: int,
        timeout: float | None = None,
        poll: float = 0.25,
        on_status: Callable[[str], Any] | None = None,
    ) -> str:
        on_poll = (lambda report: on_status(report.status)) if on_status else None
        return self.wait(update_id, timeout, poll, on_poll).status

    def updates_for_sha(self, sha: str, prompt_name: str | None = None, mode: str | None = None) -> list[Update]:
        """The commit's updates (``mode``: those a release wait of that mode answers for)."""
        from gate.records import Update

        return decode(
            list[Update],
            self._call("GET", "/v1/updates", params={"sha": sha, "prompt": prompt_name, "mode": mode}),
        )

    def wait_for_sha(
        self,
        sha: str,
        prompt: str | None = None,
        timeout: float | None = None,
        poll: float = SHA_POLL,
        mode: str | None = DEFAULT_RELEASE_MODE,
        on_select: Callable[[str], object] | None = None,
    ) -> tuple[int, list[UpdateReport]]:
        """As ``Gate.wait_for_sha`` (the one loop, ``release.wait_for_release``): the commit's
        updates are looked up until some appear (up to ``timeout``), then each open one is
        long-polled until it is terminal."""

        def watch(report: UpdateReport, deadline: float | None) -> None:
            self._long_poll(report.update.id, time_left(deadline, LONG_POLL), failures=0, patient=True)

        return wait_for_release(self, sha, prompt, timeout, poll, mode, on_select, watch)

    def record_commit(
        self,
        sha: str,
        outcome: str,
        update_ids: list[int] | tuple[int, ...] = (),
        detail: str | None = None,
        repo: str | None = None,
        ref: str | None = None,
    ) -> CommitRecord:
        """Record what the push job did for commit ``sha`` (an admin token: the push job's)."""
        from gate.records import CommitRecord

        body = {"outcome": outcome, "update_ids": list(update_ids), "detail": detail, "repo": repo, "ref": ref}
        path = f"/v1/commits/{path_segment(sha)}/record"
        return decode(CommitRecord, self._call("PUT", path, body={k: v for k, v in body.items() if v is not None}))

    def commit_record(self, sha: str) -> CommitRecord | None:
        """The push job's record of commit ``sha``, or None."""
        from gate.records import CommitRecord

        try:
            return decode(CommitRecord, self._call("GET", f"/v1/commits/{path_segment(sha)}/record"))
        except NotFound:
            return None

    def list_updates(
        self,
        limit: int = 20,
        prompt_name: str | None = None,
        *,
        status: str | None = None,
        sha_prefix: str | None = None,
        before_id: int | None = None,
    ) -> list[Update]:
        """Newest first, optionally of one prompt, in one status, of commits whose SHA
        starts with ``sha_prefix`` (hex digits), older than update ``before_id``."""
        from gate.records import Update

        params = {
            "limit": limit,
            "prompt": prompt_name,
            "status": status,
            "sha_prefix": sha_prefix,
            "before_id": before_id,
        }
        return decode(list[Update], self._call("GET", "/v1/updates", params=params))

    def cancel(self, update_id: int, reason: str = "cancelled by a user") -> None:
        """Cancel the update (the service records who cancelled it as the reason, and lets a
        submit token cancel only its own: ``Forbidden`` otherwise)."""
        self._call("POST", f"/v1/updates/{int(update_id)}/cancel")

    # --- prompts ------------------------------------------------------------------------------

    def live(self, name: str) -> LivePrompt:
        from gate.records import LivePrompt

        return decode(LivePrompt, self._call("GET", f"/v1/prompts/{path_segment(name)}/live"))

    def history(self, name: str, limit: int = HISTORY_LIMIT) -> list[dict]:
        """A prompt's live versions, newest first, as ``Gate.history`` gives them."""
        rows = self._call("GET", f"/v1/prompts/{path_segment(name)}/history", params={"limit": limit})
        return [_history_row(decode(dict, row)) for row in rows[:limit]]

    def rollback(
        self, name: str, reason: str, actor: str, to_version: int | None = None, seen_version: int | None = None
    ) -> dict:
        """An earlier version live again; the service records its token's name (and
        ``actor``) as who."""
        body = {"reason": reason, "actor": actor, "to": to_version, "seen_version": seen_version}
        return self._call(
            "POST", f"/v1/prompts/{path_segment(name)}/rollback", body={k: v for k, v in body.items() if v is not None}
        )

    # --- after the merge: what production serves, canary rollouts (gate/client/served.py) ----

    served = delegate("_served", ServedRemote.served)
    rollouts = delegate("_served", ServedRemote.rollouts)
    rollout_of_update = delegate("_served", ServedRemote.rollout_of_update)
    list_live = delegate("_served", ServedRemote.list_live)

    # --- datasets, bars (gate/client/datasets.py), prices, workers ---------------------------

    list_datasets = delegate("_datasets", RemoteDatasets.list_datasets)
    mappings = delegate("_datasets", RemoteDatasets.mappings)
    get_dataset = delegate("_datasets", RemoteDatasets.get_dataset)
    register_dataset = delegate("_datasets", RemoteDatasets.register_dataset)
    refresh_dataset = delegate("_datasets", RemoteDatasets.refresh_dataset)
    upload_rows = delegate("_datasets", RemoteDatasets.upload_rows)
    diff_upload = delegate("_datasets", RemoteDatasets.diff_upload)
    dataset_versions = delegate("_datasets", RemoteDatasets.dataset_versions)
    dataset_version = delegate("_datasets", RemoteDatasets.dataset_version)
    preview_dataset = delegate("_datasets", RemoteDatasets.preview_dataset)
    diff_versions = delegate("_datasets", RemoteDatasets.diff_versions)
    map_dataset = delegate("_datasets", RemoteDatasets.map_dataset)
    unmap_dataset = delegate("_datasets", RemoteDatasets.unmap_dataset)

    def prices(self) -> dict[str, Price]:
        from gate.records import Price

        return decode(dict[str, Price], self._call("GET", "/v1/prices"))

    def live_workers(self) -> list[WorkerRow]:
        from gate.records import WorkerRow

        return decode(list[WorkerRow], self._call("GET", "/v1/workers"))

    # --- the gate config ----------------------------------------------------------------------

    def sync_config(
        self, text: str, path: str, dry_run: bool = False, files: list[str] | None = None, commit: str | None = None
    ):
        """``gateconfig.sync`` (or with ``dry_run`` ``gateconfig.diff``) of the gate config
        ``text``, run by the service; ``path`` is its path in the repository. The service
        reads the remote sources itself; ``files``: the file datasets whose rows this client
        uploaded (``gateconfig.remote`` does both); ``commit``: the commit the text was read
        at (recorded with the breaks it newly accepts)."""
        from gate.gateconfig import SyncResult

        body = {
            "config": text,
            "path": path,
            "dry_run": dry_run,
            **({"files": files} if files else {}),
            **({"commit": commit} if commit else {}),
        }
        data = self._call("POST", "/v1/sync", body=body, timeout=10 * TIMEOUTS.read)
        return decode(SyncResult, data)
