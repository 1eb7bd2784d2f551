"""A blob store in an S3 bucket (AWS or any S3-compatible server: MinIO, Ceph, moto, ...).

Keys live under ``s3://bucket/prefix/``. Credentials and region are boto3's own (the standard
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_DEFAULT_REGION`` variables, a profile,
an instance role). A server that cannot be reached, times out or answers 5xx raises
:class:`BlobUnavailable` (transient: the API answers 503, a worker retries the job); a missing
object raises :class:`BlobNotFound`. An S3 PUT is atomic, so a reader never sees half an object.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import boto3
import botocore.exceptions
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from service.blobs.base import BlobInfo, BlobNotFound, BlobStore, BlobUnavailable, check_key

__all__ = ["S3BlobStore", "parse_s3_url"]

T = TypeVar("T")

#: Errors of the connection itself: the endpoint is down, slow or cut the connection.
_TRANSIENT = (
    botocore.exceptions.EndpointConnectionError,
    botocore.exceptions.ConnectionError,
    botocore.exceptions.ConnectTimeoutError,
    botocore.exceptions.ReadTimeoutError,
    botocore.exceptions.ConnectionClosedError,
)
_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}
#: Large objects go up and down in parts of this size, several at once.
_TRANSFER = TransferConfig(multipart_threshold=64 << 20, multipart_chunksize=64 << 20)


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> ``("bucket", "some/prefix/")`` (prefix empty or ending
    in ``/``)."""
    if not url.startswith("s3://"):
        raise ValueError(f"not an s3:// URL: {url!r}")
    bucket, _, prefix = url[len("s3://") :].partition("/")
    if not bucket:
        raise ValueError(f"no bucket in {url!r}")
    prefix = prefix.strip("/")
    return bucket, (prefix + "/" if prefix else "")


class S3BlobStore(BlobStore):
    """Objects under ``prefix`` in ``bucket``; ``endpoint_url`` for an S3-compatible server."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        connect_timeout_s: float = 2.0,
        read_timeout_s: float = 60.0,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.endpoint_url = endpoint_url
        where = f" at {endpoint_url}" if endpoint_url else ""
        self.description = f"s3://{bucket}/{self.prefix}{where}"
        config = Config(
            connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s,
            # One quick retry of a dropped connection; an endpoint that is down answers with
            # BlobUnavailable within seconds, not after boto3's default backoff ladder.
            retries={"max_attempts": 2, "mode": "standard"},
            # Path-style URLs: what S3-compatible servers (MinIO, moto) expect.
            s3={"addressing_style": "path"} if endpoint_url else None,
        )
        self.client: Any = boto3.session.Session().client(
            "s3", endpoint_url=endpoint_url, config=config
        )

    @classmethod
    def from_url(cls, url: str, *, endpoint_url: str | None = None) -> S3BlobStore:
        bucket, prefix = parse_s3_url(url)
        return cls(bucket, prefix, endpoint_url=endpoint_url)

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    def _call(self, fn: Callable[[], T], key: str = "") -> T:
        try:
            return fn()
        except _TRANSIENT as exc:
            raise BlobUnavailable(f"{self.description} unreachable: {exc}") from exc
        except botocore.exceptions.ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            if code in _NOT_FOUND or status == 404:
                raise BlobNotFound(key) from exc
            if status >= 500 or code in {"SlowDown", "ServiceUnavailable", "InternalError"}:
                raise BlobUnavailable(f"{self.description}: {code} {exc}") from exc
            raise

    def put_file(self, key: str, path: Path, *, move: bool = False) -> None:
        name = self._key(key)
        self._call(lambda: self.client.upload_file(str(path), self.bucket, name, Config=_TRANSFER))
        if move:
            Path(path).unlink(missing_ok=True)

    def put_bytes(self, key: str, data: bytes) -> None:
        name = self._key(key)
        self._call(lambda: self.client.put_object(Bucket=self.bucket, Key=name, Body=data))

    def get_bytes(self, key: str) -> bytes:
        name = self._key(key)

        def read() -> bytes:
            body = self.client.get_object(Bucket=self.bucket, Key=name)["Body"]
            try:
                return bytes(body.read())
            finally:
                body.close()

        return self._call(read, key)

    def local_path(self, key: str, scratch: Path) -> Path:
        name = self._key(key)
        scratch = Path(scratch)
        scratch.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="blob-", suffix=".npy", dir=scratch)
        os.close(fd)
        try:
            self._call(
                lambda: self.client.download_file(self.bucket, name, tmp, Config=_TRANSFER), key
            )
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return Path(tmp)

    def exists(self, key: str) -> bool:
        name = self._key(key)
        try:
            self._call(lambda: self.client.head_object(Bucket=self.bucket, Key=name), key)
        except BlobNotFound:
            return False
        return True

    def delete(self, key: str) -> None:
        name = self._key(key)
        self._call(lambda: self.client.delete_object(Bucket=self.bucket, Key=name))

    def delete_prefix(self, prefix: str) -> int:
        removed = 0
        batch: list[str] = []

        def flush() -> None:
            nonlocal removed
            if not batch:
                return
            objects = [{"Key": self._key(k)} for k in batch]
            self._call(
                lambda: self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True}
                )
            )
            removed += len(batch)
            batch.clear()

        for info in self.list(prefix):
            batch.append(info.key)
            if len(batch) == 1000:  # the most one DeleteObjects request takes
                flush()
        flush()
        return removed

    def list(self, prefix: str = "") -> Iterator[BlobInfo]:
        full = self.prefix + prefix
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full, "MaxKeys": 1000}
            if token is not None:
                kwargs["ContinuationToken"] = token
            page = self._call(lambda kw=kwargs: self.client.list_objects_v2(**kw))  # type: ignore[misc]
            for obj in page.get("Contents", []):
                key = str(obj["Key"])[len(self.prefix) :]
                yield BlobInfo(key, int(obj["Size"]), obj["LastModified"].timestamp())
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")

    def ping(self) -> bool:
        try:
            self._call(lambda: self.client.head_bucket(Bucket=self.bucket))
        except BlobNotFound as exc:
            raise BlobUnavailable(f"bucket {self.bucket!r} does not exist") from exc
        except botocore.exceptions.ClientError as exc:
            raise BlobUnavailable(f"{self.description}: {exc}") from exc
        return True

    def create_bucket(self) -> None:
        """Create the bucket when missing (tests, first start of a local S3 server)."""
        try:
            self._call(lambda: self.client.head_bucket(Bucket=self.bucket))
        except BlobNotFound:
            self._call(lambda: self.client.create_bucket(Bucket=self.bucket))
