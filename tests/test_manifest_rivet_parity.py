"""Rivet-compatible manifest v1 (issue 15 item 3), both directions.

- A manifest as Rivet writes it (tests/fixtures/rivet_manifest_v1, written by hand from
  Rivet's schema, docs/manifest.md) is verified by `rivet validate` — canonical and `--run-id` copy.
- Manifests we write are read by `_rivet_reader` below: a small reader written from the
  docs (docs/manifest.md "Fields") and nothing else — it does not import rivet_core. It checks
  the field types Rivet's serde structs require (cursor bounds are strings, `source.schema` is
  present, `compression` a string), the strategy labels, the invariants, the `_SUCCESS` marker
  and Rivet's schema fingerprint recomputed from the Parquet file's own schema.
- Manifests we wrote before parity (`time_window`, no `source.schema`) still read and verify.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

from tests.helpers import db_exec, source_block, write_config
from tests.helpers import rivet_quick as rivet  # no run here crashes or pauses: in-process

FIXTURE = Path(__file__).parent / "fixtures" / "rivet_manifest_v1"
RIVET_LABELS = {"full", "incremental", "chunked", "keyset", "timewindow"}
_HEX16 = re.compile(r"^xxh3:[0-9a-f]{16}$")


# ------------------------------------------------------------------ the independent reader
def _rust_type(t: pa.DataType) -> str:
    """Rust arrow `DataType` Debug names of the types these tests write (docs/manifest.md)."""
    if pa.types.is_timestamp(t):
        return f"Timestamp(Microsecond, {'None' if t.tz is None else 'Some(' + json.dumps(t.tz) + ')'})"
    return {pa.int32(): "Int32", pa.int64(): "Int64", pa.string(): "Utf8", pa.large_string(): "LargeUtf8",
            pa.float64(): "Float64", pa.bool_(): "Boolean", pa.date32(): "Date32"}[t]


def rivet_schema_fingerprint(schema: pa.Schema) -> str:
    text = "".join(f"{f.name}\t{_rust_type(f.type)}\n" for f in sorted(schema, key=lambda f: f.name.encode()))
    return "xxh3:" + xxhash.xxh3_64_hexdigest(text.encode())


def _rivet_reader(prefix: Path) -> dict[str, Any]:
    """Read `prefix/manifest.json` the way Rivet's serde structs do; assert what they require."""
    raw = (prefix / "manifest.json").read_bytes()
    m = json.loads(raw)
    assert m["manifest_version"] == 1
    for key in ("run_id", "export_name", "started_at", "finished_at", "format", "compression",
                "schema_fingerprint"):
        assert isinstance(m[key], str), key
    assert m.get("mode", "batch") in ("batch", "cdc")
    assert m["status"] in ("running", "success", "failed", "interrupted")
    src = m["source"]
    assert isinstance(src["engine"], str) and src["engine"] in ("postgres", "mysql", "mssql", "mongo", "sqlite")
    assert "schema" in src and (src["schema"] is None or isinstance(src["schema"], str))  # Option<String>, no skip
    assert src.get("table") is None or isinstance(src["table"], str)
    ext = src.get("extraction")
    if ext is not None:
        assert ext["strategy"] in RIVET_LABELS
        for key in ("cursor_column", "cursor_type", "cursor_low", "cursor_high"):
            assert ext.get(key) is None or isinstance(ext[key], str), key  # Option<String>
        assert ext.get("source_row_count") is None or isinstance(ext["source_row_count"], int)
    assert isinstance(m["destination"]["kind"], str) and isinstance(m["destination"]["uri"], str)
    assert _HEX16.match(m["schema_fingerprint"])
    assert isinstance(m["row_count"], int) and 0 <= m["part_count"] <= 2**32 - 1
    ids = set()
    for p in m["parts"]:
        assert isinstance(p["part_id"], int) and p["part_id"] not in ids
        ids.add(p["part_id"])
        assert isinstance(p["path"], str) and not p["path"].startswith("/")
        assert isinstance(p["rows"], int) and isinstance(p["size_bytes"], int)
        assert _HEX16.match(p["content_fingerprint"]), p
        assert len(base64.b64decode(p["content_md5"])) == 16
        assert p["status"] in ("committed", "quarantined")
        body = (prefix / p["path"]).read_bytes()
        assert len(body) == p["size_bytes"] and p["content_fingerprint"] == "xxh3:" + xxhash.xxh3_64_hexdigest(body)
    committed = [p for p in m["parts"] if p["status"] == "committed"]
    assert m["part_count"] == len(committed) and m["row_count"] == sum(p["rows"] for p in committed)
    assert (prefix / "_SUCCESS").read_text() == f"xxh3:{xxhash.xxh3_64_hexdigest(raw)}\n"
    if m.get("row_hash") is not None:
        rh = m["row_hash"]
        assert isinstance(rh["column"], str) and isinstance(rh["render"], str)
        assert rh["covered"] is True or (isinstance(rh["covered"], list) and rh["covered"])
    return m


