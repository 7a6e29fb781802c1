"""Issue 45.6: each hot statement has one definition, from which both of its forms come
(``gate.store.textsql``). Here each is run in both forms on MariaDB — the SQLAlchemy form
(what SQLite and other drivers run, forced by making ``string_literal`` answer None) and
the text form PyMySQL runs — each in a transaction rolled back afterwards, from the same
committed data, in both of MySQL's escaping modes: what each returns and what each leaves
in its table must be the same. On SQLite the SQLAlchemy form runs and must give what the
test expects. Values are hostile (quotes, backslashes, NUL, %s, an injection attempt)."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import asdict, replace
from datetime import datetime
from decimal import Decimal

import pytest
from sqlalchemy import insert, select, text

from gate.records import Answer, ItemResult, Trial
from gate.store import answers as answers_module
from gate.store import item_claims, textsql
from gate.store import items as items_module
from gate.store import versions as versions_module
from gate.store.answers import find_answers, save_answers
from gate.store.dialect import db_now
from gate.store.items import claim_items_from, write_item_results
from gate.store.schema import EPOCH, answer, dataset_row, prompt_run, prompt_run_item
from gate.store.versions import insert_version_rows, version_inputs

HOSTILE = [
    "plain",
    "it's",
    "back\\slash",
    "\\'",
    "'\\",
    "' OR 1=1 -- ",
    "'); DROP TABLE answer; --",
    "50% of %s and %(x)s",
    'say "hi"',
    "line\nbreak\r\n\t",
    "nul\x00byte",
    "ctrl-z\x1a",
    "ünïcødé ✓ 𝔘",
    "",
    "{}",
    "?",
    ":x",
]
MODES = ["", "NO_BACKSLASH_ESCAPES"]
RUN = 11


# (database, sql_mode): each form on each database, and MySQL's other escaping mode (only MySQL has it)
IN_EACH_MODE = pytest.mark.parametrize(
    ("db_url", "mode"),
    [("mariadb", MODES[0]), ("mariadb", MODES[1]), ("sqlite", MODES[0])],
    ids=["mariadb, backslash escapes", "mariadb, NO_BACKSLASH_ESCAPES", "sqlite"],
    indirect=["db_url"],
)


@contextmanager
def sqlalchemy_form(monkeypatch):
    """The statement modules take the SQLAlchemy form, whatever the driver."""
    with monkeypatch.context() as patch:
        for module in (items_module, answers_module, versions_module):
            patch.setattr(module, "string_literal", lambda conn: None)
        yield


def both_forms(g, monkeypatch, mode: str, act, snapshot) -> dict:
    """{form: (what ``act(conn)`` returned, ``snapshot(conn)`` after it)} for each form the
    database runs (text: PyMySQL only), each in its own transaction, rolled back."""
    mysql = g.engine.dialect.name == "mysql"
    outcomes = {}
    for form in ("sqlalchemy", "text") if mysql else ("sqlalchemy",):
        with g.engine.connect() as conn:
            if mode:
                conn.execute(text(f"SET SESSION sql_mode = CONCAT(@@sql_mode, ',{mode}')"))
                conn.execute(text("SELECT 1"))  # the server reports the mode in the next OK packet's status
                conn.commit()
            try:
                with conn.begin() as transaction:
                    if form == "text":
                        quote = textsql.string_literal(conn)
                        assert quote is not None and quote.no_backslash_escapes == bool(mode)
                        outcomes[form] = (act(conn), snapshot(conn))
                    else:
                        with sqlalchemy_form(monkeypatch):
                            outcomes[form] = (act(conn), snapshot(conn))
                    transaction.rollback()
            finally:
                if mode:
                    conn.execute(text(f"SET SESSION sql_mode = REPLACE(@@sql_mode, '{mode}', '')"))
                    conn.commit()
    if mysql:
        assert outcomes["text"] == outcomes["sqlalchemy"]
    return outcomes["sqlalchemy"]


def committed(g, *statements) -> None:
    """Set-up rows, committed (foreign keys off: the rows stand alone)."""
    with g.engine.connect() as conn:
        mysql = conn.dialect.name == "mysql"
        if not mysql:  # (outside a transaction, or SQLite ignores it)
            conn.connection.dbapi_connection.execute("PRAGMA foreign_keys = OFF")
        try:
            with conn.begin():
                if mysql:
                    conn.exec_driver_sql("SET SESSION foreign_key_checks = 0")
                for statement, rows in statements:
                    conn.execute(statement, rows)
                if mysql:
                    conn.exec_driver_sql("SET SESSION foreign_key_checks = 1")
        finally:
            if not mysql:
                conn.connection.dbapi_connection.execute("PRAGMA foreign_keys = ON")


def table(conn, t, *where, token: str | None = None) -> list[tuple]:
    """A table's rows, sorted, as comparable values: a time as EPOCH, whole seconds from the
    database's now (within a day of it: written by the statement) or as it is; a lease
    token as whether it is the one given."""
    now = conn.execute(select(db_now())).scalar()
    if isinstance(now, str):  # SQLite's text
        now = datetime.fromisoformat(now[:26])
    out = []
    for row in conn.execute(select(t).where(*where)):
        values = []
        for column, value in zip(t.c.keys(), row):
            if isinstance(value, datetime):
                seconds = (value - now).total_seconds()
                value = "EPOCH" if value == EPOCH else round(seconds) if abs(seconds) < 86400 else value
            elif column == "lease_token" and value is not None:
                value = "token" if value == token else "other token"
            values.append(value)
        out.append(tuple(values))
    return sorted(out, key=repr)


# --- an import page's INSERT of dataset rows ---------------------------------------------------


def page(values=HOSTILE):
    return [
        (k, f"{value}#{k}", value or "empty", json.dumps({"text": value}, ensure_ascii=False), f"{k:064x}", k % 2)
        for k, value in enumerate(values)
    ]


@IN_EACH_MODE
@pytest.mark.parametrize("values", [HOSTILE, [v for v in HOSTILE if "\x00" not in v]], ids=["NUL", "no NUL"])
def test_insert_version_rows_round_trips(gate, monkeypatch, mode, values):
    rows = page(values)
    inserted, stored = both_forms(
        gate,
        monkeypatch,
        mode,
        lambda conn: insert_version_rows(conn, 7, rows),
        lambda conn: table(conn, dataset_row, dataset_row.c.version_id == 7),
    )
    assert inserted == len(rows)
    assert sorted(stored, key=lambda row: row[1]) == [(7, p, i, e, json.loads(j), h, k) for p, i, e, j, h, k in rows]


def test_a_page_split_in_statements_round_trips(mysql_gate, monkeypatch):
    big = "x'\\" * 20_000
    rows = [(p, i, e, json.dumps({"text": big + str(p)}), h, k) for p, i, e, _, h, k in page(HOSTILE * 3)[:40]]
    assert sum(len(r[3]) for r in rows) > 2 * textsql.MAX_INSERT_CHARS  # ~3.2 MB of literals: 4+ statements
    inserted, stored = both_forms(
        mysql_gate,
        monkeypatch,
        "",
        lambda conn: insert_version_rows(conn, 9, rows),
        lambda conn: table(conn, dataset_row, dataset_row.c.version_id == 9),
    )
    assert inserted == 40 and len(stored) == 40


# --- the rows' inputs --------------------------------------------------------------------------


@IN_EACH_MODE
def test_version_inputs_round_trips(gate, monkeypatch, mode):
    rows = page()
    with gate.engine.begin() as conn:
        insert_version_rows(conn, 7, rows)
        insert_version_rows(conn, 8, rows[:3])  # another version's rows at the same positions
    wanted = [0, 2, 5, 11, 999]  # (999: no such row)
    found, _ = both_forms(gate, monkeypatch, mode, lambda conn: version_inputs(conn, 7, wanted), lambda conn: None)
    assert found == {p: json.loads(rows[p][3]) for p in wanted if p < len(rows)}


# --- the answers kept for reuse ------------------------------------------------------------------


def kept_answers(values=HOSTILE) -> list[Answer]:
    return [
        Answer(
            f"{k:064x}",
            value or "empty",
            value if k % 4 else None,
            k if k % 3 else None,
            k,
            None,
            1,
            RUN + k % 3,
            None if k % 2 else f"{k + 1000:064x}",
        )
        for k, value in enumerate(values)
    ]


@IN_EACH_MODE
def test_save_answers_round_trips_and_never_replaces(gate, monkeypatch, mode):
    first = kept_answers()[0]
    committed(gate, (insert(answer), [dict(asdict(first), created_at=datetime(2020, 1, 1))]))
    later = [replace(first, actual_decision="a better one", raw_output="'; --")] + kept_answers()[1:]
    _, stored = both_forms(
        gate, monkeypatch, mode, lambda conn: save_answers(conn, later), lambda conn: table(conn, answer)
    )
    assert {row[0]: row[1] for row in stored} == {a.request_key: a.actual_decision for a in kept_answers()}
    assert [row[8] for row in stored] == [datetime(2020, 1, 1)] + [0] * (len(stored) - 1)  # the clock's, at the INSERT


@IN_EACH_MODE
def test_find_answers_round_trips(gate, monkeypatch, mode):
    run = dict(
        update_id=1,
        dataset_id=1,
        dataset_name="d",
        source_uri="u",
        source_options={},
        min_accuracy=0.5,
        lease_until=EPOCH,
        created_at=EPOCH,
    )
    kept = kept_answers()
    committed(
        gate,
        (insert(prompt_run), [dict(run, id=RUN, status="DONE"), dict(run, id=RUN + 1, status="RUNNING")]),
        (insert(prompt_run), [dict(run, id=RUN + 2, status="CANCELLED")]),
        (insert(answer).values(created_at=db_now()), [asdict(a) for a in kept]),
    )
    asked = [a.request_key for a in kept] + ["' OR '1'='1", "\\", f"{999:064x}"]
    found, _ = both_forms(gate, monkeypatch, mode, lambda conn: find_answers(conn, asked), lambda conn: None)
    finished = {a.request_key: a for a in kept if a.run_id != RUN + 1}  # a run still running pays for nothing yet
    assert found == {key: replace(a, trial_of=None) for key, a in finished.items()}


# --- an executor chunk: its claim, its lease, its result UPDATE ------------------------------------


def items(n: int, changes: dict | None = None) -> list[dict]:
    """``n`` items of the run, never leased, with hostile text; ``changes`` by position."""
    rows = []
    for k in range(n):
        value = HOSTILE[k % len(HOSTILE)]
        row = dict(
            run_id=RUN,
            position=k,
            item_id=f"{value}#{k}",
            input={"text": value} if k % 3 else None,
            expected_decision=value or "empty",
            verdict="PENDING",
            attempt=0,
            claims=0,
            lease_token=None,
            lease_until=EPOCH,
            throttled_since=None,
        )  # (every row with every key: an executemany binds the first row's)
        row.update((changes or {}).get(k, {}))
        rows.append(row)
    return rows


@IN_EACH_MODE
def test_claim_items_from_round_trips(gate, monkeypatch, mode):
    """The locking read of the items never leased from a position on, the lease of those
    under the attempt cap, the others ended ERROR: the same items, the same rows after."""
    changes = {
        1: dict(lease_until=datetime(2031, 1, 1), lease_token="x" * 32),  # leased: not claimed
        3: dict(verdict="MATCH"),  # scored
        4: dict(attempt=3),  # its attempts spent: ends ERROR
        5: dict(attempt=2, throttled_since=datetime(2020, 1, 1), claims=0),
        6: dict(attempt=1, lease_until=datetime(2001, 1, 1)),  # a retry due: claim_items', not this claim's
    }
    committed(
        gate,
        (insert(prompt_run_item), items(14, changes)),
        (insert(prompt_run_item), [dict(items(1)[0], run_id=RUN + 1)]),
    )

    def claim(conn):
        token, claimed = claim_items_from(conn, RUN, 1, 6, 30.0, 3)
        claim.token = token
        return [
            (c.position, c.item_id, c.expected_decision, c.attempt, c.claims, c.throttled_for is not None)
            for c in claimed
        ]

    claimed, stored = both_forms(
        gate,
        monkeypatch,
        mode,
        claim,
        lambda conn: table(conn, prompt_run_item, token=claim.token),
    )
    assert [c[0] for c in claimed] == [2, 5, 7, 8, 9]  # 6 locked from 1: 4 ended ERROR
    assert claimed[1][3:] == (3, 1, True)
    by_position = {(row[0], row[1]): row for row in stored}
    columns = prompt_run_item.c.keys()
    assert by_position[(RUN, 4)][columns.index("verdict")] == "ERROR"
    assert {p for (r, p), row in by_position.items() if row[columns.index("lease_token")] == "token"} == {2, 5, 7, 8, 9}
    assert {by_position[(RUN, p)][columns.index("lease_until")] for p in (2, 5, 7, 8, 9)} == {30}


def test_the_claim_read_is_one_statement_in_both_forms(mysql_gate):
    """The read itself, rows as the driver gives them: the text form's input is its JSON text."""
    committed(mysql_gate, (insert(prompt_run_item), items(6, {2: dict(throttled_since=datetime(2020, 1, 1))})))
    params = {"run_id": RUN, "from_position": 1, "limit": 4}
    with mysql_gate.engine.begin() as conn:
        through_sqlalchemy = [tuple(row) for row in conn.execute(items_module._ITEM_CLAIM_FROM, params)]
        sql = textsql.template("claim_from", item_claims.claim_from_statement, conn, textsql.string_literal(conn))
        as_text = [tuple(row) for row in textsql.execute_text(conn, sql(params))]
    assert [r[:4] for r in as_text] == [r[:4] for r in through_sqlalchemy] and len(as_text) == 4
    assert [None if r[4] is None else json.loads(r[4]) for r in as_text] == [r[4] for r in through_sqlalchemy]
    assert [r[5] is None for r in as_text] == [r[5] is None for r in through_sqlalchemy] == [True, False, True, True]


