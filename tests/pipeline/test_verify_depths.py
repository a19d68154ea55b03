"""Verification depths (issue 15 item 1): `light`, `sample`, `full` with Rivet's meaning.

`full` re-reads every part: content hash recorded at write time, row count from the file,
and the Form B per-column checksums (Rivet's xxh3-64-sum-v2, docs/manifest.md). Everything runs
against the real PostgreSQL and the real S3 server (SeaweedFS); damage is done to the
bytes at the destination, never to the tool's own state.
"""

from __future__ import annotations

import json
import random
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rivet_core.destination import DestinationSpec, open_destination
from rivet_core.manifest import parse_manifest, verify_at_destination
from rivet_core.manifest.artifacts import write_manifest_files
from rivet_core.manifest.column_checksums import (
    CHECKSUM_RENDER,
    ColumnSum,
    column_sum,
    combine,
    parquet_sums,
    table_sums,
)
from tests.helpers import db_exec, source_block, state_rows, write_config
from tests.helpers import rivet as rivet_process  # the crash needs a process of its own
from tests.helpers import rivet_quick as rivet  # the other runs neither crash nor pause: in-process

ROWS = 240


def _seed(url: str) -> None:
    db_exec(url,
            "CREATE TABLE items (id INT PRIMARY KEY, name TEXT, price NUMERIC(10,2), qty INT, "
            "flag BOOLEAN, updated_at TIMESTAMP, payload BYTEA)",
            "INSERT INTO items SELECT g, 'n' || g, g * 1.25, CASE WHEN g % 7 = 0 THEN NULL ELSE g % 13 END, "
            "g % 2 = 0, TIMESTAMP '2026-01-01' + g * INTERVAL '1 hour', decode(md5(g::text), 'hex') "
            f"FROM generate_series(1, {ROWS}) AS g")


def _export(**extra: Any) -> dict[str, Any]:
    return {"name": "items", "table": "items", "mode": "full", "format": "parquet",
            "destination": {"type": "local", "path": "out"}, **extra}


def _run(config: Path, *args: str, **env: str) -> None:
    result = rivet("run", "-c", str(config), *args, env=env or None)
    assert result.returncode == 0, result.stderr


def _validate(config: Path, depth: str) -> tuple[int, dict[str, Any]]:
    result = rivet("validate", "-c", str(config), "--format", "json", "--depth", depth)
    assert result.stdout.strip(), result.stderr
    return result.returncode, json.loads(result.stdout)["exports"][0]["verification"]


def _manifest(out: Path) -> dict[str, Any]:
    return json.loads((out / "manifest.json").read_text())


def _assert_fingerprinted(manifest: dict[str, Any], columns: set[str]) -> None:
    """Every committed part carries content hash, MD5 and per-column checksums, and the run
    level is their sum — and the recorded sums equal an independent re-read."""
    parts = [p for p in manifest["parts"] if p.get("status", "committed") == "committed"]
    assert parts
    for p in parts:
        assert p["content_fingerprint"].startswith("xxh3:") and p["content_md5"], p
        assert {c["name"] for c in p["column_checksums"]} == columns, p
    assert manifest["checksum_render"] == CHECKSUM_RENDER
    summed = combine({c["name"]: ColumnSum(int(c["checksum"]), c["nulls"]) for c in p["column_checksums"]}
                     for p in parts)
    assert {c["name"]: (int(c["checksum"]), c["nulls"]) for c in manifest["column_checksums"]} == {
        n: (s.checksum, s.nulls) for n, s in summed.items()}


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


COLUMNS = {"id", "name", "price", "qty", "flag", "updated_at", "payload"}


