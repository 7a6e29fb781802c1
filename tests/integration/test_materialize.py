"""Importing and materializing on both backends, with small pages: a row that breaks the
row contract is refused when the dataset is imported, naming the dataset, the row and the
problem; a label the prompt lacks ends the run ERROR and the update FAILED; a page that
fails mid-transaction (a crash) leaves the cursor on the last committed page, and copying
on from it inserts every item exactly once."""

from __future__ import annotations

import threading
from pathlib import Path

import pymysql
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.exc import OperationalError
from support.helpers import spec

from gate.datasets.sources import Row, content_hash, next_page_size, open_source
from gate.domain import Gate
from gate.errors import DatasetError
from gate.report.text import render_text
from gate.store.runs import advance_materialize
from gate.store.schema import EPOCH, prompt_run, prompt_run_item
from gate.verdict.reasons import ITEM_DETAIL
from workers import materialize
from workers.materialize import Materializer
from workers.reconcile import Reconciler

PAGE = 4


def _gate(gate) -> Gate:
    return Gate(gate.engine, gate.settings.with_(page_size=PAGE))


def _csv(path: Path, rows) -> Path:
    path.write_text("item_id,expected_decision,text\n" + "".join(f"{i},{label},text {i}\n" for i, label in rows))
    return path


def _materialize(g: Gate) -> None:
    m = Materializer(g.engine, g.settings, threading.Event())
    while m.poll() == 0:
        pass


def _submit(g: Gate, tmp_path, rows) -> int:
    g.register_dataset("d", str(_csv(tmp_path / "d.csv", rows)))
    g.map_dataset("p1", "d", "0.5")
    return g.submit(spec())


GOOD = [(f"i{n:02d}", "yes" if n % 2 else "no") for n in range(30)]


@pytest.mark.parametrize(
    "rows, problem",
    [
        (GOOD[:2] + [("i00", "yes")] + GOOD[3:], r"dataset d: duplicate item ids: i00"),  # same page
        (GOOD[:5] + [("i01", "no")] + GOOD[6:], r"dataset d: duplicate item ids: i01"),  # pages in flight
        (GOOD[:25] + [("i02", "no")] + GOOD[26:], r"dataset d: duplicate item ids: i02"),  # committed page
        (GOOD[:9] + [("i09", "")] + GOOD[10:], r"line 11: item i09: missing label"),
        (GOOD[:9] + [("", "yes")] + GOOD[10:], r"line 11: missing item id"),
        ([], r"dataset d has no rows"),
    ],
)
def test_a_bad_row_is_refused_when_the_dataset_is_imported(gate, tmp_path, rows, problem):
    g = _gate(gate)
    with pytest.raises(DatasetError, match=problem):
        _submit(g, tmp_path, rows)


def test_a_label_the_prompt_lacks_ends_the_run_error_and_the_update_failed(gate, tmp_path):
    g = _gate(gate)
    uid = _submit(g, tmp_path, GOOD[:13] + [("i13", "maybe")] + GOOD[14:])
    _materialize(g)
    Reconciler(g.engine, g.settings, threading.Event()).poll()
    report = g.status(uid)
    run = report.runs[0]
    assert run.status == "ERROR" and report.status == "FAILED", (run.status, run.reason)
    # the reason says how many rows and labels, not which: any reader of the update reads it,
    # and a holdout's labels are its values (issue 33); which, the run's item detail says
    assert run.reason == "dataset d: 1 row(s) with 1 label(s) the prompt does not have (its labels: yes, no)"
    assert report.update.reason == f"could not be scored: d: {run.reason}"
    assert run.metrics[ITEM_DETAIL] == {
        "unknown_labels": {"maybe": 1},
        "examples": [{"item_id": "i13", "expected": "maybe"}],
    }
    assert "item i13: 'maybe'" in render_text(report)  # this reader may read the rows: the report says it
    assert run.scored == 0 and run.total == 0  # stopped before the first page


