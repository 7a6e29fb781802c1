"""CSV and JSONL objects in S3 or any S3-compatible store (MinIO, Ceph, R2...).

URI form::

    s3://my-bucket/datasets/support-v3.csv
    s3://my-bucket/datasets/support-v3.jsonl

Needs the optional extra: ``pip install 'prompt-gate[s3]'`` (boto3).

Credentials and region come from boto3's usual chain (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` / ``AWS_PROFILE`` / an instance role...), never from the URI or
the database. ``PROMPTGATE_S3_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL``) points the reader
at another S3-compatible server, e.g. ``http://minio:9000``; with an endpoint set,
path-style addressing is used unless ``PROMPTGATE_S3_ADDRESSING_STYLE`` says otherwise.
``PROMPTGATE_SOURCE_TIMEOUT`` bounds connecting and each read (default 30 s). Read by the
service for a caller, an endpoint must be one its source policy allows (``egress.py``);
AWS's own endpoints are public addresses.

The cursor is ``<byte offset>:<line number>`` (as for files); a page after a cursor that
the open stream is not at is a ranged GetObject from the offset with ``If-Match`` on the
pinned ETag, so an object replaced mid-read is an error, not a silent mix of versions.
``snapshot_version()`` is ``etag:<ETag>``.
"""

from __future__ import annotations

import os
import urllib.parse

from gate.errors import DatasetError

from .base import SourceOptions, register
from .files import text_kind
from .http import Body, StreamedTextReader, source_timeout

_CLIENTS: dict[tuple, object] = {}
_CREDENTIAL_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
)


def _client(timeout: float):
    try:
        import boto3
        from botocore.config import Config
    except ModuleNotFoundError:
        raise DatasetError("s3:// sources need boto3: install the extra with pip install 'prompt-gate[s3]'") from None
    endpoint = os.environ.get("PROMPTGATE_S3_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL") or None
    style = os.environ.get("PROMPTGATE_S3_ADDRESSING_STYLE") or ("path" if endpoint else "auto")
    # one client per configuration (clients are thread-safe and costly to build); a change
    # of credentials in the environment gets a new one
    key = (endpoint, style, timeout) + tuple(os.environ.get(name) for name in _CREDENTIAL_ENV)
    client = _CLIENTS.get(key)
    if client is None:
        config = Config(
            connect_timeout=timeout,
            read_timeout=timeout,
            retries={"max_attempts": 3, "mode": "standard"},
            s3={"addressing_style": style},
        )
        client = boto3.session.Session().client("s3", endpoint_url=endpoint, config=config)
        if len(_CLIENTS) > 16:
            _CLIENTS.clear()
        _CLIENTS[key] = client
    return client, endpoint


@register("s3")
class S3Reader(StreamedTextReader):
    def __init__(self, uri: str, options: SourceOptions):
        parts = urllib.parse.urlsplit(uri)
        self.bucket = parts.netloc
        self.key = urllib.parse.unquote(parts.path.lstrip("/"))
        if not self.bucket or not self.key:
            raise DatasetError(f"{uri}: an S3 source is s3://<bucket>/<key>")
        super().__init__(uri, options, text_kind(self.key, uri, options.extra.get("format")))
        self.timeout = source_timeout(options)
        self.client, self.endpoint = _client(self.timeout)
        if options.egress is not None and self.endpoint:  # the operator's endpoint, checked like any host
            endpoint = urllib.parse.urlsplit(self.endpoint)
            options.egress.pin(
                endpoint.hostname,
                endpoint.port or (443 if endpoint.scheme == "https" else 80),
                f"{uri} (endpoint {self.endpoint})",
            )
        self.etag: str | None = None
        self._version: str | None = None
        pinned = str(options.extra.get("pinned_version") or "")
        if pinned.startswith("etag:"):
            self.etag = pinned[len("etag:") :]

    def snapshot_version(self) -> str:
        """The object's ETag now; a pinned ETag it no longer has is an error."""
        if self._version is None:
            try:
                head = self.client.head_object(Bucket=self.bucket, Key=self.key)
            except Exception as exc:  # noqa: BLE001 - mapped to a message below
                raise DatasetError(self._message(exc)) from None
            etag = head.get("ETag") or ""
            if self.etag and etag != self.etag:
                raise DatasetError(self._changed())
            self.etag = etag
            self._version = f"etag:{etag}"
        return self._version

    def _fetch(self, offset: int) -> Body:
        args = {"Bucket": self.bucket, "Key": self.key}
        if offset > 0:
            args["Range"] = f"bytes={offset}-"
        if self.etag:
            args["IfMatch"] = self.etag
        try:
            response = self.client.get_object(**args)
        except Exception as exc:  # noqa: BLE001 - mapped to a message below
            raise DatasetError(self._message(exc)) from None
        etag = response.get("ETag")
        if self.etag is None:
            self.etag = etag
        elif etag and etag != self.etag:  # a store that ignores If-Match
            response["Body"].close()
            raise DatasetError(self._changed())
        start = offset
        content_range = response.get("ContentRange") or ""
        if offset > 0 and not content_range.startswith(f"bytes {offset}-"):
            start = 0  # a store that ignored Range: skip to the offset
        body = response["Body"]
        return Body(body.read, body.close, start, response.get("ContentLength"))

    def _changed(self) -> str:
        return (
            f"{self.uri}: the object changed while it was being read (ETag was {self.etag}); "
            f"start a new run to read the new version"
        )

    def _message(self, exc: Exception) -> str:
        where = f"{self.uri}" + (f" (endpoint {self.endpoint})" if self.endpoint else "")
        name = type(exc).__name__
        response = getattr(exc, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code", ""))
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "412") or status == 412:
                return self._changed()
            if code in ("InvalidRange", "416") or status == 416:
                return f"{where}: the object is shorter than the position already read: it changed; start a new run"
            if code == "NoSuchBucket":
                return f"{where}: no such bucket {self.bucket!r}"
            if code in ("NoSuchKey", "404", "NotFound") or status == 404:
                return f"{where}: no such object (bucket {self.bucket!r}, key {self.key!r})"
            if code in (
                "AccessDenied",
                "403",
                "Forbidden",
                "InvalidAccessKeyId",
                "SignatureDoesNotMatch",
            ) or status in (401, 403):
                return (
                    f"{where}: access denied ({code}): check the AWS credentials in the environment "
                    f"(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_PROFILE)"
                )
            if self.options.egress is not None:  # for a caller: the code, not the store's text
                return f"{where}: S3 error {code or status}"
            return f"{where}: S3 error {code or status}: {response.get('Error', {}).get('Message', exc)}"
        if name == "NoCredentialsError":
            return (
                f"{where}: no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                f"(or AWS_PROFILE) in the environment"
            )
        if self.options.egress is not None:
            return f"{where}: cannot read the object ({name})"
        if name in ("EndpointConnectionError", "ConnectionClosedError"):
            return f"{where}: cannot connect: {exc}"
        if name in ("ConnectTimeoutError", "ReadTimeoutError") or isinstance(exc, TimeoutError):
            return f"{where}: timed out after {self.timeout:g}s: {exc}"
        return f"{where}: cannot read the object: {exc}"
