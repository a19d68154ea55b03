"""Clients handed in by the host (rivet_core/destination/clients.py): one mechanism for S3,
GCS and Azure, against the real emulators (fake-gcs-server, Azurite).

The specs carry no credentials and no endpoint — built from their fields, the clients would
look for Google application default credentials / DefaultAzureCredential at the public
services — so a write that lands on the emulator went through the provided client. The
emulator's own SDK (tests/cloud_areas.py) reads it back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rivet_core import api
from rivet_core.destination import DestinationSpec, open_destination
from rivet_core.destination.clients import client_provider, provided_client, s3_client_provider
from tests.cloud_areas import CloudArea, GCSArea


def _bare_spec(area: CloudArea) -> DestinationSpec:
    extra = {} if isinstance(area, GCSArea) else {"account_name": area.account}
    return DestinationSpec(kind=area.kind, bucket=area.bucket, prefix="provided/", **extra)


def test_a_provided_client_carries_the_writes_of_a_spec_without_credentials(
        cloud: CloudArea, tmp_path: Path) -> None:
    part = tmp_path / "part.bin"
    part.write_bytes(b"rivet " * 1000)
    seen: list[str] = []

    def provide(spec: DestinationSpec) -> object:
        seen.append(spec.bucket or "")
        return cloud.client()  # GCS: the storage.Client; Azure: the container's ContainerClient

    with api.client_provider(cloud.kind, provide):
        dest = open_destination(_bare_spec(cloud))
        dest.write_file(part, "part.bin")
        assert dest.read_bytes("part.bin") == part.read_bytes()
    assert seen == [cloud.bucket]
    assert cloud.read("provided/part.bin") == part.read_bytes()  # the emulator's own SDK


def test_providers_of_different_stores_nest_and_end_with_their_block() -> None:
    s3_spec = DestinationSpec(kind="s3", bucket="b")
    gcs_spec = DestinationSpec(kind="gcs", bucket="b")
    s3_client, gcs_client = object(), object()
    with s3_client_provider(lambda _spec: s3_client):  # the original name still works
        with client_provider("gcs", lambda _spec: gcs_client):
            assert provided_client(s3_spec) is s3_client
            assert provided_client(gcs_spec) is gcs_client
            with client_provider("s3", None):  # None: build it from the fields again
                assert provided_client(s3_spec) is None
            assert provided_client(s3_spec) is s3_client
        assert provided_client(gcs_spec) is None
    assert provided_client(s3_spec) is None
    with pytest.raises(ValueError, match="'local'.*s3, gcs, azure"):
        with client_provider("local", lambda _spec: None):
            pass
