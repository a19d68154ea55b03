"""`table_format: iceberg` with a MariaDB/MySQL source (TEST_MYSQL_DSN) — docs/adr/0009-table-formats.md.

A full run, then incremental runs merged on `id`, of a table with the types a MySQL
export carries into Iceberg: DECIMAL, DATETIME(6) (a zone-less timestamp), BIGINT, and JSON —
which Iceberg v2 cannot hold, so the schema gate refuses it before any part is written,
naming the column and the `text` override; with the override the JSON text round-trips.
The oracle is pyiceberg's scan of the table from the catalog, compared with the source
queried directly.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog

from rivet_core import api
from tests.helpers import db_exec, rivet_quick, source_block, write_config

COLUMNS = ("id", "name", "amount", "at", "doc", "big")


def _config(tmp_path: Path, url: str, **extra: Any) -> Path:
    export = {"name": "items", "table": "items", "mode": "full", "format": "parquet", "table_format": "iceberg",
              "iceberg": {"catalog_url": f"sqlite:///{tmp_path / 'catalog.db'}", "namespace": "lake"},
              "destination": {"type": "local", "path": str(tmp_path / "out")}, **extra}
    return write_config(tmp_path, source_block(url), [export])


def _insert(url: str, ids: range, second: int = 0) -> None:
    rows = ", ".join(
        f"({i}, 'n{i}', {i}.1234 * 1000, TIMESTAMP('2026-03-01 00:00:00.123456') + INTERVAL {second + i} SECOND, "
        f"'{{\"k\": {i}, \"tags\": [\"a\", \"b\"]}}', {i} * 10000000000)" for i in ids)
    db_exec(url, f"INSERT INTO items VALUES {rows}")


def _scan(tmp_path: Path) -> list[dict[str, Any]]:
    catalog = SqlCatalog("rivet", uri=f"sqlite:///{tmp_path / 'catalog.db'}")
    try:
        rows = catalog.load_table("lake.items").scan().to_arrow().to_pylist()
    finally:
        catalog.engine.dispose()
    return [{**r, "doc": json.loads(r["doc"])} for r in sorted(rows, key=lambda r: r["id"])]


def _source(url: str) -> list[dict[str, Any]]:
    out = db_exec(url, f"SELECT {', '.join(COLUMNS)} FROM items ORDER BY id")
    return [{**dict(zip(COLUMNS, r, strict=True)), "doc": json.loads(r[4])} for r in out]


def test_mysql_full_and_merged_incremental_runs_round_trip_decimal_datetime_and_json(tmp_path, mysql_url):
    db_exec(mysql_url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), amount DECIMAL(14,4), "
                       "at DATETIME(6) NOT NULL, doc JSON, big BIGINT)")
    _insert(mysql_url, range(1, 41))

    refused = api.run_export(api.load_config(_config(tmp_path, mysql_url)), "items")
    assert refused.status == "failed"
    assert "column 'doc'" in refused.error_message and "`text`" in refused.error_message
    assert not any((tmp_path / "out").rglob("*.parquet"))  # refused before the first part

    full = _config(tmp_path, mysql_url, columns={"doc": "text"})
    assert api.run_export(api.load_config(full), "items").status == "success"
    rows = _scan(tmp_path)
    assert rows == _source(mysql_url)
    assert rows[0]["amount"] == Decimal("1123.4000") and rows[0]["at"].microsecond == 123456
    assert rows[0]["at"].tzinfo is None  # DATETIME has no zone: an Iceberg `timestamp`, not `timestamptz`

    incremental = _config(tmp_path, mysql_url, mode="incremental", cursor_column="at", merge_on=["id"],
                          columns={"doc": "text"})
    assert api.run_export(api.load_config(incremental), "items").status == "success"
    db_exec(mysql_url, "UPDATE items SET name = 'changed', amount = 0.0001, doc = JSON_OBJECT('k', -5), "
                       "at = at + INTERVAL 1 DAY WHERE id IN (4, 30)")
    _insert(mysql_url, range(41, 51), second=100000)
    summary = api.run_export(api.load_config(incremental), "items")
    assert summary.status == "success" and summary.total_rows == 12
    rows = _scan(tmp_path)
    assert rows == _source(mysql_url)  # ids 4 and 30 once each, with their new values
    assert [r["id"] for r in rows] == list(range(1, 51))
    assert rows[3]["name"] == "changed" and rows[3]["doc"] == {"k": -5}
    verdict = rivet_quick("validate", "-c", str(incremental))
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
