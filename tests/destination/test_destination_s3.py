"""S3 destination against the real SeaweedFS server (SigV4): PUT/multipart/list/errors (moves, the
read cap and deletes run on every object store in test_destination_cloud.py)."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import socket
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from rivet_core.destination import DestinationSpec, fingerprint_file, open_destination
from rivet_core.destination.checksums import Fingerprint
from rivet_core.destination.s3 import MULTIPART_CONCURRENCY, S3Destination
from rivet_core.errors import DestinationError

pytestmark = pytest.mark.s3


from tests.s3_area import S3Area, fresh_prefix, s3_module_bucket  # noqa: E402,F401 - shared fixture


@pytest.fixture
def s3(s3_module_bucket: S3Area) -> S3Area:
    """Overrides conftest's `s3`: the module's bucket, a fresh prefix per test."""
    return fresh_prefix(s3_module_bucket)

MiB = 1024 * 1024


def s3_spec(s3: Any, prefix: str | None = None, **kw: Any) -> DestinationSpec:
    prefix = f"{s3.prefix}exports/orders" if prefix is None else prefix
    fields = dict(kind="s3", bucket=s3.bucket, prefix=prefix, endpoint=s3.endpoint,
                  access_key=s3.access_key, secret_key=s3.secret_key)
    fields.update(kw)
    return DestinationSpec(**fields)


def s3_dest(s3: Any, prefix: str | None = None, **kw: Any) -> S3Destination:
    dest = open_destination(s3_spec(s3, prefix, **kw))
    assert isinstance(dest, S3Destination)
    return dest


class EtagTamperingClient:
    """Real client; only the ETag in PutObject/UploadPart responses is altered, as a
    corrupting proxy between us and the server would do."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if name not in ("put_object", "upload_part"):
            return attr

        def call(**kwargs: Any) -> Any:
            resp = attr(**kwargs)
            resp["ETag"] = '"' + "0" * 32 + '"'
            return resp

        return call


def test_uri_and_prefix_normalisation(s3: Any) -> None:
    dest = s3_dest(s3, prefix="/exports/orders")
    assert dest.uri == f"s3://{s3.bucket}/exports/orders/"
    assert s3_dest(s3, prefix="").uri == f"s3://{s3.bucket}/"


def test_small_file_is_one_put_with_a_plain_md5_etag(tmp_path: Path, s3: Any) -> None:
    src = tmp_path / "p.parquet"
    src.write_bytes(os.urandom(100_000))
    dest = s3_dest(s3)
    res = dest.write_file(src, "p.parquet")
    assert (res.xxh3, res.md5_b64) == fingerprint_file(src)
    raw = s3.client().head_object(Bucket=s3.bucket, Key=f"{s3.prefix}exports/orders/p.parquet")
    assert raw["ETag"].strip('"') == hashlib.md5(src.read_bytes()).hexdigest()
    info = dest.head("p.parquet")
    assert info is not None and info.size == 100_000 and info.md5_b64 == res.md5_b64


def test_an_etag_that_disagrees_with_the_local_md5_is_corruption_in_transit(tmp_path: Path, s3: Any) -> None:
    src = tmp_path / "p.csv"
    src.write_bytes(b"a,b\n1,2\n")
    real = s3_dest(s3)
    dest = S3Destination(s3_spec(s3), client=EtagTamperingClient(real._client))
    with pytest.raises(DestinationError, match=r"part 'p.csv' corrupted in transit \(md5 [0-9a-f]{32}≠0{32}\)") as ei:
        dest.write_file(src, "p.csv")
    assert ei.value.transient is True


