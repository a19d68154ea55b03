"""The bucket set of a `partition_by` export, against the truth (the source).

A reader of a `partition_by` export reads every bucket folder under the root as one Hive
dataset; what it sees must be the source's rows — no bucket left behind by an earlier run
(rows deleted at the MIN, the last NULL gone, a row whose date moved), no empty bucket
folder written for a span with no rows — and `rivet validate` must fail when the folders
present are not the set the last run published (rivet_core/pipeline/facade/bucket_set.py,
rivet_core/manifest/bucket_index.py). The oracle reads the destination with pyarrow and
DuckDB and queries the source directly; against real PostgreSQL and SQLite files.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import manifest_ids, pg_exec, rivet, rivet_quick, source_block, write_config

Exec = Callable[..., list[tuple]]


class Source:
    """A source database the test writes to directly: its config block and `exec`."""

    def __init__(self, url: str, exec_sql: Exec) -> None:
        self.url, self.exec = url, exec_sql

    def seed(self, rows: list[tuple[int, str | None]]) -> None:
        values = ", ".join(f"({i}, {repr(d) if d else 'NULL'}, 'v{i}')" for i, d in rows)
        self.exec("DROP TABLE IF EXISTS ev", "CREATE TABLE ev (id int PRIMARY KEY, day date, v text)",
                  f"INSERT INTO ev VALUES {values}")

    def ids(self) -> list[int]:
        return [r[0] for r in self.exec("SELECT id FROM ev ORDER BY id")]


def _sqlite_exec(path: Path) -> Exec:
    def run(*sql: str) -> list[tuple]:
        conn = sqlite3.connect(path)
        try:
            rows: list[tuple] = []
            for statement in sql:
                rows = conn.execute(statement).fetchall()
            conn.commit()
            return rows
        finally:
            conn.close()
    return run


@pytest.fixture(params=["postgres", "sqlite"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Source:
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        return Source(url, lambda *sql: pg_exec(url, *sql))
    path = tmp_path / "src.db"
    return Source(f"sqlite:///{path}", _sqlite_exec(path))


def _config(tmp_path: Path, source: Source, **fields: Any) -> Path:
    export = {"name": "ev", "table": "ev", "format": "parquet", "partition_by": "day",
              "destination": {"type": "local", "path": "out/ev/{partition}"}, **fields}
    return write_config(tmp_path, source_block(source.url), [export])


def _run(cfg: Path) -> None:
    run = rivet_quick("run", "-c", str(cfg))
    assert run.returncode == 0, run.stderr


def reader_ids(root: Path, *, hive: bool = True) -> list[int]:
    """The ids a reader of the root sees: pyarrow's dataset (Hive partitioning for day
    buckets of a DATE column; without it for year buckets, whose folder value is not the
    column's — docs/modes.md) and DuckDB's glob agree."""
    files = sorted(root.glob("*/data/*.parquet"))
    if not files:
        return []
    table = ds.dataset(root, format="parquet", partitioning="hive" if hive else None,
                       schema=pq.read_schema(files[0]),
                       exclude_invalid_files=True).to_table()
    duck = duckdb.sql(f"SELECT id FROM read_parquet('{root}/*/data/*.parquet', hive_partitioning=false) "
                      "ORDER BY id").fetchall()
    assert sorted(table.column("id").to_pylist()) == [r[0] for r in duck]
    return [r[0] for r in duck]


def bucket_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("_"))


def validate(cfg: Path) -> tuple[int, list[dict[str, Any]]]:
    out = rivet_quick("validate", "-c", str(cfg), "--format", "json")
    return out.returncode, json.loads(out.stdout)["exports"]


def failures(verdicts: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(v["export_name"], f["kind"], f.get("bucket", "")) for v in verdicts
            for f in v["verification"]["failures"] if f["kind"] != "untracked_object"]


# ------------------------------------------------------------------ finding 5
def test_a_full_rerun_withdraws_the_bucket_at_the_old_min_and_the_emptied_null_bucket(source, tmp_path):
    """Delete the row at MIN and the only NULL row, run again: a reader sees exactly the
    source's rows, the two emptied buckets are gone from the root (their trail parked under
    `_quarantine/`, not deleted), and validate passes on the new set."""
    source.seed([(1, "2024-01-01"), (2, "2024-01-02"), (3, "2024-01-03"), (4, None)])
    cfg = _config(tmp_path, source)
    root = tmp_path / "out" / "ev"
    _run(cfg)
    assert reader_ids(root) == [1, 2, 3, 4]
    source.exec("DELETE FROM ev WHERE id IN (1, 4)")
    _run(cfg)
    assert reader_ids(root) == source.ids() == [2, 3]
    assert bucket_dirs(root) == ["day=2024-01-02", "day=2024-01-03"]
    parked = {p.relative_to(root).parts[2:] for p in (root / "_quarantine").rglob("*") if p.is_file()}
    assert {("day=2024-01-01", "manifest.json"), ("day=2024-01-01", "_SUCCESS"),
            ("day=__HIVE_DEFAULT_PARTITION__", "manifest.json")} <= parked
    assert sum(1 for p in parked if p[1] == "data") == 2  # each withdrawn bucket's one part
    code, verdicts = validate(cfg)
    assert code == 0, verdicts
    assert sorted(v["export_name"] for v in verdicts) == ["ev [bucket set]", "ev [day=2024-01-02]",
                                                          "ev [day=2024-01-03]"]


def test_a_row_whose_date_changes_leaves_its_old_bucket_on_a_full_rerun(source, tmp_path):
    """A row moved to another day is read once, in its new bucket: its old bucket, now
    empty, is withdrawn rather than left with the old version of the row."""
    source.seed([(1, "2024-01-01"), (2, "2024-01-02"), (3, "2024-01-02")])
    cfg = _config(tmp_path, source)
    root = tmp_path / "out" / "ev"
    _run(cfg)
    source.exec("UPDATE ev SET day = '2024-01-05' WHERE id = 1")
    _run(cfg)
    assert reader_ids(root) == [1, 2, 3]
    assert bucket_dirs(root) == ["day=2024-01-02", "day=2024-01-05"]
    assert manifest_ids(root / "day=2024-01-05") == [1]
    assert validate(cfg)[0] == 0


def test_a_kill_between_the_record_and_the_withdrawal_fails_validate_until_the_next_run(pg_url, tmp_path):
    """Killed after the bucket record shrank, before the stale bucket moved: the stale
    bucket is still readable but no longer recorded, so validate FAILS naming it; the next
    run withdraws it and a reader sees the source."""
    source = Source(pg_url, lambda *sql: pg_exec(pg_url, *sql))
    source.seed([(1, "2024-01-01"), (2, "2024-01-02")])
    cfg = _config(tmp_path, source)
    root = tmp_path / "out" / "ev"
    _run(cfg)
    source.exec("DELETE FROM ev WHERE id = 1")
    killed = rivet("run", "-c", str(cfg), env={"RIVET_TEST_PANIC_AT": "after_bucket_set_recorded"}, timeout=600)
    assert killed.returncode != 0 and "after_bucket_set_recorded" in killed.stderr
    assert reader_ids(root) == [1, 2]  # not yet withdrawn ...
    code, verdicts = validate(cfg)  # ... and validate says so
    assert code == 3 and failures(verdicts) == [("ev [bucket set]", "bucket_unrecorded", "day=2024-01-01")]
    _run(cfg)
    assert reader_ids(root) == source.ids() == [2]
    assert validate(cfg)[0] == 0


def test_validate_fails_naming_a_bucket_folder_that_was_deleted(pg_url, tmp_path):
    """`rm -rf` of a bucket folder: the bucket set is FAILED (exit 3), naming the bucket."""
    source = Source(pg_url, lambda *sql: pg_exec(pg_url, *sql))
    source.seed([(1, "2024-01-01"), (2, "2024-01-02"), (3, "2024-01-03")])
    cfg = _config(tmp_path, source)
    _run(cfg)
    shutil.rmtree(tmp_path / "out" / "ev" / "day=2024-01-02")
    code, verdicts = validate(cfg)
    assert code == 3
    assert failures(verdicts) == [("ev [bucket set]", "bucket_missing", "day=2024-01-02")]
    pretty = rivet_quick("validate", "-c", str(cfg))
    assert "ev [bucket set]: FAILED" in pretty.stdout and "day=2024-01-02" in pretty.stdout
    _run(cfg)  # the next run publishes the bucket again
    assert validate(cfg)[0] == 0


def test_a_damaged_bucket_record_fails_validate_and_the_next_run_rewrites_it(pg_url, tmp_path):
    source = Source(pg_url, lambda *sql: pg_exec(pg_url, *sql))
    source.seed([(1, "2024-01-01"), (2, "2024-01-02")])
    cfg = _config(tmp_path, source)
    _run(cfg)
    record = tmp_path / "out" / "ev" / "_partitions.json"
    record.write_text("{not json")
    code, verdicts = validate(cfg)
    assert code == 3 and [f[1] for f in failures(verdicts)] == ["bucket_index_invalid"]
    pretty = rivet_quick("validate", "-c", str(cfg)).stdout
    assert "_partitions.json' could not be read" in pretty and "run the export again" in pretty
    _run(cfg)
    assert json.loads(record.read_text())["buckets"] == [
        {"prefix": "day=2024-01-01/", "run_id": json.loads(
            (tmp_path / "out" / "ev" / "day=2024-01-01" / "manifest.json").read_text())["run_id"]},
        {"prefix": "day=2024-01-02/", "run_id": json.loads(
            (tmp_path / "out" / "ev" / "day=2024-01-02" / "manifest.json").read_text())["run_id"]}]
    assert validate(cfg)[0] == 0


def test_validate_fails_on_a_bucket_folder_no_run_recorded(pg_url, tmp_path):
    """A bucket folder with a manifest that no run of the export recorded (copied in, or
    left by a crash before the record) is FAILED: no published run explains its rows."""
    source = Source(pg_url, lambda *sql: pg_exec(pg_url, *sql))
    source.seed([(1, "2024-01-01"), (2, "2024-01-02")])
    cfg = _config(tmp_path, source)
    _run(cfg)
    root = tmp_path / "out" / "ev"
    shutil.copytree(root / "day=2024-01-02", root / "day=2023-05-05")
    code, verdicts = validate(cfg)
    assert code == 3
    assert ("ev [bucket set]", "bucket_unrecorded", "day=2023-05-05") in failures(verdicts)


def test_a_bucket_folder_of_another_export_is_never_withdrawn_and_is_named(pg_url, tmp_path):
    """Another export writes into a folder shaped like a bucket: the partitioned run does
    not move its trail (it names it in a warning), and validate reports it as unrecorded."""
    source = Source(pg_url, lambda *sql: pg_exec(pg_url, *sql))
    source.seed([(1, "2024-01-01"), (2, "2024-01-02")])
    foreign = tmp_path / "out" / "ev" / "day=2020-01-01"
    (tmp_path / "b").mkdir()
    other = write_config(tmp_path / "b", source_block(pg_url), [{
        "name": "other", "table": "ev", "format": "parquet", "destination": {"type": "local", "path": str(foreign)}}])
    assert rivet_quick("run", "-c", str(other)).returncode == 0
    cfg = _config(tmp_path, source)
    before = sorted(p.relative_to(foreign) for p in foreign.rglob("*"))
    _run(cfg)
    source.exec("DELETE FROM ev WHERE id = 1")
    run = rivet_quick("run", "-c", str(cfg))
    assert run.returncode == 0, run.stderr
    assert "day=2020-01-01/ holds a manifest of export 'other'" in run.stderr
    assert sorted(p.relative_to(foreign) for p in foreign.rglob("*")) == before
    code, verdicts = validate(cfg)
    assert code == 3
    assert ("ev [bucket set]", "bucket_unrecorded", "day=2020-01-01") in failures(verdicts)


# ------------------------------------------------------------------ incremental: an append log
def test_an_incremental_export_keeps_every_bucket_it_published_and_records_new_ones(pg_url, tmp_path):
    """Incremental buckets are an append log (docs/modes.md): a deleted row's bucket stays,
    a new bucket joins the record, validate passes; a deleted folder still fails it."""
    source = Source(pg_url, lambda *sql: pg_exec(pg_url, *sql))
    source.seed([(1, "2024-01-01"), (2, "2024-01-02")])
    cfg = _config(tmp_path, source, mode="incremental", cursor_column="id")
    root = tmp_path / "out" / "ev"
    _run(cfg)
    source.exec("DELETE FROM ev WHERE id = 1", "INSERT INTO ev VALUES (3, '2024-02-01', 'n')")
    _run(cfg)
    assert reader_ids(root) == [1, 2, 3]
    assert bucket_dirs(root) == ["day=2024-01-01", "day=2024-01-02", "day=2024-02-01"]
    assert validate(cfg)[0] == 0
    shutil.rmtree(root / "day=2024-01-01")
    code, verdicts = validate(cfg)
    assert code == 3 and failures(verdicts) == [("ev [bucket set]", "bucket_missing", "day=2024-01-01")]


def test_an_incremental_bucket_deleted_stays_failed_after_the_next_run_until_a_full_refresh(pg_url, tmp_path):
    """A deleted incremental bucket is not exported again by the next run (its cursor is past
    its rows), even when a new row lands in it: the reader sees fewer rows than the source,
    so validate stays FAILED (`bucket_lost`, naming the fix) — until `--full-refresh`."""
    source = Source(pg_url, lambda *sql: pg_exec(pg_url, *sql))
    source.seed([(1, "2024-01-01"), (2, "2024-01-02")])
    cfg = _config(tmp_path, source, mode="incremental", cursor_column="id")
    root = tmp_path / "out" / "ev"
    _run(cfg)
    shutil.rmtree(root / "day=2024-01-01")
    source.exec("INSERT INTO ev VALUES (3, '2024-01-01', 'n')")
    _run(cfg)
    assert reader_ids(root) == [2, 3] != source.ids()
    code, verdicts = validate(cfg)
    assert code == 3 and failures(verdicts) == [("ev [bucket set]", "bucket_lost", "day=2024-01-01")]
    assert "rivet run --full-refresh -e ev" in rivet_quick("validate", "-c", str(cfg)).stdout
    refreshed = rivet_quick("run", "-c", str(cfg), "--full-refresh")
    assert refreshed.returncode == 0, refreshed.stderr
    current = json.loads((root / "day=2024-01-01" / "manifest.json").read_text())
    assert sorted(i for part in current["parts"]
                  for i in pq.read_table(root / "day=2024-01-01" / part["path"]).column("id").to_pylist()) == [1, 3]
    assert validate(cfg)[0] == 0


def test_merge_on_with_partition_by_is_refused_at_load_saying_why(pg_url, tmp_path):
    source = Source(pg_url, lambda *sql: pg_exec(pg_url, *sql))
    cfg = _config(tmp_path, source, mode="incremental", cursor_column="id", table_format="delta", merge_on=["id"])
    out = rivet_quick("validate", "-c", str(cfg))
    assert out.returncode != 0
    message = out.stderr + out.stdout
    assert "export 'ev'" in message or "ev" in message
    assert "partition_by is not compatible with merge_on" in message and "its own table" in message
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ the smalls
def test_an_open_end_sentinel_9999_12_31_is_exported_in_an_open_ended_last_bucket(source, tmp_path):
    """`9999-12-31` ("no end date") no longer fails the export: its year bucket has no
    upper bound, and every row is read back once."""
    source.seed([(1, "2024-06-01"), (2, "9999-12-31"), (3, None)])
    cfg = _config(tmp_path, source, partition_granularity="year")
    root = tmp_path / "out" / "ev"
    _run(cfg)
    assert bucket_dirs(root) == ["day=2024", "day=9999", "day=__HIVE_DEFAULT_PARTITION__"]
    assert manifest_ids(root / "day=9999") == [2]
    assert reader_ids(root, hive=False) == source.ids()
    assert validate(cfg)[0] == 0


def test_a_sparse_span_creates_folders_only_for_the_buckets_that_hold_rows(source, tmp_path):
    """Two rows 324 years apart with yearly buckets: two folders, not 325 — an empty
    bucket is never run and never written."""
    source.seed([(1, "1700-03-01"), (2, "2024-01-01")])
    cfg = _config(tmp_path, source, partition_granularity="year")
    root = tmp_path / "out" / "ev"
    _run(cfg)
    assert bucket_dirs(root) == ["day=1700", "day=2024"]
    assert reader_ids(root, hive=False) == [1, 2]
    index = json.loads((root / "_partitions.json").read_text())
    assert [b["prefix"] for b in index["buckets"]] == ["day=1700/", "day=2024/"]
    assert validate(cfg)[0] == 0


# ------------------------------------------------------------------ object stores and tables
def test_on_s3_a_full_rerun_withdraws_the_emptied_buckets_and_a_reader_sees_the_source(pg_url, tmp_path, s3):
    """The same withdrawal on S3: the emptied buckets' keys move under the root's
    `_quarantine/`, the rows a reader of the bucket keys finds equal the source, validate
    passes; then a deleted bucket fails it."""
    source = Source(pg_url, lambda *sql: pg_exec(pg_url, *sql))
    source.seed([(1, "2024-01-01"), (2, "2024-01-02"), (3, "2024-01-03"), (4, None)])
    destination = {"type": "s3", "bucket": s3.bucket, "prefix": "lake/ev/{partition}/", "endpoint": s3.endpoint,
                   "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}
    cfg = _config(tmp_path, source, destination=destination)
    client = s3.client()

    def keys() -> list[str]:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix="lake/ev/")
        return sorted(o["Key"][len("lake/ev/"):] for page in pages for o in page.get("Contents", []))

    _run(cfg)
    source.exec("DELETE FROM ev WHERE id IN (1, 4)")
    _run(cfg)
    live = [k for k in keys() if not k.startswith("_")]
    assert sorted({k.split("/", 1)[0] for k in live}) == ["day=2024-01-02", "day=2024-01-03"]
    parts = [k for k in live if "/data/" in k and "/_quarantine/" not in k]
    rows = [
        i for k in parts
        for i in pq.read_table(pa_buffer(client.get_object(Bucket=s3.bucket, Key="lake/ev/" + k)["Body"].read()))
        .column("id").to_pylist()]
    assert sorted(rows) == source.ids() == [2, 3]
    parked = [k for k in keys() if k.startswith("_quarantine/")]
    assert any(k.endswith("day=2024-01-01/manifest.json") for k in parked)
    assert any(k.endswith("day=__HIVE_DEFAULT_PARTITION__/_SUCCESS") for k in parked)
    assert validate(cfg)[0] == 0
    for k in keys():
        if k.startswith("day=2024-01-03/"):
            client.delete_object(Bucket=s3.bucket, Key="lake/ev/" + k)
    code, verdicts = validate(cfg)
    assert code == 3 and failures(verdicts) == [("ev [bucket set]", "bucket_missing", "day=2024-01-03")]


def pa_buffer(data: bytes) -> Any:
    import pyarrow as pa

    return pa.BufferReader(data)


def test_a_stale_delta_bucket_is_withdrawn_with_its_log_and_the_others_keep_their_history(pg_url, tmp_path):
    """A bucket published as a Delta table moves with its `_delta_log/` (no table is left to
    read there); a bucket that stays keeps its earlier version's files (its log still
    references them), and delta-rs reads every remaining table as the source; validate
    passes."""
    from deltalake import DeltaTable

    source = Source(pg_url, lambda *sql: pg_exec(pg_url, *sql))
    source.seed([(1, "2024-01-01"), (2, "2024-01-02"), (3, "2024-01-02")])
    cfg = _config(tmp_path, source, table_format="delta")
    root = tmp_path / "out" / "ev"
    _run(cfg)
    source.exec("DELETE FROM ev WHERE id = 1", "UPDATE ev SET v = 'changed' WHERE id = 2")
    _run(cfg)
    assert bucket_dirs(root) == ["day=2024-01-02"]
    kept = DeltaTable(str(root / "day=2024-01-02"))
    assert sorted(kept.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 2, "day": dt.date(2024, 1, 2), "v": "changed"},
        {"id": 3, "day": dt.date(2024, 1, 2), "v": "v3"}]
    assert DeltaTable(str(root / "day=2024-01-02"), version=0).to_pyarrow_table().num_rows == 2  # history readable
    parked = [p for p in (root / "_quarantine").rglob("*") if p.is_file()]
    assert any(p.parent.name == "_delta_log" and p.parent.parent.name == "day=2024-01-01" for p in parked)
    assert validate(cfg)[0] == 0


@pytest.mark.parametrize(("mode", "iceberg", "expected"), [
    ("full", {}, "partition_by with table_format: iceberg is not supported for mode: full"),
    ("chunked", {}, "partition_by with table_format: iceberg is not supported for mode: chunked"),
    ("incremental", {"table": "one"}, "partition_by cannot be combined with iceberg.table"),
])
def test_iceberg_buckets_that_could_keep_stale_rows_are_refused_at_load(pg_url, tmp_path, mode, iceberg, expected):
    """A replacing Iceberg bucket the source emptied could be neither withdrawn (the catalog
    names its metadata) nor emptied (a run over no row commits nothing): refused before any
    run, as is one table name for every bucket."""
    source = Source(pg_url, lambda *sql: pg_exec(pg_url, *sql))
    source.seed([(1, "2024-01-01")])
    block = {"catalog_url": f"sqlite:///{tmp_path / 'catalog.db'}", "namespace": "lake", **iceberg}
    extra = {"cursor_column": "id"} if mode == "incremental" else {"chunk_column": "id"} if mode == "chunked" else {}
    cfg = _config(tmp_path, source, mode=mode, table_format="iceberg", iceberg=block, **extra)
    out = rivet_quick("run", "-c", str(cfg))
    assert out.returncode != 0
    assert expected in out.stderr and "ev" in out.stderr
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ the probe, as a property
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.dates(min_value=dt.date(1600, 1, 1), max_value=dt.date(9999, 12, 31)), max_size=12),
       st.sampled_from(["day", "month", "year"]))
def test_the_probe_finds_exactly_the_buckets_that_hold_rows(tmp_path_factory, days, granularity):
    """Against a real SQLite file: the buckets the runner plans are exactly the labels of
    the values (bucket_of), in order, the NULL bucket last when there are NULLs."""
    from rivet_core.config import load_config
    from rivet_core.pipeline.buckets.ranges import HIVE_NULL_PARTITION, bucket_of
    from rivet_core.pipeline.buckets.run import plan_buckets

    tmp = tmp_path_factory.mktemp("probe")
    source = Source(f"sqlite:///{tmp / 'src.db'}", _sqlite_exec(tmp / "src.db"))
    source.seed([(i, d.isoformat()) for i, d in enumerate(days)] + [(len(days), None)])
    config = load_config(_config(tmp, source, partition_granularity=granularity))
    planned = [b.label for b in plan_buckets(config, config.export("ev"))]
    assert planned == sorted({bucket_of(d, granularity) for d in days}) + [HIVE_NULL_PARTITION]
