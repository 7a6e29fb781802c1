"""The PyMySQL text fast path of the hot statements: an import page's multi-row INSERT of
dataset rows, an executor chunk's claim, its result UPDATE and the INSERT IGNORE of its
answers kept for reuse, written as SQL text with MySQL's quoting rules instead of bound
parameters (``versions.insert_version_rows``, ``items.claim_items_from``,
``items.write_item_results``, ``items.find_answers``, ``items.save_answers``,
``versions.version_inputs``).
Other drivers and dialects (``string_literal`` answers None) take the SQLAlchemy path."""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy.engine import Connection

from gate.records import ItemResult
from gate.states import RUN_TERMINAL, Verdict

from .schema import EPOCH

_EPOCH_TEXT = EPOCH.strftime("%Y-%m-%d %H:%M:%S")  # the epoch as a MySQL DATETIME literal's text
MAX_INSERT_CHARS = 1_000_000  # one multi-row INSERT stays far below max_allowed_packet (16 MiB on MariaDB)


def string_literal(conn: Connection) -> Literals | None:
    """What quotes a str as a MySQL string literal for this connection, or None where the
    caller should let the driver bind values.

    MySQL needs only the backslash and the quote escaped inside a quoted literal
    (mysql_real_escape_string also escapes NUL, CR, LF and ^Z, for log readability), or,
    under the NO_BACKSLASH_ESCAPES sql_mode, only the quote doubled. That holds for utf8
    connections; multi-byte charsets whose characters can contain the byte 0x5C (GBK,
    SJIS...) are left to the driver."""
    driver = conn.connection.dbapi_connection
    if conn.dialect.driver != "pymysql" or getattr(driver, "charset", None) not in ("utf8mb4", "utf8", "utf8mb3"):
        return None
    from pymysql.constants import SERVER_STATUS  # (loaded with the driver: a SQLite gate never imports it)

    return Literals(bool((driver.server_status or 0) & SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES))


class Literals:
    """MySQL string literals in one escaping mode: calling it quotes one text;
    ``escape_all(texts)`` escapes a whole column (without the quotes around each)."""

    SEPARATOR = "\x00"

    def __init__(self, no_backslash_escapes: bool):
        self.escape = (
            (lambda text: text.replace("'", "''"))
            if no_backslash_escapes
            else (lambda text: text.replace("\\", "\\\\").replace("'", "\\'"))
        )

    def __call__(self, text: str) -> str:
        return "'" + self.escape(text) + "'"

    def escape_all(self, texts: Sequence[str]) -> list[str]:
        """One escaping pass over the column joined by a separator that none of the texts
        holds (one by one otherwise): a page's 3,000 values cost a few calls, not 6,000."""
        joined = self.SEPARATOR.join(texts)
        if joined.count(self.SEPARATOR) != len(texts) - 1:
            return [self.escape(text) for text in texts]
        return self.escape(joined).split(self.SEPARATOR)


def multi_row_statements(head: str, values: list[str], max_chars: int):
    """``head`` followed by the comma-joined ``values``, as few statements as keep each within
    ``max_chars`` (a value longer than that on its own goes alone)."""
    if len(head) + sum(map(len, values)) + len(values) <= max_chars:  # the usual page: one statement
        yield head + ",".join(values)
        return
    start, size = 0, len(head)
    for end, value in enumerate(values):
        if size + len(value) + 1 > max_chars and end > start:
            yield head + ",".join(values[start:end])
            start, size = end, len(head)
        size += len(value) + 1
    yield head + ",".join(values[start:])


RESULT_COLUMNS = (
    "verdict",
    "actual_decision",
    "raw_output",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "error",
    "answer_key",
    "reused_update_id",
)
TRIAL_COLUMNS = ("trials", "unstable")  # set only by a chunk of a prompt with trials: one call's UPDATE is unchanged
FIELD_COLUMNS = ("fields_wrong", "fields_missing")  # set only by a chunk of a fields decision (gate.prompt.structured)
JUDGE_COLUMNS = ("judge",)  # set only by a chunk of a judged run (gate.prompt.judge)


