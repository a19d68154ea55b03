"""GCS and Azure destinations against the real emulators (fake-gcs-server, Azurite).

The object-store contract every backend shares — quarantine moves, the read cap, idempotent
deletes — runs on S3 (SeaweedFS) as well, through the `store` fixture, with each service's
own SDK as the oracle; S3-only behaviour stays in test_destination_s3.py.

Each contract test runs on both clouds (`cloud` fixture); the oracle is the cloud's own SDK
(tests/cloud_areas.py), never rivet's destination code. What is checked: one-request writes
whose MD5 the service reports back, large parts streamed in bounded memory (resumable
upload / staged blocks) and round-tripping byte for byte, staged bytes that changed never
becoming visible, listing inside the prefix, quarantine moves, the read cap, idempotent
deletes, a SAS token (writes, moves; a read-only one refused naming its variable), and errors
that name the setting to fix without ever printing a secret.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rivet_core.destination import Destination, DestinationSpec, fingerprint_file, open_destination
from rivet_core.destination.checksums import Fingerprint
from rivet_core.errors import DestinationError
from tests.cloud_areas import AzureArea, CloudArea, GCSArea
from tests.s3_area import fresh_prefix, s3_module_bucket  # noqa: F401 - the module's S3 bucket fixture

MiB = 1024 * 1024
PREFIX = "exports/items/"  # the areas' own prefix (tests/cloud_areas.py)


def cloud_dest(area: CloudArea, prefix: str = PREFIX, **kw: Any) -> Any:
    return open_destination(DestinationSpec(**{**area.spec_fields(), "prefix": prefix, **kw}))


def service_md5(area: CloudArea, key: str) -> str | None:
    """The MD5 the service itself reports for an object (GCS md5Hash, Azure Content-MD5)."""
    if isinstance(area, GCSArea):
        return area.client().bucket(area.bucket).get_blob(key).md5_hash
    md5 = area.client().get_blob_client(key).get_blob_properties().content_settings.content_md5
    return base64.b64encode(bytes(md5)).decode() if md5 else None


@dataclass
class Store:
    """A destination on one object store, and that store's own SDK to check it with."""

    kind: str
    dest: Destination
    keys: Callable[[], dict[str, int]]  # every object under the prefix → size
    read: Callable[[str], bytes]


@pytest.fixture(params=["s3", "gcs", "azure"])
def store(request: pytest.FixtureRequest) -> Store:
    if request.param != "s3":
        area = request.getfixturevalue(request.param)
        return Store(request.param, cloud_dest(area), area.keys, lambda key: area.read(PREFIX + key))
    s3 = fresh_prefix(request.getfixturevalue("s3_module_bucket"))
    prefix, client = s3.prefix + PREFIX, s3.client()
    dest = open_destination(DestinationSpec(kind="s3", bucket=s3.bucket, prefix=prefix, endpoint=s3.endpoint,
                                            access_key=s3.access_key, secret_key=s3.secret_key))
    return Store("s3", dest,
                 lambda: {o["Key"][len(prefix):]: o["Size"]
                          for o in client.list_objects_v2(Bucket=s3.bucket, Prefix=prefix).get("Contents", [])},
                 lambda key: client.get_object(Bucket=s3.bucket, Key=prefix + key)["Body"].read())


def test_uri_names_the_bucket_or_container_and_the_normalised_prefix(cloud: CloudArea) -> None:
    scheme = "gs" if cloud.kind == "gcs" else "az"
    assert cloud_dest(cloud, prefix="/exports/items").uri == f"{scheme}://{cloud.bucket}/exports/items/"
    assert cloud_dest(cloud, prefix="").uri == f"{scheme}://{cloud.bucket}/"


