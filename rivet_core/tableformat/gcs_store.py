"""A table on Google Cloud Storage: how pyarrow (pyiceberg's file IO; a Delta table's data files) reaches the destination's prefix.

The same bucket and credentials as the GCS destination (rivet_core/destination/gcs.py,
`gcs_credentials`): a service-account `credentials_file`, else no credentials for
`allow_anonymous` or a custom `endpoint` (an emulator), else the application default
credentials. pyarrow's `GcsFileSystem` speaks the JSON API (the one fake-gcs-server
serves, unlike the XML API delta-rs writes through — docs/adr/0009-table-formats.md), so
an Iceberg table's metadata, manifests and the parts' footers go through it, and so do a
Delta table's data files (its log goes through a local copy: gcs_delta_log.py).

The options are plain strings (they travel as pyiceberg file-IO properties, iceberg_io.py)
and hold no secret: the credentials file's path, never its key; a signed-in client's
access token is fetched only when the filesystem is built.
"""

from __future__ import annotations

import urllib.parse
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

if TYPE_CHECKING:
    from rivet_core.destination.base import DestinationSpec

#: Option names (TableLocation.storage_options of a GCS table).
BUCKET, ENDPOINT, CREDENTIALS_FILE, ANONYMOUS = ("gcs_bucket", "gcs_endpoint", "gcs_credentials_file",
                                                 "gcs_anonymous")
#: The total retry budget of one request: the GCS destination's default (24 s × 5 attempts).
_RETRY_BUDGET = timedelta(seconds=120)


def gcs_options(spec: Any) -> dict[str, str]:
    """The GCS destination spec as table-location options (no credential in them)."""
    options = {BUCKET: spec.bucket or ""}
    if spec.endpoint:
        options[ENDPOINT] = spec.endpoint.rstrip("/")
    if spec.credentials_file:
        options[CREDENTIALS_FILE] = spec.credentials_file
    if spec.allow_anonymous:
        options[ANONYMOUS] = "true"
    return options


def gcs_spec(options: dict[str, str], prefix: str = "") -> DestinationSpec:
    """The GCS destination spec these options came from (`gcs_options`), at `prefix`."""
    from rivet_core.destination.base import DestinationSpec

    return DestinationSpec(kind="gcs", bucket=options.get(BUCKET), prefix=prefix, endpoint=options.get(ENDPOINT),
                           credentials_file=options.get(CREDENTIALS_FILE),
                           allow_anonymous=options.get(ANONYMOUS) == "true")


def gcs_filesystem(options: dict[str, str]) -> pafs.GcsFileSystem:
    """A pyarrow filesystem over the bucket, signed as the destination's client would be."""
    from google.auth.credentials import AnonymousCredentials

    from rivet_core.destination.gcs import gcs_credentials

    spec = gcs_spec(options)
    creds, project = gcs_credentials(spec)
    kwargs: dict[str, Any] = {"retry_time_limit": _RETRY_BUDGET}
    if isinstance(creds, AnonymousCredentials):
        kwargs["anonymous"] = True
    else:  # a service account or the default credentials: hand pyarrow a fresh token
        from google.auth.transport.requests import Request

        creds.refresh(Request())
        kwargs["access_token"] = creds.token
        # google-auth's expiry is naive UTC; a credential without one is given the usual hour
        expiry = creds.expiry.replace(tzinfo=UTC) if creds.expiry else datetime.now(UTC) + timedelta(minutes=55)
        kwargs["credential_token_expiration"] = expiry
        if project:
            kwargs["project_id"] = project
    if spec.endpoint:
        parts = urllib.parse.urlsplit(spec.endpoint)
        kwargs.update(endpoint_override=parts.netloc, scheme=parts.scheme or "https")
    return pafs.GcsFileSystem(**kwargs)
