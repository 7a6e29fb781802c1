"""Bounds on request bodies, before any handler (or authentication) reads one: a prompt
file is small, and a body's size is the one cost a caller controls before the token is
checked. A pure ASGI middleware: it reads the body up to the limit (a chunked body, which
has no Content-Length, is counted too), answers 413 past it, 408 when the whole body has
not arrived within ``timeout`` seconds (a client that stalls mid-body holds no handler),
and hands the app the body it read.

A JSON body (``application/json``, ``…+json``, or a body with no content type, which
FastAPI reads as JSON) meets the limits of a YAML prompt file (``gate.yamlfile``): nested
at most ``MAX_DEPTH`` deep, no duplicate key (JSON's own rule is "last one wins", so two
readers could disagree on what was sent). One loader, ``strict_json``, for every body:
the middleware refuses a body it finds over those limits with 400 and one line; a body
that is not JSON at all is left to the route, which says so in its own words.

A number longer than ``MAX_NUMBER_DIGITS`` characters is over those limits too (Python
refuses an integer past 4,300 digits, in words of its own that hint at its internals).

The one exception is a dataset upload (``PUT /v1/datasets/{name}/rows``): its body is a
file, up to its own cap (``serve --max-upload-bytes``). It is not read here: a declared
length over that cap is refused at once, and the route, once the token has been checked,
streams the body to a spooled file, counting it against the cap (``spool_upload``)."""

from __future__ import annotations

import asyncio
import json
import re
from tempfile import SpooledTemporaryFile
from typing import Any

from starlette.concurrency import run_in_threadpool

from ..errors import TooLarge, TooSlow, UsageError
from ..yamlfile import MAX_DEPTH

MAX_BODY_BYTES = 1024 * 1024
BODY_TIMEOUT_SECONDS = 30.0
MAX_UPLOAD_BYTES = 256 * 1024 * 1024
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


async def spool_upload(chunks, limit: int, idle: float = BODY_TIMEOUT_SECONDS) -> SpooledTemporaryFile:
    """An upload's body (an async iterator of byte chunks) in a spooled temporary file,
    rewound; TooLarge past ``limit`` bytes, TooSlow when no byte arrives for ``idle``
    seconds (a large file may take long, a stalled one may not hold a handler and a spool),
    UsageError when the client leaves. At most ``SPOOL_IN_MEMORY`` bytes are held in
    memory: the rest goes to disk, and the file is gone when closed."""
    spool, size, pending = SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY), 0, []
    try:
        async for chunk in _paced(chunks, idle):
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


async def _paced(chunks, idle: float):
    """``chunks`` while each arrives within ``idle`` seconds of the one before."""
    from starlette.requests import ClientDisconnect

    stream = chunks.__aiter__()
    while True:
        try:
            async with asyncio.timeout(idle):
                chunk = await stream.__anext__()
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise TooSlow(f"the upload stopped: no byte for {idle:g} s (the service's --body-timeout)") from None
        except ClientDisconnect:
            raise UsageError("the client left before its upload ended: nothing was stored") from None
        yield chunk
