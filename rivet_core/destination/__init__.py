"""Destinations: where parts and trust artifacts land (docs/invariants.md I2, M1, M7, M9).

`open_destination(spec)` returns a `Destination` (local directory, S3 or GCS bucket/prefix,
Azure container/prefix, or stdout). The contract each backend keeps is in `base.py`; key safety (reject, never
clamp) in `keys.py`; one-pass xxh3 + MD5 fingerprints in `checksums.py`.
"""

from __future__ import annotations

from pathlib import Path

from rivet_core.destination.base import Destination, DestinationSpec, ObjectInfo, WriteResult
from rivet_core.destination.checksums import fingerprint_bytes, fingerprint_file, md5_bytes
from rivet_core.destination.errors import destination_error
from rivet_core.destination.keys import check_key

__all__ = [
    "Destination", "DestinationSpec", "ObjectInfo", "WriteResult", "open_destination",
    "fingerprint_file", "fingerprint_bytes", "md5_bytes", "check_key", "is_transient",
    "DOCTOR_PROBE_KEY",
]

DOCTOR_PROBE_KEY = ".rivet_doctor_probe"


def open_destination(spec: DestinationSpec, base_dir: Path | None = None, *, create: bool = True) -> Destination:
    """Open the destination `spec` describes.

    local: `path` (else `prefix`, else ".") — relative paths are resolved against
    `base_dir` (the config file's directory; cwd when None); the directory is created unless
    `create=False` (read-only inspection must leave no trace).
    s3 / gcs / azure: require `bucket` (azure: the container); no network call happens
    until the first operation. The GCS and Azure clients are the package extras `gcs` and
    `azure` (pyproject.toml); a missing one is reported with the pip command.
    stdout: streams to `sys.stdout.buffer`.
    """
    kind = (spec.kind or "").strip().lower()
    if kind == "local":
        raw = spec.path or spec.prefix or "."
        root = Path(raw).expanduser()
        if not root.is_absolute():
            root = (base_dir or Path.cwd()) / root
        from rivet_core.destination.local import LocalDestination

        return LocalDestination(root, create=create)
    if kind == "s3":
        from rivet_core.destination.clients import provided_client
        from rivet_core.destination.s3 import S3Destination

        return S3Destination(spec, client=provided_client(spec))
    if kind == "stdout":
        from rivet_core.destination.stdout import StdoutDestination

        return StdoutDestination()
    if kind == "gcs":
        _require("google.cloud.storage", "gcs")
        from rivet_core.destination.clients import provided_client
        from rivet_core.destination.gcs import GCSDestination

        return GCSDestination(spec, client=provided_client(spec))
    if kind == "azure":
        _require("azure.storage.blob", "azure")
        from rivet_core.destination.azure import AzureDestination
        from rivet_core.destination.clients import provided_client

        return AzureDestination(spec, client=provided_client(spec))
    raise destination_error(
        f"unknown destination type {spec.kind!r} — expected local, s3, gcs, azure or stdout")


def _require(module: str, extra: str) -> None:
    """Name the pip extra when a cloud's client library is not installed."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        raise destination_error(
            f"destination type '{extra}' needs the '{module}' package — install it with "
            f"`pip install 'rivet-dagster[{extra}]'`")


def is_transient(exc: BaseException) -> bool:
    """True when a destination error is worth retrying (connection, 5xx, throttling)."""
    return bool(getattr(exc, "transient", False))
