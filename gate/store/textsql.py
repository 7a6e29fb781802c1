"""The PyMySQL text form of the hot statements, derived from their SQLAlchemy definition.

Six statements are on the hot path of an import page or an executor chunk: the multi-row
INSERT of dataset rows (``versions.insert_version_rows``), a chunk's claim and its lease
(``items.claim_items_from``), its result UPDATE (``items.write_item_results``), the read
and the INSERT IGNORE of the answers kept for reuse (``answers.find_answers``,
``answers.save_answers``) and the read of the rows' inputs (``versions.version_inputs``).
Each is defined once, in its module, as a SQLAlchemy statement with named bind parameters.
SQLite and other drivers execute it as such. On PyMySQL over utf8 (``string_literal``
answers a quoting) it is compiled once per shape with the connection's MySQL dialect into
a ``Template`` — the compiled SQL cut at its parameters, constants (a ``Verdict``, EPOCH)
quoted into it — and each call fills the parameters with MySQL literals: SQLAlchemy's
compile, bind and driver escaping per call cost more CPU than these statements' round
trips (bench/README.md), the reason this text path exists.

Every value goes through ``sql_literal``: a str is quoted by ``Literals`` (MySQL's rules for
the connection's escaping mode), numbers are rendered from ``int``/``float``, a datetime by
its fields; any other type raises. A value is never interpolated raw.

Only what is per row of a statement (a multi-row INSERT's rows, an UPDATE's value per
position: ``by_position``) is put together here, from templates compiled from the
definition."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import case, literal
from sqlalchemy.engine import Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import BindParameter, ColumnElement, bindparam, null

from gate.records import ItemResult

MAX_INSERT_CHARS = 1_000_000  # one multi-row INSERT stays far below max_allowed_packet (16 MiB on MariaDB)


def string_literal(conn: Connection) -> Literals | None:
    """What quotes a str as a MySQL string literal for this connection, or None where the
    caller should let the driver bind values (the SQLAlchemy form).

    MySQL needs only the backslash and the quote escaped inside a quoted literal
    (mysql_real_escape_string also escapes NUL, CR, LF and ^Z, for log readability), or,
    under the NO_BACKSLASH_ESCAPES sql_mode, only the quote doubled. That holds for utf8
    connections; multi-byte charsets whose characters can contain the byte 0x5C (GBK,
    SJIS...) are left to the driver."""
    driver = conn.connection.dbapi_connection
    if (
        driver is None
        or conn.dialect.driver != "pymysql"
        or getattr(driver, "charset", None) not in ("utf8mb4", "utf8", "utf8mb3")
    ):
        return None
    from pymysql.constants import SERVER_STATUS  # (loaded with the driver: a SQLite gate never imports it)

    return _LITERALS[bool((driver.server_status or 0) & SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES)]


class Literals:
    """MySQL string literals in one escaping mode: calling it quotes one text;
    ``escape_all(texts)`` escapes a whole column (without the quotes around each)."""

    SEPARATOR = "\x00"

    def __init__(self, no_backslash_escapes: bool):
        self.no_backslash_escapes = no_backslash_escapes
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


_LITERALS = {False: Literals(False), True: Literals(True)}  # one per escaping mode: templates are cached per mode


def sql_literal(value: Any, quote: Literals) -> str:
    """``value`` as a MySQL literal (what PyMySQL would send for it bound, but a str quoted by
    ``quote``); a type it does not know raises rather than be interpolated."""
    if value is None:
        return "NULL"
    if isinstance(value, str):  # a StrEnum too
        return quote(value)
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        text = repr(value)
        if text in ("inf", "-inf", "nan"):
            raise ValueError(f"{text} has no MySQL literal")
        return text if "e" in text else text + "e0"  # a DOUBLE, as PyMySQL sends it
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{value} has no MySQL literal")
        return str(value)  # (its str is digits, a point, a sign, an exponent)
    if isinstance(value, datetime):
        text = f"{value.year:04}-{value.month:02}-{value.day:02} {value.hour:02}:{value.minute:02}:{value.second:02}"
        return quote(text + (f".{value.microsecond:06}" if value.microsecond else ""))
    if isinstance(value, date):
        return quote(f"{value.year:04}-{value.month:02}-{value.day:02}")
    raise TypeError(f"no MySQL literal for {type(value).__name__}")


# --- templates: a statement compiled once, its parameters filled per call -------------------------

_TOKENS = re.compile(r"%\(([^)]+)\)s|%s|%%|__\[POSTCOMPILE_(\w+)\]|\x01(\w+)\x01")


class _Param:
    """A parameter the caller fills: its name, bind processor (a JSON column's dumps...),
    whether it is a list (an expanding IN)."""

    __slots__ = ("name", "process", "expanding")

    def __init__(self, bind: BindParameter, dialect, name: str | None = None):
        self.name = name or bind.key
        self.process = bind.type._cached_bind_processor(dialect)
        self.expanding = bind.expanding

    def render(self, value, quote: Literals) -> str:
        process = self.process
        if self.expanding:
            if not value:
                raise ValueError(f"an empty list for {self.name}: the caller returns before the statement")
            if process is None:
                if set(map(type, value)) == {int}:  # positions, ids: the usual list
                    return ",".join(map(str, value))
                return ",".join([sql_literal(v, quote) for v in value])
            return ",".join([sql_literal(process(v), quote) for v in value])
        return sql_literal(value if process is None else process(value), quote)


class Template:
    """A statement's MySQL text with holes: ``texts[0] + fill[0] + texts[1] + ...``. Cut from
    the statement compiled with the connection's dialect (pyformat paramstyle, or format:
    each ``%s`` the next bind of ``positiontup``); a bind with a value of its own (a constant of the
    definition) is quoted into the text; an expanding bind is a hole for a list; a
    ``by_position`` is a hole the caller fills (``slots``)."""

    def __init__(self, sql: str, names: Iterable[str] | None, binds: dict, dialect, quote: Literals):
        self.quote = quote
        positional = names is not None
        self.texts: list[str] = []
        self.holes: list[_Param | str] = []  # a parameter, or the name of a by_position slot
        names = iter(names or ())
        text: list[str] = []
        at = 0
        for match in _TOKENS.finditer(sql):
            text.append(sql[at : match.start()])
            at = match.end()
            token = match.group(0)
            if token == "%%":
                text.append("%")
                continue
            if match.group(3):  # a by_position slot
                self.texts.append("".join(text))
                self.holes.append(match.group(3))
                text = []
                continue
            if match.group(1):  # pyformat: the name in place
                name = match.group(1)
            else:  # format (each %s the next of positiontup), or an expanding bind (named in both)
                name = match.group(2) or next(names)
                if match.group(2) and positional:  # (an expanding bind is in positiontup too)
                    listed = next(names)
                    assert listed == name, (listed, name)
            bind = binds[name]
            if not bind.required:  # a constant of the definition (a list: an IN of constants)
                text.append(_Param(bind, dialect).render(bind.effective_value, quote))
                continue
            self.texts.append("".join(text))
            self.holes.append(_Param(bind, dialect, name))
            text = []
        text.append(sql[at:])
        self.texts.append("".join(text))
        self.params = {hole.name: hole for hole in self.holes if isinstance(hole, _Param)}

    @classmethod
    def of(cls, stmt, dialect, quote: Literals) -> Template:
        compiled = stmt.compile(dialect=dialect, compile_kwargs={})
        return cls(compiled.string, compiled.positiontup, compiled.binds, dialect, quote)

    def __call__(self, params: dict[str, Any], slots: dict[str, str] | None = None) -> str:
        """The SQL text with ``params`` quoted in and the ``slots``' text (``by_position``)."""
        out = [self.texts[0]]
        quote = self.quote
        for hole, text in zip(self.holes, self.texts[1:]):
            out.append((slots or {})[hole] if isinstance(hole, str) else hole.render(params[hole.name], quote))
            out.append(text)
        return "".join(out)