# ---------------------------------------------------------------- 1. the reported bug, local
@pytest.mark.postgres
def test_a_byte_changed_in_a_local_part_fails_full_naming_part_check_expected_and_found(
        tmp_path: Path, pg_url: str) -> None:
    _seed(pg_url)
    config = write_config(tmp_path, source_block(pg_url), [_export()])
    _run(config)
    out = tmp_path / "out"
    manifest = _manifest(out)
    _assert_fingerprinted(manifest, COLUMNS)
    code, v = _validate(config, "full")
    assert code == 0 and v["passed"] and v["column_checksums"] == "verified"
    assert v["parts_content_verified"] == manifest["part_count"]

    [part] = manifest["parts"]
    _flip_a_byte(out / part["path"])  # same size: a listing cannot see it
    for depth in ("light", "sample"):
        code, v = _validate(config, depth)
        assert code == 0 and v["passed"], (depth, v)
    code, v = _validate(config, "full")
    assert code == 3 and not v["passed"] and v["parts_failed"] == 1
    first = v["failures"][0]
    assert first["kind"] == "part_content_mismatch" and first["code"] == "RIVET_VERIFY_PART_CONTENT"
    assert (first["part_id"], first["path"], first["check"]) == (1, part["path"], "content_fingerprint")
    assert first["expected"] == part["content_fingerprint"] and first["actual"] != first["expected"]
    text = rivet("validate", "-c", str(config), "--depth", "full")
    assert text.returncode == 3
    assert part["path"] in text.stdout + text.stderr and "content_fingerprint" in text.stdout + text.stderr


# ------------------------------------------------- 2. Form B catches what a rewritten manifest hides
@pytest.mark.postgres
def test_changed_values_with_a_recomputed_content_hash_fail_the_column_checksum(
        tmp_path: Path, pg_url: str) -> None:
    _seed(pg_url)
    config = write_config(tmp_path, source_block(pg_url), [_export()])
    _run(config)
    out = tmp_path / "out"
    [part] = _manifest(out)["parts"]
    table = pq.read_table(out / part["path"])
    names = table.column("name").to_pylist()
    names[5] = "tampered"
    pq.write_table(table.set_column(table.schema.get_field_index("name"), "name", pa.array(names)),
                   out / part["path"])
    # A writer that recomputes the content hash (and size) but not the values' checksums.
    dest = open_destination(DestinationSpec(kind="local", path=str(out)))
    m = parse_manifest((out / "manifest.json").read_bytes())
    from dataclasses import replace

    from rivet_core.destination.checksums import Fingerprinter
    fp = Fingerprinter()
    fp.update((out / part["path"]).read_bytes())
    p0 = replace(m.parts[0], size_bytes=fp.size, content_fingerprint=fp.xxh3, content_md5=fp.md5_b64)
    write_manifest_files(dest, replace(m, parts=(p0,)))

    v = verify_at_destination(dest, depth="full", export_name="items")
    assert not v.passed and v.exit_code() == 3 and v.column_checksums == "failed"
    per_part = [f for f in v.failures if f.kind == "value_checksum_mismatch" and f.part_id == 1]
    assert [f.check for f in per_part] == ["column 'name' checksum"]
    assert per_part[0].expected != per_part[0].actual and part["path"] in per_part[0].describe()
    assert any(f.part_id == "*" and "'name'" in f.check for f in v.failures)  # run level too
    assert verify_at_destination(dest, depth="sample", export_name="items").passed


# ------------------------------------------------------------- 3. backward compatibility
@pytest.mark.postgres
def test_a_manifest_without_column_checksums_verifies_full_for_what_it_carries(
        tmp_path: Path, pg_url: str) -> None:
    _seed(pg_url)
    config = write_config(tmp_path, source_block(pg_url), [_export(max_file_size="12KB")])
    _run(config)
    out = tmp_path / "out"
    dest = open_destination(DestinationSpec(kind="local", path=str(out)))
    from dataclasses import replace
    m = parse_manifest((out / "manifest.json").read_bytes())
    assert len(m.parts) > 1
    old = replace(m, column_checksums=None, checksum_render=None,
                  parts=tuple(replace(p, column_checksums=None) for p in m.parts))
    write_manifest_files(dest, old)
    v = verify_at_destination(dest, depth="full", export_name="items")
    assert v.passed and v.column_checksums == "not recorded" and v.parts_content_verified == len(m.parts)
    code, out_json = _validate(config, "full")
    assert code == 0 and out_json["column_checksums"] == "not recorded"
    # …and still fails on damage to what it does carry
    _flip_a_byte(out / m.parts[-1].path)
    v = verify_at_destination(dest, depth="full", export_name="items")
    assert {(f.path, f.check) for f in v.failures if f.kind == "part_content_mismatch"} == {
        (m.parts[-1].path, "content_fingerprint"), (m.parts[-1].path, "content_md5")}
    assert not v.passed and v.parts_failed == 1


