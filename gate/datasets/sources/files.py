"""Local CSV and JSONL files, and the CSV/JSONL decoding every byte-stream source shares.

The cursor is ``<byte offset>:<line number>``: a page seeks to the offset and reads on, so
memory stays flat whatever the file's size. The same cursor and the same decoding serve
the streamed sources (``http.py``, ``s3.py``): they hand ``read_text_page`` a
``LineStream`` over their response body instead of a file.

Shared pieces:

- ``text_kind``       csv or jsonl from a path's suffix (or a hint);
- ``TextDecoder``     splits a byte stream into records (a quoted CSV field may span
                      lines), bounds a record's size before it is read whole, decodes one
                      record into a dict of columns;
- ``LineStream``      a forward-only line source over any binary stream with ``readline``,
                      tracking the byte offset and line number, with push-back;
- ``read_text_page``  one page of rows from a ``LineStream``, and the cursor after it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections import Counter
from pathlib import PurePosixPath

from gate.datasets.field_counts import MAX_FIELD_CHARS
from gate.errors import DatasetError
from gate.prompt.structured.expected import EXPECTED_PREFIX, PROTECTED_COLUMN

from .base import (
    MAX_ROW_DEPTH,
    Page,
    Row,
    SourceOptions,
    json_quote,
    label_like,
    make_row,
    read_by_contract,
    register,
    resolve_path,
)

TEXT_KINDS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}
_UNLABELLED_HINT = (
    " (a dataset without labels, for judged prompts only, leaves the label column out: this one has "
    "{0!r}, which reads as a misnamed label column)"
)


def text_kind(name: str, uri: str, hint: str | None = None) -> str:
    """``csv`` or ``jsonl`` for a path or object key (``hint`` overrides the suffix)."""
    if hint:
        kind = {"csv": "csv", "jsonl": "jsonl", "ndjson": "jsonl"}.get(hint.strip().lower().lstrip("."))
        if kind is None:
            raise DatasetError(f"{uri}: unsupported format {hint!r}: use csv or jsonl")
        return kind
    suffix = PurePosixPath(name).suffix.lower()
    kind = TEXT_KINDS.get(suffix)
    if kind is None:
        raise DatasetError(f"{uri}: unsupported file type {suffix or '(none)'}: use .csv or .jsonl")
    return kind


def parse_cursor(cursor: str | None, start: int, first_line: int) -> tuple[int, int]:
    if not cursor:
        return start, first_line
    offset, sep, line = cursor.partition(":")
    try:
        return int(offset), int(line)
    except ValueError:
        raise DatasetError(f"invalid cursor {cursor!r} for a text source (expected '<offset>:<line>')") from None


class LineStream:
    """Lines from a binary stream (anything with ``readline(limit)``), with the byte offset
    and the number of the next line, and push-back of lines already read."""

    def __init__(self, raw, offset: int = 0, line: int = 1):
        self.raw = raw
        self.offset = offset
        self.line = line
        self._back = b""

    def readline(self, limit: int = -1) -> bytes:
        if self._back:
            cut = self._back.find(b"\n")
            end = cut + 1 if cut >= 0 else len(self._back)
            if limit >= 0:
                end = min(end, limit)
            data, self._back = self._back[:end], self._back[end:]
            if not self._back and not data.endswith(b"\n") and (limit < 0 or len(data) < limit):
                data += self.raw.readline(limit - len(data) if limit >= 0 else -1)
        else:
            data = self.raw.readline(limit)
        if data:
            self.offset += len(data)
            self.line += 1
        return data

    def has_pushed_back(self) -> bool:
        return bool(self._back)

    def unread_raw(self, data: bytes) -> None:
        """Give back bytes just read from ``raw`` itself, around ``readline``'s counting."""
        self._back = data + self._back

    def unread(self, lines: list[bytes]) -> None:
        """Give back whole lines just read (they are read again next)."""
        data = b"".join(lines)
        self._back = data + self._back
        self.offset -= len(data)
        self.line -= len(lines)

    def skip(self, nbytes: int) -> int:
        """Discard ``nbytes`` (fewer at the end of the stream); returns how many went."""
        gone = 0
        if self._back:
            take = min(nbytes, len(self._back))
            self._back = self._back[take:]
            gone = take
        while gone < nbytes:
            block = self.raw.read(min(1 << 16, nbytes - gone))
            if not block:
                break
            gone += len(block)
        self.offset += gone
        return gone