_TEMPLATES: dict = {}


def template(key, build: Callable[[], Any], conn: Connection, quote: Literals) -> Template:
    """The template of the statement ``build()`` makes, compiled once per ``key`` (the
    statement's shape), dialect and escaping mode."""
    cache_key = (key, conn.dialect, quote.no_backslash_escapes)
    found = _TEMPLATES.get(cache_key)
    if found is None:
        found = _TEMPLATES[cache_key] = Template.of(build(), conn.dialect, quote)
    return found


def execute_text(conn: Connection, sql: str):
    """Run a statement's text as it is (no parameters: every value is in it, quoted)."""
    return conn.exec_driver_sql(sql, execution_options={"no_parameters": True})


# --- multi-row INSERTs --------------------------------------------------------------------------


class RowsTemplate:
    """A single-row INSERT's template cut into its head (``INSERT ... VALUES ``) and its row,
    to send many rows in one statement: the row's parameters are filled a column at a time
    (a column of str escaped in one pass: ``Literals.escape_all``)."""

    def __init__(self, stmt, dialect, quote: Literals):
        compiled = stmt.compile(dialect=dialect)
        sql = compiled.string
        cut = sql.rindex(" VALUES ") + len(" VALUES ")
        head = Template(sql[:cut], None, compiled.binds, dialect, quote)
        assert not head.holes, "a multi-row INSERT's head takes no parameters"
        self.head = head.texts[0]
        self.row = Template(sql[cut:], compiled.positiontup, compiled.binds, dialect, quote)
        self.texts = [text.replace("{", "{{").replace("}", "}}") for text in self.row.texts]  # (for str.format)
        self.params = [hole for hole in self.row.holes if isinstance(hole, _Param)]
        assert len(self.params) == len(self.row.holes), "a row takes parameters, no slots"

    def statements(self, columns: dict[str, Any], max_chars: int = MAX_INSERT_CHARS) -> list[str]:
        """The INSERTs of the rows whose values are given by column: a sequence each, all of
        one length, or one value (a list or tuple is a column) that every row takes; as
        few statements as keep each within ``max_chars``."""
        quote = self.row.quote
        rendered: list[Sequence[Any]] = []
        row_format = [self.texts[0]]  # the row as a format string: "{}" per column, a shared value in place
        for hole, text in zip(self.params, self.texts[1:]):
            values = columns[hole.name]
            if not isinstance(values, (list, tuple)):  # one value for every row
                row_format.append(hole.render(values, quote).replace("{", "{{").replace("}", "}}"))
            else:
                types = set(map(type, values)) if hole.process is None else None
                if types == {str}:  # the quotes in the format, the column escaped in one pass
                    rendered.append(quote.escape_all(values))
                    row_format.append("'{}'")
                elif types == {int}:
                    rendered.append(values)
                    row_format.append("{}")
                else:
                    rendered.append([hole.render(v, quote) for v in values])
                    row_format.append("{}")
            row_format.append(text)
        fill = "".join(row_format).format
        rows = [fill(*row) for row in zip(*rendered)]
        return list(multi_row_statements(self.head, rows, max_chars))


