"""A Delta table on Azure Blob Storage: how delta-rs and pyarrow reach the destination's prefix.

The same account, container and credential as the Azure destination
(rivet_core/destination/azure.py): the shared key from `account_key_env`, else the SAS
token, else no signature with `allow_anonymous`, else nothing — delta-rs then reads the
`AZURE_*` environment (service principal, managed identity), as DefaultAzureCredential
does for the destination. An `endpoint` (Azurite, a private endpoint) is the account URL
the destination computes (`account_url`), so both clients address the same blobs.

delta-rs commits the log with a conditional put (`If-None-Match: *`), which Azure Blob
Storage honours, so no lock client is needed (unlike S3, see location.py).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import pyarrow.fs as pafs

#: delta-rs (object_store) option names.
ACCOUNT, KEY, SAS, ENDPOINT = ("azure_storage_account_name", "azure_storage_account_key",
                               "azure_storage_sas_key", "azure_storage_endpoint")


def azure_options(spec: Any) -> dict[str, str]:
    """delta-rs storage options for the destination spec (credentials: never logged)."""
    from rivet_core.destination.azure import account_url

    options: dict[str, str] = {}
    if spec.account_name:
        options[ACCOUNT] = spec.account_name
    if spec.endpoint:
        url = account_url(spec)
        options[ENDPOINT] = url
        options["allow_http"] = "true" if url.startswith("http://") else "false"
    if spec.account_key:
        options[KEY] = spec.account_key
    elif spec.sas_token:
        options[SAS] = spec.sas_token.lstrip("?")
    elif spec.allow_anonymous:
        options["azure_skip_signature"] = "true"
    return options


def azure_filesystem(uri: str, options: dict[str, str]) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem over the account and the table root's path in it
    (`<container>/<prefix>`), for reading the parts' footers and rows."""
    kwargs: dict[str, Any] = {}
    if KEY in options:
        kwargs["account_key"] = options[KEY]
    elif SAS in options:
        kwargs["sas_token"] = options[SAS]
    if ENDPOINT in options:
        parts = urllib.parse.urlsplit(options[ENDPOINT])
        # Blob and DFS at the same authority: pyarrow probes the DFS endpoint for a
        # hierarchical namespace, which an emulator or private endpoint serves there too.
        kwargs.update(blob_storage_authority=parts.netloc, blob_storage_scheme=parts.scheme,
                      dfs_storage_authority=parts.netloc, dfs_storage_scheme=parts.scheme)
    fs = pafs.AzureFileSystem(options.get(ACCOUNT, ""), **kwargs)
    return fs, uri[len("az://"):]