def test_a_page_that_fails_mid_transaction_is_read_again_without_duplicates(gate, tmp_path, monkeypatch):
    g = _gate(gate)
    uid = _submit(g, tmp_path, GOOD)
    real, calls = advance_materialize, []

    def crash_on_the_third_page(conn, run_id, token, **kw):
        calls.append(kw["cursor"])
        if len(calls) == 3:
            raise RuntimeError("worker died mid-page")
        return real(conn, run_id, token, **kw)

    monkeypatch.setattr(materialize, "advance_materialize", crash_on_the_third_page)
    with pytest.raises(RuntimeError, match="died"):
        _materialize(g)
    run_id = g.status(uid).runs[0].run_id
    i, r = prompt_run_item, prompt_run
    with g.engine.begin() as conn:
        committed = conn.execute(select(func.count()).where(i.c.run_id == run_id)).scalar()
        cursor_rows = conn.execute(select(r.c.row_count).where(r.c.id == run_id)).scalar()
        assert committed == cursor_rows == 2 * PAGE  # pages 1-2 in; 3 and the one after it rolled back
        conn.execute(update(r).where(r.c.id == run_id).values(lease_until=EPOCH))  # the lease runs out
    monkeypatch.setattr(materialize, "advance_materialize", real)
    _materialize(g)
    with g.engine.connect() as conn:
        ids = conn.execute(select(i.c.item_id).where(i.c.run_id == run_id)).scalars().all()
    assert sorted(ids) == sorted(i for i, _ in GOOD)  # every item once
    run = g.status(uid).runs[0]
    assert run.row_count == len(GOOD)
    assert run.content_hash == content_hash(_all_rows(tmp_path / "d.csv"))  # the version's content


def test_a_page_whose_commit_was_lost_in_flight_is_not_inserted_again(gate, tmp_path, monkeypatch):
    """The connection drops while the second page's COMMIT is in flight, after the server
    committed it: ``transaction`` runs the page's transaction again, and that second run
    finds the page in instead of inserting it again (its own item ids would end the run)."""
    g = _gate(gate)
    uid = _submit(g, tmp_path, GOOD)
    real, calls = advance_materialize, []

    def commit_then_lose_the_connection(conn, run_id, token, **kw):
        calls.append(kw["cursor"])
        moved = real(conn, run_id, token, **kw)
        if len(calls) == 2:
            conn.connection.dbapi_connection.commit()  # the server commits the page...
            raise OperationalError(
                "COMMIT",
                {},
                pymysql.err.OperationalError(  # ...the client never hears of it
                    2013, "Lost connection to server during query"
                ),
            )
        return moved

    monkeypatch.setattr(materialize, "advance_materialize", commit_then_lose_the_connection)
    _materialize(g)
    run_id = g.status(uid).runs[0].run_id
    with g.engine.connect() as conn:
        ids = conn.execute(select(prompt_run_item.c.item_id).where(prompt_run_item.c.run_id == run_id)).scalars().all()
    assert sorted(ids) == sorted(i for i, _ in GOOD)  # every item once
    run = g.status(uid).runs[0]
    assert (run.status, run.reason, run.row_count) == ("RUNNING", None, len(GOOD))
    assert len(calls) == len(set(calls)) == -(-len(GOOD) // PAGE)  # each page advanced the cursor once


def _all_rows(path: Path):
    reader, rows, cursor = open_source(str(path)), [], None
    while True:
        page = reader.read_page(cursor, 1000)
        rows += page.rows
        if page.next_cursor is None:
            return rows
        cursor = page.next_cursor


def test_page_size_follows_the_row_bytes_read_so_far():
    narrow = [Row(f"i{n}", "yes", '{"text":"x"}', f"line {n}") for n in range(10)]
    wide = [Row(f"i{n}", "yes", '{"text":"' + "x" * 60_000 + '"}', f"line {n}") for n in range(10)]
    assert next_page_size(narrow, 5000, 4 << 20) == 5000  # bounded by rows
    assert next_page_size(wide, 5000, 4 << 20) == (4 << 20) // 60_016  # bounded by bytes: ~69 rows
    assert next_page_size(wide, 5000, 1000) == 1  # never less than a row
    assert next_page_size([], 5000, 1000) == 5000


def test_import_pages_hold_about_page_bytes_the_first_one_too(gate, tmp_path, monkeypatch):
    """The first page, before any row was read, is as many rows as page_bytes holds of the
    widest row allowed (it was page_size rows whatever their width: issue 33); the others
    are sized by the rows read so far."""
    from gate.datasets.sources.files import FileReader

    asked = []
    read_page = FileReader.read_page
    monkeypatch.setattr(
        FileReader, "read_page", lambda self, cursor, limit: asked.append(limit) or read_page(self, cursor, limit)
    )
    g = Gate(gate.engine, gate.settings.with_(page_size=1000, page_bytes=300))
    rows = [(f"i{n:03d}", "yes" if n % 2 else "no") for n in range(400)]
    uid = _submit(g, tmp_path, rows)  # registering imports the file as a version: its pages
    _materialize(g)
    run = g.status(uid).runs[0]
    assert run.row_count == 400 and run.total == 400
    row_bytes = len('{"text":"text 100"}') + len("i100") + len("no")  # ~26 bytes
    assert asked[0] == 1 and set(asked[1:]) <= {300 // row_bytes, 300 // (row_bytes + 1)}, asked  # 300 // 64 KiB