def rows_template(key, build: Callable[[], Any], conn: Connection, quote: Literals) -> RowsTemplate:
    cache_key = ("rows", key, conn.dialect, quote.no_backslash_escapes)
    found = _TEMPLATES.get(cache_key)
    if found is None:
        found = _TEMPLATES[cache_key] = RowsTemplate(build(), conn.dialect, quote)
    return found


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


# --- a value per row of an UPDATE ---------------------------------------------------------------


def by_position(name: str, key, type_, values: dict | None = None, rows: int | None = None, branch=None, else_=None):
    """A SET value that differs by row: ``CASE key WHEN k THEN branch(v) ... ELSE else_ END``
    over ``values`` ({key value: v}), or ``branch(v)`` alone when every row of the
    statement (``rows`` of them) takes one v. ``branch`` makes the SQL of one value
    (``literal(v, type_)`` unless told: ``db_now`` for a time ahead).

    With ``values`` it is that expression (the SQLAlchemy form: plain constructs, so the
    statement caches as any other). Without (``values=None``), in a statement compiled
    for a ``Template``, it is a slot named ``name``: its text is made per call by
    ``Slot.fill`` from the same ``key``, ``branch`` and ``else_``, compiled once."""
    cell = _PositionCell(name, key, type_, branch, else_)
    return cell if values is None else cell.filled(values, rows)