def test_a_small_file_is_one_request_and_the_service_reports_our_md5(tmp_path: Path, cloud: CloudArea) -> None:
    src = tmp_path / "p.parquet"
    src.write_bytes(os.urandom(100_000))
    dest = cloud_dest(cloud)
    res = dest.write_file(src, "p.parquet")
    assert (res.xxh3, res.md5_b64) == fingerprint_file(src) and res.size == 100_000
    expected = base64.b64encode(hashlib.md5(src.read_bytes()).digest()).decode()
    assert service_md5(cloud, PREFIX + "p.parquet") == expected
    info = dest.head("p.parquet")
    assert info is not None and (info.size, info.md5_b64) == (100_000, expected)
    assert cloud.read(PREFIX + "p.parquet") == src.read_bytes()


def test_a_large_file_streams_in_bounded_memory_and_round_trips(tmp_path: Path, cloud: CloudArea) -> None:
    src = tmp_path / "stream.bin"
    with open(src, "wb") as fh:
        for _ in range(8):
            fh.write(os.urandom(5 * MiB))
        fh.write(b"tail")
    dest = cloud_dest(cloud, multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    tracemalloc.start()
    try:
        res = dest.write_file(src, "stream.bin")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.size == 40 * MiB + 4 and (res.xxh3, res.md5_b64) == fingerprint_file(src)
    assert peak < 20 * MiB, f"the upload held {peak / MiB:.1f} MiB for a 40 MiB file"
    assert cloud.read(PREFIX + "stream.bin") == src.read_bytes()
    assert service_md5(cloud, PREFIX + "stream.bin") == res.md5_b64
    if isinstance(cloud, AzureArea):  # staged blocks, one per chunk, committed as one blob
        committed, uncommitted = cloud.client().get_blob_client(PREFIX + "stream.bin").get_block_list("all")
        assert (len(committed), len(uncommitted)) == (9, 0)


@pytest.mark.parametrize("size", [1 * MiB, 6 * MiB], ids=["one-request", "streamed"])
def test_staged_bytes_that_differ_from_the_writers_fingerprint_never_become_visible(
        tmp_path: Path, cloud: CloudArea, size: int) -> None:
    src = tmp_path / "part.parquet"
    src.write_bytes(os.urandom(size))
    xxh3, md5 = fingerprint_file(src)
    wrong = Fingerprint(size=size, xxh3="xxh3:0000000000000000", md5_b64=md5)
    dest = cloud_dest(cloud, multipart_threshold=5 * MiB, multipart_chunksize=1 * MiB)
    with pytest.raises(DestinationError, match="changed after it was written"):
        dest.write_file(src, "part.parquet", staged=wrong)
    assert dest.head("part.parquet") is None and cloud.keys() == {}
    right = Fingerprint(size=size, xxh3=xxh3, md5_b64=md5)
    assert dest.write_file(src, "part.parquet", staged=right).xxh3 == xxh3


def test_write_bytes_is_one_request_even_above_the_threshold(cloud: CloudArea) -> None:
    dest = cloud_dest(cloud, multipart_threshold=1 * MiB)
    data = b"{" + b" " * (2 * MiB) + b"}"
    res = dest.write_bytes(data, "manifest.json")
    assert base64.b64decode(res.md5_b64) == hashlib.md5(data).digest()
    assert service_md5(cloud, PREFIX + "manifest.json") == res.md5_b64
    if isinstance(cloud, AzureArea):
        committed, _ = cloud.client().get_blob_client(PREFIX + "manifest.json").get_block_list("all")
        assert len(committed) <= 1  # a Put Blob, not staged blocks


def test_list_stays_inside_the_prefix_and_reports_sizes_and_md5s(cloud: CloudArea) -> None:
    for i in range(5):
        cloud.put(f"{PREFIX}part-{i:03d}.csv", b"x" * (i + 1))
    cloud.put("exports/other/x.csv", b"y")
    cloud.put("exports/items_sibling.csv", b"z")
    listing = cloud_dest(cloud).list()
    assert [(o.key, o.size) for o in listing] == [(f"part-{i:03d}.csv", i + 1) for i in range(5)]
    assert all(o.md5_b64 for o in listing)
    assert [o.key for o in cloud_dest(cloud).list("part-00")] == [f"part-00{i}.csv" for i in range(5)]


def test_move_copies_then_deletes_only_the_source(store: Store) -> None:
    store.dest.write_bytes(b"divergent", "p1.parquet")
    store.dest.write_bytes(b"other", "p2.parquet")
    store.dest.move("p1.parquet", "_quarantine/run-1/p1.parquet")
    assert store.keys() == {"_quarantine/run-1/p1.parquet": 9, "p2.parquet": 5}
    assert store.read("_quarantine/run-1/p1.parquet") == b"divergent"
    with pytest.raises(DestinationError, match="does not exist"):
        store.dest.move("p1.parquet", "x")
    assert store.keys() == {"_quarantine/run-1/p1.parquet": 9, "p2.parquet": 5}


#: How each backend confirms a copy (rivet_core/destination/base.py `move_by_copy`).
MOVE_MD5 = {"s3": "never", "gcs": "if_known", "azure": "always"}


@pytest.mark.parametrize("copied", [b"short", b"DIVERGENT"], ids=["other-size", "same-size-other-bytes"])
def test_a_copy_that_did_not_land_intact_keeps_the_source(store: Store, copied: bytes) -> None:
    """The move's check on a real service: the copy step writes other bytes at the target
    (a copy corrupted on the way); the source must stay. S3 confirms by size only (a
    multipart ETag is no MD5), so same-size bytes pass there — and only there."""
    from rivet_core.destination.base import move_by_copy

    store.dest.write_bytes(b"divergent", "p1.parquet")

    def corrupt_copy(_src: Any) -> None:
        store.dest.write_bytes(copied, "_quarantine/r/p1.parquet")

    if len(copied) == 9 and store.kind == "s3":
        move_by_copy(store.dest, "p1.parquet", "_quarantine/r/p1.parquet", corrupt_copy,
                     md5=MOVE_MD5[store.kind], where=str)
        assert store.keys() == {"_quarantine/r/p1.parquet": 9}
        return
    with pytest.raises(DestinationError, match="the copy did not land intact .*the source was kept"):
        move_by_copy(store.dest, "p1.parquet", "_quarantine/r/p1.parquet", corrupt_copy,
                     md5=MOVE_MD5[store.kind], where=str)
    assert store.read("p1.parquet") == b"divergent"


def test_read_bytes_refuses_objects_over_the_cap_and_delete_is_idempotent(store: Store) -> None:
    store.dest.write_bytes(b"x" * 5000, "_SUCCESS")
    with pytest.raises(DestinationError, match="over the 4096-byte limit"):
        store.dest.read_bytes("_SUCCESS", max_bytes=4096)
    assert store.dest.read_bytes("_SUCCESS", max_bytes=5000) == b"x" * 5000
    store.dest.delete("_SUCCESS")
    store.dest.delete("_SUCCESS")  # missing: not an error (Destination.delete)
    assert store.dest.head("_SUCCESS") is None and store.keys() == {}


@pytest.mark.parametrize("op", ["head", "list", "write"])
def test_a_missing_bucket_or_container_is_reported_with_the_fix(op: str, cloud: CloudArea) -> None:
    dest = open_destination(DestinationSpec(**{**cloud.spec_fields(), "bucket": cloud.bucket + "-missing"}))
    call = {"head": lambda: dest.head("manifest.json"), "list": lambda: dest.list(),
            "write": lambda: dest.write_bytes(b"{}", "manifest.json")}[op]
    with pytest.raises(DestinationError, match=rf"'{cloud.bucket}-missing' does not exist( in account '\w+')? — create it or fix destination.bucket"):
        call()


def test_an_unreachable_endpoint_is_a_transient_error_naming_the_settings(cloud: CloudArea) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}" + ("/" + cloud.account if isinstance(cloud, AzureArea) else "")
    dest = open_destination(DestinationSpec(**{**cloud.spec_fields(), "endpoint": endpoint,
                                               "timeout_s": 1, "max_attempts": 2}))
    with pytest.raises(DestinationError, match="cannot reach the .* endpoint") as ei:
        dest.list()
    assert ei.value.transient is True and "destination.timeout_s" in str(ei.value)


