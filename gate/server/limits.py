"""A bound on request bodies, before any handler (or authentication) reads one: a prompt
file is small, and a body's size is the one cost a caller controls before the token is
checked. A pure ASGI middleware: it reads the body up to the limit (a chunked body, which
has no Content-Length, is counted too), answers 413 past it, and hands the app the body
it read.

The one exception is a dataset upload (``PUT /v1/datasets/{name}/rows``): its body is a
file, up to its own cap (``serve --max-upload-bytes``). It is not read here: a declared
length over that cap is refused at once, and the route, once the token has been checked,
streams the body to a spooled file, counting it against the cap (``spool_upload``)."""

from __future__ import annotations

import json
import re
from tempfile import SpooledTemporaryFile

from starlette.concurrency import run_in_threadpool

from ..errors import TooLarge

MAX_BODY_BYTES = 1024 * 1024
MAX_UPLOAD_BYTES = 256 * 1024 * 1024
SPOOL_IN_MEMORY = 4 * 1024 * 1024       # an upload's bytes held in memory before they go to a temporary file
WRITE_BLOCK = 1024 * 1024
UPLOAD_PATH = re.compile(r"/v1/datasets/[^/]+/rows")


class BodyLimit:
    def __init__(self, app, limit: int = MAX_BODY_BYTES, upload_limit: int = MAX_UPLOAD_BYTES):
        self.app, self.limit, self.upload_limit = app, limit, upload_limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if scope.get("method") == "PUT" and UPLOAD_PATH.fullmatch(scope.get("path", "")):
            if declared is not None and (not declared.isdigit() or int(declared) > self.upload_limit):
                return await self._refuse(send, self.upload_limit)
            return await self.app(scope, receive, send)      # streamed by the route (spool_upload)
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            return await self._refuse(send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":      # the client left before its body ended
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                return await self._refuse(send)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send, limit: int | None = None):
        body = json.dumps({"error": f"request body larger than {limit or self.limit} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


async def spool_upload(chunks, limit: int) -> SpooledTemporaryFile:
    """An upload's body (an async iterator of byte chunks) in a spooled temporary file,
    rewound; TooLarge past ``limit`` bytes. At most ``SPOOL_IN_MEMORY`` bytes are held in
    memory: the rest goes to disk, and the file is gone when closed."""
    spool, size, pending = SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY), 0, []
    try:
        async for chunk in chunks:
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"the uploaded file is larger than {limit} bytes (the service's --max-upload-bytes)")
            pending.append(chunk)
            if sum(map(len, pending)) >= WRITE_BLOCK:      # written off the event loop: it may go to disk
                await run_in_threadpool(spool.write, b"".join(pending))
                pending.clear()
        await run_in_threadpool(spool.write, b"".join(pending))
        spool.seek(0)
        return spool
    except BaseException:
        spool.close()
        raise