class SentHeaders:
    """What each request carried on the wire, recorded by botocore's `before-send` event on a
    real client: the operation, `X-Amz-Content-SHA256` and the names in SigV4's SignedHeaders."""

    def __init__(self, *clients: Any) -> None:
        self.sent: list[tuple[str, str, set[str]]] = []
        for client in {id(c): c for c in clients}.values():
            client.meta.events.register("before-send.s3", self._record)

    def _record(self, request: Any, event_name: str, **_: Any) -> None:
        auth = str(request.headers.get("Authorization", ""))
        signed = auth.split("SignedHeaders=", 1)[1].split(",", 1)[0] if "SignedHeaders=" in auth else ""
        sha = request.headers.get("X-Amz-Content-SHA256", b"")
        self.sent.append((event_name.rsplit(".", 1)[1],
                          sha.decode() if isinstance(sha, bytes) else str(sha), set(signed.split(";"))))

    def of(self, operation: str) -> list[tuple[str, set[str]]]:
        return [(sha, signed) for op, sha, signed in self.sent if op == operation]


def test_a_body_sent_with_its_md5_is_not_hashed_again_on_plain_http(tmp_path: Path, s3: Any) -> None:
    """PutObject and UploadPart bodies are sent UNSIGNED-PAYLOAD with Content-MD5 among the
    signed headers; every other call keeps its signed SHA-256; the objects round-trip."""
    assert s3.endpoint.startswith("http://")
    dest = s3_dest(s3, multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    seen = SentHeaders(dest._client, dest._body_client)
    small, big = tmp_path / "small.bin", tmp_path / "big.bin"
    small.write_bytes(os.urandom(1000))
    big.write_bytes(os.urandom(11 * MiB))
    dest.write_file(small, "small.bin")
    dest.write_file(big, "big.bin")
    bodies = seen.of("PutObject") + seen.of("UploadPart")
    assert len(bodies) == 1 + 3
    assert all(sha == "UNSIGNED-PAYLOAD" and "content-md5" in signed for sha, signed in bodies)
    others = seen.of("CreateMultipartUpload") + seen.of("CompleteMultipartUpload")
    assert len(others) == 2 and all(re.fullmatch("[0-9a-f]{64}", sha) for sha, _ in others)
    for name, src in (("small.bin", small), ("big.bin", big)):
        raw = s3.client().get_object(Bucket=s3.bucket, Key=f"{s3.prefix}exports/orders/{name}")
        assert raw["Body"].read() == src.read_bytes()


def test_a_body_changed_after_signing_is_refused_by_its_signed_md5(tmp_path: Path, s3: Any) -> None:
    """The guarantee the unsigned payload rests on: a body altered on the way (same length,
    after the request was signed) is refused by the server, and no object appears."""
    src = tmp_path / "p.bin"
    src.write_bytes(os.urandom(4096))
    dest = s3_dest(s3)

    def corrupt(request: Any, **_: Any) -> None:
        request.body = bytes(b ^ 0xFF for b in src.read_bytes())

    dest._body_client.meta.events.register("before-send.s3.PutObject", corrupt)
    with pytest.raises(DestinationError, match=r"corrupted in transit \(server rejected Content-MD5\)"):
        dest.write_file(src, "p.bin")
    assert dest.head("p.bin") is None


def test_a_file_above_the_threshold_goes_multipart_and_round_trips_byte_for_byte(tmp_path: Path, s3: Any) -> None:
    src = tmp_path / "big.parquet"
    src.write_bytes(os.urandom(17 * MiB + 123))
    dest = s3_dest(s3)  # default 16 MiB threshold and chunks
    res = dest.write_file(src, "big.parquet")
    raw = s3.client().get_object(Bucket=s3.bucket, Key=f"{s3.prefix}exports/orders/big.parquet")
    assert raw["ETag"].strip('"').endswith("-2")
    assert raw["Body"].read() == src.read_bytes()
    assert (res.xxh3, res.md5_b64) == fingerprint_file(src) and res.size == src.stat().st_size
    info = dest.head("big.parquet")
    assert info is not None and info.size == res.size and info.md5_b64 is None  # not an MD5


def test_multipart_upload_streams_the_file_in_bounded_memory(tmp_path: Path, s3: Any) -> None:
    src = tmp_path / "stream.bin"
    with open(src, "wb") as fh:
        for _ in range(8):
            fh.write(os.urandom(5 * MiB))
    dest = s3_dest(s3, multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    tracemalloc.start()
    try:
        res = dest.write_file(src, "stream.bin")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.size == 40 * MiB
    # the chunks in flight plus the one being read, never the file
    bound = (MULTIPART_CONCURRENCY + 1) * 5 * MiB + 2 * MiB
    assert bound < 40 * MiB
    assert peak < bound, f"multipart held {peak / MiB:.1f} MiB for a 40 MiB file"
    etag = s3.client().head_object(Bucket=s3.bucket, Key=f"{s3.prefix}exports/orders/stream.bin")["ETag"]
    assert etag.strip('"').endswith("-8")


class ConcurrencyRecordingClient:
    """Real client; records how many UploadPart requests were running at the same time."""

    def __init__(self, real: Any) -> None:
        import threading

        self._real, self._lock = real, threading.Lock()
        self.running = self.most = 0
        self.numbers: list[int] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if name != "upload_part":
            return attr

        def call(**kwargs: Any) -> Any:
            with self._lock:
                self.running += 1
                self.most = max(self.most, self.running)
                self.numbers.append(kwargs["PartNumber"])
            try:
                return attr(**kwargs)
            finally:
                with self._lock:
                    self.running -= 1
        return call


def test_multipart_parts_upload_concurrently_within_the_bound_and_assemble_in_order(
        tmp_path: Path, s3: Any) -> None:
    src = tmp_path / "many.bin"
    src.write_bytes(os.urandom(9 * 5 * MiB + 777))
    real = s3_dest(s3, multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    client = ConcurrencyRecordingClient(real._client)
    dest = S3Destination(s3_spec(s3, multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB), client=client)
    res = dest.write_file(src, "many.bin")
    assert sorted(client.numbers) == list(range(1, 11))
    assert 1 <= client.most <= MULTIPART_CONCURRENCY
    raw = s3.client().get_object(Bucket=s3.bucket, Key=f"{s3.prefix}exports/orders/many.bin")
    assert raw["ETag"].strip('"').endswith("-10")
    assert raw["Body"].read() == src.read_bytes()
    assert (res.xxh3, res.md5_b64) == fingerprint_file(src)


def test_multipart_part_corruption_aborts_and_leaves_no_object(tmp_path: Path, s3: Any) -> None:
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(6 * MiB))
    real = s3_dest(s3, multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    dest = S3Destination(s3_spec(s3, multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB),
                         client=EtagTamperingClient(real._client))
    with pytest.raises(DestinationError, match="corrupted in transit"):
        dest.write_file(src, "big.bin")
    assert real.head("big.bin") is None
    uploads = s3.client().list_multipart_uploads(Bucket=s3.bucket).get("Uploads", [])
    assert [u for u in uploads if u["Key"].endswith("big.bin")] == []


def test_write_bytes_is_a_single_put_even_above_the_multipart_threshold(s3: Any) -> None:
    dest = s3_dest(s3, multipart_threshold=5 * MiB)
    data = b"{" + b" " * (6 * MiB) + b"}"
    res = dest.write_bytes(data, "manifest.json")
    etag = s3.client().head_object(Bucket=s3.bucket, Key=f"{s3.prefix}exports/orders/manifest.json")["ETag"]
    assert etag.strip('"') == hashlib.md5(data).hexdigest()
    assert base64.b64decode(res.md5_b64) == hashlib.md5(data).digest()


def test_list_paginates_past_1000_keys_and_stays_inside_the_prefix(s3: Any) -> None:
    client = s3.client()
    keys = [f"{s3.prefix}exports/orders/part-{i:05d}.csv" for i in range(1005)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=s3.bucket, Key=k, Body=b"x"), keys))
    client.put_object(Bucket=s3.bucket, Key=f"{s3.prefix}exports/other/x.csv", Body=b"y")
    client.put_object(Bucket=s3.bucket, Key=f"{s3.prefix}exports/orders_sibling.csv", Body=b"z")
    listing = s3_dest(s3).list()
    assert [o.key for o in listing] == [k.removeprefix(f"{s3.prefix}exports/orders/") for k in keys]
    assert all(o.size == 1 and o.md5_b64 for o in listing)
    assert [o.key for o in s3_dest(s3).list("part-0100")] == [f"part-0100{i}.csv" for i in range(5)]


# Moves, the read cap and deletes: the shared object-store contract, run on S3 too
# (tests/destination/test_destination_cloud.py, the `store` fixture).


@pytest.mark.parametrize("op", ["write", "head", "list"])
def test_wrong_credentials_name_the_credential_settings_and_hide_the_secret(op: str, s3: Any) -> None:
    secret = "definitely-wrong-secret-value"
    dest = s3_dest(s3, secret_key=secret)
    call = {"write": lambda: dest.write_bytes(b"x", "k"), "head": lambda: dest.head("k"),
            "list": lambda: dest.list()}[op]
    with pytest.raises(DestinationError) as ei:
        call()
    msg = str(ei.value)
    assert "access_key_env" in msg and "secret_key_env" in msg and s3.bucket in msg
    assert secret not in msg and s3.secret_key not in msg
    assert ei.value.transient is False


@pytest.mark.parametrize("op", ["head", "list", "read"])
def test_a_missing_bucket_is_reported_with_the_fix(op: str, s3: Any) -> None:
    dest = s3_dest(s3, bucket=s3.bucket + "-missing")
    call = {"head": lambda: dest.head("manifest.json"), "list": lambda: dest.list(),
            "read": lambda: dest.read_bytes("manifest.json")}[op]
    with pytest.raises(DestinationError, match=rf"bucket '{s3.bucket}-missing' does not exist — create it or fix destination.bucket"):
        call()


def test_an_unreachable_endpoint_is_a_transient_error(s3: Any) -> None:
    import boto3
    from botocore.config import Config

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spec = s3_spec(s3, endpoint=f"http://127.0.0.1:{port}")
    client = boto3.client("s3", endpoint_url=spec.endpoint, aws_access_key_id="a", aws_secret_access_key="b",
                          region_name="us-east-1", config=Config(retries={"max_attempts": 1}, connect_timeout=2))
    with pytest.raises(DestinationError, match="cannot reach the S3 endpoint") as ei:
        S3Destination(spec, client=client).list()
    assert ei.value.transient is True


def test_server_errors_and_throttling_are_classified_transient(s3: Any) -> None:
    from botocore.exceptions import ClientError

    dest = s3_dest(s3)

    def err(code: str, status: int) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": "m"},
                            "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")

    assert dest._error(err("SlowDown", 503), "write", "k").transient is True
    assert dest._error(err("InternalError", 500), "write", "k").transient is True
    assert dest._error(err("InvalidArgument", 400), "write", "k").transient is False
    assert dest._error(err("AccessDenied", 403), "write", "k").transient is False