class _PositionCell(ColumnElement):
    """``by_position`` without its values: a template's slot."""

    inherit_cache = False  # (never executed: compiled once into a template)

    def __init__(self, name, key, type_, branch=None, else_=None):
        self.name, self.key, self.type = name, key, type_
        self.branch = branch or (lambda v: v if isinstance(v, ColumnElement) else literal(v, type_))
        self.else_ = null() if else_ is None else else_

    def filled(self, values: dict, rows: int | None) -> ColumnElement:
        column = list(values.values())
        if len(column) == rows and _all_one(column):
            return self.branch(column[0])
        return case({k: self.branch(v) for k, v in values.items()}, value=self.key, else_=self.else_)

    def slot(self, dialect, quote: Literals) -> Slot:
        return Slot(self, dialect, quote)


@compiles(_PositionCell)
def _position_cell(element, compiler, **kw):
    """The slot's mark in the compiled text (cut out by ``Template``), noted on the compiler."""
    compiler._by_position_slots = getattr(compiler, "_by_position_slots", {})
    compiler._by_position_slots[element.name] = element
    return f"\x01{element.name}\x01"


def _all_one(values: list) -> bool:
    first = values[0]
    return all(v == first and type(v) is type(first) for v in values)  # dicts too: equal judging, one text


class Slot:
    """A ``by_position``'s text per call, from its key, branch and else compiled once."""

    def __init__(self, element: _PositionCell, dialect, quote: Literals):
        def part(expr) -> Template:
            compiled = expr.compile(dialect=dialect)
            return Template(compiled.string, compiled.positiontup, compiled.binds, dialect, quote)

        self.key = part(element.key)({})  # (a column: no parameters)
        branch = part(element.branch(bindparam("v", type_=element.type)))
        hole = branch.holes[0]
        if branch.texts == ["", ""] and isinstance(hole, _Param):  # the value alone: no template to fill
            self.branch = lambda value: hole.render(value, quote)
        else:
            self.branch = lambda value: branch({"v": value})
        self.else_ = part(element.else_)({})

    def fill(self, values: dict, rows: int, whens: dict[int, str]) -> str:
        """The slot's SQL for ``values`` ({key: v}, ``rows`` rows in the statement; ``whens``:
        each key's "WHEN k THEN ", made once for the statement's slots)."""
        branch = self.branch
        column = list(values.values())
        if len(column) == rows and _all_one(column):
            return branch(column[0])
        texts: dict = {}
        out = []
        for k, value in values.items():
            tkey = (type(value), repr(value) if type(value) in (list, dict) else value)
            text = texts.get(tkey)
            if text is None:
                text = texts[tkey] = branch(value)
            out.append(whens[k] + text)
        return f"CASE {self.key} {' '.join(out)} ELSE {self.else_} END"


class UpdateTemplate:
    """An UPDATE's template and its ``by_position`` slots."""

    def __init__(self, stmt, dialect, quote: Literals):
        compiled = stmt.compile(dialect=dialect, compile_kwargs={})
        self.statement = Template(compiled.string, compiled.positiontup, compiled.binds, dialect, quote)
        elements = getattr(compiled, "_by_position_slots", {})
        self.slots = {name: element.slot(dialect, quote) for name, element in elements.items()}

    def __call__(self, params: dict, values: dict[str, dict], rows: int) -> str:
        """The UPDATE's text: ``params`` its parameters, ``values`` each slot's {key: value}
        (``rows`` rows in the statement)."""
        whens: dict[int, str] = {}
        for column in values.values():
            if len(column) > len(whens):
                whens.update((k, f"WHEN {int(k)} THEN ") for k in column if k not in whens)
        return self.statement(params, {name: slot.fill(values[name], rows, whens) for name, slot in self.slots.items()})


def update_template(key, build: Callable[[], Any], conn: Connection, quote: Literals) -> UpdateTemplate:
    cache_key = ("update", key, conn.dialect, quote.no_backslash_escapes)
    found = _TEMPLATES.get(cache_key)
    if found is None:
        found = _TEMPLATES[cache_key] = UpdateTemplate(build(), conn.dialect, quote)
    return found


# --- what a chunk's results write ---------------------------------------------------------------

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
    columns: tuple[str, ...] = RESULT_COLUMNS + TRIAL_COLUMNS if any(r.trials for r in results) else RESULT_COLUMNS
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
