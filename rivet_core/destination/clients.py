"""Object-store clients handed in by the caller instead of built from rivet.yaml.

The CLI builds its S3 client from the destination's own fields (endpoint, region,
`access_key_env`/`secret_key_env`, profile). A host application that manages credentials
itself — an orchestrator's S3 resource, say — provides the client instead, for everything
opened while `s3_client_provider(...)` is active in the calling thread: exports, their
verification and reads. The uploads stay rivet's own (Content-MD5 on every part, ETag and
size checked after each write), whichever client carries them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from rivet_core.destination.base import DestinationSpec

S3ClientProvider = Callable[[DestinationSpec], Any]

_s3_provider: ContextVar[S3ClientProvider | None] = ContextVar("rivet_s3_client_provider", default=None)


@contextmanager
def s3_client_provider(provider: S3ClientProvider | None) -> Iterator[None]:
    """Within the block, S3 destinations take their boto3 client from `provider(spec)`
    (None: build it from the destination's fields, as without the block)."""
    token = _s3_provider.set(provider)
    try:
        yield
    finally:
        _s3_provider.reset(token)


def provided_s3_client(spec: DestinationSpec) -> Any | None:
    """The caller's client for `spec`, or None when no provider is active."""
    provider = _s3_provider.get()
    return provider(spec) if provider is not None else None
