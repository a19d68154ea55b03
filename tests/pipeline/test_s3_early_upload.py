"""S3 parts uploaded while they are encoded (rivet_core/destination/s3_multipart.py `EarlyUpload`).

Against real SeaweedFS servers: the run is parked once the source is drained but before the
writer has finished the part — its last row group and footer are not encoded yet (the
`after_source_read` file barrier, rivet_core/pipeline/faults.py) — and the server itself is
asked what is in flight: a multipart upload with parts already stored under the part's final
key, while nothing is listed under the prefix (the object appears only when the commit facade completes it, after
the extract and the quality gate: docs/invariants.md I1/I2). The outputs are re-read with
pyarrow from the bucket and compared with the source queried directly; the failure case
SIGKILLs a private SeaweedFS by PID there and requires a clean failure (no manifest, no
_SUCCESS, no part) and a re-run that recovers.

The table: random bytes (incompressible), ~32 MB of Parquet in 50 k-row groups: two groups
(~27 MB, over the 16 MiB multipart threshold) are on disk at the barrier, 20 k rows are not.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.hardening.support import (
    PauseBarrier,
    cli,
    finish,
    private_s3,
    rivet_popen,
    s3_keys,
    wait_until,
)
from tests.helpers import db_exec, source_block, write_config
from tests.s3_area import fresh_prefix, s3_module_bucket  # noqa: F401 - fixtures

ROWS = 120_000
#: 4 × 64 random bytes per row: ~32 MB of Parquet that zstd cannot shrink.
PAYLOAD = " || ".join(f"sha512(int8send(g::bigint * 4 + {i}))" for i in range(4))


@pytest.fixture
def s3(s3_module_bucket):  # noqa: ANN001, ANN201, F811
    return fresh_prefix(s3_module_bucket)


@pytest.fixture
def pg_blobs(pg_url: str) -> str:
    db_exec(pg_url, "CREATE TABLE blobs (id INT PRIMARY KEY, payload BYTEA)",
            f"INSERT INTO blobs SELECT g, {PAYLOAD} FROM generate_series(1, {ROWS}) g")
    return pg_url


def _config(tmp: Path, url: str, dest: dict[str, Any], **export: Any) -> Path:
    return write_config(tmp, {**source_block(url), "tuning": {"throttle_ms": 0, "max_retries": 0}}, [{
        "name": "blobs", "table": "blobs", "mode": "full", "format": "parquet",
        "parquet": {"row_group_strategy": "fixed_rows", "row_group_rows": 50_000},
        "destination": dest, **export}])


def _dest(endpoint: str, bucket: str, prefix: str) -> dict[str, Any]:
    return {"type": "s3", "bucket": bucket, "prefix": prefix, "endpoint": endpoint, "region": "us-east-1",
            "access_key_env": "RIVET_EARLY_AK", "secret_key_env": "RIVET_EARLY_SK"}


def _uploads(client: Any, bucket: str, prefix: str) -> list[dict[str, Any]]:
    return [u for u in client.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])]


def _stored_parts(client: Any, bucket: str, upload: dict[str, Any]) -> int:
    return len(client.list_parts(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"]).get("Parts", []))


def _bucket_rows(client: Any, bucket: str, prefix: str) -> pa.Table:
    """Every part the success manifest lists, downloaded and re-read with pyarrow."""
    manifest = json.loads(client.get_object(Bucket=bucket, Key=prefix + "manifest.json")["Body"].read())
    assert manifest["status"] == "success"
    tables = [pq.read_table(pa.BufferReader(client.get_object(Bucket=bucket, Key=prefix + p["path"])["Body"].read()))
              for p in manifest["parts"]]
    return pa.concat_tables(tables).sort_by("id")


def _source_rows(url: str) -> tuple[list[int], list[bytes]]:
    rows = db_exec(url, "SELECT id, payload FROM blobs ORDER BY id")
    return [r[0] for r in rows], [bytes(r[1]) for r in rows]


def _assert_equals_source(table: pa.Table, url: str) -> None:
    ids, payloads = _source_rows(url)
    assert table.column("id").to_pylist() == ids
    assert table.column("payload").to_pylist() == payloads


def test_a_part_is_uploading_before_its_writer_finished_and_appears_only_at_commit(tmp_path, pg_blobs, s3):
    env = {"RIVET_EARLY_AK": s3.access_key, "RIVET_EARLY_SK": s3.secret_key}
    config = _config(tmp_path, pg_blobs, _dest(s3.endpoint, s3.bucket, s3.prefix))
    barrier = PauseBarrier(tmp_path / "barrier", "after_source_read")
    proc = rivet_popen("run", "-c", str(config), env={**env, **barrier.env})
    try:
        barrier.wait(proc)  # every row fetched, the part not finished (I1: not publishable yet)
        client = s3.client()

        def uploading() -> list[dict[str, Any]]:
            return [u for u in _uploads(client, s3.bucket, s3.prefix) if _stored_parts(client, s3.bucket, u)]

        [upload] = wait_until(uploading, 60, "a chunk of the unfinished part stored by the server")
        assert upload["Key"].startswith(s3.prefix + "data/blobs_") and upload["Key"].endswith(".parquet")
        assert s3_keys(client, s3.bucket, s3.prefix) == {}  # nothing visible before the commit
    finally:
        barrier.release()
    rc, _, err = finish(proc)
    assert rc == 0, err

    keys = s3_keys(client, s3.bucket, s3.prefix)
    assert upload["Key"][len(s3.prefix):] in keys  # the key the upload in flight had
    assert {"manifest.json", "_SUCCESS"} <= set(keys)
    assert _uploads(client, s3.bucket, s3.prefix) == []  # completed, nothing left open
    _assert_equals_source(_bucket_rows(client, s3.bucket, s3.prefix), pg_blobs)


def test_a_rotated_export_uploads_each_part_and_re_reads_equal_to_the_source(tmp_path, pg_blobs, s3):
    # ~32 MB in parts of at most 20 MB: part 0 (over the multipart threshold) starts uploading
    # when part 1 opens, part 1 (under it) is one PUT at commit.
    env = {"RIVET_EARLY_AK": s3.access_key, "RIVET_EARLY_SK": s3.secret_key}
    config = _config(tmp_path, pg_blobs, _dest(s3.endpoint, s3.bucket, s3.prefix), max_file_size="20MB")
    result = cli("run", "-c", str(config), "--json", "--validate", env=env)
    assert result.returncode == 0, result.stderr
    client = s3.client()
    parts = sorted(k for k in s3_keys(client, s3.bucket, s3.prefix) if k.endswith(".parquet"))
    assert len(parts) == 2 and parts[0].endswith("_part0.parquet") and parts[1].endswith("_part1.parquet")
    assert _uploads(client, s3.bucket, s3.prefix) == []
    _assert_equals_source(_bucket_rows(client, s3.bucket, s3.prefix), pg_blobs)


def test_the_s3_server_killed_mid_upload_fails_the_run_cleanly_and_a_rerun_succeeds(tmp_path, pg_blobs):
    with private_s3() as server:
        bucket, prefix = f"early-{uuid.uuid4().hex[:8]}", "blobs/"
        server.client().create_bucket(Bucket=bucket)
        env = {"RIVET_EARLY_AK": server.access_key, "RIVET_EARLY_SK": server.secret_key}
        dest = {**_dest(server.endpoint, bucket, prefix), "timeout_s": 2, "max_attempts": 2}
        config = _config(tmp_path, pg_blobs, dest)
        barrier = PauseBarrier(tmp_path / "barrier", "after_source_read")
        proc = rivet_popen("run", "-c", str(config), env={**env, **barrier.env})
        try:
            barrier.wait(proc)
            client = server.client()
            wait_until(lambda: any(_stored_parts(client, bucket, u) for u in _uploads(client, bucket, prefix)),
                       60, "the early upload to store its first part")
            server.kill()  # mid-stream: the upload is open, the part not finished
        finally:
            barrier.release()
        rc, _, err = finish(proc)

        server.start()  # same data dir and ports: what did the dead server keep?
        assert rc != 0, err
        assert "Traceback" not in err and "cannot reach the S3 endpoint" in err, err
        assert s3_keys(server.client(), bucket, prefix) == {}  # no part, no manifest, no _SUCCESS

        rerun = cli("run", "-c", str(_config(tmp_path, pg_blobs, _dest(server.endpoint, bucket, prefix))),
                    env=env)
        assert rerun.returncode == 0, rerun.stderr
        client = server.client()
        assert {"manifest.json", "_SUCCESS"} <= set(s3_keys(client, bucket, prefix))
        _assert_equals_source(_bucket_rows(client, bucket, prefix), pg_blobs)
