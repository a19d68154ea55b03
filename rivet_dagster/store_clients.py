"""Object-store clients in Dagster come from the project's resources: S3 from dagster-aws,
GCS from dagster-gcp, Azure Blob Storage from dagster-azure.

An export names its resource with `dagster.s3_resource_key` / `gcs_resource_key` /
`azure_resource_key` (or `build_definitions(..., gcs_resource_key=...)` and the component's
attributes give one to every export of that store without its own). Its asset and checks
require that key, and their bodies run inside `api.client_provider(kind, ...)`, so the
core's destination takes the resource's client instead of building one from rivet.yaml's
credential fields. S3 exports without a key get a default `S3Resource` (rivet_dagster/s3.py);
GCS and Azure exports without one keep building their client from rivet.yaml.

The resources are duck-typed on what dagster-gcp / dagster-azure expose (not imported:
dagster-gcp needs pandas<3 through dagster-pandas, which this project's lock does not
have; dagster-azure's pins conflict with it too):

* GCS — `dagster_gcp.GCSResource.get_client()` returns a `google.cloud.storage.Client`
  (dagster-io/dagster, python_modules/libraries/dagster-gcp/dagster_gcp/gcs/resources.py;
  one release yielded it from a generator instead, so a context manager is entered too).
  GCSResource is an `IAttachDifferentObjectToOpContext`: through `required_resource_keys`
  it arrives as that client itself, which is accepted as is.
* Azure — `dagster_azure.blob.AzureBlobStorageResource.get_client()` is a context manager
  yielding an `azure.storage.blob.BlobServiceClient` (closed when the block ends;
  dagster_azure/blob/resources.py), and `dagster_azure.adls2.ADLS2Resource.blob_client` is
  a `BlobServiceClient` property (dagster_azure/adls2/resources.py). The destination gets
  that service's `get_container_client(<destination.bucket>)`.

Anything else is a clear error naming the key, the export and what was expected. Only the
client changes hands: the uploads and their checks stay rivet's own. The IO manager's
`load_input` reads with rivet.yaml's settings (it is shared across configs, holds no
resources).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import dagster as dg

from rivet_core import api
from rivet_dagster.config_block import ExportDagsterConfig
from rivet_dagster.s3 import s3_resource_key

#: The `exports[].dagster` field naming each object store's resource.
KEY_FIELDS = {"s3": "s3_resource_key", "gcs": "gcs_resource_key", "azure": "azure_resource_key"}

_EXPECTED = {
    "s3": "a dagster_aws.s3.S3Resource (get_client() → a boto3 S3 client) or a boto3 S3 client",
    "gcs": "a dagster_gcp GCSResource (get_client() → google.cloud.storage.Client) or a "
           "google.cloud.storage.Client",
    "azure": "a dagster_azure AzureBlobStorageResource (get_client() → BlobServiceClient), an "
             "ADLS2Resource (blob_client) or an azure.storage.blob.BlobServiceClient",
}


def own_key(export: api.ExportConfig, kind: str) -> str | None:
    """The key `exports[].dagster.<kind>_resource_key` names, if any."""
    return getattr(export.dagster, KEY_FIELDS[kind], None) if export.dagster is not None else None


def resource_key(export: api.ExportConfig) -> str | None:
    """The resource key an export's object-store client comes from; None when the client is
    built from rivet.yaml. A key for another store than the destination's is refused."""
    kind = export.destination.type
    for other, field in KEY_FIELDS.items():
        if other != kind and own_key(export, other):
            raise api.ConfigError(
                f"export '{export.name}': dagster.{field} is set but the destination is "
                f"type: {kind} — use dagster.{KEY_FIELDS[kind]}" if kind in KEY_FIELDS else
                f"export '{export.name}': dagster.{field} is set but the destination is "
                f"type: {kind}, which takes no client from a resource — remove it")
    if kind == "s3":
        return s3_resource_key(export)
    return own_key(export, kind) if kind in KEY_FIELDS else None


def required_keys(export: api.ExportConfig) -> set[str]:
    """`required_resource_keys` of an export's assets and checks."""
    key = resource_key(export)
    return {key} if key else set()


def use_resource(config: api.RivetConfig, kind: str, key: str) -> None:
    """Exports to `kind` without their own `dagster.<kind>_resource_key` take `key`."""
    for export in config.exports:
        if export.destination.type != kind or own_key(export, kind):
            continue
        block = export.dagster if export.dagster is not None else ExportDagsterConfig()
        export.dagster = block.model_copy(update={KEY_FIELDS[kind]: key})


def _is_client(kind: str, obj: Any) -> bool:
    if kind == "gcs":
        return callable(getattr(obj, "bucket", None)) and callable(getattr(obj, "list_blobs", None))
    if kind == "azure":
        return callable(getattr(obj, "get_container_client", None))
    return callable(getattr(obj, "put_object", None))  # s3: a boto3 client


def _client(kind: str, resource: Any, stack: ExitStack) -> Any | None:
    """The store's client the resource offers (entered into `stack` when it is a context
    manager), or None."""
    if _is_client(kind, resource):
        return resource
    if kind == "azure":
        # ADLS2Resource; a property that cannot build its client raises its own error
        service = getattr(resource, "blob_client", None)
        if _is_client(kind, service):
            return service
    get_client = getattr(resource, "get_client", None)
    if not callable(get_client):
        return None
    made = get_client()
    if _is_client(kind, made):
        return made
    if hasattr(made, "__enter__"):
        made = stack.enter_context(made)
        return made if _is_client(kind, made) else None
    return None


def _provider(kind: str, client: Any) -> Callable[[Any], Any]:
    if kind == "azure":  # the destination takes its container's client
        return lambda spec: client.get_container_client(spec.bucket or "")
    return lambda _spec: client


@contextmanager
def store_clients(context: Any, export: api.ExportConfig) -> Iterator[None]:
    """While the block runs, the core's destination of `export` uses the client of its
    resource (nothing changes when it has none)."""
    key = resource_key(export)
    if key is None:
        yield
        return
    kind = export.destination.type
    resource = getattr(context.resources, key)
    with ExitStack() as stack:
        client = _client(kind, resource, stack)
        if client is None:
            raise dg.Failure(allow_retries=False, description=(  # a wiring error: no retry helps
                f"export '{export.name}': resource '{key}' (dagster.{KEY_FIELDS[kind]}) is a "
                f"{type(resource).__name__}, which offers no {kind} client — bind under '{key}' "
                f"{_EXPECTED[kind]}"))
        with api.client_provider(kind, _provider(kind, client)):
            yield


def with_store_clients(export: api.ExportConfig):  # noqa: ANN201 - a decorator of Dagster op bodies
    """Run an asset or check body (plain or generator) inside `store_clients(context, export)`.
    `functools.wraps` keeps the body's signature, which Dagster reads."""
    if resource_key(export) is None:
        return lambda fn: fn

    def decorate(fn):  # noqa: ANN001, ANN202
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def generator(context, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
                with store_clients(context, export):
                    yield from fn(context, *args, **kwargs)
            return generator

        @functools.wraps(fn)
        def call(context, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            with store_clients(context, export):
                return fn(context, *args, **kwargs)
        return call

    return decorate
