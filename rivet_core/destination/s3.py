"""S3 (and S3-compatible) destination over boto3 (M7 atomic objects, I2 durable writes).

Writes:
* below `multipart_threshold`: ONE `PutObject` with `Content-MD5` (the server rejects a
  body that changed in transit) and a check that the returned ETag equals our MD5;
* at or above it: an explicit multipart upload that reads the file sequentially, at most
  `MULTIPART_CONCURRENCY` chunks of `multipart_chunksize` uploading at once, each sent with its own
  `Content-MD5` and ETag check, and the final `<md5-of-md5s>-N` ETag checked too. Any
  failure aborts the upload, so no partial object ever appears under the key. Each part's
  body is a range of the file (rivet_core/destination/s3_multipart.py), not a copy in memory;
* early (`begin_early_upload`): the same multipart upload started while the writer is still
  appending to the part, completed only when `write_file` is called for it (the per-part
  commit facade) and aborted by `cancel_early_uploads` when the run ends without publishing.
The whole file's xxh3 is computed in the same single pass as the parts' MD5s and checked
against the writer's fingerprint (the staged part's MD5 is then the writer's; a file without
one gets its MD5 in that pass too).

Client: credentials in the order explicit access/secret (+ session token) → `aws_profile`
→ boto3 default chain; `endpoint` → `endpoint_url` with path-style addressing (SeaweedFS,
MinIO) and region `us-east-1` unless given; retries in boto3 "standard" mode. The newer
boto3 default of sending flexible (CRC) checksums is turned down to "when_required",
since many S3-compatible servers reject them and we already send Content-MD5.

Bodies (`PutObject`, `UploadPart`) always carry that Content-MD5, and it is one of the
signed headers, so a body changed in transit fails the server's MD5 check whether or not the
body's SHA-256 is signed too. botocore signs it anyway on a plain-`http://` endpoint
(SeaweedFS, MinIO on a private network); hashing 300 MB costs the client 0.25 CPU-s
(docs/benchmarks.md "S3: bodies are not hashed twice"). Those two calls therefore go through a
second client of the same session with `payload_signing_enabled: False` (`_body_client`);
every other call, whose body carries no MD5, keeps the signed payload. Against `https://` the
two are one client: botocore already skips the SHA-256 there for a body with a checksum.

Errors become `DestinationError` naming the bucket/key and the fix, with `.transient`
set for connection failures, 5xx and throttling. Secrets are registered with
`redact_secrets` on open and never appear in messages.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
import re
import threading
from pathlib import Path
from typing import Any

from rivet_core.destination.base import (
    Destination,
    DestinationSpec,
    ObjectInfo,
    WriteResult,
    check_read_within_cap,
    head_within_cap,
    move_by_copy,
    open_staged,
)
from rivet_core.destination.checksums import (
    Fingerprint,
    Fingerprinter,
    check_staged,
    md5_hex_to_b64,
)
from rivet_core.destination.errors import destination_error
from rivet_core.destination.keys import check_key, check_list_prefix, normalize_prefix
from rivet_core.destination.s3_multipart import MAX_PARTS, ChunkedUpload, EarlyUpload
from rivet_core.errors import DestinationError
from rivet_core.redact import register_secret

MIN_PART_SIZE = 5 * 1024 * 1024  # S3 minimum for every part but the last
#: Parts of one multipart upload sent at the same time. One request at a time left the
#: upload waiting on each round trip (the client hashes the next chunk meanwhile, the server
#: stores the last); three keep both busy. Memory: a part's body is a range of the staged
#: file, read as it is sent, so parts in flight hold socket buffers, not 16 MiB chunks.
MULTIPART_CONCURRENCY = 3
MAX_COPY_OBJECT = 5 * 1024**3  # CopyObject limit; larger objects use a multipart copy

_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_MULTIPART_ETAG = re.compile(r"^([0-9a-f]{32})-(\d+)$")

_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}
_CREDENTIAL_CODES = {
    "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken",
    "ExpiredToken", "TokenRefreshRequired", "InvalidClientTokenId",
    "AuthorizationHeaderMalformed", "InvalidSecurity", "403", "Forbidden",
}
_TRANSIENT_CODES = {
    "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "Throttling",
    "ThrottlingException", "RequestLimitExceeded", "RequestThrottled", "BadDigest",
    "IncompleteBody", "500", "502", "503", "504",
}


def _etag(value: Any) -> str:
    return str(value or "").strip().strip('"').lower()


def _make_clients(spec: DestinationSpec) -> tuple[Any, Any]:
    """Build the boto3 S3 client following the credential order of docs/config-reference.md
    `exports[].destination`, and the client for Content-MD5 bodies (the module docstring):
    a second client of the same session on a plain-`http://` endpoint, else the same one."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ProfileNotFound

    if spec.endpoint:
        # Custom endpoints (SeaweedFS, MinIO) never get credentials from EC2 instance
        # metadata; probing it only adds a multi-second timeout to every failure path.
        os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    region = spec.region or ("us-east-1" if spec.endpoint else None)
    try:
        if spec.access_key or spec.secret_key:
            if not (spec.access_key and spec.secret_key):
                raise destination_error(
                    "S3 destination has only one of access key / secret key — set both "
                    "destination.access_key_env and destination.secret_key_env, or neither"
                )
            session = boto3.session.Session(
                aws_access_key_id=spec.access_key, aws_secret_access_key=spec.secret_key,
                aws_session_token=spec.session_token or None, region_name=region,
            )
        elif spec.aws_profile:
            session = boto3.session.Session(profile_name=spec.aws_profile, region_name=region)
        else:
            session = boto3.session.Session(region_name=region)

        def client(**s3_options: Any) -> Any:
            if spec.endpoint:
                s3_options["addressing_style"] = "path"
            config = Config(
                # botocore: "max_attempts" counts retries, "total_max_attempts" every attempt.
                retries=({"mode": "standard", "total_max_attempts": spec.max_attempts} if spec.max_attempts
                         else {"mode": "standard", "max_attempts": 5}),
                connect_timeout=spec.timeout_s or 10,
                read_timeout=spec.timeout_s or 120,
                signature_version="s3v4",
                s3=s3_options or None,
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            )
            return session.client("s3", endpoint_url=spec.endpoint or None, config=config)

        main = client()
        plain_http = (spec.endpoint or "").lower().startswith("http://")
        return main, (client(payload_signing_enabled=False) if plain_http else main)
    except ProfileNotFound as exc:
        raise destination_error(
            f"AWS profile '{spec.aws_profile}' not found — fix destination.aws_profile or add it "
            f"to ~/.aws/config"
        ) from exc
    except (BotoCoreError, ValueError) as exc:
        raise destination_error(f"cannot create the S3 client for bucket '{spec.bucket}': {exc}") from exc


