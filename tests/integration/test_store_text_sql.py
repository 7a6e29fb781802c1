"""The two hot statements built as text on PyMySQL (``gate.store.textsql``): an imported
page's INSERT of dataset rows and a chunk's result UPDATE write every value back byte for
byte, in both of MySQL's escaping modes, and the UPDATE keeps its lease guard; SQLite
takes the SQLAlchemy path and must end the same."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from sqlalchemy import insert, select, text

from gate.records import ItemResult
from gate.store import textsql
from gate.store.answers import save_answers
from gate.store.dialect import db_now
from gate.store.items import claim_items, write_item_results
from gate.store.schema import EPOCH, answer, dataset_row, prompt_run_item
from gate.store.versions import insert_version_rows

TRICKY = [
    "plain",
    "it's",
    "back\\slash",
    "\\'",
    "'\\",
    "50% of %s and %(x)s",
    'say "hi"',
    "tab\there",
    "line\nbreak\r\n",
    "nul\x00byte",
    "ctrl-z\x1a",
    "ünïcødé ✓ 𝔘",
    "",
    "''",
    "\\\\'",
    "?",
    ":x",
]


# a page escapes each column in one pass over its values joined by NUL, unless a value holds NUL
WITHOUT_NUL = [value for value in TRICKY if "\x00" not in value]


def _rows(n_repeat: int = 1, values=TRICKY):
    """(item_id, input JSON, label) rows."""
    rows = []
    for k in range(n_repeat):
        for i, value in enumerate(values):
            rows.append((f"{value}#{k}-{i}", json.dumps({"text": value}, ensure_ascii=False), value or "empty"))
    return rows


def _insert(conn, version_id, rows) -> int:
    """The rows as a page of a dataset version: (position, item_id, label, input, row hash, protected)."""
    return insert_version_rows(
        conn,
        version_id,
        [(k, item_id, label, input_json, "0" * 64, k % 2) for k, (item_id, input_json, label) in enumerate(rows)],
    )


def _read_back(conn, version_id):
    r = dataset_row
    return sorted(
        conn.execute(select(r.c.item_id, r.c.input, r.c.expected_decision).where(r.c.version_id == version_id)).all()
    )


def _assert_round_trip(conn, version_id, rows):
    back = _read_back(conn, version_id)
    assert [(a, json.loads(b) if isinstance(b, str) else b, c) for a, b, c in back] == sorted(
        (a, json.loads(b), c) for a, b, c in rows
    )


@pytest.mark.parametrize("values", [TRICKY, WITHOUT_NUL], ids=["with NUL", "without NUL"])
def test_insert_version_rows_round_trips_every_character(gate, values):
    rows = _rows(values=values)
    with gate.engine.begin() as conn:
        assert _insert(conn, 7, rows) == len(rows)
    with gate.engine.connect() as conn:
        _assert_round_trip(conn, 7, rows)


@pytest.mark.parametrize("values", [TRICKY, WITHOUT_NUL], ids=["with NUL", "without NUL"])
def test_insert_version_rows_under_no_backslash_escapes(mysql_gate, values):
    rows = _rows(values=values)
    with mysql_gate.engine.begin() as conn:
        conn.execute(text("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')"))
        conn.execute(text("SELECT 1"))  # the server reports the mode in the next OK packet's status
        assert _insert(conn, 8, rows) == len(rows)
        conn.execute(text("SET SESSION sql_mode = REPLACE(@@sql_mode, 'NO_BACKSLASH_ESCAPES', '')"))
    with mysql_gate.engine.connect() as conn:
        _assert_round_trip(conn, 8, rows)


def test_a_page_larger_than_one_statement_is_split(mysql_gate):
    big = "x" * 60_000
    rows = [(f"id{i}", json.dumps({"text": big + str(i)}), "yes") for i in range(40)]  # ~2.4 MB
    assert sum(len(r[1]) for r in rows) > 2 * textsql.MAX_INSERT_CHARS
    with mysql_gate.engine.begin() as conn:
        assert _insert(conn, 9, rows) == 40
    with mysql_gate.engine.connect() as conn:
        _assert_round_trip(conn, 9, rows)


@pytest.mark.parametrize("limit,expected", [(1000, [3]), (23, [2, 1]), (22, [1, 1, 1]), (5, [1, 1, 1])])
def test_multi_row_statements_cut_by_length(limit, expected):
    values = ["a" * 10, "b" * 10, "c" * 10]
    statements = list(textsql.multi_row_statements("H", values, limit))
    assert [len(s.split(",")) for s in statements] == expected
    assert all(len(s) <= limit or "," not in s for s in statements)  # one value over the limit goes alone
    assert ",".join(s[1:] for s in statements) == ",".join(values)


def _claimed(g, run_id: int, n: int):
    with g.engine.begin() as conn:
        conn.execute(
            insert(prompt_run_item),
            [
                dict(
                    run_id=run_id,
                    position=i,
                    item_id=f"it{i}",
                    input={},
                    expected_decision="yes",
                    lease_until=EPOCH,
                )
                for i in range(n)
            ],
        )
    with g.engine.begin() as conn:
        return claim_items(conn, run_id, n, 30, 3)


def test_write_item_results_writes_every_field_under_the_lease(gate):
    token, items = _claimed(gate, 11, len(TRICKY) + 2)
    results = [
        ItemResult(
            it.position,
            "MATCH" if k % 2 else "MISMATCH",
            actual_decision=TRICKY[k % len(TRICKY)],
            raw_output=TRICKY[(k + 3) % len(TRICKY)],
            latency_ms=100 + k,
            prompt_tokens=k or None,
            completion_tokens=None,
            error=None,
        )
        for k, it in enumerate(items[:-2])
    ]
    results.append(ItemResult(items[-2].position, "PENDING", error="timeout: 50% \\ 'x'", retry_in=120.0))
    results.append(ItemResult(items[-1].position, "ERROR", error="auth: it's over"))
    with gate.engine.begin() as conn:
        assert write_item_results(conn, 11, token, results) == len(results)
        now = conn.execute(select(db_now())).scalar()
    i = prompt_run_item
    with gate.engine.connect() as conn:
        rows = {r.position: r for r in conn.execute(select(i).where(i.c.run_id == 11))}
    for r in results:
        row = rows[r.position]
        assert (
            row.verdict,
            row.actual_decision,
            row.raw_output,
            row.latency_ms,
            row.prompt_tokens,
            row.completion_tokens,
            row.error,
            row.lease_token,
        ) == (
            r.verdict,
            r.actual_decision,
            r.raw_output,
            r.latency_ms,
            r.prompt_tokens,
            r.completion_tokens,
            r.error,
            None,
        )
        if r.verdict == "PENDING":
            assert timedelta(seconds=110) < row.lease_until - now < timedelta(seconds=130)
            assert row.next_attempt_at == row.lease_until
        else:
            assert row.lease_until == datetime(2000, 1, 1)


def test_write_item_results_needs_the_token_and_a_live_lease(gate):
    token, items = _claimed(gate, 12, 3)
    results = [ItemResult(it.position, "MATCH", actual_decision="yes") for it in items]
    with gate.engine.begin() as conn:
        assert write_item_results(conn, 12, "someone-else", results) == 0
        conn.execute(
            prompt_run_item.update()
            .where(prompt_run_item.c.run_id == 12, prompt_run_item.c.position == items[0].position)
            .values(lease_until=datetime(2001, 1, 1))
        )  # its lease ran out
        assert write_item_results(conn, 12, token, results) == 2


def _answers(values=TRICKY):
    from gate.records import Answer

    return [
        Answer(
            f"{i:064x}",
            value or "empty",
            value,
            i if i % 3 else None,
            i,
            None,
            1,
            2,
            None if i % 2 else f"{i + 1000:064x}",
        )
        for i, value in enumerate(values)
    ]


def _kept(conn) -> list[tuple]:
    a = answer
    return sorted(
        tuple(r)
        for r in conn.execute(
            select(
                a.c.request_key,
                a.c.actual_decision,
                a.c.raw_output,
                a.c.latency_ms,
                a.c.prompt_tokens,
                a.c.completion_tokens,
                a.c.update_id,
                a.c.run_id,
                a.c.trial_of,
            )
        )
    )


def test_save_answers_round_trips_every_character_in_one_statement(db_url):
    """A chunk's answers are one INSERT IGNORE on PyMySQL (bound through the driver with the
    server's clock among the VALUES it was one statement per answer), every value byte for
    byte and ``created_at`` the server's clock; SQLite takes the SQLAlchemy path."""
    _check_save_answers(db_url, "")


