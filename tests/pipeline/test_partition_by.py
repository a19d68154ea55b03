"""`partition_by` end to end against PostgreSQL (rivet_core/pipeline/buckets/run.py).

Each bucket is a sub-export with its own manifest and `_SUCCESS` under `<col>=<label>/`;
the oracle re-reads what the success manifests list (pyarrow / DuckDB, never the tool's
counters) and compares with the source queried directly.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from rivet_core.pipeline.buckets.ranges import HIVE_NULL_PARTITION, bucket_of
from tests.cloud_areas import success_ids
from tests.helpers import (
    data_files,
    manifest_ids,
    pg_exec,
    rivet,
    rivet_quick,
    source_block,
    state_rows,
    write_config,
)

# ids 1..14; "CreatedOn" (mixed case: the bucket SQL must quote it) spans 2024-02-27 .. 2024-03-02
# with a gap day and a leap day; ts holds instants written in several zones near month edges.
ROWS = [
    (1, "2024-02-27", "2024-01-31 23:30:00-05"), (2, "2024-02-27", "2024-02-01 00:30:00+02"),
    (3, "2024-02-29", "2024-02-29 12:00:00+00"), (4, "2024-02-29", "2024-03-01 01:00:00+05:30"),
    (5, "2024-03-02", "2023-12-31 23:59:59-01"), (6, None, None), (7, None, "2024-02-10 00:00:00+00"),
    (8, "2024-03-01", "2024-03-31 22:00:00-03"), (9, "2024-03-02", "2024-04-01 00:00:00+00"),
    (10, "2024-02-27", "2024-02-15 10:00:00+00"), (11, "2024-03-01", "2024-02-29 23:00:00-02"),
    (12, "2024-03-02", "2024-01-01 00:00:00+14"), (13, "2024-02-29", "2024-02-01 00:00:00+00"),
    (14, "2024-03-01", None),
]


def _seed(url: str) -> None:
    values = ", ".join(
        f"({i}, {repr(d) if d else 'NULL'}, {repr(t) if t else 'NULL'}, 'v{i}')" for i, d, t in ROWS)
    pg_exec(url, "DROP TABLE IF EXISTS ev",
            'CREATE TABLE ev (id int PRIMARY KEY, "CreatedOn" date, ts timestamptz, v text)',
            f"INSERT INTO ev VALUES {values}")


def _source(url: str) -> list[tuple]:
    return pg_exec(url, 'SELECT id, "CreatedOn", ts, v FROM ev ORDER BY id')


def _export(destination: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"name": "ev", "table": "ev", "format": "parquet", "partition_by": "CreatedOn",
            "destination": destination, **fields}


def _bucket_dirs(root: Path) -> list[str]:
    """The bucket folders under the root (the root also holds `_partitions.json`)."""
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def test_day_buckets_on_local_read_back_as_a_hive_dataset(pg_url, tmp_path):
    """Day buckets that hold rows (no folder for the empty 2024-02-28), NULLs in the Hive
    default partition, each with manifest + _SUCCESS; pyarrow and DuckDB Hive reads equal the
    source; validate checks the bucket set and every bucket, and names a deleted part."""
    _seed(pg_url)
    root = tmp_path / "out" / "ev"
    cfg = write_config(tmp_path, source_block(pg_url), [_export({"type": "local", "path": "out/ev/{partition}"})])
    run = rivet_quick("run", "-c", str(cfg))
    assert run.returncode == 0, run.stderr
    labels = ["2024-02-27", "2024-02-29", "2024-03-01", "2024-03-02", HIVE_NULL_PARTITION]
    assert _bucket_dirs(root) == sorted(f"CreatedOn={x}" for x in labels)
    for label in labels:
        bucket = root / f"CreatedOn={label}"
        assert (bucket / "_SUCCESS").is_file()
        manifest = json.loads((bucket / "manifest.json").read_text())
        assert manifest["status"] == "success"
        assert manifest["export_name"] == "ev__" + ("null" if label == HIVE_NULL_PARTITION else label)
        expected = sorted(i for i, d, _ in ROWS if bucket_of(d, "day") == label)
        assert manifest_ids(bucket) == expected
    source = _source(pg_url)
    schema = pq.read_schema(data_files(root)[0])
    table = ds.dataset(root, format="parquet", partitioning="hive", schema=schema,
                       exclude_invalid_files=True).to_table().sort_by("id")
    assert [tuple(r.values()) for r in table.to_pylist()] == [
        (i, d, t.astimezone(dt.UTC) if t else None, v) for i, d, t, v in source]
    got = duckdb.sql(f"SELECT id, \"CreatedOn\" FROM read_parquet('{root}/*/data/*.parquet', "
                     "hive_partitioning=true) ORDER BY id").fetchall()
    assert got == [(i, d) for i, d, _, _ in source]
    ok = rivet_quick("validate", "-c", str(cfg), "--format", "json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    verdicts = json.loads(ok.stdout)["exports"]
    assert sorted(v["export_name"] for v in verdicts) == sorted(
        ["ev [bucket set]"] + [f"ev [CreatedOn={x}]" for x in labels])
    victim = data_files(root / "CreatedOn=2024-02-29")[0]
    victim.unlink()
    bad = rivet_quick("validate", "-c", str(cfg), "--format", "json")
    assert bad.returncode != 0
    failed = [v for v in json.loads(bad.stdout)["exports"] if not v["verification"]["passed"]]
    assert [v["export_name"] for v in failed] == ["ev [CreatedOn=2024-02-29]"]
    assert victim.name in json.dumps(failed[0]["verification"]["failures"])


class S3Area:
    """The S3 test bucket with the cloud areas' oracle vocabulary (keys, read)."""

    def __init__(self, server: Any) -> None:
        self.server, self.client = server, server.client()

    def destination(self, prefix: str) -> dict[str, Any]:
        return {"type": "s3", "bucket": self.server.bucket, "prefix": prefix, "endpoint": self.server.endpoint,
                "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}

    def keys(self, prefix: str) -> dict[str, int]:
        out = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.server.bucket, Prefix=prefix):
            out.update({o["Key"][len(prefix):]: o["Size"] for o in page.get("Contents", [])})
        return out

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.server.bucket, Key=key)["Body"].read()


