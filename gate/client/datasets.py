"""The dataset requests of ``RemoteGate`` (``RemoteDatasets``, a part of it): datasets, their versions
and rows, uploads of a repository's files, and the prompt-dataset bars, each a request of the client's
session.
Each method imports the dataclasses it decodes (``gate.records``): a `submit` through the
service sends its request before they load (``remote``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .session import TIMEOUTS, decode, path_segment

if TYPE_CHECKING:
    from gate.records import DataDiff, Dataset, DatasetMapping, DatasetPreview, DatasetVersion, Imported


class RemoteDatasets:
    """Dataset and bar requests, each made with ``call`` (a session's ``_call``: the request and
    the judging of its answer, ``gate.client.session``)."""

    def __init__(self, call: Callable[..., Any]):
        self._call = call

    def list_datasets(self) -> list[tuple[Dataset, list[DatasetMapping]]]:
        from gate.records import Dataset, DatasetMapping

        return [
            (decode(Dataset, d["dataset"]), decode(list[DatasetMapping], d["mappings"]))
            for d in self._call("GET", "/v1/datasets")
        ]

    def mappings(self, prompt_name: str | None = None) -> list[DatasetMapping]:
        return [m for _, maps in self.list_datasets() for m in maps if prompt_name in (None, m.prompt_name)]

    def get_dataset(self, name: str) -> Dataset:
        return self.dataset_versions(name)[0]

    def register_dataset(
        self,
        name: str,
        source_uri: str,
        *,
        id_column: str | None = None,
        label_column: str | None = None,
        base_dir: str | Path | None = None,
        declared_in: str | None = None,
    ) -> Dataset:
        """Register a dataset the server reads (https://, s3://, sql+...; the service
        refuses a file on its machine). ``base_dir`` and ``declared_in`` serve the local
        gate's file sources only, so they are not sent. A local file (a path, file://) is
        read here and its rows uploaded (``upload_rows``), named by its path as given."""
        from gate.datasets.sources import scheme_of
        from gate.datasets.sources.upload import local_repo_path
        from gate.records import Dataset

        if scheme_of(source_uri.strip()) == "file":
            path = source_uri.strip().removeprefix("file://")
            return self.upload_rows(
                name,
                path,
                local_repo_path(path),
                id_column=id_column,
                label_column=label_column,
                declared_in=declared_in,
            )[0]
        body = {"name": name, "source": source_uri, "id_column": id_column, "label_column": label_column}
        data = self._call("POST", "/v1/datasets", body={k: v for k, v in body.items() if v is not None})
        return decode(Dataset, data["dataset"])

    def refresh_dataset(self, name: str, *, file: str | None = None) -> tuple[Dataset, Imported | None]:
        """Import the dataset's source again; ``file``: a local file whose rows are
        uploaded instead (a dataset registered from an upload is refreshed only so), under
        the path the gate recorded for it."""
        from gate.records import Dataset, Imported

        if file is not None:
            from gate.datasets.sources.upload import local_repo_path

            ds = self.get_dataset(name)
            repo_path = ds.options.get("upload_path") or local_repo_path(file)
            return self.upload_rows(
                name,
                file,
                repo_path,
                id_column=ds.options.get("id_column"),
                label_column=ds.options.get("label_column"),
                commit=None,
                declared_in=ds.options.get("declared_in"),
            )
        data = self._call("POST", f"/v1/datasets/{path_segment(name)}/refresh")
        return decode(Dataset, data["dataset"]), decode(Imported, data.get("imported"))

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
    ) -> tuple[Dataset, Imported | None]:
        """Send the rows of the local ``file`` (CSV or JSONL, streamed) to the service, which
        imports them as the dataset's version as a local import would (admin). ``repo_path``
        and ``commit`` say where they came from."""
        from gate.records import Dataset, Imported

        params = {
            "path": repo_path,
            "id_column": id_column,
            "label_column": label_column,
            "commit": commit,
            "declared_in": declared_in,
        }
        data = self._put_rows(name, file, params)
        return decode(Dataset, data["dataset"]), decode(Imported, data.get("imported"))

    def diff_upload(self, name: str, file: str | Path, repo_path: str) -> DataDiff:
        """How the rows of the local ``file`` (a pull request's copy of the dataset's file at
        ``repo_path``) differ from the gate's version; nothing is stored (submit)."""
        from gate.records import DataDiff

        return decode(DataDiff, self._put_rows(name, file, {"path": repo_path, "dry_run": "true"}))

    def _put_rows(self, name: str, file: str | Path, params: dict) -> Any:
        """The rows of the local ``file`` (CSV or JSONL) streamed to the dataset's rows route.
        (The sources are imported here: no other command of the service needs them.)"""
        from gate.datasets.sources.upload import open_upload, upload_format

        with open_upload(file) as (fh, size):
            return self._call(
                "PUT",
                f"/v1/datasets/{path_segment(name)}/rows",
                upload=(fh, size),
                params={**params, "format": upload_format(file)},
                timeout=10 * TIMEOUTS.read,
            )

    def dataset_versions(self, name: str) -> tuple[Dataset, list[DatasetVersion]]:
        from gate.records import Dataset, DatasetVersion

        data = self._call("GET", f"/v1/datasets/{path_segment(name)}/versions")
        return decode(Dataset, data["dataset"]), decode(list[DatasetVersion], data["versions"])

    def dataset_version(self, name: str, version: int | str | None = None) -> DatasetVersion:
        from gate.records import DatasetVersion

        if version is not None and str(version).strip() == "0":
            # the route's 0 means "current": ask as the local gate does
            return self.preview_dataset(name, 0, 0).version
        number = path_segment(str(version if version is not None else 0))
        return decode(DatasetVersion, self._call("GET", f"/v1/datasets/{path_segment(name)}/versions/{number}"))

    def preview_dataset(self, name: str, rows: int = 10, version: int | str | None = None) -> DatasetPreview:
        from gate.records import DatasetPreview

        data = self._call(
            "GET", f"/v1/datasets/{path_segment(name)}/preview", params={"rows": max(0, rows), "version": version}
        )
        return decode(DatasetPreview, data)

    def diff_versions(self, name: str, old: int | str, new: int | str) -> DataDiff:
        from gate.records import DataDiff

        return decode(
            DataDiff,
            self._call("GET", f"/v1/datasets/{path_segment(name)}/diff", params={"old": old, "new": new}),
        )

    def map_dataset(
        self, prompt_name: str, dataset_name: str, min_accuracy: Any, *, bars: dict[str, Any] | None = None
    ) -> DatasetMapping:
        from gate.records import DatasetMapping

        data = self._call(
            "PUT",
            f"/v1/prompts/{path_segment(prompt_name)}/datasets/{path_segment(dataset_name)}",
            body={"min_accuracy": min_accuracy, "bars": bars},
        )
        return decode(DatasetMapping, data)

    def unmap_dataset(self, prompt_name: str, dataset_name: str) -> bool:
        path = f"/v1/prompts/{path_segment(prompt_name)}/datasets/{path_segment(dataset_name)}"
        return bool(self._call("DELETE", path)["removed"])
