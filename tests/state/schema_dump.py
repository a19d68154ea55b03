"""The on-disk schema of a state store, as comparable data, and its golden files.

The golden files under tests/state/golden/ were written by the SQLAlchemy Core state store
(rivet_core/state before it moved to the DB-API drivers); tests/state/test_state_schema_golden.py
checks that every store the current code creates or migrates has exactly that schema:
- SQLite: every `sqlite_master` row, its `sql` text byte for byte (SQLite keeps the DDL text
  as it was sent, so a reformatted CREATE TABLE would show here);
- PostgreSQL: the catalogue's view of it (columns with types, nullability and defaults,
  constraints, indexes, sequences) — PostgreSQL keeps no DDL text, so equivalence is what
  can be compared.

Re-write them only on purpose (a new migration): `python -m tests.state.schema_dump DIR`
with TEST_PG_DSN set writes both files from a fresh store of the code in the checkout.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parent / "golden"
SQLITE_GOLDEN = GOLDEN / "sqlite_master.json"
POSTGRESQL_GOLDEN = GOLDEN / "postgresql_schema.json"


def sqlite_schema(db: Path) -> list[dict[str, Any]]:
    """Every `sqlite_master` row (type, name, tbl_name, sql), ordered by type and name."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()
    return [{"type": t, "name": n, "tbl_name": tbl, "sql": sql} for t, n, tbl, sql in rows]


_PG_QUERIES = {
    "columns": "SELECT table_name, column_name, ordinal_position, data_type, is_nullable, column_default "
               "FROM information_schema.columns WHERE table_schema = 'public' "
               "ORDER BY table_name, ordinal_position",
    "constraints": "SELECT conrelid::regclass::text AS table_name, conname, contype::text, "
                   "pg_get_constraintdef(oid) AS definition FROM pg_constraint "
                   "WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2",
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
               "ORDER BY tablename, indexname",
    "sequences": "SELECT sequence_name, data_type FROM information_schema.sequences "
                 "WHERE sequence_schema = 'public' ORDER BY sequence_name",
}


def postgresql_schema(url: str) -> dict[str, list[dict[str, Any]]]:
    """The public schema's columns, constraints, indexes and sequences (see module docstring)."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        return {part: [dict(r) for r in conn.execute(sql).fetchall()] for part, sql in _PG_QUERIES.items()}


def _write(directory: Path) -> None:
    import os
    import tempfile
    import uuid

    import psycopg

    from rivet_core.state import StateStore

    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        StateStore.open(Path(tmp) / "rivet.yaml", state_url="").close()
        schema = sqlite_schema(Path(tmp) / ".rivet_state.db")
    (directory / SQLITE_GOLDEN.name).write_text(json.dumps(schema, indent=1) + "\n")
    admin, db = os.environ["TEST_PG_DSN"], f"rivet_golden_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    try:
        url = _with_database(admin, db)
        StateStore.open(None, state_url=url).close()
        pg = postgresql_schema(url)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    (directory / POSTGRESQL_GOLDEN.name).write_text(json.dumps(pg, indent=1) + "\n")


def _with_database(admin: str, db: str) -> str:
    """TEST_PG_DSN (a postgresql:// URL) with another database name."""
    import urllib.parse

    parts = urllib.parse.urlsplit(admin)
    return parts._replace(path=f"/{db}").geturl()


if __name__ == "__main__":
    _write(Path(sys.argv[1]) if len(sys.argv) > 1 else GOLDEN)
