"""A chunk repair (`rivet repair --execute`) of a `table_format:` export keeps the TABLE true
(rivet_core/pipeline/facade/finalize_repair.py → rivet_core/tableformat/repair.py).

The oracle is the format's own reader — deltalake's DeltaTable, pyiceberg's scan through the
SQL catalog — compared with the source queried directly, never our manifest or counters;
`rivet validate` must pass after, and the manifest must name the table version the reader
sees. Small tables (200 rows, four windows of 50) keep each case to a few seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog

from tests.helpers import db_exec, rivet, source_block, write_config
from tests.helpers import rivet_quick as quick


@pytest.fixture(autouse=True)
def _sqlite_state_beside_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunk checkpoint lives in .rivet_state.db beside the config (as in test_reconcile_repair.py)."""
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)


# ------------------------------------------------------------------------------ where and how to read
def _local(tmp_path: Path, fmt: str) -> dict[str, Any]:
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    return {"fmt": fmt, "dest": {"type": "local", "path": str(tmp_path / "out")}, "uri": str(tmp_path / "out"),
            "options": {}, "s3": None, "catalog": catalog,
            "iceberg": {"catalog_url": catalog, "namespace": "lake"} if fmt == "iceberg" else None}


def _s3_delta(s3: Any) -> dict[str, Any]:
    dest = {"type": "s3", "bucket": s3.bucket, "prefix": "exports/items/", "endpoint": s3.endpoint,
            "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}
    options = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": s3.access_key,
               "AWS_SECRET_ACCESS_KEY": s3.secret_key, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    return {"fmt": "delta", "dest": dest, "uri": f"s3://{s3.bucket}/exports/items", "options": options, "s3": s3,
            "iceberg": None}


def _gcs_delta(gcs: Any) -> dict[str, Any]:
    """A Delta table on the GCS emulator, committed through a copy of its log
    (rivet_core/tableformat/gcs_delta_log.py); read here by delta-rs straight from `gs://`."""
    return {"fmt": "delta", "dest": gcs.destination(), "uri": f"gs://{gcs.bucket}/exports/items",
            "options": gcs.delta_options(), "s3": None, "gcs": gcs, "iceberg": None}


def _gcs_iceberg(tmp_path: Path, gcs: Any) -> dict[str, Any]:
    """An Iceberg table on the GCS emulator; read here with pyiceberg's stock pyarrow IO
    (fake-gcs-server accepts any token), so no line of rivet reads it back."""
    import time

    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    io = {"py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO", "gcs.service.host": gcs.endpoint,
          "gcs.oauth2.token": "test", "gcs.oauth2.token-expires-at": str(int((time.time() + 3600) * 1000))}
    return {"fmt": "iceberg", "dest": gcs.destination(), "uri": f"gs://{gcs.bucket}/exports/items", "options": {},
            "s3": None, "gcs": gcs, "catalog": catalog, "catalog_io": io,
            "iceberg": {"catalog_url": catalog, "namespace": "lake"}}


def _s3_iceberg(tmp_path: Path, s3: Any) -> dict[str, Any]:
    """An Iceberg table on the S3 server; pyiceberg reads it with its own S3 settings."""
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    io = {"s3.endpoint": s3.endpoint, "s3.access-key-id": s3.access_key, "s3.secret-access-key": s3.secret_key,
          "s3.region": "us-east-1"}
    return {**_s3_delta(s3), "fmt": "iceberg", "catalog": catalog, "catalog_io": io,
            "iceberg": {"catalog_url": catalog, "namespace": "lake"}}


@pytest.fixture(params=["delta-local", "iceberg-local", "delta-s3", "iceberg-s3", "delta-gcs", "iceberg-gcs"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    if request.param == "delta-s3":
        return _s3_delta(request.getfixturevalue("s3"))
    if request.param == "iceberg-s3":
        return _s3_iceberg(tmp_path, request.getfixturevalue("s3"))
    if request.param == "delta-gcs":
        return _gcs_delta(request.getfixturevalue("gcs"))
    if request.param == "iceberg-gcs":
        return _gcs_iceberg(tmp_path, request.getfixturevalue("gcs"))
    return _local(tmp_path, request.param.split("-")[0])


def _config(tmp_path: Path, url: str, where: dict[str, Any], **extra: Any) -> Path:
    export = {"name": "items", "table": "items", "mode": "chunked", "chunk_column": "id", "chunk_size": 50,
              "chunk_checkpoint": True, "format": "parquet", "table_format": where["fmt"],
              "destination": where["dest"], **extra}
    if where["iceberg"]:
        export["iceberg"] = where["iceberg"]
    return write_config(tmp_path, source_block(url), [export])


def _seed(url: str) -> None:
    db_exec(url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50))",
            "INSERT INTO items SELECT g, 'n' || g FROM generate_series(1, 200) g WHERE g <> 75")


def _drift_window_two(url: str) -> None:
    """Inside window 2 (ids 51–100): delete three rows, change one, insert one — the count
    drops by two, so `rivet reconcile` finds the window; the change rides along."""
    db_exec(url, "DELETE FROM items WHERE id IN (60, 61, 62)", "UPDATE items SET name = 'changed' WHERE id = 70",
            "INSERT INTO items VALUES (75, 'inserted')")


def _source(url: str) -> list[tuple[int, str]]:
    return [(int(i), str(n)) for i, n in db_exec(url, "SELECT id, name FROM items ORDER BY id")]


def _delta(where: dict[str, Any]) -> DeltaTable:
    return DeltaTable(where["uri"], storage_options=where["options"])


def _iceberg(where: dict[str, Any]) -> Any:
    catalog = SqlCatalog("rivet", uri=where["catalog"], **where.get("catalog_io", {}))
    try:
        return catalog.load_table("lake.items")
    finally:
        catalog.engine.dispose()


def _table_rows(where: dict[str, Any]) -> list[tuple[int, str]]:
    """The table as its format's reader sees it (not our manifest)."""
    data = _delta(where).to_pyarrow_table() if where["fmt"] == "delta" else _iceberg(where).scan().to_arrow()
    return sorted(zip(data.column("id").to_pylist(), data.column("name").to_pylist(), strict=True))


def _version(where: dict[str, Any]) -> int:
    if where["fmt"] == "delta":
        return int(_delta(where).version())
    return int(_iceberg(where).current_snapshot().snapshot_id)


def _manifest(where: dict[str, Any]) -> dict[str, Any]:
    if where.get("gcs") is not None:
        return json.loads(where["gcs"].read("exports/items/manifest.json"))
    if where["s3"] is None:
        return json.loads((Path(where["uri"]) / "manifest.json").read_text())
    s3 = where["s3"]
    return json.loads(s3.client().get_object(Bucket=s3.bucket, Key="exports/items/manifest.json")["Body"].read())


def _manifest_names_the_table(where: dict[str, Any]) -> None:
    block = _manifest(where)["table"]
    if where["fmt"] == "delta":
        assert block["version"] == _delta(where).version() and block["operation"] == "repair"
        files = set(pa.table(_delta(where).get_add_actions(flatten=True)).column("path").to_pylist())
        assert files == {p["path"] for p in _manifest(where)["parts"]}  # the table's files are the parts
    else:
        assert block["snapshot_id"] == _version(where) and block["operation"] == "repair"


def _validate(config: Path) -> None:
    result = quick("validate", "-c", str(config), "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["exports"][0]["verification"]["passed"] is True


def _repair(config: Path, **kw: Any) -> Any:
    return quick("repair", "-c", str(config), "-e", "items", "--execute", "--format", "json", **kw)


def _rerun_converges(config: Path, where: dict[str, Any], url: str) -> None:
    """The repair re-run after a crash: it succeeds, the table equals the source, the manifest
    names the table's version, and validate passes."""
    again = _repair(config)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _table_rows(where) == _source(url)
    _manifest_names_the_table(where)
    _validate(config)


# ------------------------------------------------------------------------------ cases

def test_a_repair_replaces_the_windows_files_in_one_table_commit(tmp_path, pg_url, where):
    _seed(pg_url)
    config = _config(tmp_path, pg_url, where)
    assert quick("run", "-c", str(config)).returncode == 0
    before = _version(where)
    assert _table_rows(where) == _source(pg_url)
    _drift_window_two(pg_url)
    fixed = _repair(config)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert _table_rows(where) == _source(pg_url)  # deleted, changed and inserted rows, each id once
    if where["fmt"] == "delta":
        assert _delta(where).version() == before + 1  # ONE table commit
    else:
        snapshot = _iceberg(where).current_snapshot()
        assert snapshot.summary.additional_properties["rivet_run_id"].startswith("items_repair_")
    _manifest_names_the_table(where)
    _validate(config)
    assert quick("reconcile", "-c", str(config), "-e", "items").returncode == 0


@pytest.mark.parametrize("point", ["after_file_write", "after_table_commit", "after_manifest_update"])
def test_a_crash_during_the_repair_leaves_a_whole_table_and_the_rerun_converges(tmp_path, pg_url, point):
    where = _local(tmp_path, "delta")
    _seed(pg_url)
    config = _config(tmp_path, pg_url, where)
    assert quick("run", "-c", str(config)).returncode == 0
    first = _table_rows(where)
    _drift_window_two(pg_url)
    crashed = rivet("repair", "-c", str(config), "-e", "items", "--execute", env={"RIVET_TEST_PANIC_AT": point})
    assert crashed.returncode != 0
    if point != "after_table_commit":  # both fire in record_part, before the table commit
        assert _delta(where).version() == 0 and _table_rows(where) == first  # the previous version
    else:
        assert _table_rows(where) == _source(pg_url)  # the commit landed whole, never a part of it
    _validate(config)  # the old manifest still verifies: a later version made by this export
    _rerun_converges(config, where, pg_url)


def test_an_iceberg_crash_after_the_table_commit_converges_on_the_rerun(tmp_path, pg_url):
    where = _local(tmp_path, "iceberg")
    _seed(pg_url)
    config = _config(tmp_path, pg_url, where)
    assert quick("run", "-c", str(config)).returncode == 0
    _drift_window_two(pg_url)
    crashed = rivet("repair", "-c", str(config), "-e", "items", "--execute",
                    env={"RIVET_TEST_PANIC_AT": "after_table_commit"})
    assert crashed.returncode != 0
    assert _table_rows(where) == _source(pg_url)
    _validate(config)
    _rerun_converges(config, where, pg_url)


def test_a_keyset_incremental_table_export_is_refused_before_anything_is_written(tmp_path, pg_url):
    """Its table is appended to run after run, so no chunk manifest lists all of its files
    (rivet_core/tableformat/repair.py): the repair is refused before any window is
    re-exported, naming the full re-run."""
    where = _local(tmp_path, "delta")
    _seed(pg_url)
    config = _config(tmp_path, pg_url, where, chunk_column=None, chunk_by_key="id", keyset_incremental=True)
    assert quick("run", "-c", str(config)).returncode == 0
    out = tmp_path / "out"
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    version, manifest = _delta(where).version(), _manifest(where)
    _drift_window_two(pg_url)
    refused = _repair(config)
    assert refused.returncode != 0
    assert "re-run the whole export" in refused.stdout + refused.stderr
    assert "--full-refresh" in refused.stdout + refused.stderr
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before  # no part, no commit, no manifest
    assert _delta(where).version() == version and _manifest(where) == manifest


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_a_window_emptied_at_the_source_then_a_crash_after_the_commit_still_converges(tmp_path, pg_url, fmt):
    """The re-run's commit has nothing left to change (the crashed commit already removed the
    window's files and the window has no new part); it must still be a commit of the re-run,
    so the manifest it writes names a version its own run made (tableformat/verify.py)."""
    where = _local(tmp_path, fmt)
    _seed(pg_url)
    config = _config(tmp_path, pg_url, where)
    assert quick("run", "-c", str(config)).returncode == 0
    db_exec(pg_url, "DELETE FROM items WHERE id BETWEEN 51 AND 100")
    crashed = rivet("repair", "-c", str(config), "-e", "items", "--execute",
                    env={"RIVET_TEST_PANIC_AT": "after_table_commit"})
    assert crashed.returncode != 0
    assert _table_rows(where) == _source(pg_url)
    _rerun_converges(config, where, pg_url)