def test_save_answers_under_no_backslash_escapes(mysql_url):
    _check_save_answers(mysql_url, "NO_BACKSLASH_ESCAPES")


def _check_save_answers(db_url: str, mode: str) -> None:
    from gate.domain import Gate

    g = Gate.connect(db_url, upgrade=True)
    mysql = db_url.startswith("mysql")
    answers = _answers()

    def inserts(conn) -> int:  # the server's count of INSERT statements on this connection
        return int(conn.execute(text("SHOW SESSION STATUS LIKE 'Com_insert'")).first()[1]) if mysql else 0

    with g.engine.begin() as conn:
        if mode:
            conn.execute(text(f"SET SESSION sql_mode = CONCAT(@@sql_mode, ',{mode}')"))
            conn.execute(text("SELECT 1"))
        before = inserts(conn)
        save_answers(conn, answers)
        sent = inserts(conn) - before
        if mode:
            conn.execute(text(f"SET SESSION sql_mode = REPLACE(@@sql_mode, '{mode}', '')"))
    with g.engine.connect() as conn:
        assert _kept(conn) == sorted(
            (
                a.request_key,
                a.actual_decision,
                a.raw_output,
                a.latency_ms,
                a.prompt_tokens,
                a.completion_tokens,
                a.update_id,
                a.run_id,
                a.trial_of,
            )
            for a in answers
        )
        stamped = conn.execute(select(answer.c.created_at).limit(1)).scalar()
        now = conn.execute(select(db_now())).scalar()
    assert abs((now - stamped).total_seconds()) < 60
    if mysql:
        assert sent == 1, f"{sent} INSERT statements for {len(answers)} answers"
    g.close()
