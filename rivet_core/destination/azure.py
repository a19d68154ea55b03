"""Azure Blob Storage destination over azure-storage-blob (M7 atomic objects, I2 durable writes).

Why the upload is atomic: a block blob changes only when a Put Blob or a Put Block List
commits it. Staged blocks are invisible (uncommitted) until the commit names them, and the
service discards uncommitted blocks of a blob that is never committed, so a reader never
sees a partial part and no temporary name is needed.

Writes (docs/adr/0008-gcs-and-azure-clients.md):
* below `multipart_threshold`: ONE Put Blob with `Content-MD5` (the service rejects a body
  that changed in transit, `Md5Mismatch`) and the blob's stored MD5 set to ours; the MD5
  the service reports back must equal ours;
* at or above it: the file is read sequentially in `multipart_chunksize` blocks (one in
  memory at a time), each staged with its own `Content-MD5` (checked by the service), then
  committed with a Put Block List carrying the whole file's MD5 — after `check_staged`, so
  bytes that differ from the writer's fingerprint never become visible.
After a commit the blob's size and stored MD5 are read back and compared with ours.

Client: the account URL is `endpoint` (an emulator's path-style URL gets `/<account_name>`
appended when it has no path) or `https://<account_name>.blob.core.windows.net`; the
credential is the shared key from `account_key_env`, else the SAS token from
`sas_token_env`, else none with `allow_anonymous`, else `DefaultAzureCredential`
(environment, workload/managed identity, Azure CLI). `timeout_s` / `max_attempts` set the
per-request timeouts and the retry count; the retry back-off starts at 1 s (the SDK's 15 s
default turns a dead endpoint into minutes).

Errors become `DestinationError` naming the container/key and the fix, `.transient` for
connection failures, 408/429/5xx and MD5 mismatches. Keys and SAS tokens are registered
with `redact_secrets` on open and never appear in messages.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import math
import os
import time
import urllib.parse
import uuid
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
from rivet_core.destination.checksums import Fingerprint, Fingerprinter, check_staged
from rivet_core.destination.errors import destination_error
from rivet_core.destination.keys import check_key, check_list_prefix, normalize_prefix
from rivet_core.errors import DestinationError
from rivet_core.redact import register_secret

MAX_BLOCKS = 50_000
#: Put Blob takes up to 5000 MiB in one request; anything `write_bytes` gets is far smaller.
MAX_SINGLE_PUT = 256 * 1024 * 1024
_TRANSIENT_STATUS = {408, 429, 500, 502, 503, 504}
_COPY_POLL_S = 120.0


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def account_url(spec: DestinationSpec) -> str:
    """The blob service URL of the account (see the module docstring)."""
    if spec.endpoint:
        url = spec.endpoint.rstrip("/")
        parts = urllib.parse.urlsplit(url)
        if not parts.path and spec.account_name and _is_loopback(parts.hostname or ""):
            url += "/" + spec.account_name  # Azurite addresses accounts by path
        return url
    if not spec.account_name:
        raise destination_error(
            "Azure destination requires 'account_name' (or an endpoint) — set destination.account_name")
    return f"https://{spec.account_name}.blob.core.windows.net"


def _credential(spec: DestinationSpec) -> Any:
    if spec.account_key:
        if not spec.account_name:
            raise destination_error(
                "Azure account_key_env needs destination.account_name (the key signs as that account)")
        return {"account_name": spec.account_name, "account_key": spec.account_key}
    if spec.sas_token:
        from azure.core.credentials import AzureSasCredential

        return AzureSasCredential(spec.sas_token.lstrip("?"))
    if spec.allow_anonymous:
        return None
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()


def make_azure_container_client(spec: DestinationSpec) -> Any:
    """The `ContainerClient` of the destination's container (credentials as above)."""
    from azure.storage.blob import BlobServiceClient, ExponentialRetry

    register_secret(spec.account_key)
    register_secret(spec.sas_token)
    attempts = spec.max_attempts or 5
    service = BlobServiceClient(
        account_url(spec), credential=_credential(spec),
        retry_policy=ExponentialRetry(initial_backoff=1, increment_base=2, retry_total=attempts - 1,
                                      random_jitter_range=1),
        connection_timeout=spec.timeout_s or 10, read_timeout=spec.timeout_s or 120,
        max_single_put_size=MAX_SINGLE_PUT,
    )
    return service.get_container_client(spec.bucket or "")


