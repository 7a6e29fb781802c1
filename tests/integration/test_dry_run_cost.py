"""What a pull request's dry run costs the service (review of issue 33, finding 5): a
45-byte dry run against a 150,000-row dataset read the whole stored version from the
database each time (~0.7 s of the server's CPU), so a submit token repeating it pinned a
core. A version is immutable: the service reads its keys once and keeps them, within a
bound on their memory (``PROMPTGATE_DIFF_CACHE_BYTES``).

Measured on the database itself: how many rows of ``dataset_row`` each dry run makes the
server read (MariaDB's ``TABLE_STATISTICS``, or MySQL's ``performance_schema``), a count
no other test's database touches and no machine's load changes."""

from __future__ import annotations

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from support.service_harness import Service

ROWS = 20_000
HEADER = b"item_id,expected_decision,text\n"


def stored_file(rows: int, extra: bytes = b"") -> bytes:
    return HEADER + b"".join(b"b%d,urgent,repo row %d down\n" % (i, i) for i in range(rows)) + extra


class RowsRead:
    """Rows of this test database's ``dataset_row`` the server has read so far."""

    def __init__(self, url: str):
        self.engine, self.schema = create_engine(url), make_url(url).database
        with self.engine.connect() as conn:
            try:
                conn.execute(text("SET GLOBAL userstat = 1"))
                self.query = (
                    "SELECT ROWS_READ FROM information_schema.TABLE_STATISTICS "
                    "WHERE TABLE_SCHEMA = :schema AND TABLE_NAME = 'dataset_row'"
                )
            except Exception:  # MySQL: no userstat
                self.query = (
                    "SELECT COUNT_FETCH FROM performance_schema.table_io_waits_summary_by_table "
                    "WHERE OBJECT_SCHEMA = :schema AND OBJECT_NAME = 'dataset_row'"
                )

    def __call__(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(text(self.query), {"schema": self.schema}).scalar() or 0)


def dry_runs(service, count: int, read: RowsRead) -> tuple[list[dict], list[int]]:
    """``count`` dry runs of a one-row copy: their answers, and the rows each read."""
    answers, reads = [], []
    with service.client("submit") as ci:
        for _ in range(count):
            before = read()
            got = ci.put(
                "/v1/datasets/big/rows",
                params={"path": "data/big.csv", "dry_run": "true"},
                content=HEADER + b"b1,urgent,x\n",
            )
            assert got.status_code == 200, got.text
            reads.append(read() - before)
            answers.append(got.json())
    return answers, reads


def test_a_repeated_dry_run_reads_the_stored_version_once(mysql_url, tmp_path):
    read = RowsRead(mysql_url)
    service = Service(mysql_url, tmp_path)
    try:
        with service.client("admin", timeout=120) as admin:
            params = {"path": "data/big.csv", "declared_in": "gate.yaml"}
            assert admin.put("/v1/datasets/big/rows", params=params, content=stored_file(ROWS)).status_code == 200
            answers, reads = dry_runs(service, 3, read)
            assert reads[0] >= ROWS and reads[1:] == [0, 0], reads  # read once, then kept
            assert answers[0] == answers[1] == answers[2], answers
            assert (answers[0]["removed"], answers[0]["changed"], answers[0]["rows"]) == (ROWS - 1, 1, 1)
            assert answers[0]["examples"]["removed"][:2] == ["b0 (urgent)", "b10 (urgent)"]

            changed = stored_file(ROWS, b"b1,urgent,x\n".replace(b"b1,", b"new,"))
            assert admin.put("/v1/datasets/big/rows", params=params, content=changed).status_code == 200
            answers, reads = dry_runs(service, 2, read)  # a new version: its own keys, read once
            assert reads[0] >= ROWS and reads[1] == 0, reads
            assert (answers[0]["removed"], answers[0]["changed"]) == (ROWS, 1), answers[0]
    finally:
        service.stop()
        read.engine.dispose()
    assert "Traceback" not in service.log(), service.log()


def test_a_version_over_the_caches_bound_is_compared_all_the_same(mysql_url, tmp_path):
    """A version whose keys would not fit ``PROMPTGATE_DIFF_CACHE_BYTES`` is not kept: each
    dry run reads it, and answers as a kept one would."""
    read = RowsRead(mysql_url)
    service = Service(mysql_url, tmp_path, env={"PROMPTGATE_DIFF_CACHE_BYTES": "100000"})
    try:
        with service.client("admin", timeout=120) as admin:
            params = {"path": "data/big.csv", "declared_in": "gate.yaml"}
            assert admin.put("/v1/datasets/big/rows", params=params, content=stored_file(ROWS)).status_code == 200
        answers, reads = dry_runs(service, 2, read)
        assert all(n >= ROWS for n in reads), reads
        assert answers[0] == answers[1] and (answers[0]["removed"], answers[0]["changed"]) == (ROWS - 1, 1)
    finally:
        service.stop()
        read.engine.dispose()
