"""Where an export's table lives and how delta-rs (or pyiceberg) reaches it.

The table root is the export's prefix: `<prefix>/_delta_log/` next to `manifest.json`, and
the table's files are the parts under `<prefix>/data/` (referenced, never copied). A time
partition writes under `<prefix>/<time_column>=<key>/`; its table is still the export's
one table at `<prefix>`, and its files carry that sub-prefix in their table paths.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rivet_core.destination import Destination
from rivet_core.unit.resolve import ResolvedUnit

if TYPE_CHECKING:
    import pyarrow.fs as pafs

#: A time partition's sub-prefix (plan.py): one `<column>=<key>/` segment.
_PARTITION = re.compile(r"^[^/=]+=[A-Za-z0-9_.-]+/$")


@dataclass(frozen=True)
class TableLocation:
    """The table's URI, delta-rs storage options (credentials: never logged) and the
    path of the unit's prefix relative to the table root ('' or `<col>=<key>/`)."""

    uri: str
    storage_options: dict[str, str]
    sub_prefix: str

    def __repr__(self) -> str:  # never print credentials, even in a traceback
        return f"TableLocation(uri={self.uri!r}, sub_prefix={self.sub_prefix!r})"


def unit_sub_prefix(plan: ResolvedUnit) -> str:
    """`<time_column>=<key>/` for a time partition (plan.py), else ''."""
    if plan.window is None or not plan.export.time_column:
        return ""
    return f"{plan.export.time_column}={plan.window.label}/"


def table_location(plan: ResolvedUnit, dest: Destination) -> TableLocation:
    """The table of `plan`'s export, reached with the destination's own settings."""
    return location_of(dest, unit_sub_prefix(plan))


def sub_prefix_of(dest: Destination, table_uri: str,
                  render: Callable[[TableLocation], str] = lambda loc: loc.uri) -> str | None:
    """The destination's path under the table at `table_uri` ('' at the root, `<col>=<key>/`
    for a time partition), or None when the destination is not that table's (a manifest
    naming another table). `render` spells a location as the manifest does (an Iceberg
    table records `file://`, `abfs://` URIs: iceberg_catalog.location_uri)."""
    here = render(location_of(dest, "")).rstrip("/") + "/"
    root = table_uri.rstrip("/") + "/"
    if here == root:
        return ""
    rest = here[len(root):] if here.startswith(root) else None
    return rest if rest is not None and _PARTITION.match(rest) else None


def location_of(dest: Destination, sub: str) -> TableLocation:
    """The table whose root is `dest`'s prefix with the unit's `sub` prefix removed."""
    from rivet_core.destination.local import LocalDestination
    from rivet_core.destination.s3 import S3Destination

    if isinstance(dest, LocalDestination):
        root = str(dest.root).rstrip("/")
        if sub and root.endswith("/" + sub.rstrip("/")):
            root = root[: -len(sub.rstrip("/")) - 1]
        return TableLocation(uri=root or "/", storage_options={}, sub_prefix=sub)
    if isinstance(dest, S3Destination):
        spec = dest.spec
        prefix = dest.prefix or ""
        if sub and prefix.endswith(sub):
            prefix = prefix[: -len(sub)]
        options = {"AWS_REGION": spec.region or "us-east-1",
                   # Runs of one export are serialised by the export lock (state/locks.py),
                   # so delta-rs needs no external lock client for its log's rename.
                   "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
        if spec.endpoint:
            options["AWS_ENDPOINT_URL"] = spec.endpoint
            options["AWS_ALLOW_HTTP"] = "true" if spec.endpoint.startswith("http://") else "false"
        if spec.access_key and spec.secret_key:
            options["AWS_ACCESS_KEY_ID"] = spec.access_key
            options["AWS_SECRET_ACCESS_KEY"] = spec.secret_key
            if spec.session_token:
                options["AWS_SESSION_TOKEN"] = spec.session_token
        elif spec.aws_profile:
            options["AWS_PROFILE"] = spec.aws_profile
        return TableLocation(uri=f"s3://{spec.bucket}/{prefix}".rstrip("/"), storage_options=options,
                             sub_prefix=sub)
    from rivet_core.destination.azure import AzureDestination

    if isinstance(dest, AzureDestination):
        from rivet_core.tableformat.azure_store import azure_options

        prefix = dest.prefix or ""
        if sub and prefix.endswith(sub):
            prefix = prefix[: -len(sub)]
        return TableLocation(uri=f"az://{dest.container}/{prefix}".rstrip("/"),
                             storage_options=azure_options(dest.spec), sub_prefix=sub)
    from rivet_core.destination.gcs import GCSDestination

    if isinstance(dest, GCSDestination):  # Delta opens it through a log copy (delta_log.py)
        from rivet_core.tableformat.gcs_store import gcs_options

        prefix = dest.prefix or ""
        if sub and prefix.endswith(sub):
            prefix = prefix[: -len(sub)]
        return TableLocation(uri=f"gs://{dest.bucket_name}/{prefix}".rstrip("/"),
                             storage_options=gcs_options(dest.spec), sub_prefix=sub)
    raise ValueError(f"a table format needs a local, s3, azure or gcs destination, not '{dest.kind}'")


def part_filesystem(loc: TableLocation) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem over the table root and the root's path in it (reads footers and,
    for MERGE / predicate overwrites, the parts' rows)."""
    import pyarrow.fs as pafs

    if loc.uri.startswith("s3://"):
        o = loc.storage_options
        endpoint = o.get("AWS_ENDPOINT_URL", "")
        fs = pafs.S3FileSystem(
            access_key=o.get("AWS_ACCESS_KEY_ID"), secret_key=o.get("AWS_SECRET_ACCESS_KEY"),
            session_token=o.get("AWS_SESSION_TOKEN"), region=o.get("AWS_REGION"),
            endpoint_override=endpoint.split("://", 1)[-1] or None,
            scheme="http" if endpoint.startswith("http://") else "https")
        return fs, loc.uri[len("s3://"):]
    if loc.uri.startswith("az://"):
        from rivet_core.tableformat.azure_store import azure_filesystem

        return azure_filesystem(loc.uri, loc.storage_options)
    if loc.uri.startswith("gs://"):
        from rivet_core.tableformat.gcs_store import gcs_filesystem

        return gcs_filesystem(loc.storage_options), loc.uri[len("gs://"):]
    return pafs.LocalFileSystem(), loc.uri