@pytest.fixture(params=["s3", "gcs", "azure"])
def area(request: pytest.FixtureRequest) -> Any:
    if request.param == "s3":
        return S3Area(request.getfixturevalue("s3"))
    return request.getfixturevalue(request.param)


def test_timestamptz_buckets_on_each_cloud(pg_url, tmp_path, area):
    """Buckets by UTC date (instants written in other zones near month and year edges), CSV,
    on S3 (month) / GCS / Azure (year, fewer buckets): each bucket's manifest lists exactly
    its rows, every row once; validate passes."""
    _seed(pg_url)
    granularity = "month" if isinstance(area, S3Area) else "year"
    export = _export(area.destination("lake/ev/{partition}/"), partition_by="ts", partition_granularity=granularity,
                     format="csv", compression="none")
    cfg = write_config(tmp_path, source_block(pg_url), [export])
    run = rivet_quick("run", "-c", str(cfg))
    assert run.returncode == 0, run.stderr
    source = {i: t for i, _, t, _ in _source(pg_url)}
    labels = (["2023-12", "2024-01", "2024-02", "2024-03", "2024-04"] if granularity == "month"
              else ["2023", "2024"]) + [HIVE_NULL_PARTITION]
    roots = {k.split("/", 1)[0] for k in area.keys("lake/ev/") if "/" in k}
    assert roots == {f"ts={x}" for x in labels}
    seen: list[int] = []
    for label in labels:
        prefix = f"lake/ev/ts={label}/"
        assert "_SUCCESS" in area.keys(prefix)
        ids = success_ids(area, prefix=prefix)
        assert ids == sorted(i for i, t in source.items() if bucket_of(t, granularity) == label), label
        seen += ids
    assert sorted(seen) == sorted(source)  # every row once, the NULL bucket included
    ok = rivet_quick("validate", "-c", str(cfg))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    heads = [line for line in ok.stdout.splitlines() if not line.startswith(" ")]  # not Rivet's detail lines
    assert sum("PASSED" in line for line in heads) == len(labels) + 1  # the bucket set, then each bucket


def _bucket_ids(root: Path) -> list[int]:
    """Every id the success manifests of every bucket list (each run of a bucket once)."""
    return sorted(i for bucket in root.iterdir() if bucket.is_dir() for i in manifest_ids(bucket))


def test_incremental_buckets_crash_then_rerun_keep_every_id_once(pg_url, tmp_path):
    """Each bucket is its own incremental sub-export with its own cursor. A crash after the
    first bucket committed its cursor, then a re-run: every id exactly once; new rows in an
    old and a new bucket are added by the next run, and nothing is repeated."""
    _seed(pg_url)
    root = tmp_path / "out" / "ev"
    cfg = write_config(tmp_path, source_block(pg_url), [_export(
        {"type": "local", "path": "out/ev/{partition}"}, mode="incremental", cursor_column="id")])
    crashed = rivet("run", "-c", str(cfg), env={"RIVET_TEST_PANIC_AT": "after_cursor_commit"}, timeout=600)
    assert crashed.returncode != 0
    assert _bucket_dirs(root) == ["CreatedOn=2024-02-27"]  # one bucket, then the kill
    rerun = rivet_quick("run", "-c", str(cfg))
    assert rerun.returncode == 0, rerun.stderr
    assert _bucket_ids(root) == list(range(1, 15))
    cursors = dict(state_rows(cfg, "SELECT export_name, last_cursor_value FROM export_state"))
    assert cursors["ev__2024-02-27"] == "10" and cursors["ev__null"] == "7"
    pg_exec(pg_url, "INSERT INTO ev VALUES (15, '2024-02-27', NULL, 'n'), (16, '2024-03-05', NULL, 'n')")
    again = rivet_quick("run", "-c", str(cfg))
    assert again.returncode == 0, again.stderr
    assert _bucket_ids(root) == list(range(1, 17))
    assert manifest_ids(root / "CreatedOn=2024-03-05") == [16]