def result_columns(results: Sequence[ItemResult]) -> tuple[str, ...]:
    columns = RESULT_COLUMNS + TRIAL_COLUMNS if any(r.trials for r in results) else RESULT_COLUMNS
    columns = columns + FIELD_COLUMNS if any(r.fields_wrong is not None for r in results) else columns
    return columns + JUDGE_COLUMNS if any(r.judge is not None for r in results) else columns


def attempt_spent(result: ItemResult) -> int:
    """1 when the result counts as one of its item's attempts: a call was made for it and
    it was not the provider asking to wait (a 429 with a Retry-After); else 0 (reused, not
    called, backpressure)."""
    return 1 if result.calls and not result.backpressure else 0


def stored_value(result: ItemResult, column: str):
    """The value a result writes to ``column`` (trials: their stored JSON form)."""
    if column == "trials":
        return None if result.trials is None else [t.to_dict() for t in result.trials]
    if column == "unstable":
        return int(result.unstable)
    return getattr(result, column)


def item_results_sql(run_id: int, token: str, results: Sequence[ItemResult], quote) -> str:
    """The MySQL text of ``write_item_results``' UPDATE, values quoted by ``quote``.

    The SQLAlchemy form binds 7 CASE branches per item (1,800 parameters for a chunk of
    256); building, caching and escaping those cost more CPU per chunk than the statement's
    commit. This builds the same statement as text in a small fraction of that (see
    bench/README.md). A column is read once for the chunk and quoted only when its values
    differ (most columns of a chunk hold one value: a MATCH, no error, no reuse), each
    distinct text quoted once."""
    positions = [str(int(r.position)) for r in results]
    sets = [
        f"{column} = {_by_position(positions, _column(results, column), quote)}" for column in result_columns(results)
    ]
    spent = [attempt_spent(r) for r in results]
    if any(spent):
        sets.append(f"attempt = attempt + {_by_position(positions, spent, quote)}")
    throttled = [position for position, r in zip(positions, results) if r.backpressure]
    if throttled:
        sets.append(
            f"throttled_since = CASE WHEN position IN ({','.join(throttled)}) "
            "THEN COALESCE(throttled_since, UTC_TIMESTAMP(6)) ELSE throttled_since END"
        )
    sets.append("lease_token = NULL")
    retry = [
        (position, round(float(r.retry_in or 0) * 1_000_000))
        for position, r in zip(positions, results)
        if r.verdict == Verdict.PENDING
    ]
    if retry:
        at = " ".join(f"WHEN {i} THEN TIMESTAMPADD(MICROSECOND, {us}, UTC_TIMESTAMP(6))" for i, us in retry)
        sets.append(f"lease_until = CASE position {at} ELSE '{_EPOCH_TEXT}' END")
        sets.append(f"next_attempt_at = CASE position {at} ELSE NULL END")
    else:
        sets.append(f"lease_until = '{_EPOCH_TEXT}'")
    return (
        f"UPDATE prompt_run_item SET {', '.join(sets)} WHERE run_id = {int(run_id)} "
        f"AND position IN ({','.join(positions)}) AND lease_token = {quote(token)} "
        "AND lease_until > UTC_TIMESTAMP(6)"
    )


def _column(results: Sequence[ItemResult], column: str) -> list:
    if column in ("trials", "unstable", "judge"):
        return [stored_value(r, column) for r in results]
    return [getattr(r, column) for r in results]


def _by_position(positions: list[str], values: list, quote) -> str:
    """One SQL value for the column if all its values are one, else a CASE on position."""
    first = values[0]
    if all(v == first and type(v) is type(first) for v in values):  # dicts too: equal judging, one text
        return _sql_value(first, quote)
    texts: dict = {}
    branches = []
    for position, value in zip(positions, values):
        key = (type(value), value if not isinstance(value, (list, dict)) else repr(value))
        text = texts.get(key)
        if text is None:
            text = texts[key] = _sql_value(value, quote)
        branches.append(f"WHEN {position} THEN {text}")
    return "CASE position " + " ".join(branches) + " END"