def _md5_b64(value: Any) -> str | None:
    return base64.b64encode(bytes(value)).decode("ascii") if value else None


class AzureDestination(Destination):
    """Objects live at `az://<container>/<prefix><key>` in the storage account."""

    kind = "azure"
    supports_manifest = True

    def __init__(self, spec: DestinationSpec, client: Any | None = None) -> None:
        if not spec.bucket or not spec.bucket.strip():
            raise destination_error(
                "Azure destination requires 'bucket' (the container) — set destination.bucket")
        if "/" in spec.bucket:
            raise destination_error(
                f"Azure container name {spec.bucket!r} is invalid — put sub-paths in destination.prefix")
        register_secret(spec.account_key)
        register_secret(spec.sas_token)
        self.container = spec.bucket
        self.account = spec.account_name or ""
        self.prefix = normalize_prefix(spec.prefix)
        self.endpoint = spec.endpoint
        #: The resolved settings, for a client that reaches the same prefix its own way
        #: (delta-rs for `table_format: delta`, rivet_core/tableformat/azure_store.py).
        self.spec = spec
        self.uri = f"az://{self.container}/{self.prefix}"
        self.multipart_threshold = max(1, min(int(spec.multipart_threshold), MAX_SINGLE_PUT))
        self.chunksize = max(1024 * 1024, int(spec.multipart_chunksize))
        self._sas = spec.sas_token.lstrip("?") if spec.sas_token else None
        env = f" ({spec.credential_env})" if spec.credential_env else ""
        self._credential_hint = (
            f"destination.account_key_env{env} must name an environment variable holding the "
            f"key of account '{self.account}'" if spec.account_key else
            f"destination.sas_token_env{env} must name an environment variable holding a SAS "
            "token with read, write, list and delete permission" if spec.sas_token else
            "the container allows no anonymous access: set account_key_env or sas_token_env"
            if spec.allow_anonymous else
            "no account_key_env / sas_token_env is set, so DefaultAzureCredential was used: "
            "log in (`az login`, a managed identity or AZURE_CLIENT_ID/AZURE_TENANT_ID/"
            "AZURE_CLIENT_SECRET) with Storage Blob Data Contributor, or set account_key_env")
        try:
            self._container = client if client is not None else make_azure_container_client(spec)
        except ImportError:
            raise
        except DestinationError:
            raise
        except Exception as exc:  # noqa: BLE001 - a malformed key or URL
            raise destination_error(
                f"cannot create the Azure client for container '{self.container}': "
                f"{type(exc).__name__}: {exc} — check destination.account_name, endpoint and "
                f"the key in account_key_env / sas_token_env", code="RIVET_DEST_CREDENTIALS") from exc

    # -- error mapping ---------------------------------------------------------------
    def _where(self, key: str | None) -> str:
        return f"az://{self.container}/{self.prefix}{key if key is not None else ''}"

    def _no_container(self) -> DestinationError:
        return destination_error(
            f"Azure container '{self.container}' does not exist in account '{self.account or '?'}' "
            f"— create it or fix destination.bucket", code="RIVET_DEST_NO_BUCKET")

    def _error(self, exc: BaseException, action: str, key: str | None) -> DestinationError:
        """Translate an azure-core exception into a DestinationError with a fix."""
        from azure.core import exceptions as aexc

        where = self._where(key)
        if isinstance(exc, DestinationError):
            return exc
        code = str(getattr(exc, "error_code", "") or "")
        status = int(getattr(exc, "status_code", 0) or 0)
        if "ContainerNotFound" in code or code.endswith("CONTAINER_NOT_FOUND"):
            return self._no_container()
        if isinstance(exc, aexc.ClientAuthenticationError) or status in (401, 403):
            detail = code or type(exc).__name__
            return destination_error(
                f"{action} {where} was refused ({detail}) — check the Azure credentials: "
                f"{self._credential_hint}", code="RIVET_DEST_CREDENTIALS")
        if "Md5Mismatch" in code or code.endswith("MD5_MISMATCH"):
            return destination_error(
                f"'{key}' corrupted in transit (the service rejected Content-MD5) while trying to "
                f"{action} {where}", transient=True)
        if isinstance(exc, (aexc.ServiceRequestError, aexc.ServiceResponseError, ConnectionError,
                            TimeoutError)):
            return destination_error(
                f"cannot reach the Azure endpoint {self.endpoint or 'blob.core.windows.net'} to "
                f"{action} {where}: {type(exc).__name__} — check that the endpoint is up and "
                f"reachable (raise destination.timeout_s or destination.max_attempts for a slow "
                f"one), then retry the run", transient=True)
        if isinstance(exc, aexc.HttpResponseError):
            transient = status in _TRANSIENT_STATUS
            hint = (" — the Azure service is failing or overloaded; retry the run later (raise "
                    "destination.max_attempts to retry more within one run)") if transient else ""
            message = str(exc.message or exc).splitlines()[0]
            return destination_error(f"{action} {where} failed: {status}: {code or message}{hint}",
                                     transient=transient)
        return destination_error(f"{action} {where} failed: {type(exc).__name__}: {exc}")

    def _errors(self) -> tuple[type[BaseException], ...]:
        from azure.core.exceptions import AzureError

        return (AzureError, ConnectionError, TimeoutError)

    def _blob(self, key: str) -> Any:
        return self._container.get_blob_client(self.prefix + key)

    # -- writes ----------------------------------------------------------------------
    def _content_settings(self, md5: bytes) -> Any:
        from azure.storage.blob import ContentSettings

        return ContentSettings(content_type="application/octet-stream", content_md5=bytearray(md5))

    def _put(self, data: bytes, key: str, fp: Fingerprinter, staged: Fingerprint | None = None) -> WriteResult:
        check_staged(fp.result(), staged, f"for '{key}'")  # before anything is visible
        md5 = base64.b64decode(fp.md5_b64)
        try:
            resp = self._blob(key).upload_blob(
                data, blob_type="BlockBlob", length=len(data), overwrite=True, validate_content=True,
                content_settings=self._content_settings(md5))
        except self._errors() as exc:
            raise self._error(exc, "write", key) from exc
        returned = resp.get("content_md5") if resp else None
        if returned and bytes(returned) != md5:
            raise destination_error(
                f"part '{key}' corrupted in transit (md5 {fp.md5_b64}≠{_md5_b64(returned)})", transient=True)
        return WriteResult(key=key, size=fp.size, md5_b64=fp.md5_b64, xxh3=fp.xxh3)

    def _staged_blocks(self, fh: Any, key: str, size_hint: int, staged: Fingerprint | None) -> WriteResult:
        """Stage `fh` block by block (one block in memory), then commit the block list."""
        from azure.storage.blob import BlobBlock

        blob = self._blob(key)
        chunksize = max(self.chunksize, math.ceil(size_hint / MAX_BLOCKS))
        upload = uuid.uuid4().hex[:12]  # block ids of one upload never collide with another's
        fp = Fingerprinter()
        blocks: list[Any] = []
        while True:
            chunk = fh.read(chunksize)
            if not chunk:
                break
            if len(blocks) >= MAX_BLOCKS:
                raise destination_error(f"'{key}' needs more than {MAX_BLOCKS} blocks (file grew while uploading)")
            fp.update(chunk)
            block_id = base64.b64encode(f"{upload}-{len(blocks):06d}".encode()).decode("ascii")
            try:
                resp = blob.stage_block(block_id, chunk, length=len(chunk), validate_content=True)
            except self._errors() as exc:
                raise self._error(exc, f"stage block {len(blocks) + 1} of", key) from exc
            returned = resp.get("content_md5") if resp else None
            if returned and bytes(returned) != hashlib.md5(chunk, usedforsecurity=False).digest():
                raise destination_error(
                    f"part '{key}' corrupted in transit (block {len(blocks) + 1} md5 differs)", transient=True)
            blocks.append(BlobBlock(block_id=block_id))
            del chunk
        result = fp.result()
        check_staged(result, staged, f"for '{key}'")  # uncommitted blocks: nothing visible
        md5 = base64.b64decode(result.md5_b64)
        try:
            blob.commit_block_list(blocks, content_settings=self._content_settings(md5))
        except self._errors() as exc:
            raise self._error(exc, "commit the blocks of", key) from exc
        landed = self.head(key)
        if landed is None or landed.size != result.size or landed.md5_b64 != result.md5_b64:
            raise destination_error(
                f"part '{key}' corrupted in transit (committed {landed.size if landed else 'nothing'} bytes "
                f"md5 {landed.md5_b64 if landed else None}, sent {result.size} bytes md5 {result.md5_b64})",
                transient=True)
        return WriteResult(key=key, size=result.size, md5_b64=result.md5_b64, xxh3=result.xxh3)

    def write_file(self, local_path: Path, key: str, staged: Fingerprint | None = None) -> WriteResult:
        check_key(key)
        fh = open_staged(local_path, key)  # closed in finally
        try:
            size_hint = os.fstat(fh.fileno()).st_size
            if size_hint < self.multipart_threshold:
                data = fh.read(self.multipart_threshold)
                if not fh.read(1):
                    fp = Fingerprinter()
                    fp.update(data)
                    return self._put(data, key, fp, staged)
                fh.seek(0)  # the file grew after stat; stage it in blocks instead
                del data
            return self._staged_blocks(fh, key, size_hint, staged)
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
    def head(self, key: str) -> ObjectInfo | None:
        from azure.core.exceptions import ResourceNotFoundError

        check_key(key)
        try:
            props = self._blob(key).get_blob_properties()
        except ResourceNotFoundError as exc:
            if "ContainerNotFound" in str(exc.error_code or ""):
                raise self._no_container() from exc
            return None
        except self._errors() as exc:
            raise self._error(exc, "read", key) from exc
        return ObjectInfo(key=key, size=int(props.size or 0),
                          md5_b64=_md5_b64(props.content_settings.content_md5))

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        check_list_prefix(prefix)
        out: list[ObjectInfo] = []
        try:
            for props in self._container.list_blobs(name_starts_with=self.prefix + prefix):
                name = str(props.name)
                rel = name[len(self.prefix):] if name.startswith(self.prefix) else ""
                if rel:
                    out.append(ObjectInfo(key=rel, size=int(props.size or 0),
                                          md5_b64=_md5_b64(props.content_settings.content_md5)))
        except self._errors() as exc:
            raise self._error(exc, "list", prefix) from exc
        out.sort(key=lambda o: o.key)
        return out

    def read_bytes(self, key: str, max_bytes: int | None = None) -> bytes:
        head_within_cap(self, key, max_bytes, self._where)
        try:
            data = self._blob(key).download_blob(max_concurrency=1).readall()
        except self._errors() as exc:
            raise self._error(exc, "read", key) from exc
        check_read_within_cap(data, key, max_bytes, self._where)
        return bytes(data)

    # -- move / delete ---------------------------------------------------------------
    def move(self, src_key: str, dst_key: str) -> None:
        """Server-side Copy Blob to `dst_key` (waited for), confirm status, size and MD5, then
        delete `src_key` only (`base.move_by_copy`)."""

        def copy(_src: ObjectInfo) -> str:
            source_url = self._blob(src_key).url
            if self._sas:
                source_url += ("&" if "?" in source_url else "?") + self._sas
            target = self._blob(dst_key)
            try:
                status = target.start_copy_from_url(source_url).get("copy_status")
                deadline = time.monotonic() + _COPY_POLL_S
                while status == "pending" and time.monotonic() < deadline:
                    time.sleep(0.2)  # a large copy runs asynchronously on the service
                    status = target.get_blob_properties().copy.status
            except self._errors() as exc:
                raise self._error(exc, "copy", src_key) from exc
            return str(status)

        move_by_copy(self, src_key, dst_key, copy, md5="always", where=self._where)

    def delete(self, key: str) -> None:
        """Delete one blob (see `Destination.delete`); a missing one is not an error."""
        from azure.core.exceptions import ResourceNotFoundError

        check_key(key)
        try:
            self._blob(key).delete_blob()
        except ResourceNotFoundError as exc:
            if "ContainerNotFound" in str(exc.error_code or ""):
                raise self._no_container() from exc
        except self._errors() as exc:
            raise self._error(exc, "delete", key) from exc