def test_full_buckets_crash_mid_write_then_rerun_replace_each_bucket(pg_url, tmp_path):
    """A kill right after a part landed (nothing published for that bucket), then two
    re-runs: each bucket's current manifest lists its rows once, and its data/ folder holds
    only its current parts (the previous run's moved to _quarantine/)."""
    _seed(pg_url)
    root = tmp_path / "out" / "ev"
    cfg = write_config(tmp_path, source_block(pg_url), [_export({"type": "local", "path": "out/ev/{partition}"})])
    crashed = rivet("run", "-c", str(cfg), env={"RIVET_TEST_PANIC_AT": "after_file_write"}, timeout=600)
    assert crashed.returncode != 0
    assert not (root / "CreatedOn=2024-02-27" / "manifest.json").exists()
    for _ in range(2):
        run = rivet_quick("run", "-c", str(cfg))
        assert run.returncode == 0, run.stderr
    current = []
    for bucket in (p for p in root.iterdir() if p.is_dir()):
        manifest = json.loads((bucket / "manifest.json").read_text())
        listed = sorted(p["path"] for p in manifest["parts"])
        current += pa.concat_tables([pq.read_table(bucket / p) for p in listed]).column("id").to_pylist() \
            if listed else []
        on_disk = sorted(str(p.relative_to(bucket)) for p in data_files(bucket))
        if bucket.name != "CreatedOn=2024-02-27":  # the crashed bucket keeps its orphan until gc
            assert on_disk == listed, bucket.name
    assert sorted(current) == list(range(1, 15))


def test_a_column_that_is_not_a_date_fails_with_rivets_message(pg_url, tmp_path):
    _seed(pg_url)
    cfg = write_config(tmp_path, source_block(pg_url), [_export(
        {"type": "local", "path": "out/{partition}"}, partition_by="v")])
    run = rivet_quick("run", "-c", str(cfg))
    assert run.returncode == 1
    assert "could not parse partition min 'v1' from column 'v' as a date" in run.stderr
    assert not (tmp_path / "out").exists()


def test_the_bucket_query_quotes_the_column_and_renders_only_dates():
    from rivet_core.pipeline.buckets.ranges import NULL_BUCKET, generate_buckets
    from rivet_core.pipeline.buckets.run import bucket_query
    from rivet_core.source.query import MYSQL, POSTGRES

    bucket = generate_buckets(dt.date(2024, 2, 29), dt.date(2024, 2, 29), "month")[0]
    assert bucket_query(POSTGRES, "SELECT * FROM t WHERE a LIKE 'x%'", 'we"ird', bucket) == (
        "SELECT * FROM (SELECT * FROM t WHERE a LIKE 'x%') AS _rivet_part "
        "WHERE \"we\"\"ird\" >= '2024-02-01' AND \"we\"\"ird\" < '2024-03-01'")
    assert bucket_query(MYSQL, "SELECT 1", "a`b", NULL_BUCKET).endswith("WHERE `a``b` IS NULL")


def test_chunked_month_buckets_on_mariadb(mysql_url, tmp_path):
    """MariaDB DATETIME, month buckets, each bucket a chunked sub-export (range windows of 2
    ids, so a bucket has several parts): every id once, in its own bucket; validate passes."""
    from tests.helpers import mysql_exec

    rows = [(1, "2024-01-31 23:59:59"), (2, "2024-02-01 00:00:00"), (3, "2024-02-29 12:00:00"),
            (4, None), (5, "2024-02-10 08:00:00"), (6, "2024-04-01 00:00:00"), (7, "2024-02-11 09:00:00")]
    values = ", ".join(f"({i}, {repr(t) if t else 'NULL'}, 'v{i}')" for i, t in rows)
    mysql_exec(mysql_url, "CREATE TABLE ev (id int PRIMARY KEY, ts datetime NULL, v varchar(10))",
               f"INSERT INTO ev VALUES {values}")
    root = tmp_path / "out" / "ev"
    cfg = write_config(tmp_path, source_block(mysql_url), [_export(
        {"type": "local", "path": "out/ev/{partition}"}, partition_by="ts", partition_granularity="month",
        mode="chunked", chunk_column="id", chunk_size=2)])
    run = rivet_quick("run", "-c", str(cfg))
    assert run.returncode == 0, run.stderr
    labels = ["2024-01", "2024-02", "2024-04", HIVE_NULL_PARTITION]  # no row in March: no folder
    assert _bucket_dirs(root) == sorted(f"ts={x}" for x in labels)
    for label in labels:
        expected = sorted(i for i, t in rows if bucket_of(t, "month") == label)
        assert manifest_ids(root / f"ts={label}") == expected, label
    feb = json.loads((root / "ts=2024-02" / "manifest.json").read_text())
    assert len(feb["parts"]) > 1 and feb["source"]["extraction"]["strategy"] == "chunked"
    assert _bucket_ids(root) == [i for i, _ in rows]
    ok = rivet_quick("validate", "-c", str(cfg))
    assert ok.returncode == 0, ok.stdout + ok.stderr
