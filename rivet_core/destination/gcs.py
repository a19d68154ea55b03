"""Google Cloud Storage destination over google-cloud-storage (M7 atomic objects, I2 durable writes).

Why the upload is atomic: a GCS object appears under its name only when its upload is
finalized — a one-request (multipart) upload or the last chunk of a resumable session —
so a reader never sees a partial part and no temporary name is needed. A failed or
abandoned resumable session leaves nothing visible (the service drops it after a week).

Writes (docs/adr/0008-gcs-and-azure-clients.md):
* below `multipart_threshold`: the bytes are read into memory, fingerprinted (xxh3 + MD5),
  compared with the writer's fingerprint (`check_staged`) BEFORE anything is sent, and sent
  with `md5Hash` in the object metadata: GCS refuses to finalize an object whose bytes do
  not match it;
* at or above it: a resumable upload in `multipart_chunksize` chunks (one chunk in memory
  at a time), fingerprinted while it streams; when the writer's fingerprint is known its
  MD5 goes into the metadata up front, so the service refuses to finalize other bytes.
Every write is then checked against what the service reports for the finished object:
its size and its MD5 (`md5Hash`; CRC32C when the object has no MD5). A mismatch is
"corrupted in transit" (transient: a re-run rewrites the part; the object is not recorded).

Client: `credentials_file` (service-account JSON) → anonymous when `allow_anonymous` or a
custom `endpoint` (an emulator) has no credentials_file → application default credentials
(`GOOGLE_APPLICATION_CREDENTIALS`, gcloud, the metadata server). `timeout_s` is the
connect/read timeout of each request, `max_attempts` bounds the retry budget.

Errors become `DestinationError` naming the bucket/key and the fix, `.transient` for
connection failures, 408/429/5xx. Nothing of a credentials file is ever quoted.
"""

from __future__ import annotations

import base64
import io
import os
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
    CHUNK_SIZE,
    Fingerprint,
    Fingerprinter,
    check_staged,
)
from rivet_core.destination.errors import destination_error
from rivet_core.destination.keys import check_key, check_list_prefix, normalize_prefix
from rivet_core.errors import DestinationError

#: Resumable chunks must be multiples of 256 KiB (the GCS upload protocol).
_CHUNK_QUANTUM = 256 * 1024
_SCOPES = ["https://www.googleapis.com/auth/devstorage.read_write"]
_TRANSIENT_STATUS = {408, 429, 500, 502, 503, 504}


def gcs_credentials(spec: DestinationSpec) -> tuple[Any, str | None]:
    """(credentials, project) in the order of the module docstring; the one resolution the
    destination's client and a table format's file IO (tableformat/gcs_store.py) share."""
    from google.auth.credentials import AnonymousCredentials

    if spec.credentials_file:
        from google.oauth2 import service_account

        path = os.path.expanduser(spec.credentials_file)
        try:
            creds = service_account.Credentials.from_service_account_file(path, scopes=_SCOPES)
        except FileNotFoundError as exc:
            raise destination_error(
                f"GCS credentials_file '{spec.credentials_file}' does not exist — fix "
                f"destination.credentials_file", code="RIVET_DEST_CREDENTIALS") from exc
        except (ValueError, KeyError, OSError) as exc:  # never quote the file: it holds a key
            raise destination_error(
                f"GCS credentials_file '{spec.credentials_file}' is not a usable service-account key "
                f"({type(exc).__name__}) — point destination.credentials_file at the JSON key "
                f"file of a service account with Storage Object Admin on bucket '{spec.bucket}'",
                code="RIVET_DEST_CREDENTIALS") from None
        return creds, creds.project_id
    if spec.allow_anonymous or spec.endpoint:
        return AnonymousCredentials(), None
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        return google.auth.default(scopes=_SCOPES)
    except DefaultCredentialsError:
        raise destination_error(
            f"no Google credentials found for GCS bucket '{spec.bucket}' — set "
            f"destination.credentials_file to a service-account key, or export "
            f"GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud auth application-default login`",
            code="RIVET_DEST_CREDENTIALS") from None


