"""keyset_incremental: an append-only table is exported in keyset pages, and each clean
re-run starts after the highest key committed by the previous one (cursor after manifest)."""

from __future__ import annotations

import sqlite3

from tests.helpers import cursor_of, manifest_ids, write_config
from tests.helpers import rivet_quick as rivet  # no run here crashes or pauses: in-process


def test_keyset_incremental_exports_only_keys_after_the_committed_high_water_key(tmp_path):
    db = tmp_path / "s.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(1, 251)])
    config = write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{db}"}, [{
        "name": "t", "table": "t", "mode": "chunked", "chunk_by_key": "id", "chunk_size": 60,
        "keyset_incremental": True, "format": "parquet", "destination": {"type": "local", "path": "out"}}])
    first = rivet("run", "-c", str(config))
    assert first.returncode == 0, first.stderr
    assert cursor_of(config, "t") == "250"
    with sqlite3.connect(db) as conn:
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(251, 271)])
    second = rivet("run", "-c", str(config), "--json")
    assert second.returncode == 0, second.stderr
    assert '"rows": 20' in second.stdout
    assert cursor_of(config, "t") == "270"
    assert manifest_ids(tmp_path / "out") == list(range(1, 271))  # every id once across runs