def _sql_value(value, quote) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, (list, dict)):
        return quote(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    return str(int(value))


ANSWER_COLUMNS = (
    "request_key",
    "actual_decision",
    "raw_output",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "update_id",
    "run_id",
    "trial_of",
)


def answers_insert_sql(answers: Sequence, quote) -> list[str]:
    """The MySQL text of ``save_answers``' ``INSERT IGNORE``: one multi-row statement (a
    few for a chunk of very long answers), ``created_at`` the server's clock.

    Bound through the driver, the statement's ``UTC_TIMESTAMP(6)`` among the VALUES kept
    PyMySQL's ``executemany`` from folding the rows into one INSERT: it sent one statement
    per answer, 256 round trips a chunk (bench/README.md, the database path)."""

    def sql_value(value) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, str):
            return quote(value)
        return str(int(value))

    values = [
        "(" + ",".join(sql_value(getattr(a, column)) for column in ANSWER_COLUMNS) + ",UTC_TIMESTAMP(6))"
        for a in answers
    ]
    head = f"INSERT IGNORE INTO answer ({', '.join(ANSWER_COLUMNS)}, created_at) VALUES "
    return list(multi_row_statements(head, values, MAX_INSERT_CHARS))


def item_claim_from_sql(run_id: int, from_position: int, limit: int) -> str:
    """``items.claim_items_from``' locking read, as text, with what the executor needs of
    each item (its values inlined: all integers). A locking read through the index locks
    each item's row as well, so reading its columns here costs no more lookups; the
    dataset row's input is read by whoever renders the chunk (``version_inputs``), off
    the claimer's path."""
    return (
        "SELECT position, item_id, expected_decision, attempt, input, "
        "TIMESTAMPDIFF(MICROSECOND, throttled_since, UTC_TIMESTAMP(6)) * 1e-6 "
        "FROM prompt_run_item FORCE INDEX (ix_item_ready) "
        f"WHERE run_id = {int(run_id)} AND verdict = 'PENDING' AND lease_until = '{_EPOCH_TEXT}' "
        f"AND position >= {int(from_position)} ORDER BY lease_until, position LIMIT {int(limit)} "
        "FOR UPDATE SKIP LOCKED"
    )


def item_lease_sql(
    run_id: int, positions: Sequence[int], token: str, lease_seconds: float, attempt_cap: int, quote
) -> str:
    """The claim's lease UPDATE, as text: on 256 positions, binding them through SQLAlchemy's
    expanding IN and the driver's escaping cost more CPU than the statement's round trip.
    Its items were never leased: their claims in a row start at 1 (``items._lease_statement``)."""
    return (
        "UPDATE prompt_run_item SET claims = IF(lease_token IS NULL, 1, claims + 1), "
        f"lease_token = {quote(token)}, lease_until = TIMESTAMPADD(MICROSECOND, "
        f"{round(float(lease_seconds) * 1_000_000)}, UTC_TIMESTAMP(6)) "
        f"WHERE run_id = {int(run_id)} AND position IN ({','.join(str(int(p)) for p in positions)}) "
        f"AND attempt < {int(attempt_cap)}"
    )


def version_inputs_sql(version_id: int, positions: Sequence[int]) -> str:
    """``versions.version_inputs``' read, as text (rows come back as (position, input JSON text))."""
    return (
        f"SELECT position, input FROM dataset_row WHERE version_id = {int(version_id)} "
        f"AND position IN ({','.join(str(int(p)) for p in positions)})"
    )


def answers_found_sql(keys: Sequence[str], quote) -> str:
    """``items.find_answers``' read, as text: the answers kept under these request keys whose
    paying run is finished (a chunk's 256 keys bound through SQLAlchemy's expanding IN cost
    more CPU than the read)."""
    return (
        "SELECT a.request_key, a.actual_decision, a.raw_output, a.latency_ms, a.prompt_tokens, "
        "a.completion_tokens, a.update_id, a.run_id FROM answer AS a JOIN prompt_run AS r ON r.id = a.run_id "
        f"WHERE a.request_key IN ({','.join(map(quote, keys))}) "
        f"AND r.status IN ({','.join(quote(str(s)) for s in sorted(RUN_TERMINAL))})"
    )
