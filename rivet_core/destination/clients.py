"""Object-store clients handed in by the caller instead of built from rivet.yaml.

The CLI builds each cloud's client from the destination's own fields (endpoint, region,
credential variables, profile, credentials_file). A host application that manages
credentials itself — an orchestrator's storage resource, say — provides the client instead,
for everything opened while `client_provider(kind, ...)` is active in the calling context:
exports, their verification and reads. One mechanism serves every object store; what the
provider returns is what that destination's constructor accepts as `client`:

* `s3`: a boto3 S3 client (rivet_core/destination/s3.py);
* `gcs`: a `google.cloud.storage.Client` (rivet_core/destination/gcs.py);
* `azure`: the `azure.storage.blob.ContainerClient` of the destination's container
  (`spec.bucket`; rivet_core/destination/azure.py).

The uploads stay rivet's own (S3: Content-MD5 per part, ETag and size checked; GCS: md5Hash
sent and the finished object's size/MD5 checked; Azure: Content-MD5 per block and for the
blob), whichever client carries them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from rivet_core.destination.base import DestinationSpec

ClientProvider = Callable[[DestinationSpec], Any]
#: Kept as a name: the S3 provider is a `ClientProvider` like the others.
S3ClientProvider = ClientProvider

#: The object stores whose destinations accept an injected client.
PROVIDED_KINDS = ("s3", "gcs", "azure")

_providers: ContextVar[Mapping[str, ClientProvider] | None] = ContextVar("rivet_client_providers", default=None)


@contextmanager
def client_provider(kind: str, provider: ClientProvider | None) -> Iterator[None]:
    """Within the block, `kind` destinations (s3, gcs or azure) take their client from
    `provider(spec)` (None: build it from the destination's fields, as without the block).
    Providers of other kinds active in an enclosing block stay in force."""
    if kind not in PROVIDED_KINDS:
        raise ValueError(f"no client can be provided for destination type {kind!r} — "
                         f"expected one of {', '.join(PROVIDED_KINDS)}")
    current = dict(_providers.get() or {})
    if provider is None:
        current.pop(kind, None)
    else:
        current[kind] = provider
    token = _providers.set(current)
    try:
        yield
    finally:
        _providers.reset(token)


def s3_client_provider(provider: S3ClientProvider | None) -> Any:
    """`client_provider("s3", provider)` — the original name, kept for callers."""
    return client_provider("s3", provider)


def provided_client(spec: DestinationSpec) -> Any | None:
    """The caller's client for `spec` (by `spec.kind`), or None when no provider is active."""
    provider = (_providers.get() or {}).get((spec.kind or "").strip().lower())
    return provider(spec) if provider is not None else None


def provided_s3_client(spec: DestinationSpec) -> Any | None:
    """`provided_client` for an S3 spec (the original name)."""
    return provided_client(spec)