def leased(g, n: int) -> str:
    token = "t" * 32
    committed(
        g,
        (
            insert(prompt_run_item),
            items(n, {k: dict(lease_token=token, lease_until=datetime(2099, 1, 1)) for k in range(n)}),
        ),
    )
    return token


def chunk_results() -> list[ItemResult]:
    """Every kind of result a chunk writes back, with hostile text."""
    trials = (Trial("yes", "it's", 3, 1, 2), Trial(None, error="50% \\ 'x'"))
    return [
        ItemResult(
            0, "MATCH", actual_decision="it's", raw_output="' OR 1=1 -- ", latency_ms=5, calls=1, answer_key="a" * 64
        ),
        ItemResult(
            1,
            "MISMATCH",
            actual_decision="back\\slash",
            raw_output="nul\x00byte",
            calls=1,
            trials=trials,
            unstable=True,
        ),
        ItemResult(2, "PENDING", error="timeout: 50% \\ 'x'", retry_in=120.0, calls=1),
        ItemResult(3, "PENDING", error="429", retry_in=5.0, backpressure=True, calls=1),
        ItemResult(4, "ERROR", error="auth: it's over", calls=1, fields_wrong=3, fields_missing=1),
        ItemResult(
            5, "MATCH", actual_decision="ünïcødé ✓ 𝔘", reused_update_id=7, judge={"why": "it's \\ fine", "n": [1, None]}
        ),
        ItemResult(6, "PENDING", error=None, retry_in=None, calls=0),
    ]