@pytest.mark.parametrize("op", ["write", "head", "list"])
def test_a_wrong_azure_key_names_account_key_env_and_hides_the_key(op: str, azure: AzureArea) -> None:
    secret = base64.b64encode(b"definitely-not-the-key-" * 3).decode()
    dest = open_destination(DestinationSpec(**{**azure.spec_fields(), "account_key": secret, "prefix": PREFIX}))
    call = {"write": lambda: dest.write_bytes(b"x", "k"), "head": lambda: dest.head("k"),
            "list": lambda: dest.list()}[op]
    with pytest.raises(DestinationError) as ei:
        call()
    msg = str(ei.value)
    assert "account_key_env" in msg and azure.bucket in msg, msg
    assert secret not in msg and azure.key not in msg
    assert ei.value.transient is False and ei.value.code == "RIVET_DEST_CREDENTIALS"


def test_a_broken_gcs_credentials_file_is_named_and_never_quoted(tmp_path: Path, gcs: GCSArea) -> None:
    private_key = "-----BEGIN PRIVATE KEY-----\nTHIS-IS-THE-SECRET-PART\n-----END PRIVATE KEY-----\n"
    key_file = tmp_path / "sa.json"
    key_file.write_text(json.dumps({"type": "service_account", "project_id": "p", "private_key_id": "1",
                                    "private_key": private_key, "client_email": "x@p.iam.gserviceaccount.com",
                                    "token_uri": "http://127.0.0.1:9/token"}))
    with pytest.raises(DestinationError) as ei:
        open_destination(DestinationSpec(**{**gcs.spec_fields(), "credentials_file": str(key_file)}))
    msg = str(ei.value)
    assert f"credentials_file '{key_file}' is not a usable service-account key" in msg
    assert "THIS-IS-THE-SECRET-PART" not in msg and ei.value.code == "RIVET_DEST_CREDENTIALS"