class S3Destination(Destination):
    """Objects live at `s3://<bucket>/<prefix><key>`."""

    kind = "s3"
    supports_manifest = True
    supports_early_upload = True

    def __init__(self, spec: DestinationSpec, client: Any | None = None) -> None:
        if not spec.bucket:
            raise destination_error("S3 destination requires 'bucket' — set destination.bucket")
        if "/" in spec.bucket or not spec.bucket.strip():
            raise destination_error(
                f"S3 bucket name {spec.bucket!r} is invalid — put sub-paths in destination.prefix"
            )
        register_secret(spec.secret_key)
        register_secret(spec.session_token)
        self.bucket = spec.bucket
        self.prefix = normalize_prefix(spec.prefix)
        self.endpoint = spec.endpoint
        #: The resolved settings, for a client that reaches the same prefix its own way
        #: (delta-rs for `table_format: delta`, rivet_core/tableformat/location.py).
        self.spec = spec
        self.uri = f"s3://{self.bucket}/{self.prefix}"
        self.multipart_threshold = max(1, int(spec.multipart_threshold))
        self.multipart_chunksize = max(MIN_PART_SIZE, int(spec.multipart_chunksize))
        if client is not None:  # the caller's client serves every call
            self._client = self._body_client = client
        else:
            self._client, self._body_client = _make_clients(spec)
        self._bucket_verified = False
        self._early: dict[str, EarlyUpload] = {}
        self._early_lock = threading.Lock()

    # -- error mapping ---------------------------------------------------------------
    def _where(self, key: str | None) -> str:
        return f"s3://{self.bucket}/{self.prefix}{key if key is not None else ''}"

    def _error(self, exc: Exception, action: str, key: str | None) -> DestinationError:
        """Translate a boto3/botocore exception into a DestinationError with a fix."""
        from botocore.exceptions import (
            ClientError,
            ConnectionClosedError,
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            PartialCredentialsError,
            ReadTimeoutError,
        )
        from botocore.exceptions import ConnectionError as BotoConnectionError

        where = self._where(key)
        if isinstance(exc, ClientError):
            err = exc.response.get("Error", {}) or {}
            code = str(err.get("Code") or "")
            status = int((exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
            detail = str(err.get("Message") or code or exc)
            if code == "NoSuchBucket":
                return destination_error(
                    f"bucket '{self.bucket}' does not exist — create it or fix destination.bucket",
                    code="RIVET_DEST_NO_BUCKET",
                )
            if code in _CREDENTIAL_CODES or status == 403:
                return destination_error(
                    f"{action} {where} was refused ({code or status}: {detail}) — check the S3 "
                    f"credentials: destination.access_key_env / destination.secret_key_env (and "
                    f"session_token_env) must name environment variables holding a valid key pair "
                    f"for this endpoint (or fix aws_profile), and the key needs read, write and "
                    f"list permission on bucket '{self.bucket}'",
                    code="RIVET_DEST_CREDENTIALS",
                )
            if code == "BadDigest":
                return destination_error(
                    f"'{key}' corrupted in transit (server rejected Content-MD5) while trying to "
                    f"{action} {where}", transient=True,
                )
            transient = status >= 500 or code in _TRANSIENT_CODES
            hint = (" — the S3 service is failing or overloaded; retry the run later (raise "
                    "destination.max_attempts to retry more within one run)") if transient else ""
            return destination_error(f"{action} {where} failed: {code or status}: {detail}{hint}",
                                     transient=transient)
        if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
            return destination_error(
                f"no S3 credentials found to {action} {where} — set destination.access_key_env and "
                f"destination.secret_key_env, or aws_profile, or configure the default AWS chain",
                code="RIVET_DEST_CREDENTIALS",
            )
        if isinstance(exc, (EndpointConnectionError, ConnectionClosedError, ReadTimeoutError,
                            ConnectTimeoutError, BotoConnectionError)):
            return destination_error(
                f"cannot reach the S3 endpoint {self.endpoint or '(AWS)'} to {action} {where}: {exc} "
                f"— check that the endpoint is up and reachable (raise destination.timeout_s or "
                f"destination.max_attempts for a slow one), then retry the run",
                transient=True,
            )
        return destination_error(f"{action} {where} failed: {type(exc).__name__}: {exc}")

    def _call(self, action: str, key: str | None, method: str, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        # A body sent with its Content-MD5 goes through the client that does not also sign
        # its SHA-256 (the module docstring).
        client = self._body_client if "ContentMD5" in kwargs and "Body" in kwargs else self._client
        try:
            return getattr(client, method)(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, action, key) from exc

    # -- writes ----------------------------------------------------------------------
    def _put(self, data: bytes, key: str, fp: Fingerprinter, staged: Fingerprint | None = None) -> WriteResult:
        check_staged(fp.result(), staged, f"for '{key}'")  # before anything is visible
        md5_b64 = fp.md5_b64
        resp = self._call(
            "write", key, "put_object", Bucket=self.bucket, Key=self.prefix + key, Body=data,
            ContentMD5=md5_b64, ContentLength=len(data),
        )
        etag = _etag(resp.get("ETag"))
        if _HEX32.match(etag) and etag != fp.md5_hex:
            raise destination_error(
                f"part '{key}' corrupted in transit (md5 {fp.md5_hex}≠{etag})", transient=True
            )
        return WriteResult(key=key, size=fp.size, md5_b64=md5_b64, xxh3=fp.xxh3)

    def _upload_part(self, key: str, full_key: str, upload_id: str, number: int, body: Any,
                     digest: bytes) -> dict[str, Any]:
        """One part of a multipart upload (`body`: bytes or a `FileRange`), sent with its
        Content-MD5 and its ETag checked."""
        resp = self._call(
            f"upload part {number} of", key, "upload_part", Bucket=self.bucket, Key=full_key,
            UploadId=upload_id, PartNumber=number, Body=body,
            ContentMD5=base64.b64encode(digest).decode("ascii"), ContentLength=len(body),
        )
        etag = _etag(resp.get("ETag"))
        if _HEX32.match(etag) and etag != digest.hex():
            raise destination_error(
                f"part '{key}' corrupted in transit (md5 {digest.hex()}≠{etag}, upload part {number})",
                transient=True,
            )
        return {"ETag": resp.get("ETag"), "PartNumber": number}

    def _check_multipart_etag(self, key: str, resp: dict[str, Any], part_md5s: list[bytes]) -> None:
        """The completed object's `<md5-of-md5s>-N` ETag must match the parts we sent."""
        final = _MULTIPART_ETAG.match(_etag(resp.get("ETag")))
        expected = hashlib.md5(b"".join(part_md5s), usedforsecurity=False).hexdigest()
        if final and (final.group(1) != expected or int(final.group(2)) != len(part_md5s)):
            raise destination_error(
                f"part '{key}' corrupted in transit (md5 {expected}-{len(part_md5s)}≠{_etag(resp.get('ETag'))})",
                transient=True,
            )

    def _multipart(self, fh: Any, key: str, size: int, staged: Fingerprint | None = None) -> WriteResult:
        """Upload the finished file `fh` as a multipart upload, `MULTIPART_CONCURRENCY` parts in
        flight, each part's body a range of the file (s3_multipart.py: no chunk is held in memory)."""
        chunksize = max(self.multipart_chunksize, math.ceil(size / MAX_PARTS))
        upload = ChunkedUpload(self, key, fh.fileno(), chunksize, MULTIPART_CONCURRENCY)
        try:
            if staged is None:
                upload.whole_md5()
            measured = upload.finish(size)
            if os.fstat(fh.fileno()).st_size != size:
                raise destination_error(f"'{key}': the staged file changed size while uploading")
            return upload.complete(measured, staged)
        except BaseException:
            upload.abort()
            raise

    # -- early uploads (while the part is being written) ----------------------------------
    def begin_early_upload(self, key: str, path: Path) -> EarlyUpload:
        """Start uploading `path` to `key` while its writer appends to it; `write_file(path, key)`
        completes it later (s3_multipart.py). Replaces (aborts) an earlier one for the key."""
        check_key(key)
        early = EarlyUpload(self, key, path, MULTIPART_CONCURRENCY)
        with self._early_lock:
            previous, self._early[key] = self._early.get(key), early
        if previous is not None:
            previous.abort()
        return early

    def cancel_early_uploads(self) -> None:
        """Abort every early upload not completed by `write_file` (the run ended without
        publishing them): nothing appears under their keys."""
        with self._early_lock:
            pending, self._early = list(self._early.values()), {}
        for early in pending:
            early.abort()

    def write_file(self, local_path: Path, key: str, staged: Fingerprint | None = None) -> WriteResult:
        check_key(key)
        with self._early_lock:
            early = self._early.pop(key, None)
        if early is not None and not early.cancelled:  # an aborted one (a failed attempt) is void
            result = early.complete(staged)
            if result is not None:
                return result  # below the multipart threshold: nothing was sent, PUT it below
        fh = open_staged(local_path, key)  # closed in finally
        try:
            size_hint = os.fstat(fh.fileno()).st_size
            if size_hint < self.multipart_threshold:
                data = fh.read(self.multipart_threshold)
                if not fh.read(1):  # the common case: the file fits in one PUT
                    fp = Fingerprinter()
                    fp.update(data)
                    return self._put(data, key, fp, staged)
                fh.seek(0)  # the file grew after stat; stream it instead
                del data
                size_hint = os.fstat(fh.fileno()).st_size
            return self._multipart(fh, key, size_hint, staged)
        except OSError as exc:
            raise destination_error(f"reading staged file '{local_path}' for '{key}' failed: {exc}") from exc
        finally:
            fh.close()

    def write_bytes(self, data: bytes, key: str) -> WriteResult:
        check_key(key)
        fp = Fingerprinter()
        fp.update(data)
        return self._put(bytes(data), key, fp)

    # -- reads -----------------------------------------------------------------------
    def _check_bucket(self) -> None:
        """A HEAD 404 cannot say whether the key or the bucket is missing; ask once."""
        if self._bucket_verified:
            return
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            code = str((exc.response.get("Error") or {}).get("Code") or "")
            if code in _NOT_FOUND or code == "NoSuchBucket":
                raise destination_error(
                    f"bucket '{self.bucket}' does not exist — create it or fix destination.bucket",
                    code="RIVET_DEST_NO_BUCKET",
                ) from exc
            raise self._error(exc, "check", None) from exc
        except BotoCoreError as exc:
            raise self._error(exc, "check", None) from exc
        self._bucket_verified = True

    def head(self, key: str) -> ObjectInfo | None:
        from botocore.exceptions import BotoCoreError, ClientError

        check_key(key)
        try:
            resp = self._client.head_object(Bucket=self.bucket, Key=self.prefix + key)
        except ClientError as exc:
            code = str((exc.response.get("Error") or {}).get("Code") or "")
            if code in _NOT_FOUND:
                self._check_bucket()
                return None
            raise self._error(exc, "read", key) from exc
        except BotoCoreError as exc:
            raise self._error(exc, "read", key) from exc
        self._bucket_verified = True
        return ObjectInfo(key=key, size=int(resp.get("ContentLength", 0)),
                          md5_b64=md5_hex_to_b64(_etag(resp.get("ETag"))))

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        from botocore.exceptions import BotoCoreError, ClientError

        check_list_prefix(prefix)
        out: list[ObjectInfo] = []
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix + prefix
            )
            for page in pages:
                for obj in page.get("Contents", []) or []:
                    full = str(obj.get("Key", ""))
                    if not full.startswith(self.prefix):
                        continue
                    rel = full[len(self.prefix):]
                    if rel:
                        out.append(ObjectInfo(key=rel, size=int(obj.get("Size", 0)),
                                              md5_b64=md5_hex_to_b64(_etag(obj.get("ETag")))))
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, "list", prefix) from exc
        out.sort(key=lambda o: o.key)
        return out

    def read_bytes(self, key: str, max_bytes: int | None = None) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        head_within_cap(self, key, max_bytes, self._where)
        resp = self._call("read", key, "get_object", Bucket=self.bucket, Key=self.prefix + key)
        try:
            body = resp["Body"]
            data = body.read() if max_bytes is None else body.read(max_bytes + 1)
            body.close()
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, "read", key) from exc
        check_read_within_cap(data, key, max_bytes, self._where)
        return data

    # -- move / delete ---------------------------------------------------------------
    def move(self, src_key: str, dst_key: str) -> None:
        """Copy `src_key` to `dst_key` (CopyObject, or a multipart copy above 5 GiB), confirm
        the copy's size, then delete `src_key` only (`base.move_by_copy`)."""
        from boto3.s3.transfer import TransferConfig
        from botocore.exceptions import BotoCoreError, ClientError

        def copy(src: ObjectInfo) -> None:
            source = {"Bucket": self.bucket, "Key": self.prefix + src_key}
            if src.size <= MAX_COPY_OBJECT:
                self._call("copy", src_key, "copy_object", Bucket=self.bucket,
                           Key=self.prefix + dst_key, CopySource=source)
                return
            try:
                self._client.copy(source, self.bucket, self.prefix + dst_key,
                                  Config=TransferConfig(multipart_chunksize=self.multipart_chunksize))
            except (ClientError, BotoCoreError) as exc:
                raise self._error(exc, "copy", src_key) from exc

        move_by_copy(self, src_key, dst_key, copy, md5="never", where=self._where)

    def delete(self, key: str) -> None:
        """Delete one object (see `Destination.delete`); S3 answers a missing key with success."""
        check_key(key)
        self._call("delete", key, "delete_object", Bucket=self.bucket, Key=self.prefix + key)
