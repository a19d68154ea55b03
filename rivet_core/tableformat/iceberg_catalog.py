"""Where an export's Iceberg table is registered and how pyiceberg reaches its files.

`table_format: iceberg` (docs/adr/0009-table-formats.md) registers the table in pyiceberg's
SQL catalog (a SQLAlchemy URL: SQLite or PostgreSQL; its tables are created on first use).
The catalog holds only the pointer to the table's current metadata file; the metadata
(`metadata/` beside `manifest.json`) and the data files (the parts under `data/`) live at
the export's prefix, which is the table's location and the catalog's warehouse.

The file IO is pyiceberg's pyarrow one, configured from the export's own destination
(endpoint, region, keys: never logged, never stored in the catalog).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rivet_core.config.models import ExportConfig
from rivet_core.tableformat.errors import TableCommitError
from rivet_core.tableformat.location import TableLocation


def identifier(export: ExportConfig) -> tuple[str, str]:
    """(namespace, table) of the export's table: `iceberg.table`, or the export's name."""
    block = export.iceberg
    if block is None or not block.namespace:  # the config check refuses this at load
        raise TableCommitError(f"export '{export.name}': table_format: iceberg needs iceberg.namespace")
    return block.namespace, block.table or export.name


def table_name(export: ExportConfig) -> str:
    """`namespace.table`, as the manifest and an integration's metadata name it."""
    return ".".join(identifier(export))


def location_uri(loc: TableLocation) -> str:
    """The table's location as Iceberg metadata records it, in a form every engine reading
    the catalog understands: `s3://bucket/prefix`, `gs://bucket/prefix`, `file:///abs/path`,
    or for Azure `abfs[s]://container@account.dfs.core.windows.net/prefix` (Spark's and
    Java Iceberg's ADLS form; `abfs` when the endpoint is plain http, as Azurite's is)."""
    if loc.uri.startswith("az://"):
        from rivet_core.tableformat.azure_store import ACCOUNT, ENDPOINT

        account = loc.storage_options.get(ACCOUNT)
        if not account:
            raise TableCommitError("table_format: iceberg on azure needs destination.account_name (the table's "
                                   "location names the account: abfss://<container>@<account>.dfs.core.windows.net)")
        container, _, path = loc.uri[len("az://"):].partition("/")
        scheme = "abfs" if loc.storage_options.get(ENDPOINT, "").startswith("http://") else "abfss"
        return f"{scheme}://{container}@{account}.dfs.core.windows.net/{path}".rstrip("/")
    return loc.uri if "://" in loc.uri else "file://" + loc.uri


def io_properties(loc: TableLocation) -> dict[str, str]:
    """pyiceberg FileIO properties from the destination's settings (location.py's
    storage options: the same endpoint and credentials the parts were written with).
    Azure and GCS go through iceberg_io.RivetFileIO, which builds Rivet's filesystems from
    the options passed under `rivet.`."""
    if loc.uri.startswith(("az://", "gs://")):
        from rivet_core.tableformat.iceberg_io import PREFIX

        return {"py-io-impl": "rivet_core.tableformat.iceberg_io.RivetFileIO",
                **{PREFIX + k: v for k, v in loc.storage_options.items()}}
    props = {"py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO"}
    o = loc.storage_options
    for ours, theirs in (("AWS_ENDPOINT_URL", "s3.endpoint"), ("AWS_ACCESS_KEY_ID", "s3.access-key-id"),
                         ("AWS_SECRET_ACCESS_KEY", "s3.secret-access-key"),
                         ("AWS_SESSION_TOKEN", "s3.session-token"), ("AWS_REGION", "s3.region"),
                         ("AWS_PROFILE", "s3.profile-name")):
        if o.get(ours):
            props[theirs] = o[ours]
    return props


@contextmanager
def open_catalog(export: ExportConfig, loc: TableLocation) -> Iterator[Any]:
    """pyiceberg's SqlCatalog for the export (tables created if missing); its engine's
    connections are closed on exit."""
    from pyiceberg.catalog.sql import SqlCatalog

    block = export.iceberg
    if block is None:
        raise TableCommitError(f"export '{export.name}': table_format: iceberg needs an iceberg: block")
    url = block.resolve_catalog_url()
    try:
        catalog = SqlCatalog(block.catalog_name, uri=url, warehouse=location_uri(loc), **io_properties(loc))
    except Exception as exc:  # error boundary: name the catalog, never its URL's password
        from rivet_core.redact import redact_secrets

        raise TableCommitError(f"export '{export.name}': cannot open the Iceberg catalog "
                               f"'{block.catalog_name}' at {redact_secrets(url)}: {redact_secrets(exc)}") from None
    try:
        yield catalog
    finally:
        catalog.engine.dispose()
