"""CSV and JSONL over ``http://`` and ``https://``, streamed, never loaded whole.

URI forms::

    https://data.example.com/labels/support-v3.csv
    https://data.example.com/labels/support-v3.jsonl
    https://data.example.com/export?id=7          (no suffix: set the dataset's format)
    https://data.example.com/labels.csv?token=${LABELS_TOKEN}

``${VAR}`` in the URI is replaced by the environment variable ``VAR`` when the source is
opened, so a token lives in the environment and never in the database (not when the
service opens it for a caller: ``SourceOptions.expand_env`` is then off, and connections
go only where ``SourceOptions.egress`` allows, see ``egress.py``).

The cursor is ``<byte offset>:<line number>``, the same as for local files, and the
decoding is the same (``files.TextDecoder``). One response is streamed across pages while
the pages follow each other; a page after any other cursor (a worker that restarted) asks
for ``Range: bytes=<offset>-``, with ``If-Range`` carrying the ETag (or Last-Modified) the
reader pinned, so a file that changed is detected instead of being read from the middle
of different bytes. A server without range support sends the whole file; the reader
skips to the offset.

``snapshot_version()`` is ``etag:<ETag>``, else ``last-modified:<date>``, else
``sha256:<hex>`` of the body (one streamed pass). Every later response is checked
against the pinned validator; ``options.extra["pinned_version"]`` (a version stored by an
earlier process) pins it from the start.

Settings: ``options.extra["timeout"]`` or ``PROMPTGATE_SOURCE_TIMEOUT`` (seconds, default
30) bounds connecting and each read; ``options.extra["deadline"]`` or
``PROMPTGATE_SOURCE_DEADLINE`` (seconds, default 60) bounds one fetch in all, from the
request to the body's last byte (``deadline.py``); a body with no validator (no ETag, no
Last-Modified) is fetched once: hashed for its version into a spool the pages then read;
``options.extra["format"]`` (csv | jsonl) when the path has no suffix (otherwise the Content-Type decides).

``StreamedTextReader`` is the part every byte-stream source shares (``s3.py`` uses it):
a subclass says how to fetch the body from an offset.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import os
import re
import socket
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from pathlib import PurePosixPath
from typing import TypeGuard

from gate.errors import DatasetError

from .base import Page, SourceOptions, register, shown_source
from .deadline import ENV as DEADLINE_ENV
from .deadline import FetchDeadline, plain_opener, source_deadline, timed_read
from .egress import http_opener
from .files import TEXT_KINDS, LineStream, TextDecoder, parse_cursor, read_text_page, text_kind

DEFAULT_TIMEOUT = 30.0
SKIP_RATHER_THAN_REFETCH = 1 << 20  # a live stream this close before the cursor reads on
SPOOL_IN_MEMORY = 8 << 20  # a body without validators, kept for its pages: on disk past this
USER_AGENT = "prompt-gate (dataset reader)"

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(text: str, uri: str) -> str:
    """Replace ``${VAR}`` with the environment's value; a missing variable is an error."""

    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise DatasetError(f"{uri}: environment variable {name} is not set (the source refers to ${{{name}}})")
        return os.environ[name]

    return _ENV_REF.sub(value, text)


def connect_failure(reason, timeout: float) -> str:
    """The kind of a failure to connect, in our words (never text the server sent)."""
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return f"timed out after {timeout:g}s connecting"
    if isinstance(reason, ConnectionRefusedError):
        return "cannot connect: connection refused"
    if isinstance(reason, socket.gaierror):
        return "cannot connect: the host name does not resolve"
    if isinstance(reason, ssl.SSLError):
        return f"cannot connect: TLS failed ({getattr(reason, 'reason', None) or type(reason).__name__})"
    if isinstance(reason, OSError) and reason.strerror:
        return f"cannot connect: {reason.strerror.lower()}"
    return f"cannot connect: {type(reason).__name__ if isinstance(reason, BaseException) else 'failed'}"


def source_timeout(options: SourceOptions) -> float:
    raw = options.extra.get("timeout") or os.environ.get("PROMPTGATE_SOURCE_TIMEOUT") or DEFAULT_TIMEOUT
    try:
        return float(raw)
    except (TypeError, ValueError):
        raise DatasetError(f"invalid source timeout {raw!r}: give seconds") from None


class StreamBroken(DatasetError):
    """The body stopped before its end (connection lost, timeout). A page read on a stream
    kept from an earlier page is retried once on a fresh request."""