def test_an_azure_sas_token_writes_lists_and_moves_and_is_never_printed(azure: AzureArea) -> None:
    from datetime import UTC, datetime, timedelta

    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    sas = generate_container_sas(azure.account, azure.bucket, account_key=azure.key,
                                 permission=ContainerSasPermissions(read=True, write=True, list=True, delete=True,
                                                                    create=True, add=True),
                                 expiry=datetime.now(UTC) + timedelta(hours=1))
    fields = {k: v for k, v in azure.spec_fields().items() if k != "account_key"}
    dest = open_destination(DestinationSpec(**fields, sas_token=sas, prefix=PREFIX, credential_env="AZ_SAS"))
    dest.write_bytes(b"part", "p.csv")
    dest.move("p.csv", "_quarantine/r/p.csv")
    assert [o.key for o in dest.list()] == ["_quarantine/r/p.csv"]
    assert azure.read(PREFIX + "_quarantine/r/p.csv") == b"part"

    read_only = generate_container_sas(azure.account, azure.bucket, account_key=azure.key,
                                       permission=ContainerSasPermissions(read=True, list=True),
                                       expiry=datetime.now(UTC) + timedelta(hours=1))
    dest = open_destination(DestinationSpec(**fields, sas_token=read_only, prefix=PREFIX, credential_env="AZ_SAS"))
    with pytest.raises(DestinationError) as ei:
        dest.write_bytes(b"x", "q.csv")
    msg = str(ei.value)
    assert "destination.sas_token_env (AZ_SAS)" in msg and ei.value.code == "RIVET_DEST_CREDENTIALS", msg
    assert msg.startswith("write ") and "q.csv was refused" in msg, msg  # the refused verb is the write
    signature = dict(p.split("=", 1) for p in read_only.split("&"))["sig"]
    assert signature not in msg and read_only not in msg
