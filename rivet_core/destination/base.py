"""The destination contract every backend implements (docs/invariants.md I2, M1, M7).

A `Destination` is a flat key space under one root (a local directory, an S3 or GCS
`bucket/prefix/`, an Azure `container/prefix/`, or stdout). The engine relies on three properties:

* `write_file` / `write_bytes` are **durable and atomic when they return** — a reader
  never sees a partial object under its final key (M7), so recording the part after the
  call (I2) and writing the manifest after all parts (M1) is sound;
* `head` / `list` report sizes (and MD5s where the backend has them cheaply) without
  downloading, which is what `verify_at_destination` (M5) checks against;
* superseded objects are `move`d to quarantine (M9); `delete` is used only for the doctor
  probe object and by retention (`rivet gc`, rivet_core/manifest/retention.py) for objects
  it parked under `_quarantine/gc/` longer than the grace period.

Every key passes `keys.check_key` first; every error is a `DestinationError` with a
`transient` attribute (see `destination.errors`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from rivet_core.destination.checksums import Fingerprint
from rivet_core.destination.errors import destination_error
from rivet_core.destination.keys import check_key

DEFAULT_MULTIPART_THRESHOLD = 16 * 1024 * 1024
DEFAULT_MULTIPART_CHUNKSIZE = 16 * 1024 * 1024


@dataclass(frozen=True)
class DestinationSpec:
    """Resolved destination settings (the config layer has already read the env vars)."""

    kind: str  # "local" | "s3" | "gcs" | "azure" | "stdout"
    path: str | None = None  # local: directory (absolute or relative to base_dir)
    bucket: str | None = None  # s3/gcs bucket, azure container
    prefix: str = ""  # object key prefix ("" or ending with "/" after normalisation)
    region: str | None = None
    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    aws_profile: str | None = None
    multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD
    multipart_chunksize: int = DEFAULT_MULTIPART_CHUNKSIZE
    #: S3: per-request connect/read timeout in seconds (None: 10 s connect, 120 s read) and
    #: attempts per request including the first (None: 5).
    timeout_s: float | None = None
    max_attempts: int | None = None
    #: GCS: a service-account JSON key file (None: application default credentials).
    credentials_file: str | None = None
    #: Azure: the storage account, and its shared key or SAS token (read from the env vars
    #: account_key_env / sas_token_env names); neither: DefaultAzureCredential.
    account_name: str | None = None
    account_key: str | None = None
    sas_token: str | None = None
    #: GCS/Azure: send no credentials at all (public buckets, emulators).
    allow_anonymous: bool = False
    #: Azure: the NAME of the env var the key or token came from, so a refused request can
    #: say which variable to fix (never its value).
    credential_env: str | None = None

    def __repr__(self) -> str:  # never print secrets, even in a traceback
        return (
            f"DestinationSpec(kind={self.kind!r}, path={self.path!r}, bucket={self.bucket!r}, "
            f"prefix={self.prefix!r}, region={self.region!r}, endpoint={self.endpoint!r}, "
            f"access_key={'<set>' if self.access_key else None}, "
            f"secret_key={'<set>' if self.secret_key else None}, "
            f"session_token={'<set>' if self.session_token else None}, "
            f"aws_profile={self.aws_profile!r}, credentials_file={self.credentials_file!r}, "
            f"account_name={self.account_name!r}, "
            f"account_key={'<set>' if self.account_key else None}, "
            f"sas_token={'<set>' if self.sas_token else None}, "
            f"allow_anonymous={self.allow_anonymous!r})"
        )


@dataclass(frozen=True)
class ObjectInfo:
    """One object at the destination. `key` is relative to the destination root.

    `md5_b64` is set only when the backend reports a true content MD5 for free (S3 ETag
    of a single-PUT object); None means "size-only" for verification.
    """

    key: str
    size: int
    md5_b64: str | None = None


@dataclass(frozen=True)
class WriteResult:
    """What landed: size and digests of the bytes we sent, computed while sending them."""

    key: str
    size: int
    md5_b64: str
    xxh3: str  # "xxh3:<16 hex>"


class Destination(ABC):
    """Abstract destination; see the module docstring for the guarantees."""

    kind: str
    uri: str  # "file:///abs/dir/" | "s3://bucket/prefix/" | "gs://…" | "az://container/…" | "stdout"
    supports_manifest: bool = True
    #: `begin_early_upload` overlaps the upload with the encoding (S3); the default does not.
    supports_early_upload: bool = False

    @abstractmethod
    def write_file(self, local_path: Path, key: str, staged: Fingerprint | None = None) -> WriteResult:
        """Copy a finished local file to `key`; durable and atomic when it returns.

        `staged` is the fingerprint the writer measured while writing the file: a backend
        that reads the file anyway refuses it when the bytes differ (`check_staged`); the
        local backend may publish the file without reading it and returns `staged`."""

    @abstractmethod
    def write_bytes(self, data: bytes, key: str) -> WriteResult:
        """Atomically write a small object (manifest, `_SUCCESS`); never multipart."""

    @abstractmethod
    def head(self, key: str) -> ObjectInfo | None:
        """Size (and MD5 if cheap) of `key`, or None when it does not exist."""

    def not_an_object(self, key: str) -> str | None:
        """What occupies `key` when `head` says there is no object but something is there (a
        local directory or symbolic link), else None. `verify_at_destination` reports such a
        `manifest.json` as unreadable instead of a legacy prefix; object stores hold only
        objects, so the default is None."""
        return None

    @abstractmethod
    def list(self, prefix: str = "") -> list[ObjectInfo]:
        """Every object whose key starts with `prefix`, recursively, sorted by key."""

    @abstractmethod
    def read_bytes(self, key: str, max_bytes: int | None = None) -> bytes:
        """Read a whole object; raise `DestinationError` if it is larger than `max_bytes`
        (checked with `head` before any byte is downloaded — a DoS cap, docs/rivet-compat.md "Security")."""

    @abstractmethod
    def move(self, src_key: str, dst_key: str) -> None:
        """Move one object (quarantine, M9). Never deletes anything but `src_key` after
        the copy has landed."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Delete one object; a missing one is not an error. Used ONLY by `rivet doctor` for
        its `.rivet_doctor_probe` object and by retention for what it parked under
        `_quarantine/gc/` past the grace period (rivet_core/manifest/retention.py): a part
        still at its published key is never deleted (M9: quarantine first)."""

    def begin_early_upload(self, key: str, path: Path) -> object | None:
        """Start sending `path` to `key` while its writer is still appending to it, so the
        upload overlaps the encoding; `write_file(path, key)` then completes it (nothing is
        visible under `key` before). Returns an object with `advance(n)` / `seal(size)` /
        `abort()` that the writer drives (rivet_core/format/base.py), or None when this
        backend has nothing to gain (the default: the local backend links the finished file)."""
        return None

    def cancel_early_uploads(self) -> None:  # noqa: B027 - optional hook, default: none started
        """Abort every early upload that `write_file` did not complete (a run that ended
        before publishing them); nothing may appear under their keys."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.uri}>"