# ------------------------------------------------------------------------- Rivet → ours
def _rivet_prefix(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    for f in FIXTURE.iterdir():
        if f.name != "README.md":
            shutil.copy2(f, out / f.name)
    return out


def _validate(config: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    result = rivet("validate", "-c", str(config), "--format", "json", *args)
    return result.returncode, json.loads(result.stdout)["exports"] if result.stdout else []


def test_a_manifest_written_by_rivet_is_verified_by_rivet_validate(tmp_path):
    out = _rivet_prefix(tmp_path)
    config = write_config(tmp_path, {"type": "postgres", "url": "postgresql://u@127.0.0.1:1/db"}, [
        {"name": "orders", "table": "public.orders", "mode": "incremental", "cursor_column": "updated_at",
         "format": "parquet", "destination": {"type": "local", "path": "out"}}])
    code, (verdict,) = _validate(config, "--depth", "full")
    v = verdict["verification"]
    assert code == 0 and v["passed"], v
    assert (v["parts_verified"], v["parts_failed"], v["success_marker_consistent"]) == (1, 0, True)
    assert v["failures"] == []
    # The run's own copy (`--run-id`), and the fixture's fingerprint is Rivet's algorithm.
    code, (verdict,) = _validate(config, "--run-id", "orders_20260521T120000.000")
    assert code == 0 and verdict["verification"]["passed"] and verdict["verification"]["success_marker_consistent"]
    table = pq.read_table(out / "orders_20260521_120000_000.parquet")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["schema_fingerprint"] == rivet_schema_fingerprint(table.schema)
    from rivet_core.manifest import parse_manifest, schema_fingerprint

    assert schema_fingerprint(table.schema) == manifest["schema_fingerprint"]
    parsed = parse_manifest((out / "manifest.json").read_bytes())
    assert parsed.source.extraction.strategy == "incremental" and parsed.source.schema == "public"

    # A damaged part is found; a run id with no copy is a failure, not a legacy prefix.
    body = (out / "orders_20260521_120000_000.parquet").read_bytes()
    (out / "orders_20260521_120000_000.parquet").write_bytes(body[:-1])
    code, (verdict,) = _validate(config)
    assert code == 3 and [f["kind"] for f in verdict["verification"]["failures"]] == ["part_size_mismatch"]
    code, (verdict,) = _validate(config, "--run-id", "orders_20990101T000000.000")
    assert code == 3 and verdict["verification"]["failures"][0]["kind"] == "manifest_required_but_absent"


def test_manifests_we_wrote_before_parity_still_read_and_verify(tmp_path):
    out = _rivet_prefix(tmp_path)
    old = json.loads((out / "manifest.json").read_text())
    old["source"]["extraction"] = {"strategy": "time_window"}
    del old["source"]["schema"]
    raw = (json.dumps(old, indent=2) + "\n").encode()
    (out / "manifest.json").write_bytes(raw)
    (out / "_SUCCESS").write_text(f"xxh3:{xxhash.xxh3_64_hexdigest(raw)}\n")
    config = write_config(tmp_path, {"type": "postgres", "url": "postgresql://u@127.0.0.1:1/db"}, [
        {"name": "orders", "query": "SELECT 1", "format": "parquet", "destination": {"type": "local", "path": "out"}}])
    code, (verdict,) = _validate(config)
    assert code == 0 and verdict["verification"]["passed"], verdict
    from rivet_core.manifest import parse_manifest

    parsed = parse_manifest(raw)
    assert parsed.source.extraction.strategy == "timewindow" and parsed.source.schema is None
    # Rivet's `source.table` is an Option<String>: null (or absent) reads, as in Rivet's reader.
    for table in (None, "drop"):
        other = json.loads(raw)
        if table is None:
            other["source"]["table"] = None
        else:
            del other["source"]["table"]
        assert parse_manifest(json.dumps(other).encode()).source.table is None


# ------------------------------------------------------------------------- ours → Rivet
@pytest.fixture
def shop(pg_url: str) -> str:
    db_exec(pg_url, "CREATE TABLE items (id BIGINT PRIMARY KEY, name TEXT, created_at TIMESTAMPTZ)",
            "INSERT INTO items SELECT g, 'n' || g, now() - (g || ' hours')::interval FROM generate_series(1, 20) g")
    return pg_url


def _run(config: Path, *names: str) -> None:
    args = [a for n in names for a in ("-e", n)]
    result = rivet("run", "-c", str(config), *args, "--json")
    assert result.returncode == 0, result.stderr


def test_our_manifests_read_with_a_reader_written_from_rivets_schema(tmp_path, shop):
    dest = lambda name: {"type": "local", "path": f"out/{name}"}  # noqa: E731
    config = write_config(tmp_path, source_block(shop), [
        {"name": "full_rh", "table": "public.items", "format": "parquet", "destination": dest("full_rh"),
         "meta_columns": {"row_hash": True}},
        {"name": "by_query", "query": "SELECT id, name FROM items", "format": "csv", "destination": dest("by_query"),
         "meta_columns": {"row_hash": ["id"]}},
        {"name": "recent", "table": "items", "mode": "time_window", "time_column": "created_at", "days_window": 3,
         "format": "parquet", "destination": dest("recent")},
        {"name": "by_key", "table": "items", "mode": "chunked", "chunk_by_key": "id", "chunk_size": 7,
         "format": "parquet", "destination": dest("by_key")},
        {"name": "by_range", "table": "items", "mode": "chunked", "chunk_column": "id", "chunk_size": 7,
         "chunk_checkpoint": True, "format": "parquet", "destination": dest("by_range")},
    ])
    _run(config)
    out = tmp_path / "out"
    m = {name: _rivet_reader(out / name) for name in ("full_rh", "by_query", "recent", "by_key", "by_range")}
    assert {n: x["source"]["extraction"]["strategy"] for n, x in m.items()} == {
        "full_rh": "full", "by_query": "full", "recent": "timewindow", "by_key": "keyset", "by_range": "chunked"}
    assert m["full_rh"]["source"]["schema"] == "public" and m["full_rh"]["source"]["table"] == "items"
    assert m["by_query"]["source"]["schema"] is None
    assert m["full_rh"]["row_hash"] == {"column": "_rivet_row_hash", "covered": True, "render": "rivet-py-rowhash-v1"}
    assert m["by_query"]["row_hash"]["covered"] == ["id"]
    assert "row_hash" not in m["recent"]
    window_start = m["recent"]["source"]["extraction"]["window_start"]
    assert window_start.endswith("T00:00:00+00:00")  # the UTC midnight cutoff of days_window
    for name in ("full_rh", "recent", "by_key"):
        first = m[name]["parts"][0]["path"]
        schema = pq.read_schema(out / name / first)
        assert m[name]["schema_fingerprint"] == rivet_schema_fingerprint(schema), name
    rows = {n: sum(pq.read_metadata(out / n / p["path"]).num_rows for p in x["parts"])
            for n, x in m.items() if n != "by_query"}
    assert rows == {"full_rh": 20, "recent": m["recent"]["row_count"], "by_key": 20, "by_range": 20}


def test_validate_targets_a_day_a_sub_prefix_or_a_dated_path(tmp_path):
    staged = tmp_path / "staged"
    staged.mkdir()
    day = tmp_path / "out" / "updated_at=2026-05-21"
    shutil.copytree(_rivet_prefix(staged), day)
    dated = tmp_path / "dated" / "2026-05-21"
    shutil.copytree(day, dated)
    src = {"type": "postgres", "url": "postgresql://u@127.0.0.1:1/db"}
    config = write_config(tmp_path, src, [
        {"name": "orders", "table": "orders", "mode": "time_window", "time_column": "updated_at", "days_window": 1,
         "format": "parquet", "destination": {"type": "local", "path": "out"}},
        {"name": "dated", "query": "SELECT 1", "format": "parquet",
         "destination": {"type": "local", "path": "dated/{date}"}}])
    code, (verdict,) = _validate(config, "-e", "orders", "--date", "2026-05-21")
    assert code == 0 and verdict["verification"]["passed"], verdict
    assert verdict["resolved_prefix"].rstrip("/").endswith("out/updated_at=2026-05-21")
    code, (verdict,) = _validate(config, "-e", "orders", "--prefix", "updated_at=2026-05-21")
    assert code == 0 and verdict["verification"]["passed"], verdict
    # A pinned day or sub-prefix with no manifest is a failure, not a legacy prefix.
    code, (verdict,) = _validate(config, "-e", "orders", "--date", "2026-05-22")
    assert code == 3 and verdict["verification"]["failures"][0]["kind"] == "manifest_required_but_absent"
    code, (verdict,) = _validate(config, "-e", "orders", "--prefix", "elsewhere/")
    assert code == 3 and verdict["verification"]["failures"][0]["kind"] == "manifest_required_but_absent"
    # {date} in a destination path renders at --date (the manifest names export 'orders': another
    # export's manifest fails the verdict, which proves the dated prefix was the one read).
    code, (verdict,) = _validate(config, "-e", "dated", "--date", "2026-05-21")
    assert verdict["resolved_prefix"].rstrip("/").endswith("dated/2026-05-21")
    assert code == 3 and [f["kind"] for f in verdict["verification"]["failures"]] == ["manifest_export_mismatch"]
    for bad in (("--prefix", "../out"), ("--prefix", "/abs"), ("--date", "21/05/2026")):
        result = rivet("validate", "-c", str(config), "-e", "orders", *bad)
        assert result.returncode == 1 and "Error:" in result.stderr, (bad, result.stderr)


def test_a_time_partition_records_its_window_and_validate_date_finds_it(tmp_path):
    import sqlite3
    from datetime import date

    from rivet_core import api

    db = tmp_path / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE ev (id INTEGER PRIMARY KEY, at TIMESTAMP NOT NULL)")
        conn.executemany("INSERT INTO ev VALUES (?, ?)", [(1, "2026-03-01 08:00:00"), (2, "2026-03-02 00:00:00")])
    path = write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{db}"}, [{
        "name": "ev", "table": "ev", "mode": "time_window", "time_column": "at", "days_window": 1,
        "format": "parquet", "destination": {"type": "local", "path": "out"}}])
    summary = api.run_export(api.load_config(path), "ev", window=api.DayWindow(start=date(2026, 3, 1),
                                                                            end=date(2026, 3, 2)))
    assert summary.status == "success", summary.error_message
    prefix = tmp_path / "out" / "at=2026-03-01"
    m = _rivet_reader(prefix)
    ext = m["source"]["extraction"]
    assert ext["strategy"] == "timewindow"
    assert (ext["window_start"][:10], ext["window_end"][:10]) == ("2026-03-01", "2026-03-02")
    assert [r["id"] for p in m["parts"] for r in pq.read_table(prefix / p["path"]).to_pylist()] == [1]
    code, (verdict,) = _validate(path, "--date", "2026-03-01")
    assert code == 0 and verdict["verification"]["passed"], verdict
    code, (verdict,) = _validate(path, "--run-id", summary.run_id, "--prefix", "at=2026-03-01")
    assert code == 0 and verdict["verification"]["passed"] and verdict["verification"]["success_marker_consistent"]


def test_validate_run_id_renders_run_id_in_the_destination_path(tmp_path):
    staged = tmp_path / "staged"
    staged.mkdir()
    shutil.copytree(_rivet_prefix(staged), tmp_path / "runs" / "orders_20260521T120000.000")
    config = write_config(tmp_path, {"type": "postgres", "url": "postgresql://u@127.0.0.1:1/db"}, [
        {"name": "orders", "query": "SELECT 1", "format": "parquet",
         "destination": {"type": "local", "path": "runs/{run_id}"}}])
    code, (verdict,) = _validate(config, "--run-id", "orders_20260521T120000.000")
    assert verdict["resolved_prefix"].rstrip("/").endswith("runs/orders_20260521T120000.000")
    assert code == 0 and verdict["verification"]["passed"] and verdict["verification"]["success_marker_consistent"]
