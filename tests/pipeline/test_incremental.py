"""Incremental exports on PostgreSQL and MariaDB: cursor semantics of docs/rivet-compat.md "Incremental".

Each test drives the real CLI and checks the destination with the independent oracle
(tests/helpers.py): re-read files listed by success manifests, compare with the source.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import (
    cursor_of,
    data_files,
    db_exec,
    manifest_ids,
    read_table,
    source_block,
    success_manifests,
    write_config,
)
from tests.helpers import rivet_quick as rivet  # no run here crashes, pauses or races: in-process


def _ts(url: str, minutes: int) -> str:
    if url.startswith("postgres"):
        return f"TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '{minutes} minutes'"
    return f"TIMESTAMP '2026-01-01 00:00:00' + INTERVAL {minutes} MINUTE"


def _insert(url: str, ids: range, *, minutes=None) -> None:  # noqa: ANN001
    rows = ", ".join(f"({i}, 'n{i}', {_ts(url, minutes(i) if minutes else i)})" for i in ids)
    db_exec(url, f"INSERT INTO items (id, name, updated_at) VALUES {rows}")


@pytest.fixture(params=["postgres", "mysql"])
def url(request: pytest.FixtureRequest) -> str:
    u = request.getfixturevalue("pg_url" if request.param == "postgres" else "mysql_url")
    db_exec(u, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), updated_at TIMESTAMP NULL, "
               "created_at TIMESTAMP NULL)")
    return u


def _config(tmp_path, url, **extra):  # noqa: ANN001, ANN003, ANN202
    export = {"name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
              "format": "parquet", "destination": {"type": "local", "path": "out"}, **extra}
    return write_config(tmp_path, source_block(url), [export])


def _run(config, *args):  # noqa: ANN001, ANN002, ANN202
    result = rivet("run", "-c", str(config), "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["runs"][0]


def test_unchanged_source_exports_nothing_new_and_keeps_the_cursor(tmp_path, url):
    _insert(url, range(1, 11))
    config = _config(tmp_path, url)
    first = _run(config)
    assert first["rows"] == 10 and len(data_files(tmp_path / "out")) == 1
    cursor = cursor_of(config, "items")
    second = _run(config)
    assert second["status"] == "success" and second["files"] == 0
    assert len(data_files(tmp_path / "out")) == 1
    assert cursor_of(config, "items") == cursor == "2026-01-01T00:10:00.000000"


def test_new_rows_only_are_exported_and_cursor_ranges_are_contiguous(tmp_path, url):
    _insert(url, range(1, 6))
    config = _config(tmp_path, url)
    _run(config)
    _insert(url, range(6, 9))
    second = _run(config)
    new_part = tmp_path / "out" / second["parts"][0]
    assert sorted(read_table(new_part).column("id").to_pylist()) == [6, 7, 8]
    _insert(url, range(9, 10))
    _run(config)
    ranges = sorted(((m["source"]["extraction"].get("cursor_low"), m["source"]["extraction"]["cursor_high"])
                     for m in success_manifests(tmp_path / "out") if m["parts"]), key=lambda r: r[1])
    assert len(ranges) == 3
    assert ranges[0][0] is None
    for (_, high), (low, _) in zip(ranges, ranges[1:], strict=False):
        assert low == high  # each run starts exactly where the previous one committed
    assert manifest_ids(tmp_path / "out") == list(range(1, 10))


def test_null_cursor_cells_never_erase_the_high_water_mark(tmp_path, url):
    _insert(url, range(1, 6))
    db_exec(url, "INSERT INTO items (id, name, updated_at) VALUES (6, 'null1', NULL), (7, 'null2', NULL)")
    config = _config(tmp_path, url)
    first = _run(config)
    assert first["rows"] == 7
    assert cursor_of(config, "items") == "2026-01-01T00:05:00.000000"
    second = _run(config)
    assert second["rows"] == 0 and cursor_of(config, "items") == "2026-01-01T00:05:00.000000"


def test_coalesce_mode_uses_the_fallback_column_when_the_cursor_is_null(tmp_path, url):
    db_exec(url, f"INSERT INTO items VALUES (1, 'a', {_ts(url, 1)}, {_ts(url, 0)}), "
                 f"(2, 'b', NULL, {_ts(url, 5)}), (3, 'c', {_ts(url, 3)}, {_ts(url, 0)})")
    config = _config(tmp_path, url, incremental_cursor_mode="coalesce", cursor_fallback_column="created_at")
    first = _run(config)
    assert first["rows"] == 3
    assert cursor_of(config, "items") == "2026-01-01T00:05:00.000000"
    written = read_table(tmp_path / "out" / first["parts"][0])
    assert "_rivet_coalesced_cursor" not in written.column_names
    db_exec(url, f"INSERT INTO items VALUES (4, 'd', NULL, {_ts(url, 4)}), (5, 'e', NULL, {_ts(url, 6)})")
    second = _run(config)
    assert read_table(tmp_path / "out" / second["parts"][0]).column("id").to_pylist() == [5]


def test_a_cursor_value_with_a_quote_stays_a_valid_query(tmp_path, url):
    db_exec(url, "CREATE TABLE people (name VARCHAR(50) PRIMARY KEY)",
            "INSERT INTO people VALUES ('Anna'), ('O''Brien')")
    config = write_config(tmp_path, source_block(url), [{
        "name": "people", "table": "people", "mode": "incremental", "cursor_column": "name",
        "format": "csv", "destination": {"type": "local", "path": "out"}}])
    _run(config)
    assert cursor_of(config, "people") == "O'Brien"
    db_exec(url, "INSERT INTO people VALUES ('Zoe')")
    second = _run(config)
    assert second["rows"] == 1


def test_rapid_runs_into_one_prefix_clobber_nothing(tmp_path, url):
    config = _config(tmp_path, url)
    for start in range(1, 16, 3):
        _insert(url, range(start, start + 3))
        _run(config)
    files = data_files(tmp_path / "out")
    assert len(files) == len({f.name for f in files}) == 5
    assert manifest_ids(tmp_path / "out") == list(range(1, 16))


def test_a_non_utc_session_timezone_does_not_shift_the_boundary(tmp_path, pg_url):
    db = pg_url.rsplit("/", 1)[1]
    db_exec(pg_url, f"ALTER DATABASE \"{db}\" SET timezone = 'America/New_York'",
            "CREATE TABLE ev (id INT PRIMARY KEY, at TIMESTAMPTZ NOT NULL)",
            "INSERT INTO ev VALUES (1, '2026-01-01 00:00:00+00'), (2, '2026-01-01 00:40:00+00')")
    config = write_config(tmp_path, source_block(pg_url), [{
        "name": "ev", "table": "ev", "mode": "incremental", "cursor_column": "at", "format": "parquet",
        "destination": {"type": "local", "path": "out"}}])
    _run(config)
    assert cursor_of(config, "ev") == "2026-01-01T00:40:00.000000"
    # 01:00 UTC is after the cursor; read as New York time the cursor would be 05:40 UTC
    # and this row would be silently skipped.
    db_exec(pg_url, "INSERT INTO ev VALUES (3, '2026-01-01 01:00:00+00')")
    second = _run(config)
    assert second["rows"] == 1
    assert manifest_ids(tmp_path / "out") == [1, 2, 3]


def test_a_non_utc_mysql_global_timezone_does_not_shift_the_boundary(tmp_path, mysql_url):
    db_exec(mysql_url, "CREATE TABLE ev (id INT PRIMARY KEY, at TIMESTAMP NOT NULL)")
    db_exec(mysql_url, "SET time_zone = '+00:00'",
            "INSERT INTO ev VALUES (1, '2026-01-01 00:00:00'), (2, '2026-01-01 00:40:00')")
    original = db_exec(mysql_url, "SELECT @@GLOBAL.time_zone")[0][0]
    db_exec(mysql_url, "SET GLOBAL time_zone = '-05:00'")
    try:
        config = write_config(tmp_path, source_block(mysql_url), [{
            "name": "ev", "table": "ev", "mode": "incremental", "cursor_column": "at", "format": "parquet",
            "destination": {"type": "local", "path": "out"}}])
        _run(config)
        assert cursor_of(config, "ev") == "2026-01-01T00:40:00.000000"
        db_exec(mysql_url, "SET time_zone = '+00:00'", "INSERT INTO ev VALUES (3, '2026-01-01 01:00:00')")
        assert _run(config)["rows"] == 1
        assert manifest_ids(tmp_path / "out") == [1, 2, 3]
    finally:
        db_exec(mysql_url, f"SET GLOBAL time_zone = '{original}'")