def make_gcs_client(spec: DestinationSpec) -> Any:
    """The `google.cloud.storage.Client` a GCS destination uses (credentials as above)."""
    from google.cloud import storage

    creds, project = gcs_credentials(spec)
    options = {"api_endpoint": spec.endpoint.rstrip("/")} if spec.endpoint else None
    return storage.Client(project=project or "rivet", credentials=creds, client_options=options)


class _HashingReader(io.RawIOBase):
    """A read-only view of the staged file that fingerprints each byte the first time the
    upload reads it. A resumable upload may seek back and resend a chunk after a failed
    request; bytes already hashed are not hashed twice. If the upload ever skipped ahead
    (it does not), `complete` is False and the caller re-reads the file instead.

    When the read reaches `size` — the upload is about to send its last chunk, the one that
    finalizes the object — the fingerprint is compared with the writer's (`check_staged`):
    the read raises instead of handing over the final bytes, so changed staged bytes are
    never finalized, even by a service that ignores the md5Hash sent up front."""

    def __init__(self, fh: Any, size: int, staged: Fingerprint | None, what: str) -> None:
        self._fh = fh
        self.fp = Fingerprinter()
        self._hashed = 0
        self._gap = False
        self._size, self._staged, self._what = size, staged, what

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return int(self._fh.tell())

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return int(self._fh.seek(offset, whence))

    def read(self, size: int | None = -1) -> bytes:
        start = self._fh.tell()
        data = self._fh.read(-1 if size is None else size)
        end = start + len(data)
        if start > self._hashed:
            self._gap = True
        elif end > self._hashed:
            self.fp.update(memoryview(data)[self._hashed - start:])
            self._hashed = end
            if end >= self._size and not self._gap:
                check_staged(self.fp.result(), self._staged, self._what)
        return bytes(data)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def complete(self, size: int) -> bool:
        return not self._gap and self._hashed == size


def _crc32c_b64(path: Path) -> str:
    import google_crc32c

    checksum = google_crc32c.Checksum()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_SIZE):
            checksum.update(chunk)
    return base64.b64encode(checksum.digest()).decode("ascii")


