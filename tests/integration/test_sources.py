"""Dataset sources against real peers: local files, a local HTTP server (stdlib), a local
S3-compatible server (moto's ThreadedMotoServer), a SQLite warehouse file and, when the
binaries are here, a throwaway PostgreSQL cluster."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gate.datasets.sources import Page, SourceOptions, content_hash, open_source
from gate.errors import DatasetError

# -- helpers ------------------------------------------------------------------------------

LABELS = ("approve", "reject", "escalate")


def make_records(n: int, start: int = 1) -> list[dict]:
    """Rows with the awkward bits: commas, quotes, newlines, non-ASCII."""
    out = []
    for i in range(start, start + n):
        text = f"ticket {i}: refund, please"
        if i % 7 == 0:
            text += '\nsecond line with "quotes"'
        if i % 11 == 0:
            text += " — ünïcödé ✓"
        out.append(
            {
                "item_id": f"t{i:05d}",
                "expected_decision": LABELS[i % 3],
                "text": text,
                "channel": "email" if i % 2 else "chat",
            }
        )
    return out


def csv_bytes(records: list[dict], columns=None) -> bytes:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns or list(records[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    return buf.getvalue().encode()


def jsonl_bytes(records: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def read_all(reader, page_size: int, cursor: str | None = None):
    """Every row after ``cursor`` and the cursor each page was read from."""
    rows, cursors = [], []
    while True:
        page = reader.read_page(cursor, page_size)
        assert isinstance(page, Page)
        assert len(page.rows) <= page_size
        cursors.append(cursor)
        rows.extend(page.rows)
        if page.next_cursor is None:
            return rows, cursors
        assert page.rows, "a page that is not the last has rows"
        cursor = page.next_cursor


def expected_rows(records: list[dict]):
    return [
        (
            r["item_id"],
            r["expected_decision"],
            {k: v for k, v in r.items() if k not in ("item_id", "expected_decision")},
        )
        for r in records
    ]


def as_tuples(rows):
    return [(r.item_id, r.expected, r.input) for r in rows]


def check_source(uri: str, records: list[dict], options: SourceOptions | None = None, sizes=(1, 3, 17, 1000)):
    """All page sizes give the same rows and the same content hash; resuming from any
    cursor in a fresh reader (a worker that crashed after committing it) gives the rest."""
    want = expected_rows(records)
    digests = set()
    cursors_seen = None
    for size in sizes:
        reader = open_source(uri, options)
        try:
            rows, cursors = read_all(reader, size)
        finally:
            reader.close()
        assert as_tuples(rows) == want, f"page size {size}"
        digests.add(content_hash(rows))
        if size == 3:
            cursors_seen = cursors
    assert len(digests) == 1
    # crash after the page at cursor k was read but not committed: a new process reads it again
    for k in (1, len(cursors_seen) // 2, len(cursors_seen) - 1):
        cursor = cursors_seen[k]
        reader = open_source(uri, options)
        try:
            rest, _ = read_all(reader, 3, cursor)
        finally:
            reader.close()
        assert as_tuples(rest) == want[3 * k :]
    return digests.pop()


# -- local files --------------------------------------------------------------------------


def test_csv_quoted_newlines_quotes_bom_blank_lines(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(
        b"\xef\xbb\xbfitem_id,expected_decision,text\n"
        b'1,yes,"hello\nworld"\n\n'
        b'2,no,"a ""quoted"" word, and a comma"\r\n'
        b"3,yes,plain\n\n\n"
        b"4,no,plain too\r\n \t\n5,yes,caf\xc3\xa9\n"
    )
    for size in (1, 2, 3, 10):  # page ends between whole lines, quoted records and blank lines alike
        rows, _ = read_all(open_source(str(path)), size)
        assert as_tuples(rows) == [
            ("1", "yes", {"text": "hello\nworld"}),
            ("2", "no", {"text": 'a "quoted" word, and a comma'}),
            ("3", "yes", {"text": "plain"}),
            ("4", "no", {"text": "plain too"}),
            ("5", "yes", {"text": "café"}),
        ], size
        assert [r.position for r in rows] == ["line 2", "line 5", "line 6", "line 9", "line 11"], size


def test_csv_and_jsonl_pages_resume_and_hash(tmp_path):
    records = make_records(60)
    (tmp_path / "d.csv").write_bytes(csv_bytes(records))
    (tmp_path / "d.jsonl").write_bytes(jsonl_bytes(records))
    h1 = check_source(str(tmp_path / "d.csv"), records)
    h2 = check_source("file://" + str(tmp_path / "d.jsonl"), records)
    assert h1 == h2  # same rows, same hash
    page = open_source(str(tmp_path / "d.csv")).read_page(None, 5)
    offset, line = page.next_cursor.split(":")  # cursor format stays "<offset>:<line>"
    assert int(offset) > 0 and int(line) == 7


def test_relative_path_resolves_against_base_dir(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "d.jsonl").write_bytes(jsonl_bytes(make_records(3)))
    rows, _ = read_all(open_source("data/d.jsonl", SourceOptions(base_dir=str(tmp_path))), 10)
    assert len(rows) == 3


def test_configurable_id_and_label_columns(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("ticket,verdict,body\nA1,approve,hi\nA2,reject,bye\n")
    rows, _ = read_all(open_source(str(path), SourceOptions(id_column="ticket", label_column="verdict")), 10)
    assert as_tuples(rows) == [("A1", "approve", {"body": "hi"}), ("A2", "reject", {"body": "bye"})]
    jpath = tmp_path / "d.jsonl"
    jpath.write_text('{"ticket": 7, "verdict": "approve", "n": 1.5}\n')
    rows, _ = read_all(open_source(str(jpath), SourceOptions(id_column="ticket", label_column="verdict")), 10)
    assert as_tuples(rows) == [("7", "approve", {"n": 1.5})]
    with pytest.raises(
        DatasetError,
        match=r"line 1: no id column 'item_id' in the header "
        r"\(it has 'ticket', 'verdict', 'body'\)",
    ):
        read_all(open_source(str(path)), 10)


@pytest.mark.parametrize(
    "name, content, problem",
    [
        (
            "bad.jsonl",
            b'{"item_id": "1", "expected_decision": "yes"}\n{"item_id": "2", "expected_d\n',
            r"bad.jsonl: line 2: malformed JSON",
        ),
        (
            "bad.csv",
            b"item_id,expected_decision,text\n1,yes,a\n2,no,b,extra\n",
            r"bad.csv: line 3: 4 columns where the header has 3",
        ),
        (
            "nolabel.csv",
            b"item_id,expected_decision,text\n1,yes,a\n2,,b\n",
            r"nolabel.csv: line 3: item 2: missing label \(column 'expected_decision'\)",
        ),
        # a row without the label column is a row without a label (a judged prompt's dataset,
        # issue 50.6), unless a column of it reads as a misnamed label column
        (
            "nolabel.jsonl",
            b'{"item_id": "1", "label": "yes", "text": "a"}\n',
            r"line 1: item 1: missing label .*; its column 'label' reads as a misnamed label column",
        ),
        ("notobject.jsonl", b'["1", "yes"]\n', r"line 1: a row must be an object"),
        ("latin1.csv", b"item_id,expected_decision,text\n1,yes,caf\xe9\n", r"line 2: not valid UTF-8"),
        ("empty.csv", b"", r"empty.csv: the CSV file has no header row"),
    ],
)
def test_malformed_rows_name_the_line(tmp_path, name, content, problem):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(DatasetError, match=problem):
        read_all(open_source(str(tmp_path / name)), 1)


def test_row_over_size_limit(tmp_path):
    path = tmp_path / "big.jsonl"
    big = "x" * 2000
    path.write_text(
        json.dumps({"item_id": "1", "expected_decision": "yes", "text": "ok"})
        + "\n"
        + json.dumps({"item_id": "2", "expected_decision": "yes", "text": big})
        + "\n"
    )
    opts = SourceOptions(max_row_bytes=1000)
    with pytest.raises(DatasetError, match=r"line 2: item 2: row is \d+ bytes, over the 1000-byte limit"):
        read_all(open_source(str(path), opts), 10)
    # a line far over the limit is refused before it is read whole
    huge = tmp_path / "huge.csv"
    huge.write_bytes(b"item_id,expected_decision,text\n1,yes," + b"y" * 5_000_000)
    with pytest.raises(DatasetError, match=r"line 2: row is over \d+ bytes, beyond the 1000-byte limit"):
        read_all(open_source(str(huge), opts), 10)
    # an unterminated quote cannot swallow the rest of the file
    runaway = tmp_path / "runaway.csv"
    runaway.write_bytes(b'item_id,expected_decision,text\n1,yes,"never closed\n' + b"2,no,b\n" * 2000)
    with pytest.raises(DatasetError, match=r"line 2: row is over"):
        read_all(open_source(str(runaway), opts), 10)


def test_empty_and_header_only_files_have_no_rows(tmp_path):
    (tmp_path / "e.jsonl").write_bytes(b"")
    (tmp_path / "h.csv").write_bytes(b"item_id,expected_decision\n\n")
    for name in ("e.jsonl", "h.csv"):
        assert open_source(str(tmp_path / name)).read_page(None, 10) == Page([], None)
        assert read_all(open_source(str(tmp_path / name)), 10)[0] == []


def test_missing_file_and_unknown_type(tmp_path):
    with pytest.raises(DatasetError, match=r"no such file"):
        open_source(str(tmp_path / "nope.csv"))
    (tmp_path / "d.txt").write_text("x")
    with pytest.raises(DatasetError, match=r"unsupported file type \.txt"):
        open_source(str(tmp_path / "d.txt"))
    with pytest.raises(DatasetError, match=r"unsupported source kind 'ftp'"):
        open_source("ftp://example.com/d.csv")


def test_file_snapshot_version_is_content_hash(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(csv_bytes(make_records(5)))
    assert open_source(str(path)).snapshot_version() == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_row_is_read_in_order_with_its_label(tmp_path):
    records = make_records(2500)
    path = tmp_path / "d.csv"
    path.write_bytes(csv_bytes(records))
    rows, _ = read_all(open_source(str(path)), 100)
    assert [r.item_id for r in rows[:4]] == ["t00001", "t00002", "t00003", "t00004"]
    assert len(rows) == 2500
    assert Counter(r.expected for r in rows) == {"reject": 834, "approve": 833, "escalate": 833}
    assert open_source(str(path)).snapshot_version().startswith("sha256:")


# -- HTTP ---------------------------------------------------------------------------------


class Site:
    """What the test HTTP server serves. Paths are /<mode>/<name>:

    ranged  Accept-Ranges, ETag, If-Range          plain   no range support, no validators
    lm      Last-Modified only, no ranges          status  /status/<code> answers that code
    broken  announces the full length, stops at byte ``cut``
    flaky   the first response for a name breaks after a third of the body, then fine
    stall   sends half, then stalls longer than the reader's timeout
    slow    waits before answering                 secure  needs ?token=s3cret
    """

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.types: dict[str, str] = {}
        self.requests: list[dict] = []
        self.cut = 0
        self.flaked: set[str] = set()


def _handler(site: Site):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):
            pass

        def _write(self, data: bytes) -> None:
            try:
                self.wfile.write(data)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            mode, _, name = url.path.strip("/").partition("/")
            site.requests.append(
                {
                    "mode": mode,
                    "name": name,
                    "range": self.headers.get("Range"),
                    "if_range": self.headers.get("If-Range"),
                }
            )
            if mode == "status":
                self.send_error(int(name.split(".")[0]))
                return
            data = site.files.get(name)
            if data is None:
                self.send_error(404)
                return
            if mode == "secure" and urllib.parse.parse_qs(url.query).get("token") != ["s3cret"]:
                self.send_error(403)
                return
            if mode == "slow":
                time.sleep(1.0)
            etag = f'"{hashlib.sha1(data).hexdigest()[:16]}"'
            status, body, headers = 200, data, {}
            if mode in ("ranged", "broken", "flaky", "stall", "secure"):
                headers["Accept-Ranges"] = "bytes"
                headers["ETag"] = etag
                wanted, if_range = self.headers.get("Range"), self.headers.get("If-Range")
                if wanted and (if_range is None or if_range == etag):
                    start = int(wanted.split("=")[1].split("-")[0])
                    if start >= len(data):
                        self.send_error(416)
                        return
                    status, body = 206, data[start:]
                    headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            if mode == "lm":
                headers["Last-Modified"] = "Wed, 21 Oct 2026 07:28:00 GMT"
            ctype = site.types.get(name) or (
                "text/csv"
                if name.endswith(".csv")
                else "application/x-ndjson"
                if name.endswith(".jsonl")
                else "text/plain"
            )
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            start = len(data) - len(body)
            if mode == "broken":
                self._write(body[: max(site.cut - start, 0)])
            elif mode == "flaky" and name not in site.flaked:
                site.flaked.add(name)
                self._write(body[: len(body) // 3])
            elif mode == "stall":
                self._write(body[: len(body) // 2])
                time.sleep(1.0)
            else:
                self._write(body)

    return Handler


@pytest.fixture(scope="module")
def http_site():
    site = Site()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    yield site
    server.shutdown()
    server.server_close()


@pytest.fixture
def site(http_site):
    http_site.files.clear()
    http_site.types.clear()
    http_site.requests.clear()
    http_site.flaked.clear()
    return http_site


def test_http_ranged_and_plain_servers_read_resume_and_hash(site, tmp_path):
    records = make_records(80)
    site.files["d.csv"] = csv_bytes(records)
    site.files["d.jsonl"] = jsonl_bytes(records)
    (tmp_path / "d.csv").write_bytes(site.files["d.csv"])
    local = check_source(str(tmp_path / "d.csv"), records)
    for mode in ("ranged", "plain", "lm"):
        for name in ("d.csv", "d.jsonl"):
            assert check_source(f"{site.base}/{mode}/{name}", records) == local, (mode, name)


def test_http_streams_one_response_across_pages(site):
    records = make_records(500)
    site.files["d.jsonl"] = jsonl_bytes(records)
    for mode in ("ranged", "plain"):
        site.requests.clear()
        rows, cursors = read_all(open_source(f"{site.base}/{mode}/d.jsonl"), 20)
        assert len(rows) == 500 and len(cursors) == 25
        assert len(site.requests) == 1, site.requests


def test_http_resume_uses_range_with_if_range(site, monkeypatch):
    import gate.datasets.sources.http as http_source

    records = make_records(100)
    site.files["d.jsonl"] = jsonl_bytes(records)
    site.files["d.csv"] = csv_bytes(records)
    uri = f"{site.base}/ranged/d.jsonl"
    reader = open_source(uri)
    version = reader.snapshot_version()
    first = reader.read_page(None, 40)
    reader.close()
    site.requests.clear()
    # a new process resumes after the committed cursor, with the version it stored
    reader = open_source(uri, SourceOptions(extra={"pinned_version": version}))
    rest, _ = read_all(reader, 40, first.next_cursor)
    assert as_tuples(first.rows + rest) == expected_rows(records)
    offset = first.next_cursor.split(":")[0]
    assert site.requests == [
        {"mode": "ranged", "name": "d.jsonl", "range": f"bytes={offset}-", "if_range": version[len("etag:") :]}
    ]
    # CSV: the header comes from the start of the file, the rows from a range
    monkeypatch.setattr(http_source, "SKIP_RATHER_THAN_REFETCH", 0)
    page = open_source(f"{site.base}/ranged/d.csv").read_page(None, 30)
    site.requests.clear()
    rest, _ = read_all(open_source(f"{site.base}/ranged/d.csv"), 30, page.next_cursor)
    assert as_tuples(page.rows + rest) == expected_rows(records)
    assert [r["range"] for r in site.requests] == [None, f"bytes={page.next_cursor.split(':')[0]}-"]


def test_http_changed_file_is_detected(site):
    site.files["d.jsonl"] = jsonl_bytes(make_records(50))
    uri = f"{site.base}/ranged/d.jsonl"
    reader = open_source(uri)
    version = reader.snapshot_version()
    assert version.startswith('etag:"')
    page = reader.read_page(None, 10)
    site.files["d.jsonl"] = jsonl_bytes(make_records(50, start=1000))  # replaced upstream
    reader.close()  # the kept response is gone: re-fetch
    with pytest.raises(DatasetError, match=r"the source changed while it was being read \(ETag was"):
        reader.read_page(page.next_cursor, 10)
    fresh = open_source(uri, SourceOptions(extra={"pinned_version": version}))
    with pytest.raises(DatasetError, match=r"source changed"):
        fresh.read_page(page.next_cursor, 10)
    with pytest.raises(DatasetError, match=r"source changed"):
        open_source(uri, SourceOptions(extra={"pinned_version": version})).snapshot_version()
    # no validators at all: the pinned content hash is compared
    site.files["d.csv"] = csv_bytes(make_records(5))
    plain = f"{site.base}/plain/d.csv"
    hashed = open_source(plain).snapshot_version()
    assert open_source(plain, SourceOptions(extra={"pinned_version": hashed})).snapshot_version() == hashed
    site.files["d.csv"] = csv_bytes(make_records(6))
    with pytest.raises(DatasetError, match=r"source changed since it was first read \(content hash"):
        open_source(plain, SourceOptions(extra={"pinned_version": hashed})).snapshot_version()
    assert open_source(uri).snapshot_version() != version


def test_http_snapshot_versions(site):
    data = csv_bytes(make_records(10))
    site.files["d.csv"] = data
    assert open_source(f"{site.base}/ranged/d.csv").snapshot_version().startswith('etag:"')
    assert open_source(f"{site.base}/lm/d.csv").snapshot_version() == "last-modified:Wed, 21 Oct 2026 07:28:00 GMT"
    # neither: the content hash, the same as the local file reader's
    assert open_source(f"{site.base}/plain/d.csv").snapshot_version() == "sha256:" + hashlib.sha256(data).hexdigest()
    reader = open_source(f"{site.base}/ranged/d.csv")
    site.requests.clear()
    reader.snapshot_version()
    read_all(reader, 1000)
    assert len(site.requests) == 1  # the version's GET serves the first page


def test_http_errors(site):
    site.files["d.csv"] = csv_bytes(make_records(10))
    with pytest.raises(DatasetError, match=r"/status/500.csv: HTTP 500: the server failed"):
        open_source(f"{site.base}/status/500.csv").read_page(None, 10)
    with pytest.raises(DatasetError, match=r"HTTP 404: no file at this URL"):
        open_source(f"{site.base}/ranged/missing.csv").read_page(None, 10)
    with pytest.raises(DatasetError, match=r"HTTP 403: access denied.*\$\{VAR\}"):
        open_source(f"{site.base}/secure/d.csv").read_page(None, 10)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DatasetError, match=r"cannot connect"):
        open_source(f"http://127.0.0.1:{port}/d.csv").read_page(None, 10)


def test_http_token_from_environment(site, monkeypatch):
    site.files["d.csv"] = csv_bytes(make_records(10))
    uri = f"{site.base}/secure/d.csv?token=${{LABELS_TOKEN}}"
    monkeypatch.delenv("LABELS_TOKEN", raising=False)
    with pytest.raises(DatasetError, match=r"environment variable LABELS_TOKEN is not set"):
        open_source(uri)
    monkeypatch.setenv("LABELS_TOKEN", "s3cret")
    rows, _ = read_all(open_source(uri), 4)
    assert len(rows) == 10


def test_http_connection_broken_mid_file(site):
    data = jsonl_bytes(make_records(400))
    site.files["d.jsonl"] = data
    site.cut = len(data) // 2
    reader = open_source(f"{site.base}/broken/d.jsonl")
    got = []
    with pytest.raises(
        DatasetError,
        match=rf"/broken/d.jsonl: the connection closed at byte {site.cut}, "
        r"before the end of the file",
    ):
        cursor = None
        while True:
            page = reader.read_page(cursor, 50)
            got.extend(page.rows)
            cursor = page.next_cursor
    assert 0 < len(got) < 400  # the pages before the break were fine
    # a kept connection that breaks is retried once from the cursor; the rows are whole
    site.requests.clear()
    rows, _ = read_all(open_source(f"{site.base}/flaky/d.jsonl"), 50)
    assert as_tuples(rows) == expected_rows(make_records(400))
    assert [r["range"] is not None for r in site.requests] == [False, True]


def test_http_timeouts(site):
    site.files["d.jsonl"] = jsonl_bytes(make_records(3000))
    opts = SourceOptions(extra={"timeout": 0.3})
    t0 = time.monotonic()
    with pytest.raises(DatasetError, match=r"timed out after 0.3s"):
        open_source(f"{site.base}/slow/d.jsonl", opts).read_page(None, 10)
    with pytest.raises(DatasetError, match=r"timed out after 0.3s reading at byte \d+"):
        read_all(open_source(f"{site.base}/stall/d.jsonl", opts), 5000)
    assert time.monotonic() - t0 < 3


def test_http_format_from_content_type(site):
    site.files["export"] = csv_bytes(make_records(5))
    site.types["export"] = "text/csv; charset=utf-8"
    site.files["blob"] = csv_bytes(make_records(5))
    rows, _ = read_all(open_source(f"{site.base}/ranged/export"), 2)
    assert len(rows) == 5
    with pytest.raises(DatasetError, match=r"cannot tell CSV from JSONL"):
        open_source(f"{site.base}/ranged/blob").read_page(None, 2)
    rows, _ = read_all(open_source(f"{site.base}/ranged/blob", SourceOptions(extra={"format": "csv"})), 2)
    assert len(rows) == 5


def test_http_memory_stays_flat(site):
    """The body is streamed: peak memory holds a page, not the file, and is the same for a
    file four times the size."""
    peaks = {}
    for n in (2000, 8000):
        site.files["big.jsonl"] = jsonl_bytes(make_records(n))
        reader = open_source(f"{site.base}/ranged/big.jsonl")
        tracemalloc.start()
        try:
            count, cursor = 0, None
            while True:
                page = reader.read_page(cursor, 200)
                count += len(page.rows)
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
                del page
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert count == n
    size = len(site.files["big.jsonl"])
    assert peaks[8000] < peaks[2000] * 1.2 + 65536, peaks
    assert peaks[8000] < size / 2, (peaks, size)


# -- S3 (moto's S3-compatible server on loopback) -----------------------------------------


@pytest.fixture(scope="module")
def moto_endpoint():
    import moto.server as server_mod  # the dev extra installs moto[server]; `make test` installs it

    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(moto_endpoint, monkeypatch):
    import boto3

    monkeypatch.setenv("PROMPTGATE_S3_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    bucket = f"labels-{time.monotonic_ns() % 10**9}"
    client.create_bucket(Bucket=bucket)
    return client, bucket


def test_s3_read_resume_hash_and_version(s3, tmp_path):
    client, bucket = s3
    records = make_records(70)
    client.put_object(Bucket=bucket, Key="sets/d.csv", Body=csv_bytes(records))
    client.put_object(Bucket=bucket, Key="sets/d.jsonl", Body=jsonl_bytes(records))
    (tmp_path / "d.csv").write_bytes(csv_bytes(records))
    local = content_hash(read_all(open_source(str(tmp_path / "d.csv")), 1000)[0])
    assert check_source(f"s3://{bucket}/sets/d.csv", records) == local
    assert check_source(f"s3://{bucket}/sets/d.jsonl", records) == local
    etag = client.head_object(Bucket=bucket, Key="sets/d.csv")["ETag"]
    assert open_source(f"s3://{bucket}/sets/d.csv").snapshot_version() == f"etag:{etag}"


def test_s3_resume_is_a_ranged_get_with_if_match(s3):
    client, bucket = s3
    records = make_records(100)
    client.put_object(Bucket=bucket, Key="d.jsonl", Body=jsonl_bytes(records))
    uri = f"s3://{bucket}/d.jsonl"
    reader = open_source(uri)
    version = reader.snapshot_version()
    first = reader.read_page(None, 30)
    reader.close()
    reader = open_source(uri, SourceOptions(extra={"pinned_version": version}))
    calls = []

    def record(params, **kwargs):
        calls.append(dict(params))

    events = reader.client.meta.events
    events.register("provide-client-params.s3.GetObject", record)
    try:
        rest, _ = read_all(reader, 30, first.next_cursor)
    finally:
        events.unregister("provide-client-params.s3.GetObject", record)
    assert as_tuples(first.rows + rest) == expected_rows(records)
    assert len(calls) == 1
    assert calls[0]["Range"] == f"bytes={first.next_cursor.split(':')[0]}-"
    assert calls[0]["IfMatch"] == version[len("etag:") :]
    # the object is replaced: the pinned ETag no longer matches
    client.put_object(Bucket=bucket, Key="d.jsonl", Body=jsonl_bytes(make_records(100, start=5)))
    again = open_source(uri, SourceOptions(extra={"pinned_version": version}))
    with pytest.raises(DatasetError, match=r"the object changed while it was being read"):
        again.read_page(first.next_cursor, 30)
    with pytest.raises(DatasetError, match=r"the object changed"):
        open_source(uri, SourceOptions(extra={"pinned_version": version})).snapshot_version()


def test_s3_errors(s3, moto_endpoint, monkeypatch):
    client, bucket = s3
    with pytest.raises(DatasetError, match=rf"no such object \(bucket '{bucket}', key 'nope.csv'\)"):
        open_source(f"s3://{bucket}/nope.csv").read_page(None, 10)
    with pytest.raises(DatasetError, match=r"s3://no-such-bucket-here/d.csv .*no such bucket"):
        open_source("s3://no-such-bucket-here/d.csv").read_page(None, 10)
    with monkeypatch.context() as env:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
            env.delenv(name, raising=False)
        env.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        env.setenv("AWS_CONFIG_FILE", "/nonexistent")
        env.setenv("AWS_EC2_METADATA_DISABLED", "true")
        env.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
        env.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
        with pytest.raises(DatasetError, match=r"no AWS credentials found"):
            open_source(f"s3://{bucket}/nope.csv").read_page(None, 10)
    with pytest.raises(DatasetError, match=r"an S3 source is s3://<bucket>/<key>"):
        open_source("s3://only-bucket")
    # AWS_ENDPOINT_URL works too
    monkeypatch.delenv("PROMPTGATE_S3_ENDPOINT_URL")
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    client.put_object(Bucket=bucket, Key="x.csv", Body=csv_bytes(make_records(3)))
    assert len(read_all(open_source(f"s3://{bucket}/x.csv"), 2)[0]) == 3


def test_s3_without_boto3_says_which_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(DatasetError, match=r"pip install 'prompt-gate\[s3\]'"):
        open_source("s3://bucket/d.csv")


# -- SQL warehouse (SQLite file; PostgreSQL when it can be started here) ------------------


def sql_uri(base: str, query: str, **params) -> str:
    return f"sql+{base}?" + urllib.parse.urlencode({"query": query, **params})


QUERY = "SELECT id AS item_id, label AS expected_decision, body, score, created FROM tickets WHERE kept = 1"


@pytest.fixture
def labels_db(tmp_path):
    path = tmp_path / "labels.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE tickets (id INTEGER, label TEXT, body TEXT, score NUMERIC, created TEXT, kept INTEGER)"
        )
        db.executemany(
            "INSERT INTO tickets VALUES (?, ?, ?, ?, ?, ?)",
            [
                (i, LABELS[i % 3], f"body {i}\nline two", i * 1.5, f"2026-01-{1 + i % 28:02d}", 0 if i % 10 == 0 else 1)
                for i in range(50, 0, -1)
            ],
        )
    return path


def sqlite_expected():
    return [
        (
            str(i),
            LABELS[i % 3],
            {"body": f"body {i}\nline two", "score": i * 1.5, "created": f"2026-01-{1 + i % 28:02d}"},
        )
        for i in range(1, 51)
        if i % 10
    ]


def test_warehouse_sqlite_pages_resume_hash(labels_db):
    uri = sql_uri(f"sqlite:///{labels_db}", QUERY)
    digests = set()
    for size in (1, 4, 1000):
        rows, cursors = read_all(open_source(uri), size)
        assert as_tuples(rows) == sqlite_expected()
        digests.add(content_hash(rows))
    assert len(digests) == 1
    assert cursors[0] is None
    rows4, cursors4 = read_all(open_source(uri), 4)
    assert cursors4[1] == "4" and json.loads(cursors4[1]) == 4  # last id, typed
    rest, _ = read_all(open_source(uri), 4, cursors4[3])  # a new process resumes
    assert as_tuples(rest) == as_tuples(rows4[12:])
    version = open_source(uri).snapshot_version()
    assert version == f"query:{hashlib.sha256(QUERY.encode()).hexdigest()};rows=45"
    everything, _ = read_all(open_source(uri), 10)
    assert len(everything) == 45 and [r.item_id for r in everything[:2]] == ["1", "2"]


def test_warehouse_string_ids_custom_columns_and_query_file(labels_db, tmp_path):
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "support.sql").write_text(
        "SELECT 'T-' || printf('%03d', id) AS ticket, label AS verdict, body FROM tickets;\n"
    )
    uri = "sql+sqlite:///labels.db?query_file=q/support.sql"
    opts = SourceOptions(id_column="ticket", label_column="verdict", base_dir=str(tmp_path))
    rows, cursors = read_all(open_source(uri, opts), 7)
    assert [r.item_id for r in rows] == [f"T-{i:03d}" for i in range(1, 51)]
    assert cursors[1] == '"T-007"'
    assert rows[0].input == {"body": "body 1\nline two"}


def test_warehouse_credentials_from_environment(labels_db, monkeypatch):
    uri = sql_uri("sqlite:///${LABELS_DIR}/labels.db", QUERY)
    monkeypatch.delenv("LABELS_DIR", raising=False)
    with pytest.raises(DatasetError, match=r"environment variable LABELS_DIR is not set"):
        open_source(uri)
    monkeypatch.setenv("LABELS_DIR", str(labels_db.parent))
    assert len(read_all(open_source(uri), 10)[0]) == 45


@pytest.mark.parametrize(
    "query, problem",
    [
        ("SELECT id, label AS expected_decision FROM tickets", r"no such column: src.item_id.*alias it"),
        (
            "SELECT 1 AS item_id, label AS expected_decision FROM tickets",
            r"duplicate item id 1: the query returns it more than once",
        ),
        (
            "SELECT CASE WHEN id = 7 THEN NULL ELSE id END AS item_id, label AS expected_decision FROM tickets",
            r"1 row\(s\) of the query have no item id",
        ),
        ("SELECT id AS item_id, NULL AS expected_decision FROM tickets", r"item 1: missing label"),
        ("DELETE FROM tickets", r"the query must be a SELECT"),
    ],
)
def test_warehouse_validation(labels_db, query, problem):
    with pytest.raises(DatasetError, match=problem):
        read_all(open_source(sql_uri(f"sqlite:///{labels_db}", query)), 3)


def test_warehouse_duplicate_across_page_boundary(tmp_path):
    path = tmp_path / "dup.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (item_id TEXT, expected_decision TEXT)")
        db.executemany("INSERT INTO t VALUES (?, ?)", [("a", "x"), ("b", "x"), ("b", "y"), ("c", "x")])
    reader = open_source(sql_uri(f"sqlite:///{path}", "SELECT * FROM t"))
    with pytest.raises(DatasetError, match=r"duplicate item id 'b'"):
        read_all(reader, 2)  # the two b rows straddle pages 1 and 2


def test_warehouse_bad_uris(tmp_path):
    with pytest.raises(DatasetError, match=r"no such SQLite database file"):
        open_source(sql_uri(f"sqlite:///{tmp_path}/nope.db", "SELECT 1"))
    assert not (tmp_path / "nope.db").exists()  # not created by the check
    with pytest.raises(DatasetError, match=r"no query"):
        open_source(f"sql+sqlite:///{tmp_path}/x.db")
    with pytest.raises(DatasetError, match=r"SQLAlchemy has no dialect"):
        open_source(sql_uri("nosuchdb://h/db", "SELECT 1"))


# PostgreSQL: a throwaway cluster from the machine's initdb/pg_ctl (`make test` installs them)


def _pg_binary(name: str) -> str | None:
    """PATH first, then Debian's versioned folder (/usr/lib/postgresql/<v>/bin)."""
    import glob

    return shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres():
    initdb, pg_ctl = _pg_binary("initdb"), _pg_binary("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.fail(
            "PostgreSQL binaries (initdb, pg_ctl) not found: `make test` installs them (apt-get install postgresql)",
            pytrace=False,
        )
    root = tempfile.mkdtemp(prefix="pg-sources-")
    prefix: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        if not shutil.which("setpriv"):
            pytest.fail("running as root without setpriv (util-linux)", pytrace=False)
        import pwd

        nobody = pwd.getpwnam("nobody")
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        prefix = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
    os.chmod(root, 0o755)
    pwfile = Path(root) / "pw"
    pwfile.write_text("pg-s3cret\n")
    os.chmod(pwfile, 0o644)
    data, port = f"{root}/data", _free_port()
    try:
        subprocess.run(
            prefix
            + [
                initdb,
                "-D",
                data,
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "--no-sync",
                "-E",
                "UTF8",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        subprocess.run(
            prefix
            + [
                pg_ctl,
                "-D",
                data,
                "-w",
                "-t",
                "30",
                "-l",
                f"{root}/log",
                "-o",
                f"-k {root} -c listen_addresses=127.0.0.1 -p {port} -c fsync=off",
                "start",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"cannot start PostgreSQL here: {exc}", pytrace=False)
    try:
        import psycopg

        with psycopg.connect(
            host="127.0.0.1", port=port, user="postgres", password="pg-s3cret", dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(
                "CREATE TABLE tickets (ticket_id bigint, verdict text, body text, amount numeric(8,2), opened date)"
            )
            conn.execute(
                "INSERT INTO tickets SELECT g, (ARRAY['approve','reject','escalate'])[1 + g % 3], "
                "'body ' || g, g * 0.25, DATE '2026-01-01' + g FROM generate_series(1, 120) g"
            )
        yield port
    finally:
        subprocess.run(prefix + [pg_ctl, "-D", data, "-m", "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def test_warehouse_postgresql(postgres, monkeypatch):
    query = (
        "SELECT ticket_id AS item_id, verdict AS expected_decision, body, amount, opened "
        "FROM tickets WHERE ticket_id <= 100"
    )
    uri = sql_uri(f"postgresql+psycopg://postgres:${{PG_PASSWORD}}@127.0.0.1:{postgres}/postgres", query)
    monkeypatch.setenv("PG_PASSWORD", "pg-s3cret")
    digests = set()
    for size in (1000, 9):
        rows, cursors = read_all(open_source(uri), size)
        assert [r.item_id for r in rows] == [str(i) for i in range(1, 101)]
        digests.add(content_hash(rows))
    assert len(digests) == 1
    assert rows[3].input == {"body": "body 4", "amount": 1, "opened": "2026-01-05"}
    assert rows[4].input["amount"] == 1.25
    rest, _ = read_all(open_source(uri), 9, cursors[5])
    assert [r.item_id for r in rest] == [str(i) for i in range(46, 101)]
    assert open_source(uri).snapshot_version().endswith(";rows=100")
    monkeypatch.setenv("PG_PASSWORD", "wrong-password")
    with pytest.raises(DatasetError, match=r"password authentication failed") as info:
        open_source(uri).read_page(None, 10)
    assert "wrong-password" not in str(info.value) and "pg-s3cret" not in str(info.value)


# -- every source kind through a whole gate run ------------------------------------------------


@pytest.mark.parametrize("kind", ["file", "http", "s3", "sql"])
def test_each_source_kind_is_added_previewed_mapped_and_run_to_a_verdict(
    kind, gate, tmp_path, monkeypatch, http_site, request
):
    """Done-when of the sources issue: a dataset of each kind goes through the service
    (add, preview, map) and a real gate run (materialize → execute → reconcile) to APPLIED,
    and the snapshot's content hash is that of the rows as the source gives them (the same
    file's, for a file served locally, over HTTP or from S3)."""
    from support.helpers import rules_spec, write_rule_rows

    from gate.mockllm import MockLLMServer
    from workers.supervisor import run_until_terminal

    data = write_rule_rows(tmp_path / "rules.csv", 30, wrong_every=10)  # 27 of 30 right
    if kind == "file":
        uri = str(data)
    elif kind == "http":
        http_site.files["rules.csv"] = data.read_bytes()
        uri = f"{http_site.base}/ranged/rules.csv"
    elif kind == "s3":
        client, bucket = request.getfixturevalue("s3")
        client.put_object(Bucket=bucket, Key="rules.csv", Body=data.read_bytes())
        uri = f"s3://{bucket}/rules.csv"
    else:
        db_path = tmp_path / "warehouse.db"
        with sqlite3.connect(db_path) as db, data.open() as fh:
            rows = list(csv.reader(fh))[1:]
            db.execute("CREATE TABLE labels (item_id TEXT, expected_decision TEXT, text TEXT)")
            db.executemany("INSERT INTO labels VALUES (?, ?, ?)", rows)
        uri = sql_uri(f"sqlite:///{db_path}", "SELECT item_id, expected_decision, text FROM labels")
    gate.register_dataset("rules", uri)
    preview = gate.preview_dataset("rules", rows=3)
    assert preview.row_count == 30 and len(preview.first_rows) == 3
    assert preview.label_counts == {"yes": 18, "no": 12}  # three "no" rows labelled yes on purpose
    gate.map_dataset("p1", "rules", "0.9")
    with MockLLMServer() as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        (report,) = run_until_terminal(gate, [gate.submit(rules_spec("p1"), "apply")], timeout=60)
    assert report.status == "APPLIED", report.update.reason
    run = report.runs[0]
    assert (run.matches, run.scored, run.row_count) == (27, 30, 30)
    # the hash is of the rows in the order the source gives them (a SQL source pages by id)
    local = content_hash(read_all(open_source(uri if kind == "sql" else str(data)), 1000)[0])
    assert run.content_hash == local and run.source_version


# --- quotes and headers that used to be misread silently ------------------------------------


def test_an_unterminated_quote_is_an_error_naming_its_line(tmp_path):
    path = tmp_path / "open.csv"
    path.write_bytes(b'item_id,expected_decision,text\n1,yes,"hello\n2,no,world\n3,yes,bye\n')
    with pytest.raises(DatasetError, match=r"open.csv: line 2: .*quote.* never closed"):
        read_all(open_source(str(path)), 10)


def test_a_quote_inside_an_unquoted_field_is_text_and_takes_no_other_row(tmp_path):
    path = tmp_path / "inches.csv"
    path.write_bytes(b'item_id,expected_decision,text\n1,yes,a 5" screen\n2,no,plain\n3,yes,"quoted, with comma"\n')
    rows, _ = read_all(open_source(str(path)), 10)
    assert as_tuples(rows) == [
        ("1", "yes", {"text": 'a 5" screen'}),
        ("2", "no", {"text": "plain"}),
        ("3", "yes", {"text": "quoted, with comma"}),
    ]


def test_a_header_with_a_column_twice_or_without_the_id_or_label_column_is_refused(tmp_path):
    twice = tmp_path / "twice.csv"
    twice.write_bytes(b"item_id,expected_decision,text,text\n1,yes,a,b\n")
    with pytest.raises(DatasetError, match=r"twice.csv: line 1: column 'text' appears twice"):
        read_all(open_source(str(twice)), 10)
    nolabel = tmp_path / "nolabel.csv"
    nolabel.write_bytes(b"item_id,label,text\n1,yes,a\n")
    with pytest.raises(DatasetError, match=r"nolabel.csv: line 1: no label column 'expected_decision'"):
        read_all(open_source(str(nolabel)), 10)
