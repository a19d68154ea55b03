"""Manifest fields written as Rivet's manifest writer writes them (issue 35 item 2).

Rivet's manifest writer (docs/manifest.md): `source.table` comes from the export's
`table:` (or a `schema.table` export name) and is null for a `query:` export;
`export_family` names the parent export; a local `destination.uri` is `file://` + the path
as configured; `extraction.cursor_type` carries the cursor column's source type (ours: the source's own type name; Rivet reserves the field and writes none yet).
Real PostgreSQL; each manifest is read back as JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import db_exec, source_block, write_config
from tests.helpers import rivet_quick as rivet


@pytest.mark.postgres
def test_a_query_export_records_no_source_table_and_the_configured_local_uri(tmp_path: Path, pg_url: str) -> None:
    db_exec(pg_url, "CREATE TABLE items (id BIGINT PRIMARY KEY, updated_at TIMESTAMPTZ)",
            "INSERT INTO items SELECT g, TIMESTAMPTZ '2026-01-01' + g * INTERVAL '1 hour' "
            "FROM generate_series(1, 30) AS g")
    exports = [
        {"name": "by_query", "query": "SELECT id, updated_at FROM items WHERE id > 5", "format": "parquet",
         "destination": {"type": "local", "path": "./out/q"}},
        {"name": "by_table", "table": "public.items", "mode": "incremental", "cursor_column": "updated_at",
         "format": "parquet", "destination": {"type": "local", "path": "out/t"}},
    ]
    config = write_config(tmp_path, source_block(pg_url), exports)
    result = rivet("run", "-c", str(config))
    assert result.returncode == 0, result.stderr
    q = json.loads((tmp_path / "out/q/manifest.json").read_text())
    assert q["source"]["table"] is None and q["source"]["schema"] is None
    assert q["destination"] == {"kind": "local", "uri": "file://./out/q"}
    assert q["export_family"] == "by_query"
    t = json.loads((tmp_path / "out/t/manifest.json").read_text())
    assert (t["source"]["schema"], t["source"]["table"]) == ("public", "items")
    assert t["destination"]["uri"] == "file://out/t" and t["export_family"] == "by_table"
    extraction = t["source"]["extraction"]
    assert extraction["cursor_column"] == "updated_at" and extraction["cursor_type"] == "timestamp with time zone"