def test_only_one_of_access_key_and_secret_is_a_config_hint(s3: Any) -> None:
    with pytest.raises(DestinationError, match="set both"):
        open_destination(s3_spec(s3, secret_key=None))


@pytest.mark.parametrize("size", [1 * MiB, 6 * MiB], ids=["single-put", "multipart"])
def test_staged_bytes_that_differ_from_the_writers_fingerprint_are_never_published(
        tmp_path: Path, s3: Any, size: int) -> None:
    src = tmp_path / "part.parquet"
    src.write_bytes(os.urandom(size))
    xxh3, md5 = fingerprint_file(src)
    dest = s3_dest(s3, multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    ok = dest.write_file(src, "good.parquet", Fingerprint(size=size, xxh3=xxh3, md5_b64=md5))
    assert (ok.xxh3, ok.md5_b64) == (xxh3, md5)
    stale = Fingerprint(size=size, xxh3="xxh3:0000000000000000", md5_b64=md5)
    with pytest.raises(DestinationError, match="changed after it was written"):
        dest.write_file(src, "bad.parquet", stale)
    assert dest.head("bad.parquet") is None
    uploads = s3.client().list_multipart_uploads(Bucket=s3.bucket).get("Uploads", [])
    assert [u for u in uploads if u["Key"].endswith("bad.parquet")] == []