def test_rivets_own_manifest_passes_full(tmp_path: Path) -> None:
    """tests/fixtures/rivet_manifest_v1: no column checksums recorded; content and rows are."""
    src = Path(__file__).resolve().parent.parent / "fixtures" / "rivet_manifest_v1"
    shutil.copytree(src, tmp_path / "p")
    dest = open_destination(DestinationSpec(kind="local", path=str(tmp_path / "p")))
    v = verify_at_destination(dest, depth="full")
    assert v.passed, [f.describe() for f in v.failures]
    assert v.column_checksums == "not recorded" and v.parts_content_verified == 1


def test_a_row_count_that_differs_from_the_footer_fails_full(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parent.parent / "fixtures" / "rivet_manifest_v1"
    shutil.copytree(src, tmp_path / "p")
    dest = open_destination(DestinationSpec(kind="local", path=str(tmp_path / "p")))
    from dataclasses import replace
    m = parse_manifest((tmp_path / "p" / "manifest.json").read_bytes())
    write_manifest_files(dest, replace(m, row_count=4, parts=(replace(m.parts[0], rows=4),)))
    v = verify_at_destination(dest, depth="full")
    [f] = [f for f in v.failures if f.kind == "part_row_count_mismatch"]
    assert (f.check, f.expected, f.actual) == ("rows", 4, 3)
    assert verify_at_destination(dest, depth="sample").passed


# ------------------------------------------------------------------------------ 4. S3
@pytest.mark.postgres
def test_a_byte_changed_in_an_s3_part_fails_full_the_same_way(tmp_path: Path, pg_url: str, s3: Any) -> None:
    _seed(pg_url)
    destination = {"type": "s3", "bucket": s3.bucket, "prefix": "exports/items/", "endpoint": s3.endpoint,
                   "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}
    config = write_config(tmp_path, source_block(pg_url), [_export(destination=destination)])
    _run(config)
    client = s3.client()
    manifest = json.loads(client.get_object(Bucket=s3.bucket, Key="exports/items/manifest.json")["Body"].read())
    _assert_fingerprinted(manifest, COLUMNS)
    code, v = _validate(config, "full")
    assert code == 0 and v["column_checksums"] == "verified", v
    [part] = manifest["parts"]
    key = "exports/items/" + part["path"]
    data = bytearray(client.get_object(Bucket=s3.bucket, Key=key)["Body"].read())
    data[len(data) // 2] ^= 0xFF
    client.put_object(Bucket=s3.bucket, Key=key, Body=bytes(data))
    code, v = _validate(config, "light")
    assert code == 0 and v["passed"]  # listing only: same size
    code, v = _validate(config, "full")
    assert code == 3
    # S3 listings carry the MD5, so the listing step already names the part (sample does too)
    [f] = [f for f in v["failures"] if f["kind"] == "part_checksum_mismatch"]
    assert (f["path"], f["check"], f["expected"]) == (part["path"], "content_md5 (listing)", part["content_md5"])
    assert f["actual"] and f["actual"] != f["expected"] and v["parts_failed"] == 1


# ---------------------------------------------- 5. every writer path records the fingerprints
@pytest.mark.postgres
def test_incremental_time_window_and_chunked_runs_record_column_checksums(tmp_path: Path, pg_url: str) -> None:
    _seed(pg_url)
    exports = [
        _export(name="inc", mode="incremental", cursor_column="updated_at",
                destination={"type": "local", "path": "inc"}),
        _export(name="tw", mode="time_window", time_column="updated_at", days_window=36600,
                destination={"type": "local", "path": "tw"}),
        _export(name="ch", mode="chunked", chunk_column="id", chunk_size=50, parallel=2,
                destination={"type": "local", "path": "ch"}),
    ]
    config = write_config(tmp_path, source_block(pg_url), exports)
    _run(config)
    db_exec(pg_url, "INSERT INTO items VALUES (9999, 'late', 1.00, 1, true, TIMESTAMP '2027-01-01', NULL)")
    _run(config, "-e", "inc")  # a second incremental run: its own manifest, fingerprinted too
    for name in ("inc", "tw", "ch"):
        manifest = _manifest(tmp_path / name)
        _assert_fingerprinted(manifest, COLUMNS)
        result = rivet("validate", "-c", str(config), "-e", name, "--depth", "full", "--format", "json")
        v = json.loads(result.stdout)["exports"][0]["verification"]
        assert result.returncode == 0 and v["column_checksums"] == "verified", (name, v)
    assert len(_manifest(tmp_path / "ch")["parts"]) > 1


@pytest.mark.postgres
def test_a_resumed_chunked_run_fingerprints_the_parts_it_keeps(tmp_path: Path, pg_url: str) -> None:
    _seed(pg_url)
    config = write_config(tmp_path, source_block(pg_url),
                          [_export(mode="chunked", chunk_column="id", chunk_size=50, chunk_checkpoint=True)])
    crashed = rivet_process("run", "-c", str(config), env={"RIVET_TEST_PANIC_AT": "after_chunk_complete:2"})
    assert crashed.returncode != 0
    assert state_rows(config, "SELECT COUNT(*) FROM chunk_task WHERE status = 'completed'")[0][0] >= 1
    _run(config, "--resume")
    manifest = _manifest(tmp_path / "out")
    _assert_fingerprinted(manifest, COLUMNS)
    code, v = _validate(config, "full")
    assert code == 0 and v["column_checksums"] == "verified", v


# ------------------------------------------------------- 6. the checksum's order-independence
_values = st.lists(st.tuples(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
                             st.one_of(st.none(), st.text(max_size=12)),
                             st.one_of(st.none(), st.floats(allow_nan=False)),
                             st.one_of(st.none(), st.binary(max_size=8))),
                   min_size=0, max_size=60)


def _table(rows: list[tuple]) -> pa.Table:
    cols = list(zip(*rows, strict=True)) if rows else [[], [], [], []]
    return pa.table({"i": pa.array(cols[0], pa.int64()), "s": pa.array(cols[1], pa.string()),
                     "f": pa.array(cols[2], pa.float64()), "b": pa.array(cols[3], pa.binary())})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_values, seed=st.integers(0, 2**32), cuts=st.lists(st.integers(0, 60), max_size=4))
def test_column_checksums_ignore_row_order_and_how_rows_are_split_into_parts(
        tmp_path: Path, rows: list[tuple], seed: int, cuts: list[int]) -> None:
    whole = table_sums(_table(rows))
    shuffled = rows[:]
    random.Random(seed).shuffle(shuffled)
    bounds = sorted({0, len(shuffled), *(c for c in cuts if c <= len(shuffled))})
    parts = []
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        path = tmp_path / f"p{seed}_{i}.parquet"
        pq.write_table(_table(shuffled[lo:hi]), path, row_group_size=7)  # several row groups
        parts.append(parquet_sums(path))
    assert combine(parts) == whole or (not rows and all(s == ColumnSum(0, 0) for s in whole.values()))
    assert whole["i"].nulls == sum(r[0] is None for r in rows)


def test_a_single_changed_value_changes_its_column_checksum_only() -> None:
    base = [(i, f"s{i}", i / 3, bytes([i % 256])) for i in range(100)]
    changed = base[:]
    changed[42] = (42, "other", 42 / 3, bytes([42]))
    a, b = table_sums(_table(base)), table_sums(_table(changed))
    assert a["s"] != b["s"] and (a["i"], a["f"], a["b"]) == (b["i"], b["f"], b["b"])
    # a moved value (same multiset per column) keeps every checksum: order-independent
    swapped = base[:]
    swapped[0], swapped[1] = base[1], base[0]
    assert table_sums(_table(swapped)) == a


def test_time_and_decimal_types_hash() -> None:
    t = pa.table({"ts": pa.array([datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=i) for i in range(5)]),
                  "d": pa.array([None, 1, 2, 3, 4], pa.decimal128(10, 2)),
                  "l": pa.array([[1], [2, 3], None, [], [4]])})
    sums = table_sums(t)
    assert sums["d"].nulls == 1 and sums["l"].nulls == 1
    assert table_sums(t.take([4, 3, 2, 1, 0])) == sums
    d = t.column("d").combine_chunks()  # sliced arrays (non-zero offsets) sum to the whole
    assert combine([{"d": column_sum(d.slice(0, 2))}, {"d": column_sum(d.slice(2))}]) == {"d": sums["d"]}
    assert column_sum(pa.array([1, 2], pa.decimal128(10, 2))) != column_sum(pa.array([1, 3], pa.decimal128(10, 2)))
    big = pa.array([10**30, -(10**30)], pa.decimal128(38, 0))  # the high word matters
    assert column_sum(big) != column_sum(pa.array([10**30 + 2**64, -(10**30)], pa.decimal128(38, 0)))


@pytest.mark.postgres
def test_a_csv_export_verifies_full_by_content_and_counted_records(tmp_path: Path, pg_url: str) -> None:
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT)",
            "INSERT INTO items SELECT g, CASE WHEN g % 5 = 0 THEN E'two\\nlines, \"quoted\"' ELSE 'n' || g END "
            "FROM generate_series(1, 50) AS g")
    config = write_config(tmp_path, source_block(pg_url), [_export(format="csv")])
    _run(config)
    manifest = _manifest(tmp_path / "out")
    assert "column_checksums" not in manifest and manifest["parts"][0]["rows"] == 50
    code, v = _validate(config, "full")
    assert code == 0 and v["parts_content_verified"] == 1 and v["column_checksums"] == "not recorded", v
    dest = open_destination(DestinationSpec(kind="local", path=str(tmp_path / "out")))
    from dataclasses import replace
    m = parse_manifest((tmp_path / "out" / "manifest.json").read_bytes())
    write_manifest_files(dest, replace(m, row_count=51, parts=(replace(m.parts[0], rows=51),)))
    v = verify_at_destination(dest, depth="full")
    [f] = [f for f in v.failures if f.kind == "part_row_count_mismatch"]
    assert (f.check, f.expected, f.actual) == ("rows", 51, 50)  # quoted newlines are one record