class TextDecoder:
    """Records of a CSV or JSONL stream, decoded into dicts of columns."""

    def __init__(self, uri: str, kind: str, options: SourceOptions):
        self.uri = uri
        self.kind = kind
        self.options = options
        # a record's raw bytes are bounded before it is read whole; the exact limit is
        # checked by make_row on the decoded columns
        self.budget = options.max_row_bytes * 2 + 1024
        self.header: list[str] | None = None
        self.data_start = 0
        self.row_overhead = 0  # bytes each row's JSON holds beyond its line's own: the header's names

    @property
    def needs_header(self) -> bool:
        return self.kind == "csv" and self.header is None

    @property
    def first_line(self) -> int:
        return 2 if self.kind == "csv" else 1

    def read_header(self, stream: LineStream) -> None:
        """Read the CSV header from a stream at offset 0; the data starts after it."""
        first = stream.readline(self.budget + 1)
        if len(first) > self.budget:
            raise DatasetError(f"{self.uri}: line 1: the header row is over {self.budget} bytes")
        self.data_start = stream.offset
        try:
            self.header = next(csv.reader([first.decode("utf-8-sig")]))
        except (StopIteration, UnicodeDecodeError):
            self.header = []
        if not self.header:
            self.header = None
            raise DatasetError(f"{self.uri}: the CSV file has no header row")
        self._check_header(self.header)
        self.row_overhead = sum(len(name.encode()) + 4 for name in self.header)  # "name": and a comma

    def _check_header(self, header: list[str]) -> None:
        """Each column named once (a second one silently replaced the first), and the id
        and label columns there (or, for the label, ``expected.<field>`` columns), or the
        error that names them (line 1). A column's name is at most ``MAX_FIELD_CHARS``
        characters: every row repeats it in its stored JSON, so one 65,000-character name made
        each 14-byte row store 65 KB (issue 33)."""
        long = next((name for name in header if len(name) > MAX_FIELD_CHARS), None)
        if long is not None:
            self.header = None
            raise DatasetError(
                f"{self.uri}: line 1: a column name is {len(long)} characters long ({long[:40]!r}...): "
                f"at most {MAX_FIELD_CHARS}"
            )
        counts = Counter(header)
        twice = [name for name in header if counts[name] > 1]
        if twice:
            times = "twice" if counts[twice[0]] == 2 else f"{counts[twice[0]]} times"
            self.header = None
            raise DatasetError(
                f"{self.uri}: line 1: column {twice[0][:80]!r} appears {times} in the header: "
                "each column needs a name of its own"
            )
        # no label column and no column like one: a dataset without labels (a judged prompt's:
        # its judge reads the answers); a prompt decided by label is refused at submit
        structured = any(name.startswith(EXPECTED_PREFIX) for name in header)  # expected.<field> columns instead
        label = self.options.label_column
        unlabelled = label not in counts and not structured and label_like(header, label) is None
        for role, column in (("id", self.options.id_column), ("label", label)):
            if column not in counts and not (role == "label" and (structured or unlabelled)):
                self.header = None
                shown = ", ".join(repr(name[:40]) for name in header[:8]) + (", ..." if len(header) > 8 else "")
                raise DatasetError(
                    f"{self.uri}: line 1: no {role} column {column!r} in the header (it has {shown}); "
                    f"name the {role} column: {role}_column: in the gate config, or --{role}-column"
                    + (_UNLABELLED_HINT.format(label_like(header, label)) if role == "label" else "")
                )

    def next_record(self, stream: LineStream) -> list[bytes]:
        """One record's lines (a quoted CSV field may hold newlines); [] at the end."""
        line_no = stream.line
        line = stream.readline(self.budget + 1)
        if not line:
            return []
        lines, size = [line], len(line)
        if self.kind == "csv" and b'"' in line:
            lines, size = self._quoted_record(stream, line_no, line)
        if size > self.budget:
            raise DatasetError(
                f"{self.uri}: line {line_no}: row is over {self.budget} bytes, beyond the "
                f"{self.options.max_row_bytes}-byte limit"
            )
        return lines

    def _quoted_record(self, stream: LineStream, line_no: int, first: bytes) -> tuple[list[bytes], int]:
        """The lines of a CSV record whose first line holds a quote, and their size. CSV's
        own rule says where it ends (Python's reader asks for another line while a quoted
        field is open), not a count of quotes: a quote inside an unquoted field is text and
        must not take the next rows with it. A quoted field still open at the end of the
        stream is an error: it would have swallowed every row after it."""
        lines, size, ended = [first], len(first), False

        def more_lines():
            nonlocal size, ended
            yield first.decode("utf-8", "replace")
            while size <= self.budget:
                line = stream.readline(self.budget + 1 - size)
                if not line:
                    ended = True
                    return
                lines.append(line)
                size += len(line)
                yield line.decode("utf-8", "replace")

        try:
            next(csv.reader(more_lines()), None)
        except csv.Error:
            pass  # the record is decoded again on its own, and its error names its line
        if ended:
            raise DatasetError(
                f"{self.uri}: line {line_no}: a quoted field opened on this line is never closed "
                "(it would take every row after it)"
            )
        return lines, size

    def text_of(self, raw: bytes, line_no: int) -> str | None:
        """A record's text, or None for a blank line."""
        if len(raw) > self.budget:
            raise DatasetError(
                f"{self.uri}: line {line_no}: row is {len(raw)} bytes, over the {self.options.max_row_bytes}-byte limit"
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise DatasetError(f"{self.uri}: line {line_no}: not valid UTF-8") from None
        if line_no == 1:
            text = text.lstrip("\ufeff")
        return text if text.strip() else None

    def rows(self, texts: list[str], line_nos: list[int]) -> list[Row]:
        """The rows of a page's records (their texts, none blank, and line numbers)."""
        options, uri = self.options, self.uri
        if self.kind == "csv":
            values = self._csv_values(texts)
            if values is not None:
                rows = self._csv_rows(values, line_nos)
                if rows is not None:
                    return rows
            decoded = [self._decode_csv(text, line_no) for text, line_no in zip(texts, line_nos)]
        else:
            decoded = [self._decode_json(text, line_no) for text, line_no in zip(texts, line_nos)]
        return [make_row(record, f"line {line_no}", options, uri) for record, line_no in zip(decoded, line_nos)]

    def _csv_values(self, texts: list[str]) -> list[list[str]] | None:
        """Every record's values from one C reader over the whole page, or None when that
        reading is not one row of the header's width per record (then each record is
        decoded alone, for an error that names its line). A text yields one row at most,
        so as many rows as texts means one each."""
        assert self.header is not None  # a CSV record is read after its header (read_header)
        reader = csv.reader(texts)
        try:
            values = list(reader)
        except csv.Error:
            return None
        if len(values) != len(texts) or reader.line_num != len(texts):
            return None
        if values and not min(map(len, values)) == max(map(len, values)) == len(self.header):
            return None
        return values

    def _csv_rows(self, values: list[list[str]], line_nos: list[int]) -> list[Row] | None:
        """The row contract for a page of values in header order, a column at a time: the
        other columns' JSON is put together from pre-quoted names (CSV values are all
        strings), which is what ``make_row`` writes, at a fraction of its cost. None when
        a row of the page breaks the contract: then ``make_row`` words the error."""
        if not values:
            return []
        header, limit = self.header, self.options.max_row_bytes
        assert header is not None  # a CSV page is read after its header (read_header)
        id_column, label_column = self.options.id_column, self.options.label_column
        if (
            id_column not in header
            or label_column not in header
            or len(set(header)) < len(header)
            or PROTECTED_COLUMN in header
            or any(read_by_contract(name) for name in header)
        ):  # a protected column, an expected call's arguments, a conversation: make_row reads them
            return None
        id_at, label_at = header.index(id_column), header.index(label_column)
        keyed = sorted((name, at) for at, name in enumerate(header) if at not in (id_at, label_at))
        keyed = [(json_quote(name) + ":", at) for name, at in keyed]
        quote = json_quote
        ids = [v[id_at].strip() for v in values]
        labels = [v[label_at].strip() for v in values]
        if len(keyed) == 1:
            ((key, at),) = keyed
            inputs = ["{" + key + quote(v[at]) + "}" for v in values]
        else:
            inputs = ["{" + ",".join([key + quote(v[at]) for key, at in keyed]) + "}" for v in values]
        if not (all(ids) and all(labels) and max(map(len, ids)) <= 191):
            return None
        if max(map(len, inputs)) * 4 > limit and any(  # 4: the most UTF-8 bytes of one character
            (len(s) if s.isascii() else len(s.encode())) > limit for s in inputs
        ):
            return None
        return list(map(Row, ids, labels, inputs, [f"line {line_no}" for line_no in line_nos]))

    def _decode_json(self, text: str, line_no: int):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{self.uri}: line {line_no}: malformed JSON: {exc.msg}") from None
        except ValueError:  # Python refuses an integer past 4,300 digits, in words about its internals
            raise DatasetError(f"{self.uri}: line {line_no}: a number longer than 4,300 digits") from None
        except RecursionError:
            raise DatasetError(
                f"{self.uri}: line {line_no}: row is nested deeper than {MAX_ROW_DEPTH} levels"
            ) from None

    def _decode_csv(self, text: str, line_no: int) -> dict:
        assert self.header is not None  # a CSV record is read after its header (read_header)
        try:
            values = next(csv.reader(io.StringIO(text)))
        except csv.Error as exc:
            raise DatasetError(f"{self.uri}: line {line_no}: malformed CSV: {exc}") from None
        if len(values) != len(self.header):
            raise DatasetError(
                f"{self.uri}: line {line_no}: {len(values)} columns where the header has {len(self.header)}"
            )
        return dict(zip(self.header, values))


def read_text_page(stream: LineStream, decoder: TextDecoder, limit: int) -> Page:
    """Up to ``limit`` rows from ``stream``, fewer once their records and the header's
    names each row repeats (``row_overhead``) come to ``options.page_bytes``: the page's
    rows hold about that much, however few or wide they are. The next cursor is where the
    next non-blank record starts (None when there is none); that record is pushed back onto
    the stream, so a caller that keeps the stream can go on reading from the cursor.

    Records are split off line by line (cheap byte work), then decoded a page at a time.
    Lines that are whole records (the usual case) are taken by a tight loop over the raw
    stream; a line that may be more (an open quote), is too long, blank, not UTF-8 or the
    file's first, and bytes pushed back, go one record at a time through ``next_record``
    and ``text_of``, which also word the errors."""
    texts: list[str] = []
    line_nos: list[int] = []
    readline, budget, csv_kind = stream.raw.readline, decoder.budget, decoder.kind == "csv"
    size, page_bytes, overhead = 0, decoder.options.page_bytes, decoder.row_overhead
    while True:
        if not stream.has_pushed_back():
            offset, line_no, line = stream.offset, stream.line, None
            while len(texts) < limit and size < page_bytes:
                line = readline(budget + 1)
                if (
                    not line
                    or len(line) > budget
                    or line_no == 1
                    or (csv_kind and b'"' in line and line.count(b'"') % 2)
                ):
                    break
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError:
                    break
                if text.isspace():
                    break
                texts.append(text)
                line_nos.append(line_no)
                offset += len(line)
                size += len(line) + overhead
                line_no += 1
                line = None
            stream.offset, stream.line = offset, line_no
            if line:
                stream.unread_raw(line)
            elif line is not None:
                return Page(decoder.rows(texts, line_nos), None)
        start_offset, start_line = stream.offset, stream.line
        lines = decoder.next_record(stream)
        if not lines:
            return Page(decoder.rows(texts, line_nos), None)
        text = decoder.text_of(b"".join(lines) if len(lines) > 1 else lines[0], start_line)
        if text is None:
            continue
        if len(texts) >= limit or size >= page_bytes:
            stream.unread(lines)
            return Page(decoder.rows(texts, line_nos), f"{start_offset}:{start_line}")
        texts.append(text)
        line_nos.append(start_line)
        size += sum(map(len, lines)) + overhead


@register("file")
class FileReader:
    def __init__(self, uri: str, options: SourceOptions):
        self.uri = uri
        self.options = options
        self.path = resolve_path(uri, options.base_dir)
        self.kind = text_kind(self.path.name, uri, options.extra.get("format"))
        if not self.path.is_file():
            raise DatasetError(f"{uri}: cannot read the dataset: no such file {self.path}")
        self.decoder = TextDecoder(uri, self.kind, options)

    def snapshot_version(self) -> str:
        digest = hashlib.sha256()
        try:
            with self.path.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
        except OSError as exc:
            raise DatasetError(f"{self.uri}: cannot read the dataset: {exc}") from None
        return f"sha256:{digest.hexdigest()}"

    def close(self) -> None:
        pass

    def read_page(self, cursor: str | None, limit: int) -> Page:
        try:
            with self.path.open("rb") as fh:
                if self.decoder.needs_header:
                    self.decoder.read_header(LineStream(fh))
                offset, line_no = parse_cursor(cursor, self.decoder.data_start, self.decoder.first_line)
                fh.seek(offset)
                return read_text_page(LineStream(fh, offset, line_no), self.decoder, limit)
        except OSError as exc:
            raise DatasetError(f"{self.uri}: cannot read the dataset: {exc}") from None
