"""The upload reader reads an uploaded file's bytes as the file reader reads the file (the
same rows, the same content hash, the same errors), and the repository paths an upload is
named by stay inside the repository."""

from __future__ import annotations

import io

import pytest

from gate.datasets.importer import read_pages
from gate.datasets.sources import ContentHash, SourceOptions, open_source, row_digests
from gate.datasets.sources.upload import UploadReader, check_repo_path, repo_path_of
from gate.errors import DatasetError, UsageError

CSV = b'item_id,expected_decision,text\na,yes,"two\nlines"\n\nb,no,"a ""quoted"" word"\nc,yes,plain\n'
JSONL = (
    b'{"item_id": "a", "expected_decision": "yes", "x": {"y": [1, 2]}}\n\n{"item_id": "b", "expected_decision": "no"}\n'
)


def content(reader) -> tuple[str, list]:
    digest, rows = ContentHash(), []
    for page in read_pages(reader, 2, 1 << 20):
        digest.update(row_digests(page))
        rows += [(r.item_id, r.expected, r.input_json) for r in page]
    return digest.hexdigest(), rows


@pytest.mark.parametrize("name,data", [("d.csv", CSV), ("d.jsonl", JSONL)])
def test_an_upload_reads_as_the_file_does(tmp_path, name, data):
    (tmp_path / name).write_bytes(data)
    from_file = open_source(str(tmp_path / name), SourceOptions())
    from_upload = UploadReader(io.BytesIO(data), f"datasets/{name}", SourceOptions())
    assert content(from_upload) == content(from_file)
    assert from_upload.snapshot_version() == from_file.snapshot_version()


def test_an_uploads_errors_are_the_files(tmp_path):
    limits = SourceOptions(max_row_bytes=100)
    with pytest.raises(DatasetError, match="line 2: .*row is .* the 100-byte limit"):
        content(UploadReader(io.BytesIO(b"item_id,expected_decision,t\na,b," + b"x" * 400 + b"\n"), "d.csv", limits))
    with pytest.raises(DatasetError, match="no id column 'item_id'"):
        content(UploadReader(io.BytesIO(b"id,expected_decision\n"), "d.csv", SourceOptions()))
    with pytest.raises(DatasetError, match="unsupported file type .txt"):
        UploadReader(io.BytesIO(CSV), "d.txt", SourceOptions())
    assert content(UploadReader(io.BytesIO(CSV), "d.txt", SourceOptions(), kind="csv"))[1]


def test_repository_paths_stay_inside_the_repository():
    assert repo_path_of("gate.yaml", "datasets/a.csv") == "datasets/a.csv"
    assert repo_path_of("team/gate.yaml", "./datasets/../a.csv") == "team/a.csv"
    for source in ("../a.csv", "/etc/passwd", "file:///etc/passwd", "datasets/../../a.csv"):
        with pytest.raises(UsageError, match="outside the gate config's folder|not a file's path"):
            repo_path_of("gate.yaml", source)
    for path in ("", "/a.csv", "../a.csv", "a/../../b.csv", "a\\b.csv", "a\x00.csv", "./a.csv", "a//b.csv", "x" * 501):
        with pytest.raises(UsageError):
            check_repo_path(path)


def test_a_repository_path_with_a_bidi_override_or_a_c1_control_is_refused():
    """Echoed in the upload's source (upload://…), the plan and the report: a right-to-left
    override would show '\u202e/vsc.x' as 'x.csv/'."""
    for path in ("\u202e/gate.yaml", "data/\u2066a.csv", "a\x85b.csv", "a\u2028b.csv", "\ufeffa.csv", "a\x9b.csv"):
        with pytest.raises(UsageError, match="not a file's path"):
            check_repo_path(path)
    assert check_repo_path("données/é.csv") == "données/é.csv"
