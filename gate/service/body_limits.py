"""Bounds on request bodies, before any handler (or authentication) reads one: a prompt
file is small, and a body's size is the one cost a caller controls before the token is
checked. A pure ASGI middleware: it reads the body up to the limit (a chunked body, which
has no Content-Length, is counted too), answers 413 past it, 408 when the whole body has
not arrived within ``timeout`` seconds (a client that stalls mid-body holds no handler),
and hands the app the body it read.

A JSON body (``application/json``, ``…+json``, or a body with no content type, which
FastAPI reads as JSON) meets the limits of a YAML prompt file (``gate.prompt.yaml_file``): nested
at most ``MAX_DEPTH`` deep, no duplicate key (JSON's own rule is "last one wins", so two
readers could disagree on what was sent). One loader, ``strict_json``, for every body:
the middleware refuses a body it finds over those limits with 400 and one line; a body
that is not JSON at all is left to the route, which says so in its own words.

A number longer than ``MAX_NUMBER_DIGITS`` characters is over those limits too (Python
refuses an integer past 4,300 digits, in words of its own that hint at its internals).

The one exception is a dataset upload (``PUT /v1/datasets/{name}/rows``): its body is a
file, up to its own cap (``serve --max-upload-bytes``). It is not read here: a declared
length over that cap is refused at once, and the route, once the token, the dataset and
the path have been checked and an upload slot is held (``UploadSlots``), streams the body
to a spooled file, counting it against the cap and its pace (``spool_upload``), and a dry
run's against its own deadline (``PROMPTGATE_DRY_RUN_SECONDS``)."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from contextlib import contextmanager
from tempfile import SpooledTemporaryFile
from typing import Any

from starlette.concurrency import run_in_threadpool

from gate.errors import TooLarge, TooSlow, UsageError
from gate.prompt.yaml_file import MAX_DEPTH

from .edge import RETRY_AFTER_SECONDS, EdgeRefusal

MAX_BODY_BYTES = 1024 * 1024
BODY_TIMEOUT_SECONDS = 30.0
MAX_UPLOAD_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_UPLOADS = 4  # uploads in progress at once, server-wide (an admin's import may go beyond)
DEFAULT_MAX_UPLOADS_PER_TOKEN = 2  # ... and per token: one token never holds them all
SPOOL_IN_MEMORY = 4 * 1024 * 1024  # an upload's bytes held in memory before they go to a temporary file
WRITE_BLOCK = 1024 * 1024
UPLOAD_PATH = re.compile(r"/v1/datasets/[^/]+/rows")


class JsonRefused(UsageError):
    """JSON that parses, but over the limits (depth, a duplicate key)."""


def _object(pairs: list[tuple[str, Any]]) -> dict:
    found: dict = {}
    for key, value in pairs:
        if key in found:
            raise JsonRefused(f"the JSON body has the key {key[:80]!r} twice")
        found[key] = value
    return found


MAX_NUMBER_DIGITS = 100  # no field of any body needs more; Python refuses ints past 4,300 in its own words


def _number(kind: type):
    def read(text: str) -> Any:
        if len(text) > MAX_NUMBER_DIGITS:
            raise JsonRefused(f"the JSON body has a number of more than {MAX_NUMBER_DIGITS} digits")
        return kind(text)

    return read


def strict_json(text: str | bytes) -> Any:
    """The JSON document; JsonRefused when nested deeper than ``MAX_DEPTH``, when an
    object repeats a key, or a number is longer than ``MAX_NUMBER_DIGITS``; ValueError
    when it is not JSON."""
    try:
        data = json.loads(text, object_pairs_hook=_object, parse_int=_number(int), parse_float=_number(float))
    except RecursionError:
        raise JsonRefused(f"the JSON body is nested deeper than {MAX_DEPTH} levels") from None
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise JsonRefused(f"the JSON body is nested deeper than {MAX_DEPTH} levels")
            stack.extend((child, depth + 1) for child in (value.values() if isinstance(value, dict) else value))
    return data


def is_json(headers: dict) -> bool:
    kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    return kind == b"" or kind == b"application/json" or kind.endswith(b"+json")


def json_problem(body: bytes) -> str | None:
    """The one line refusing ``body`` (over the JSON limits), or None (fine, or not JSON)."""
    try:
        strict_json(body)
    except JsonRefused as exc:
        return str(exc)
    except (ValueError, UnicodeDecodeError):  # not JSON: the route says so
        return None
    return None


class BodyLimit:
    def __init__(
        self,
        app,
        limit: int = MAX_BODY_BYTES,
        timeout: float = BODY_TIMEOUT_SECONDS,
        upload_limit: int = MAX_UPLOAD_BYTES,
    ):
        self.app, self.limit, self.timeout, self.upload_limit = app, limit, timeout, upload_limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if scope.get("method") == "PUT" and UPLOAD_PATH.fullmatch(scope.get("path", "")):
            if declared is not None and (not declared.isdigit() or int(declared) > self.upload_limit):
                return await _refuse(send, 413, f"request body larger than {self.upload_limit} bytes")
            return await self.app(scope, receive, send)  # streamed by the route (spool_upload)
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            return await _refuse(send, 413, f"request body larger than {self.limit} bytes")
        body = await self._read(receive, send)
        if body is None:
            return
        if body and is_json(headers):  # off the event loop: before any token check, 1 MB of {} is 0.6 s of CPU
            problem = await run_in_threadpool(json_problem, body)
            if problem:
                return await _refuse(send, 400, problem)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read(self, receive, send) -> bytes | None:
        """The whole body, or None once refused (or the client left)."""
        chunks, size = [], 0
        deadline = asyncio.get_running_loop().time() + self.timeout
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                await _refuse(send, 408, f"the request body did not arrive within {self.timeout:g} s")
                return None
            if message["type"] != "http.request":  # the client left before its body ended
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                await _refuse(send, 413, f"request body larger than {self.limit} bytes")
                return None
            if not message.get("more_body"):
                return b"".join(chunks)


async def _refuse(send, status: int, message: str) -> None:
    body = json.dumps({"error": message, "exit_code": 2}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class UploadSlots:
    """Uploads in progress, per token and server-wide. A token holds at most ``per_token``
    of them; all tokens together at most ``total``; and a token that already holds one
    takes another only while more than half of ``total`` stay free, the rest being kept
    for tokens with no upload in progress: two tokens' dry runs (two pull requests'
    tokens, held open as long as their pace allows) never hold every slot, and another
    pull request's dry run finds one. An import (admin: the default branch's sync) meets
    only its own token's cap: no other token's uploads can keep it out, and a sync uploads
    its files one at a time, so it always finds a slot. Beyond any cap: 429."""

    def __init__(self, total: int = DEFAULT_MAX_UPLOADS, per_token: int = DEFAULT_MAX_UPLOADS_PER_TOKEN):
        self.total, self.per_token = total, per_token
        self.kept = total // 2  # slots a token already uploading may not take
        self.held: Counter[str] = Counter()

    @contextmanager
    def hold(self, token_name: str, importing: bool):
        """One upload's slot for ``token_name`` (``importing``: an admin's import), or
        EdgeRefusal 429. Taken and given back on the event loop: no lock needed."""
        mine, in_progress = self.held[token_name], sum(self.held.values())
        if mine >= self.per_token:
            _busy(f"this token has {self.per_token} uploads in progress (the service's --max-uploads-per-token)")
        if not importing and in_progress >= self.total:
            _busy(f"{self.total} uploads are in progress (the service's --max-uploads)")
        if not importing and mine and in_progress >= self.total - self.kept:
            _busy(
                f"this token has an upload in progress, and the last {self.kept} of the service's "
                f"--max-uploads ({self.total}) are kept for tokens with no upload in progress"
            )
        self.held[token_name] += 1
        try:
            yield
        finally:
            self.held[token_name] -= 1
            if self.held[token_name] <= 0:
                del self.held[token_name]


def _busy(message: str):
    raise EdgeRefusal(429, f"{message}: retry later", {"Retry-After": str(RETRY_AFTER_SECONDS)})


async def spool_upload(
    chunks,
    limit: int,
    idle: float = BODY_TIMEOUT_SECONDS,
    min_rate: float | None = None,
    deadline: float | None = None,
) -> SpooledTemporaryFile:
    """An upload's body (an async iterator of byte chunks) in a spooled temporary file,
    rewound; TooLarge past ``limit`` bytes, TooSlow when no byte arrives for ``idle``
    seconds or, after the first ``idle`` seconds, when the body has come at fewer than
    ``min_rate`` bytes per second on average since it began (``UploadPace``: a byte now
    and then must not hold a slot and a handler for ever), or when it has not ended
    ``deadline`` seconds after it began (a dry run's: ``PROMPTGATE_DRY_RUN_SECONDS``),
    UsageError when the client leaves. At most ``SPOOL_IN_MEMORY`` bytes are held in
    memory: the rest goes to disk, and the file is gone when closed."""
    spool, size, pending = SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY), 0, []
    try:
        async for chunk in UploadPace(idle, min_rate, deadline).paced(chunks):
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"the uploaded file is larger than {limit} bytes (the service's --max-upload-bytes)")
            pending.append(chunk)
            if sum(map(len, pending)) >= WRITE_BLOCK:  # written off the event loop: it may go to disk
                await run_in_threadpool(spool.write, b"".join(pending))
                pending.clear()
        await run_in_threadpool(spool.write, b"".join(pending))
        spool.seek(0)
        return spool
    except BaseException:
        spool.close()
        raise


class UploadPace:
    """The pace an upload's body must keep: a byte at least every ``idle`` seconds, and,
    ``idle`` seconds after it began, ``min_rate`` bytes per second on average since then:
    by time ``t`` at least ``min_rate * (t - idle)`` bytes. So a body of ``n`` bytes has
    at most ``idle + n / min_rate`` seconds in all, however its bytes are spaced; with a
    ``deadline`` (a dry run's), at most that many seconds whatever its size."""

    def __init__(self, idle: float, min_rate: float | None, deadline: float | None = None):
        self.idle, self.min_rate, self.deadline, self.received = idle, min_rate, deadline, 0
        self.started = asyncio.get_running_loop().time()

    def _wait(self) -> tuple[float, str]:
        """How long the next chunk may take, and what ends it then: "idle", "rate" or
        "deadline"."""
        wait, why = self.idle, "idle"
        now = asyncio.get_running_loop().time()
        if self.min_rate:
            left = self.started + self.idle + self.received / self.min_rate - now
            if left < wait:
                wait, why = left, "rate"
        if self.deadline is not None and self.started + self.deadline - now < wait:
            wait, why = self.started + self.deadline - now, "deadline"
        return wait, why

    async def paced(self, chunks):
        """``chunks`` while they keep the pace."""
        from starlette.requests import ClientDisconnect

        stream = chunks.__aiter__()
        while True:
            wait, why = self._wait()
            try:
                async with asyncio.timeout(max(0.0, wait)):
                    chunk = await stream.__anext__()
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise TooSlow(self._too_slow(why)) from None
            except ClientDisconnect:
                raise UsageError("the client left before its upload ended: nothing was stored") from None
            self.received += len(chunk)
            yield chunk

    def _too_slow(self, why: str) -> str:
        if why == "idle":
            return f"the upload stopped: no byte for {self.idle:g} s (the service's --body-timeout)"
        took = asyncio.get_running_loop().time() - self.started
        if why == "deadline":
            return (
                f"the dry run's upload did not end within {self.deadline:g} s ({self.received} bytes came): "
                "a pull request's copy of a file is compared only if it comes within the service's "
                "PROMPTGATE_DRY_RUN_SECONDS"
            )
        return (
            f"the upload is too slow: {self.received} bytes in {took:.0f} s, under {self.min_rate:g} bytes per "
            f"second after the first {self.idle:g} s (the service's PROMPTGATE_UPLOAD_MIN_RATE, --body-timeout)"
        )