@pytest.mark.parametrize(
    "results",
    [
        chunk_results(),
        [
            ItemResult(k, "MATCH", actual_decision="yes", raw_output="'", calls=1) for k in range(5)
        ],  # one value a column
        [ItemResult(k, "PENDING", error="e", retry_in=30.0, backpressure=True) for k in range(3)],
    ],
    ids=["every kind", "alike", "all throttled"],
)
@IN_EACH_MODE
def test_write_item_results_round_trips(gate, monkeypatch, mode, results):
    token = leased(gate, 8)
    written, stored = both_forms(
        gate,
        monkeypatch,
        mode,
        lambda conn: write_item_results(conn, RUN, token, results),
        lambda conn: table(conn, prompt_run_item, token=token),
    )
    assert written == len(results)
    columns = prompt_run_item.c.keys()
    rows = {row[1]: dict(zip(columns, row)) for row in stored}
    for r in results:
        row = rows[r.position]
        assert (row["verdict"], row["actual_decision"], row["raw_output"], row["error"], row["lease_token"]) == (
            r.verdict,
            r.actual_decision,
            r.raw_output,
            r.error,
            None,
        )
        assert row["judge"] == r.judge and row["unstable"] == int(r.unstable)
        assert row["trials"] == (None if r.trials is None else [t.to_dict() for t in r.trials])
        assert row["attempt"] == (1 if r.calls and not r.backpressure else 0)
        assert row["throttled_since"] == (0 if r.backpressure else None)
        if r.verdict == "PENDING":
            assert row["lease_until"] == row["next_attempt_at"] == round(r.retry_in or 0)
        else:
            assert row["lease_until"] == "EPOCH" and row["next_attempt_at"] is None
    assert rows[7]["lease_token"] == "token"  # not in the chunk: untouched


def test_write_item_results_keeps_its_lease_guard(gate, monkeypatch):
    token = leased(gate, 3)
    results = [ItemResult(k, "MATCH", actual_decision="yes") for k in range(3)]
    written, _ = both_forms(
        gate, monkeypatch, "", lambda conn: write_item_results(conn, RUN, "' OR '1'='1", results), lambda conn: None
    )
    assert written == 0

    def expired(conn):
        conn.execute(
            prompt_run_item.update().where(prompt_run_item.c.position == 0).values(lease_until=datetime(2001, 1, 1))
        )
        return write_item_results(conn, RUN, token, results)

    written, _ = both_forms(gate, monkeypatch, "", expired, lambda conn: None)
    assert written == 2


def test_a_value_without_a_mysql_literal_is_refused():
    quote = textsql.Literals(False)
    assert textsql.sql_literal("it's", quote) == "'it\\'s'"
    assert textsql.sql_literal(1.5, quote) == "1.5e0" and textsql.sql_literal(True, quote) == "1"
    for value in (object(), b"bytes", float("nan"), Decimal("NaN"), Decimal("-Infinity")):
        with pytest.raises((TypeError, ValueError)):
            textsql.sql_literal(value, quote)