class Body:
    """A fetched body: ``read(n)``, the offset it starts at, its length if announced."""

    def __init__(self, read, close, start: int, length: int | None):
        self.read, self.close, self.start, self.length = read, close, start, length


class _BodyRaw(io.RawIOBase):
    """A Body as a raw stream for ``io.BufferedReader``: counts bytes, turns transport
    errors and a body shorter than announced into ``StreamBroken``."""

    def __init__(self, body: Body, describe):
        self.body = body
        self.describe = describe  # exception | None -> message
        self.got = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        want = len(buffer)
        if self.body.length is not None:
            want = min(want, self.body.length - self.got)
            if want <= 0:
                return 0
        try:
            data = self.body.read(want)
        except DatasetError:
            raise
        except Exception as exc:  # noqa: BLE001 - every transport error is a broken read
            raise StreamBroken(self.describe(exc, self.body.start + self.got)) from None
        if not data and self.body.length is not None and self.got < self.body.length:
            raise StreamBroken(self.describe(None, self.body.start + self.got))
        buffer[: len(data)] = data
        self.got += len(data)
        return len(data)

    def close(self) -> None:
        try:
            self.body.close()
        except Exception:  # noqa: BLE001 - closing a broken connection may fail again
            pass
        super().close()


class StreamedTextReader(ABC):
    """CSV/JSONL pages over a byte stream fetched from an offset (HTTP, object storage)."""

    def __init__(self, uri: str, options: SourceOptions, kind: str | None):
        self.uri = uri
        self.options = options
        self.kind = kind  # None: decided by the first response
        self.decoder: TextDecoder | None = TextDecoder(uri, kind, options) if kind else None
        self._live: LineStream | None = None
        self._live_raw: _BodyRaw | None = None

    # -- for subclasses ---------------------------------------------------------------
    @abstractmethod
    def _fetch(self, offset: int) -> Body:
        """The body from ``offset`` (or from 0 when the store ignores ranges)."""

    def _describe_break(self, exc: BaseException | None, at: int) -> str:
        if exc is None:
            return f"{self.uri}: the connection closed at byte {at}, before the end of the file"
        if isinstance(exc, (TimeoutError, socket.timeout)) or "timed out" in str(exc).lower():
            limit = getattr(self, "timeout", None)
            return f"{self.uri}: timed out" + (f" after {limit:g}s" if limit else "") + f" reading at byte {at}"
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        return f"{self.uri}: the connection broke at byte {at}: {why}"

    # -- the reader interface ---------------------------------------------------------
    def read_page(self, cursor: str | None, limit: int) -> Page:
        for attempt in (1, 2):
            reused = self._live is not None
            try:
                stream = self._position(cursor)
                assert self.decoder is not None  # _position refused a source without one
                page = read_text_page(stream, self.decoder, limit)
            except StreamBroken as exc:
                self._drop_live()
                if reused and attempt == 1:
                    continue  # the kept connection went stale: fetch from the cursor
                raise DatasetError(str(exc)) from None
            except BaseException:
                self._drop_live()
                raise
            if page.next_cursor is None:
                self._drop_live()
            return page
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._drop_live()

    # -- streams ----------------------------------------------------------------------
    def _open(self, offset: int, line: int) -> LineStream:
        body = self._fetch(offset)
        raw = _BodyRaw(body, self._describe_break)
        stream = LineStream(io.BufferedReader(raw, 1 << 16), body.start, line)
        self._live, self._live_raw = stream, raw
        if body.start < offset:
            if stream.skip(offset - body.start) < offset - body.start:
                self._drop_live()
                raise DatasetError(
                    f"{self.uri}: the source ends before byte {offset}: it changed since this dataset was read"
                )
        stream.offset, stream.line = offset, line
        return stream

    def _position(self, cursor: str | None) -> LineStream:
        if self.decoder is None or self.decoder.needs_header:
            if self._live is None or self._live.offset != 0:
                self._drop_live()
                self._open(0, 1)
            if self.decoder is None:
                raise DatasetError(f"{self.uri}: cannot tell CSV from JSONL: name the format")
            if self.decoder.needs_header:
                assert self._live is not None  # at offset 0: kept, or opened just above
                self.decoder.read_header(self._live)
        offset, line = parse_cursor(cursor, self.decoder.data_start, self.decoder.first_line)
        live = self._live
        if live is not None:
            if (live.offset, live.line) == (offset, line):
                return live
            gap = offset - live.offset
            if gap > 0 and (gap <= SKIP_RATHER_THAN_REFETCH or not self._ranges_supported()):
                if live.skip(gap) == gap:
                    live.line = line
                    return live
        self._drop_live()
        return self._open(offset, line)

    def _ranges_supported(self) -> bool:
        return True

    def _drop_live(self) -> None:
        if self._live_raw is not None:
            self._live_raw.close()
        self._live = self._live_raw = None