def move_by_copy(dest: Destination, src_key: str, dst_key: str, copy: Callable[[ObjectInfo], str | None], *,
                 md5: Literal["never", "if_known", "always"], where: Callable[[str], str]) -> None:
    """The quarantine move of an object store (M9): copy, confirm the copy, then delete the
    source — never the other way round, so a failed move leaves the object where it was.

    `copy(src)` makes the server-side copy of `src_key` to `dst_key` (raising the backend's
    `DestinationError`) and returns the service's copy status when it has one (Azure), else
    None. The copy counts as landed when it exists at the source's size, its status (if any)
    is `success`, and its MD5 matches per `md5`: `never` (S3: a multipart ETag is no MD5),
    `if_known` (GCS: when the source reports one), `always` (Azure: both sides, even unset).
    `where(key)` names an object in messages (the backend's `_where`)."""
    check_key(dst_key)
    src = dest.head(src_key)
    if src is None:
        raise destination_error(f"cannot move {where(src_key)}: it does not exist")
    status = copy(src)
    landed = dest.head(dst_key)
    intact = landed is not None and landed.size == src.size and status in (None, "success") and (
        md5 == "never" or (md5 == "if_known" and not src.md5_b64) or landed.md5_b64 == src.md5_b64)
    if not intact:
        state = f"status {status}, " if status is not None else ""
        raise destination_error(
            f"moving {where(src_key)} to '{dst_key}': the copy did not land intact ({state}expected "
            f"{src.size} bytes, found {landed.size if landed else 'nothing'}); the source was kept")
    dest.delete(src_key)


def open_staged(local_path: Path, key: str) -> BinaryIO:
    """Open a staged part for `write_file` (the caller closes it); an unreadable file is a
    `DestinationError` naming the file and the key it was meant for."""
    try:
        return open(local_path, "rb")  # noqa: SIM115 - the caller closes it
    except OSError as exc:
        raise destination_error(f"cannot read staged file '{local_path}' for '{key}': {exc}") from exc


def head_within_cap(dest: Destination, key: str, max_bytes: int | None, where: Callable[[str], str]) -> ObjectInfo:
    """`read_bytes`' first step on an object store: the object exists and, with a cap, is at
    most `max_bytes` — checked with `head` before any byte is downloaded (the size cap on
    control files, docs/rivet-compat.md "Security")."""
    info = dest.head(key)
    if info is None:
        raise destination_error(f"{where(key)} does not exist")
    if max_bytes is not None and info.size > max_bytes:
        raise destination_error(
            f"{where(key)} is {info.size} bytes, over the {max_bytes}-byte limit for this "
            f"file — refusing to read it")
    return info


def check_read_within_cap(data: bytes, key: str, max_bytes: int | None, where: Callable[[str], str]) -> None:
    """`read_bytes`' last step: the object did not grow past the cap between `head` and the read."""
    if max_bytes is not None and len(data) > max_bytes:
        raise destination_error(f"{where(key)} grew past the {max_bytes}-byte limit while being read")