def test_a_part_that_cannot_be_read_is_could_not_verify_not_a_traceback(tmp_path: Path) -> None:
    from rivet_core.destination.errors import destination_error
    from tests.test_manifest import RecordingDestination

    class UnreadablePart(RecordingDestination):
        def read_bytes(self, key: str, max_bytes: int | None = None) -> bytes:
            if key.endswith(".parquet"):
                raise destination_error(f"connection reset reading {key}", transient=True)
            return super().read_bytes(key, max_bytes)

    shutil.copytree(Path(__file__).resolve().parent.parent / "fixtures" / "rivet_manifest_v1", tmp_path / "p")
    dest = UnreadablePart(open_destination(DestinationSpec(kind="local", path=str(tmp_path / "p"))))
    v = verify_at_destination(dest, depth="full")
    [f] = [f for f in v.failures if f.fatal]  # (the fixture's README.md is an advisory untracked object)
    assert f.kind == "part_read_error" and f.path == "orders_20260521_120000_000.parquet" and f.transient
    assert not v.passed and v.exit_code() == 2  # a retry may clear it
    assert verify_at_destination(dest, depth="sample").passed


def test_validate_says_once_what_untracked_parts_under_data_usually_are(tmp_path: Path) -> None:
    """A full export run twice without `retention:` keeps the first run's part in data/: it is
    listed (advisory, the verdict passes) and one line says what it is and what removes it."""
    import sqlite3

    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(10)])
    config = tmp_path / "rivet.yaml"
    config.write_text(json.dumps({"source": {"type": "sqlite", "url": "sqlite:///s.db"},
                                  "exports": [{"name": "t", "table": "t", "mode": "full", "format": "parquet",
                                               "destination": {"type": "local", "path": "out"}}]}))
    for _ in range(2):
        assert rivet("run", "-c", str(config)).returncode == 0
    result = rivet("validate", "-c", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len([line for line in lines if line.startswith("  - untracked_object: key=data/")]) == 1
    assert [line for line in lines if "earlier runs' parts" in line] == [
        "    (untracked files under data/ are usually earlier runs' parts: data/ keeps them until a "
        "`retention:` block moves them, and manifest.json lists the current ones)"]