def _strong(etag: str | None) -> TypeGuard[str]:
    return bool(etag and not etag.startswith("W/"))


@register("http", "https")
class HttpReader(StreamedTextReader):
    def __init__(self, uri: str, options: SourceOptions):
        shown = uri if options.egress is None else shown_source(uri)  # for a caller: no token, no query
        self.url = expand_env(uri, shown) if options.expand_env else uri
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise DatasetError(f"{shown}: not an http(s) URL")
        hint = options.extra.get("format")
        suffix = PurePosixPath(parts.path).suffix.lower()
        kind = text_kind(parts.path, shown, hint) if hint or suffix in TEXT_KINDS else None
        super().__init__(shown, options, kind)
        self.timeout = source_timeout(options)
        self.deadline = source_deadline(options.extra)
        opener = plain_opener() if options.egress is None else http_opener(options.egress, shown)
        self._urlopen = opener.open
        self._spool: tempfile.SpooledTemporaryFile | None = None  # the one fetch of a body without validators
        self.etag: str | None = None
        self.last_modified: str | None = None
        self.accept_ranges: bool | None = None
        self._version: str | None = None
        self._fetched = False
        self._pinned = ""
        pinned = options.extra.get("pinned_version")
        if pinned:
            self._pin_from_version(str(pinned))

    # -- snapshot ---------------------------------------------------------------------
    def snapshot_version(self) -> str:
        """The version the server has now; a pinned version it no longer has is an error."""
        if self._version:
            return self._version
        if not self._fetched:
            # the first GET both pins the validators and serves the first page
            self._drop_live()
            self._open(0, 1)
        if self.etag:
            version = f"etag:{self.etag}"
        elif self.last_modified:
            version = f"last-modified:{self.last_modified}"
        else:
            version = self._content_hash()
            if self._pinned.startswith("sha256:") and version != self._pinned:
                raise DatasetError(
                    f"{self.uri}: the source changed since it was first read (content "
                    f"hash was {self._pinned[7:19]}..., now {version[7:19]}...); start a new run"
                )
        self._version = version
        return version

    def _content_hash(self) -> str:
        """The body's SHA-256, read once: kept in a spool that the pages read after it (the
        server is not asked for the body a second time)."""
        digest = hashlib.sha256()
        stream = self._live if self._live is not None and self._live.offset == 0 else self._open(0, 1)
        spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)
        try:
            for block in iter(lambda: stream.raw.read(1 << 16), b""):
                digest.update(block)
                spool.write(block)
        except BaseException as exc:
            spool.close()
            if isinstance(exc, StreamBroken):
                raise DatasetError(str(exc)) from None
            raise
        finally:
            self._drop_live()
        self._close_spool()
        self._spool = spool
        return f"sha256:{digest.hexdigest()}"

    def _close_spool(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None

    def close(self) -> None:
        super().close()
        self._close_spool()

    def _pin_from_version(self, version: str) -> None:
        self._pinned = version
        kind, _, value = version.partition(":")
        if kind == "etag" and value:
            self.etag = value
        elif kind == "last-modified" and value:
            self.last_modified = value

    # -- fetching ---------------------------------------------------------------------
    def _ranges_supported(self) -> bool:
        return self.accept_ranges is not False

    def _fetch(self, offset: int) -> Body:
        if self._spool is not None:  # the body was read once already (no validator)
            spool = self._spool
            start = min(offset, spool.seek(0, io.SEEK_END))
            spool.seek(start)
            return Body(spool.read, lambda: None, start, None)
        deadline = FetchDeadline(self.deadline).start()
        try:
            response = self._request(offset, deadline)
        except BaseException:
            deadline.cancel()
            raise
        deadline.opened()
        try:
            body = self._accept(response, offset)
        except BaseException:
            deadline.cancel()
            response.close()
            raise

        def close() -> None:
            deadline.cancel()
            body.close()

        read = timed_read(body.read, deadline, lambda: StreamBroken(self._past_deadline()))
        return Body(read, close, body.start, body.length)

    def _past_deadline(self) -> str:
        limit = f"{self.deadline:g}s"
        return f"{self.uri}: the server took over {limit} to send it (the total deadline per fetch, {DEADLINE_ENV})"

    def _request(self, offset: int, deadline: FetchDeadline):
        """The response from ``offset``; a failure once the deadline passed names the deadline
        (the timer shut the socket: the error that follows says nothing of the server)."""
        try:
            return self._send(offset)
        except DatasetError:
            if deadline.expired:
                raise DatasetError(self._past_deadline()) from None
            raise

    def _send(self, offset: int):
        headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
        if offset > 0 and self.accept_ranges is not False:
            headers["Range"] = f"bytes={offset}-"
            if _strong(self.etag):
                headers["If-Range"] = self.etag
            elif self.last_modified and not self.etag:
                headers["If-Range"] = self.last_modified
        request = urllib.request.Request(self.url, headers=headers)
        try:
            return self._urlopen(request, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            exc.close()
            raise DatasetError(self._status_message(exc.code)) from None
        except urllib.error.URLError as exc:
            raise DatasetError(f"{self.uri}: {connect_failure(exc.reason, self.timeout)}") from None
        except TimeoutError:
            raise DatasetError(f"{self.uri}: timed out after {self.timeout:g}s waiting for the server") from None
        except http.client.HTTPException:  # its text is the server's bytes: not shown
            raise DatasetError(f"{self.uri}: the server's answer is not valid HTTP") from None
        except OSError as exc:
            raise DatasetError(f"{self.uri}: {connect_failure(exc, self.timeout)}") from None

    def _accept(self, response, offset: int) -> Body:
        headers = response.headers
        encoding = (headers.get("Content-Encoding") or "identity").lower()
        if encoding not in ("identity", ""):
            raise DatasetError(
                f"{self.uri}: the server sent a compressed body (Content-Encoding is not "
                f"identity); serve the file uncompressed"
            )
        self._check_unchanged(headers.get("ETag"), headers.get("Last-Modified"))
        self._fetched = True
        if self.decoder is None:
            ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
            hint = {
                "text/csv": "csv",
                "application/csv": "csv",
                "application/x-ndjson": "jsonl",
                "application/ndjson": "jsonl",
                "application/jsonl": "jsonl",
                "application/x-jsonlines": "jsonl",
                "application/jsonlines": "jsonl",
            }.get(ctype)
            if hint is None:
                raise DatasetError(
                    f"{self.uri}: cannot tell CSV from JSONL (no .csv/.jsonl suffix, and the "
                    f"Content-Type is {'not a CSV or JSONL type' if ctype else 'missing'}): set the "
                    f"dataset's format"
                )
            self.kind = hint
            self.decoder = TextDecoder(self.uri, hint, self.options)
        length = headers.get("Content-Length")
        length = int(length) if length and length.isdigit() else None
        if response.status == 206:
            match = re.match(r"bytes\s+(\d+)-", headers.get("Content-Range") or "")
            start = int(match.group(1)) if match else -1
            if start != offset:
                raise DatasetError(f"{self.uri}: asked for bytes from {offset}, the server sent another range")
            self.accept_ranges = True
        else:
            start = 0
            ranges = (headers.get("Accept-Ranges") or "").lower()
            self.accept_ranges = "bytes" in ranges if offset == 0 else False
        return Body(response.read, response.close, start, length)

    def _check_unchanged(self, etag: str | None, last_modified: str | None) -> None:
        if self.etag is None and self.last_modified is None:
            self.etag, self.last_modified = etag, last_modified
            return
        if self.etag and etag and etag != self.etag:
            raise DatasetError(
                f"{self.uri}: the source changed while it was being read (ETag was "
                f"{self.etag}, now {etag}); start a new run to read the new version"
            )
        if not self.etag and self.last_modified and last_modified and last_modified != self.last_modified:
            raise DatasetError(
                f"{self.uri}: the source changed while it was being read (Last-Modified "
                f"was {self.last_modified}, now {last_modified}); start a new run"
            )

    def _status_message(self, code: int) -> str:
        text = f"{self.uri}: HTTP {code}"  # not the server's reason phrase: its bytes, not ours
        if code in (401, 403) and self.options.egress is not None:
            return f"{text}: access denied (a source that needs a token is registered with --database-url)"
        if code in (401, 403):
            return (
                f"{text}: access denied; if the URL needs a token, keep it in an environment "
                f"variable and write ${{VAR}} in the source URI"
            )
        if code == 404:
            return f"{text}: no file at this URL"
        if code == 416:
            return f"{text}: the file is shorter than the position already read: it changed; start a new run"
        if code >= 500:
            return f"{text}: the server failed; try again later"
        return text
