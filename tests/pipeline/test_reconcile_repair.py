"""`rivet reconcile` and `rivet repair` on a checkpointed chunked export (real PostgreSQL)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from tests.helpers import db_exec, rivet, source_block, write_config


def canonical_ids(prefix) -> list[int]:  # noqa: ANN001
    """Ids in the parts the canonical manifest.json lists (the repaired dataset)."""
    manifest = json.loads((prefix / "manifest.json").read_text())
    return sorted(i for p in manifest["parts"] for i in pq.read_table(prefix / p["path"]).column("id").to_pylist())


def _setup(tmp_path, pg_url):  # noqa: ANN001, ANN202
    db_exec(pg_url, "CREATE TABLE t (id INT PRIMARY KEY, v TEXT)",
            "INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 400) g")
    return write_config(tmp_path, source_block(pg_url), [{
        "name": "t", "table": "t", "mode": "chunked", "chunk_column": "id", "chunk_size": 100,
        "chunk_checkpoint": True, "format": "parquet", "destination": {"type": "local", "path": "out"}}])


def test_reconcile_reports_a_mismatch_after_source_rows_are_deleted_and_repair_fixes_it(tmp_path, pg_url):
    config = _setup(tmp_path, pg_url)
    assert rivet("run", "-c", str(config)).returncode == 0
    clean = rivet("reconcile", "-c", str(config), "-e", "t", "--format", "json")
    assert clean.returncode == 0, clean.stderr
    assert json.loads(clean.stdout)["summary"]["mismatches"] == 0

    db_exec(pg_url, "DELETE FROM t WHERE id BETWEEN 210 AND 219")
    found = rivet("reconcile", "-c", str(config), "-e", "t", "--format", "json")
    assert found.returncode == 3, found.stderr
    report = json.loads(found.stdout)
    wrong = [p for p in report["partitions"] if p["status"] == "mismatch"]
    assert [(p["chunk_index"], p["source_count"], p["exported_count"]) for p in wrong] == [(2, 90, 100)]

    dry = rivet("repair", "-c", str(config), "-e", "t", "--format", "json")
    assert dry.returncode == 0 and json.loads(dry.stdout)["executed"] is False
    assert canonical_ids(tmp_path / "out") == list(range(1, 401))  # a dry run changes nothing

    fixed = rivet("repair", "-c", str(config), "-e", "t", "--execute", "--format", "json")
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout)["summary"]["rows_written"] == 90
    expected = [i for i in range(1, 401) if not 210 <= i <= 219]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    ids = canonical_ids(tmp_path / "out")
    assert sorted(ids) == expected and manifest["row_count"] == len(expected)
    # The superseded part was moved aside, never deleted.
    assert list((tmp_path / "out" / "_quarantine").rglob("*.parquet"))
    assert rivet("reconcile", "-c", str(config), "-e", "t").returncode == 0
    validate = rivet("validate", "-c", str(config), "--format", "json")
    assert validate.returncode == 0, validate.stdout
    assert json.loads(validate.stdout)["exports"][0]["verification"]["passed"] is True


def test_reconcile_refuses_a_non_chunked_export_with_a_hint(tmp_path, pg_url):
    db_exec(pg_url, "CREATE TABLE t (id INT PRIMARY KEY)")
    config = write_config(tmp_path, source_block(pg_url), [{
        "name": "t", "table": "t", "mode": "full", "format": "parquet",
        "destination": {"type": "local", "path": "out"}}])
    result = rivet("reconcile", "-c", str(config), "-e", "t")
    assert result.returncode == 1
    assert "chunk_checkpoint: true" in result.stderr and "rivet validate" in result.stderr