class GCSDestination(Destination):
    """Objects live at `gs://<bucket>/<prefix><key>`."""

    kind = "gcs"
    supports_manifest = True

    def __init__(self, spec: DestinationSpec, client: Any | None = None) -> None:
        if not spec.bucket or not spec.bucket.strip():
            raise destination_error("GCS destination requires 'bucket' — set destination.bucket")
        if "/" in spec.bucket:
            raise destination_error(
                f"GCS bucket name {spec.bucket!r} is invalid — put sub-paths in destination.prefix")
        self.spec = spec  # a table format's file IO reaches the same bucket (tableformat/gcs_store.py)
        self.bucket_name = spec.bucket
        self.prefix = normalize_prefix(spec.prefix)
        self.endpoint = spec.endpoint
        self.uri = f"gs://{self.bucket_name}/{self.prefix}"
        self.multipart_threshold = max(1, int(spec.multipart_threshold))
        chunk = max(_CHUNK_QUANTUM, int(spec.multipart_chunksize))
        self.chunksize = chunk - chunk % _CHUNK_QUANTUM
        self._timeout = (spec.timeout_s or 10, spec.timeout_s or 120)
        self._client = client if client is not None else make_gcs_client(spec)
        self._bucket = self._client.bucket(self.bucket_name)
        self._retry = self._make_retry(spec)
        self._bucket_verified = False

    @staticmethod
    def _make_retry(spec: DestinationSpec) -> Any:
        """The library's retry (connection errors, 408/429/5xx) with a total time budget of
        timeout_s × max_attempts (defaults: 24 s × 5 = 120 s, the library's own default)."""
        from google.cloud.storage.retry import DEFAULT_RETRY

        return DEFAULT_RETRY.with_timeout((spec.timeout_s or 24) * (spec.max_attempts or 5))

    # -- error mapping ---------------------------------------------------------------
    def _where(self, key: str | None) -> str:
        return f"gs://{self.bucket_name}/{self.prefix}{key if key is not None else ''}"

    def _error(self, exc: BaseException, action: str, key: str | None) -> DestinationError:
        """Translate a google-cloud / requests exception into a DestinationError with a fix."""
        import requests
        from google.api_core import exceptions as gexc
        from google.api_core.exceptions import RetryError
        from google.auth import exceptions as auth_exc

        where = self._where(key)
        if isinstance(exc, DestinationError):
            return exc
        if isinstance(exc, RetryError) and exc.cause is not None:
            exc = exc.cause
        if isinstance(exc, (auth_exc.RefreshError, auth_exc.DefaultCredentialsError,
                            gexc.Unauthorized, gexc.Forbidden)):
            return destination_error(
                f"{action} {where} was refused ({type(exc).__name__}: {getattr(exc, 'message', exc)}) — "
                f"check the GCS credentials: destination.credentials_file (or "
                f"GOOGLE_APPLICATION_CREDENTIALS) must hold a key of a service account with "
                f"Storage Object Admin on bucket '{self.bucket_name}'",
                code="RIVET_DEST_CREDENTIALS")
        if isinstance(exc, gexc.NotFound) and "bucket" in str(exc).lower():
            return self._no_bucket()
        if isinstance(exc, gexc.GoogleAPICallError):
            status = int(exc.code or 0)
            transient = status in _TRANSIENT_STATUS
            hint = (" — the GCS service is failing or overloaded; retry the run later (raise "
                    "destination.max_attempts to retry longer within one run)") if transient else ""
            return destination_error(f"{action} {where} failed: {status}: {exc.message}{hint}",
                                     transient=transient)
        if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                            auth_exc.TransportError, ConnectionError, TimeoutError)):
            return destination_error(
                f"cannot reach the GCS endpoint {self.endpoint or '(storage.googleapis.com)'} to "
                f"{action} {where}: {type(exc).__name__} — check that the endpoint is up and "
                f"reachable (raise destination.timeout_s or destination.max_attempts for a slow "
                f"one), then retry the run", transient=True)
        return destination_error(f"{action} {where} failed: {type(exc).__name__}: {exc}")

    def _no_bucket(self) -> DestinationError:
        return destination_error(
            f"GCS bucket '{self.bucket_name}' does not exist — create it or fix destination.bucket",
            code="RIVET_DEST_NO_BUCKET")

    def _errors(self) -> tuple[type[BaseException], ...]:
        import requests
        from google.api_core.exceptions import GoogleAPICallError, RetryError
        from google.auth.exceptions import GoogleAuthError

        return (GoogleAPICallError, RetryError, GoogleAuthError, requests.exceptions.RequestException,
                ConnectionError, TimeoutError)

    # -- writes ----------------------------------------------------------------------
    def _send(self, stream: Any, key: str, size: int, md5_b64: str | None,
              if_generation_match: int | None = None) -> Any:
        """One upload of `size` bytes from `stream`; returns the finalized blob's resource.
        With `if_generation_match`, a failed precondition is raised as the library's
        `PreconditionFailed` for the caller to judge (`create_bytes`)."""
        blob = self._bucket.blob(self.prefix + key, chunk_size=self.chunksize)
        if md5_b64:
            blob.md5_hash = md5_b64  # the service refuses to finalize other bytes
        from google.api_core.exceptions import NotFound, PreconditionFailed

        try:
            blob.upload_from_file(stream, size=size, rewind=False, checksum=None,
                                  content_type="application/octet-stream", if_generation_match=if_generation_match,
                                  timeout=self._timeout, retry=self._retry)
        except PreconditionFailed:
            raise
        except NotFound as exc:  # the upload URL of a missing bucket
            self._bucket_verified = False
            self._check_bucket()
            raise self._error(exc, "write", key) from exc
        except self._errors() as exc:
            raise self._error(exc, "write", key) from exc
        self._bucket_verified = True
        return blob

    def _verify(self, blob: Any, key: str, fp: Fingerprint, local_path: Path | None) -> None:
        """Compare the finalized object with the bytes we sent (size, then MD5 or CRC32C)."""
        problem = None
        if blob.size is not None and int(blob.size) != fp.size:
            problem = f"size {fp.size}≠{blob.size}"
        elif blob.md5_hash:
            if blob.md5_hash != fp.md5_b64:
                problem = f"md5 {fp.md5_b64}≠{blob.md5_hash}"
        elif blob.crc32c and local_path is not None:
            local = _crc32c_b64(local_path)
            if local != blob.crc32c:
                problem = f"crc32c {local}≠{blob.crc32c}"
        if problem:
            raise destination_error(f"part '{key}' corrupted in transit ({problem}) at {self._where(key)}",
                                    transient=True)

    def write_file(self, local_path: Path, key: str, staged: Fingerprint | None = None) -> WriteResult:
        check_key(key)
        fh = open_staged(local_path, key)  # closed in finally
        try:
            size = os.fstat(fh.fileno()).st_size
            if size < self.multipart_threshold:
                data = fh.read(self.multipart_threshold)
                if not fh.read(1):  # the common case: one request
                    fp = Fingerprinter()
                    fp.update(data)
                    result = fp.result()
                    check_staged(result, staged, f"for '{key}'")  # before anything is sent
                    blob = self._send(io.BytesIO(data), key, len(data), result.md5_b64)
                    self._verify(blob, key, result, local_path)
                    return WriteResult(key=key, size=result.size, md5_b64=result.md5_b64, xxh3=result.xxh3)
                fh.seek(0)  # the file grew after stat; stream it instead
                size = os.fstat(fh.fileno()).st_size
                del data
            reader = _HashingReader(fh, size, staged, f"for '{key}'")
            blob = self._send(reader, key, size, staged.md5_b64 if staged else None)
            if reader.complete(size):
                result = reader.fp.result()
            else:
                from rivet_core.destination.checksums import fingerprint_file

                xxh3, md5_b64 = fingerprint_file(local_path)
                result = Fingerprint(size=size, xxh3=xxh3, md5_b64=md5_b64)
            check_staged(result, staged, f"for '{key}'")
            self._verify(blob, key, result, local_path)
            return WriteResult(key=key, size=result.size, md5_b64=result.md5_b64, xxh3=result.xxh3)
        except OSError as exc:
            raise destination_error(f"reading staged file '{local_path}' for '{key}' failed: {exc}") from exc
        finally:
            fh.close()

    def write_bytes(self, data: bytes, key: str) -> WriteResult:
        check_key(key)
        fp = Fingerprinter()
        fp.update(data)
        result = fp.result()
        blob = self._send(io.BytesIO(bytes(data)), key, len(data), result.md5_b64)
        self._verify(blob, key, result, None)
        return WriteResult(key=key, size=result.size, md5_b64=result.md5_b64, xxh3=result.xxh3)

    def create_bytes(self, data: bytes, key: str) -> bool:
        """Put `data` at `key` only if no object has that name: GCS's atomic create
        (`ifGenerationMatch=0`), the primitive a Delta log entry is committed with
        (tableformat/gcs_delta_log.py). True when this call created it; False when another
        writer's object holds the name (left untouched).

        The library retries a request that carries a generation precondition, so a retry of a
        create that did land answers 412 too: the object is then read back, and bytes equal to
        ours mean the object is this call's."""
        from google.api_core.exceptions import PreconditionFailed

        check_key(key)
        fp = Fingerprinter()
        fp.update(data)
        result = fp.result()
        try:
            blob = self._send(io.BytesIO(bytes(data)), key, len(data), result.md5_b64, if_generation_match=0)
        except PreconditionFailed:
            return self.read_bytes(key) == bytes(data)
        self._verify(blob, key, result, None)
        return True

    # -- reads -----------------------------------------------------------------------
    def _check_bucket(self) -> None:
        """A missing object and a missing bucket both read as 'not found'; ask once."""
        if self._bucket_verified:
            return
        try:
            exists = self._bucket.exists(timeout=self._timeout, retry=self._retry)
        except self._errors() as exc:
            raise self._error(exc, "check", None) from exc
        if not exists:
            raise self._no_bucket()
        self._bucket_verified = True

    def head(self, key: str) -> ObjectInfo | None:
        check_key(key)
        try:
            blob = self._bucket.get_blob(self.prefix + key, timeout=self._timeout, retry=self._retry)
        except self._errors() as exc:
            raise self._error(exc, "read", key) from exc
        if blob is None:
            self._check_bucket()
            return None
        self._bucket_verified = True
        return ObjectInfo(key=key, size=int(blob.size or 0), md5_b64=blob.md5_hash or None)

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        from google.api_core.exceptions import NotFound

        check_list_prefix(prefix)
        out: list[ObjectInfo] = []
        try:
            for blob in self._client.list_blobs(self.bucket_name, prefix=self.prefix + prefix,
                                                timeout=self._timeout, retry=self._retry):
                name = str(blob.name)
                rel = name[len(self.prefix):] if name.startswith(self.prefix) else ""
                if rel and not rel.endswith("/"):  # "dir/" placeholders made by consoles
                    out.append(ObjectInfo(key=rel, size=int(blob.size or 0), md5_b64=blob.md5_hash or None))
        except NotFound as exc:
            raise self._no_bucket() from exc
        except self._errors() as exc:
            raise self._error(exc, "list", prefix) from exc
        self._bucket_verified = True
        out.sort(key=lambda o: o.key)
        return out

    def read_bytes(self, key: str, max_bytes: int | None = None) -> bytes:
        info = head_within_cap(self, key, max_bytes, self._where)
        blob = self._bucket.blob(self.prefix + key)
        try:
            # checksum="md5": the library compares the body with the service's x-goog-hash.
            data = blob.download_as_bytes(checksum="md5" if info.md5_b64 else None,
                                          timeout=self._timeout, retry=self._retry)
        except self._errors() as exc:
            raise self._error(exc, "read", key) from exc
        except Exception as exc:  # google.resumable_media.DataCorruption
            if type(exc).__name__ == "DataCorruption":
                raise destination_error(f"{self._where(key)} was corrupted while being read: {exc}",
                                        transient=True) from exc
            raise
        check_read_within_cap(data, key, max_bytes, self._where)
        return bytes(data)

    # -- move / delete ---------------------------------------------------------------
    def move(self, src_key: str, dst_key: str) -> None:
        """Server-side rewrite to `dst_key` (in steps for large objects), confirm the copy's
        size and MD5, then delete `src_key` only (`base.move_by_copy`)."""

        def copy(_src: ObjectInfo) -> None:
            source = self._bucket.blob(self.prefix + src_key)
            target = self._bucket.blob(self.prefix + dst_key)
            try:
                token, _, _ = target.rewrite(source, timeout=self._timeout, retry=self._retry)
                while token is not None:
                    token, _, _ = target.rewrite(source, token=token, timeout=self._timeout, retry=self._retry)
            except self._errors() as exc:
                raise self._error(exc, "copy", src_key) from exc

        move_by_copy(self, src_key, dst_key, copy, md5="if_known", where=self._where)

    def delete(self, key: str) -> None:
        """Delete one object (see `Destination.delete`); a missing one is not an error."""
        from google.api_core.exceptions import NotFound

        check_key(key)
        try:
            self._bucket.blob(self.prefix + key).delete(timeout=self._timeout, retry=self._retry)
        except NotFound:
            return
        except self._errors() as exc:
            raise self._error(exc, "delete", key) from exc
