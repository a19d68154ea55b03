"""A Delta or Iceberg table is checked against the truth (issue 33, findings 1, 4 and 6):
the chain of the export's published runs, not only the last manifest.

- An empty incremental poll publishes "the table is unchanged" (its manifest names the
  published version), so the next append never treats earlier published commits as orphans.
- `merge_on` keys that are NULL or repeated within one run refuse the run before anything is
  committed (a NULL never matches in a MERGE, a repeated key wedges every later MERGE).
- A commit no published run of the export made (another writer) refuses the next run and
  keeps `rivet validate` FAILED until the operator re-baselines with `--full-refresh`.

The oracle is the formats' own readers (deltalake's DeltaTable, pyiceberg's scan over the
SQL catalog) compared with the source queried directly; never the tool's counters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog.sql import SqlCatalog

from rivet_core.destination.checksums import xxh3_fingerprint
from tests.helpers import db_exec, rivet, source_block, write_config


# ------------------------------------------------------------------------------ helpers
@pytest.fixture(params=["delta", "iceberg"])
def fmt(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _items(url: str, *, keyed: bool = True) -> None:
    key = "id INT PRIMARY KEY" if keyed else "id INT"
    db_exec(url, f"CREATE TABLE items ({key}, name VARCHAR(50), updated_at TIMESTAMPTZ NOT NULL)")


def _insert(url: str, ids: list[int | None], *, minute: int = 0, name: str = "n") -> None:
    rows = ", ".join(f"({'NULL' if i is None else i}, '{name}{i}', TIMESTAMPTZ '2026-03-01 00:00:00+00' + "
                     f"INTERVAL '{minute + n} minutes')" for n, i in enumerate(ids))
    db_exec(url, f"INSERT INTO items (id, name, updated_at) VALUES {rows}")


def _config(tmp_path: Path, url: str, fmt: str, **extra: Any) -> Path:
    export: dict[str, Any] = {"name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
                              "format": "parquet", "table_format": fmt,
                              "destination": {"type": "local", "path": str(tmp_path / "out")}, **extra}
    export = {k: v for k, v in export.items() if v is not None}
    if fmt == "iceberg":
        export["iceberg"] = {"catalog_url": f"sqlite:///{tmp_path / 'catalog.db'}", "namespace": "lake"}
    return write_config(tmp_path, source_block(url), [export])


def _run(config: Path, *args: str) -> Any:
    return rivet("run", "-c", str(config), *args)


def _ok(config: Path, *args: str) -> None:
    result = _run(config, *args)
    assert result.returncode == 0, result.stdout + result.stderr


def _catalog(tmp_path: Path) -> SqlCatalog:
    return SqlCatalog("rivet", uri=f"sqlite:///{tmp_path / 'catalog.db'}")


def _read(tmp_path: Path, fmt: str) -> pa.Table | None:
    """The table as a reader sees it (None: there is no table)."""
    if fmt == "delta":
        root = tmp_path / "out"
        if not DeltaTable.is_deltatable(str(root)):
            return None
        return DeltaTable(str(root)).to_pyarrow_table()
    catalog = _catalog(tmp_path)
    try:
        if not catalog.table_exists("lake.items"):
            return None
        return catalog.load_table("lake.items").scan().to_arrow()
    finally:
        catalog.engine.dispose()


def _rows(tmp_path: Path, fmt: str) -> list[tuple[Any, str]]:
    table = _read(tmp_path, fmt)
    assert table is not None
    return sorted(((r["id"], r["name"]) for r in table.to_pylist()), key=lambda r: (r[0] is None, r[0] or 0, r[1]))


def _source(url: str) -> list[tuple[Any, str]]:
    return sorted(((r[0], r[1]) for r in db_exec(url, "SELECT id, name FROM items")),
                  key=lambda r: (r[0] is None, r[0] or 0, r[1]))


def _validate(config: Path, *args: str) -> Any:
    return rivet("validate", "-c", str(config), *args)


def _foreign_append(tmp_path: Path, fmt: str, data: pa.Table) -> None:
    """Another writer appends `data` (shaped as the table) outside Rivet."""
    if fmt == "delta":
        current = DeltaTable(str(tmp_path / "out"))
        write_deltalake(str(tmp_path / "out"), data.cast(pa.schema(current.schema().to_arrow())), mode="append")
        return
    catalog = _catalog(tmp_path)
    try:
        table = catalog.load_table("lake.items")
        table.append(data.cast(table.schema().as_arrow()))
    finally:
        catalog.engine.dispose()


# ------------------------------------------------------------------------------ finding 1
def test_an_empty_poll_keeps_every_earlier_row_and_the_next_append_adds_to_them(tmp_path, pg_url, fmt):
    _items(pg_url)
    _insert(pg_url, list(range(1, 11)))
    config = _config(tmp_path, pg_url, fmt)
    _ok(config)
    _ok(config)  # the poll finds nothing new
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["row_count"] == 0
    assert manifest["table"] is not None and manifest["table"]["operation"] == "unchanged"
    _insert(pg_url, list(range(11, 16)), minute=1000)
    third = _run(config, "--json")
    assert third.returncode == 0, third.stderr
    assert "exported again" not in third.stdout + third.stderr  # nothing was an orphan
    assert _rows(tmp_path, fmt) == _source(pg_url)  # 15 rows, each once
    verdict = _validate(config)
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr


# ------------------------------------------------------------------------------ finding 4
def test_a_repeated_merge_key_in_the_first_batch_refuses_the_run_before_the_table_exists(tmp_path, pg_url, fmt):
    _items(pg_url, keyed=False)
    _insert(pg_url, [1, 1, 2])
    config = _config(tmp_path, pg_url, fmt, merge_on=["id"])
    refused = _run(config)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    message = refused.stdout + refused.stderr
    assert "items" in message and "merge_on" in message and "id=1" in message
    assert "primary" in message and "NOT NULL" in message
    assert _read(tmp_path, fmt) is None  # nothing committed, no table
    db_exec(pg_url, "DELETE FROM items WHERE name = 'n1' AND updated_at = (SELECT min(updated_at) FROM items)")
    _ok(config)  # the cursor had not moved: every row is exported now
    assert _rows(tmp_path, fmt) == _source(pg_url)


def test_a_null_merge_key_refuses_the_run_and_nothing_is_committed(tmp_path, pg_url, fmt):
    _items(pg_url, keyed=False)
    _insert(pg_url, [2, 3])
    config = _config(tmp_path, pg_url, fmt, merge_on=["id"])
    _ok(config)
    before = _rows(tmp_path, fmt)
    _insert(pg_url, [None], minute=1000, name="x")
    db_exec(pg_url, "UPDATE items SET name = 'cx', updated_at = updated_at + INTERVAL '1 day' WHERE id = 2")
    refused = _run(config)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    message = refused.stdout + refused.stderr
    assert "NULL" in message and "merge_on" in message and "id" in message
    assert _rows(tmp_path, fmt) == before
    db_exec(pg_url, "DELETE FROM items WHERE id IS NULL")
    _ok(config)  # the same batch, without the NULL key: the cursor had not moved
    assert _rows(tmp_path, fmt) == _source(pg_url)
    assert _validate(config).returncode == 0


def test_validate_full_flags_a_merge_table_whose_keys_are_not_unique(tmp_path, pg_url):
    """A table appended to before `merge_on` was configured holds a key twice: every later
    MERGE would refuse it, so the full verification says so."""
    _items(pg_url, keyed=False)
    _insert(pg_url, [1, 2])
    _ok(_config(tmp_path, pg_url, "delta"))
    _insert(pg_url, [1], minute=1000, name="again")
    _ok(_config(tmp_path, pg_url, "delta"))
    merged = _config(tmp_path, pg_url, "delta", merge_on=["id"])
    assert _validate(merged, "--depth", "sample").returncode == 0  # no scan below full
    verdict = _validate(merged, "--depth", "full")
    assert verdict.returncode == 3, verdict.stdout + verdict.stderr
    assert "id=1" in verdict.stdout + verdict.stderr


# ------------------------------------------------------------------------------ finding 6
def test_a_foreign_commit_refuses_the_next_run_and_validate_stays_failed_until_a_full_refresh(
        tmp_path, pg_url, fmt):
    _items(pg_url)
    _insert(pg_url, [1, 2])
    config = _config(tmp_path, pg_url, fmt)
    _ok(config)
    current = _read(tmp_path, fmt)
    assert current is not None
    _foreign_append(tmp_path, fmt, current)  # ids 1, 2 once more
    assert _validate(config).returncode == 3
    _insert(pg_url, [3, 4], minute=1000)
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "out").rglob("*"))
    refused = _run(config)
    assert refused.returncode == 3, refused.stdout + refused.stderr
    message = refused.stdout + refused.stderr
    assert "items" in message and "--full-refresh" in message and "another writer" in message
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "out").rglob("*")) == before  # nothing written
    assert [r[0] for r in _rows(tmp_path, fmt)] == [1, 1, 2, 2]  # nothing committed on top of it
    verdict = _validate(config)
    assert verdict.returncode == 3, verdict.stdout + verdict.stderr  # still FAILED
    _ok(config, "--full-refresh")  # the operator re-baselines
    assert _rows(tmp_path, fmt) == _source(pg_url)
    verdict = _validate(config)
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
    _insert(pg_url, [5], minute=2000)
    _ok(config)  # and the export goes on appending
    assert _rows(tmp_path, fmt) == _source(pg_url)
    assert _validate(config).returncode == 0


def test_a_full_refresh_of_a_merge_export_rebuilds_the_table_from_the_source(tmp_path, pg_url, fmt):
    _items(pg_url)
    _insert(pg_url, [1, 2, 3])
    config = _config(tmp_path, pg_url, fmt, merge_on=["id"])
    _ok(config)
    db_exec(pg_url, "DELETE FROM items WHERE id = 2")
    _ok(config, "--full-refresh")
    assert _rows(tmp_path, fmt) == _source(pg_url)  # an overwrite: the deleted row left the table
    assert _validate(config).returncode == 0


def test_an_empty_poll_manifest_without_a_table_block_no_longer_makes_earlier_runs_orphans(tmp_path, pg_url, fmt):
    """A prefix an earlier build left (its empty poll's manifest says `table: null`): the next
    append judges orphans by the chain of published runs — run 1's copy says it published —
    so it removes nothing."""
    _items(pg_url)
    _insert(pg_url, list(range(1, 11)))
    config = _config(tmp_path, pg_url, fmt)
    _ok(config)
    _ok(config)
    manifest_path = tmp_path / "out" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "table": None}))  # as the earlier build wrote it
    _insert(pg_url, list(range(11, 16)), minute=1000)
    _ok(config)
    assert _rows(tmp_path, fmt) == _source(pg_url)


def test_validate_fails_when_an_append_removed_rows_of_a_published_run(tmp_path, pg_url):
    """The chain check: version 1 (run 2's append) is edited to also remove run 1's files, as
    the earlier build's erasing append did. The manifest's own numbers agree with the table;
    only the chain (version 0's rows + run 2's rows) shows the loss."""
    _items(pg_url)
    _insert(pg_url, list(range(1, 11)))
    config = _config(tmp_path, pg_url, "delta")
    _ok(config)
    first = json.loads((tmp_path / "out" / "manifest.json").read_text())
    _insert(pg_url, list(range(11, 16)), minute=1000)
    _ok(config)
    assert _validate(config).returncode == 0
    commit = tmp_path / "out" / "_delta_log" / f"{1:020d}.json"
    removes = [json.dumps({"remove": {"path": p["path"], "deletionTimestamp": 1, "dataChange": True,
                                      "size": p["size_bytes"]}}) for p in first["parts"]]
    commit.write_text(commit.read_text().rstrip("\n") + "\n" + "\n".join(removes) + "\n")
    manifest_path = tmp_path / "out" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    body = json.dumps({**manifest, "table": {**manifest["table"], "rows": 5}}).encode()
    manifest_path.write_bytes(body)  # its own numbers agree with the table, and _SUCCESS with it
    (tmp_path / "out" / "_SUCCESS").write_text(xxh3_fingerprint(body))
    assert [r[0] for r in _rows(tmp_path, "delta")] == list(range(11, 16))
    verdict = _validate(config, "--depth", "sample")
    assert verdict.returncode == 3, verdict.stdout + verdict.stderr
    assert "rows of published runs left the table" in verdict.stdout + verdict.stderr


def test_a_full_export_too_refuses_to_overwrite_another_writers_commit_until_asked(tmp_path, pg_url, fmt):
    """A full export overwrites every run, but not silently over another writer's commit:
    the operator decides (`--full-refresh`), and validate says FAILED meanwhile."""
    _items(pg_url)
    _insert(pg_url, [1, 2])
    config = _config(tmp_path, pg_url, fmt, mode="full", cursor_column=None)
    _ok(config)
    current = _read(tmp_path, fmt)
    assert current is not None
    _foreign_append(tmp_path, fmt, current)
    refused = _run(config)
    assert refused.returncode == 3 and "another writer" in refused.stderr, refused.stdout + refused.stderr
    assert _validate(config).returncode == 3
    _ok(config, "--full-refresh")
    assert _rows(tmp_path, fmt) == _source(pg_url)
    assert _validate(config).returncode == 0


def test_a_chunked_export_refuses_another_writers_commit_before_its_first_window(tmp_path, pg_url):
    _items(pg_url)
    _insert(pg_url, list(range(1, 31)))
    config = _config(tmp_path, pg_url, "delta", mode="chunked", cursor_column=None, chunk_column="id", chunk_size=10)
    _ok(config)
    current = _read(tmp_path, "delta")
    assert current is not None
    _foreign_append(tmp_path, "delta", current.slice(0, 1))
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "out").rglob("*"))
    refused = _run(config)
    assert refused.returncode == 3 and "another writer" in refused.stderr, refused.stdout + refused.stderr
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "out").rglob("*")) == before  # no window written
    _ok(config, "--full-refresh")
    assert _rows(tmp_path, "delta") == _source(pg_url)
    assert _validate(config).returncode == 0


def test_a_time_partition_that_became_empty_is_emptied_in_the_table_and_stays_readable(tmp_path, pg_url, fmt):
    """Re-running a day whose rows were all deleted at the source: the day's files leave the
    table in one commit (before, the table kept referencing the parts the new manifest moved
    to `_quarantine/`, and a reader failed on the missing file)."""
    from datetime import date

    from rivet_core import api

    _items(pg_url)
    _insert(pg_url, [1, 2])  # 2026-03-01
    db_exec(pg_url, "INSERT INTO items SELECT id + 100, name, updated_at + INTERVAL '1 day' FROM items")
    config = _config(tmp_path, pg_url, fmt, mode="time_window", cursor_column=None, time_column="updated_at",
                     days_window=3650)
    cfg = api.load_config(config)
    day1 = api.DayWindow(start=date(2026, 3, 1), end=date(2026, 3, 2))
    day2 = api.DayWindow(start=date(2026, 3, 2), end=date(2026, 3, 3))
    for day in (day1, day2):
        assert api.run_export(cfg, "items", window=day).status == "success"
    db_exec(pg_url, "DELETE FROM items WHERE id < 100")
    again = api.run_export(cfg, "items", window=day1)
    assert again.status == "success", again.error_message
    assert _rows(tmp_path, fmt) == _source(pg_url)  # readable, day 1 empty, day 2 whole
    verdict = _validate(config)
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
