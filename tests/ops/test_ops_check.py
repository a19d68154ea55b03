"""`rivet check`: verdicts from EXPLAIN, the type report, --strict and --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import db_exec, source_block, write_config
from tests.helpers import rivet_quick as rivet  # no process of its own needed


def _export(name: str, table: str, **extra: object) -> dict:
    return {"name": name, "table": table, "format": "parquet",
            "destination": {"type": "local", "path": f"out/{name}"}, **extra}


def _check(config: Path, *args: str):  # noqa: ANN202
    return rivet("check", "-c", str(config), *args)


def test_strict_fails_on_unbounded_numeric_and_passes_on_a_clean_table(tmp_path: Path, pg_url: str) -> None:
    db_exec(pg_url, "CREATE TABLE money (id int PRIMARY KEY, amount numeric)",
            "INSERT INTO money VALUES (1, 1.5), (2, 2.25)",
            "CREATE TABLE clean (id int PRIMARY KEY, amount numeric(10,2), name text)",
            "INSERT INTO clean VALUES (1, 1.5, 'a')")
    config = write_config(tmp_path, source_block(pg_url),
                          [_export("money", "money"), _export("clean", "clean")])
    result = _check(config, "-e", "money", "--strict", "--type-report")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "money.amount (unsupported)" in result.stderr
    assert "unsupported" in result.stdout and "numeric" in result.stdout
    result = _check(config, "-e", "clean", "--strict", "--type-report")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "decimal128(10, 2)" in result.stdout and "exact" in result.stdout
    # Without --strict the report is a report: exit 0, verdict unsafe with the reason.
    result = _check(config, "-e", "money", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)["exports"][0]
    assert doc["verdict"] == "unsafe" and "amount" in doc["reason"]


def test_strict_flags_a_reviewed_override_as_lossy(tmp_path: Path, pg_url: str) -> None:
    db_exec(pg_url, "CREATE TABLE money (id int PRIMARY KEY, amount numeric)")
    config = write_config(tmp_path, source_block(pg_url),
                          [_export("money", "money", columns={"amount": "decimal(38,18)"})])
    result = _check(config, "--strict", "--json", "--type-report")
    assert result.returncode == 1
    doc = json.loads(result.stdout)
    assert doc["strict_failed"] is True
    amount = next(c for c in doc["exports"][0]["columns"] if c["column"] == "amount")
    assert (amount["fidelity"], amount["rivet_type"], amount["override"]) == ("lossy", "decimal128(38, 18)", True)
    assert amount["arrow_type"] == "Decimal128(38, 18)"  # Rivet's (arrow-rs) spelling


def _index_setup(url: str) -> None:
    for table in ("indexed_t", "plain_t"):
        db_exec(url, f"CREATE TABLE {table} (id INT NOT NULL, name VARCHAR(20), updated_at TIMESTAMP NULL)")
        rows = ", ".join(f"({i}, 'n{i}', TIMESTAMP '2026-01-01 00:00:00')" for i in range(1, 201))
        db_exec(url, f"INSERT INTO {table} VALUES {rows}")
    db_exec(url, "CREATE INDEX ix_updated ON indexed_t (updated_at)")


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_explain_verdict_differs_between_indexed_and_unindexed_cursor(tmp_path: Path, engine: str,
                                                                      request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("pg_url" if engine == "postgres" else "mysql_url")
    _index_setup(url)
    inc = {"mode": "incremental", "cursor_column": "updated_at"}
    config = write_config(tmp_path, source_block(url),
                          [_export("fast", "indexed_t", **inc), _export("slow", "plain_t", **inc)])
    result = _check(config, "--json")
    assert result.returncode == 0, result.stderr
    by_name = {e["export_name"]: e for e in json.loads(result.stdout)["exports"]}
    fast, slow = by_name["fast"], by_name["slow"]
    assert (fast["access"]["indexed"], fast["access"]["index_used"]) == (True, True), fast
    assert (slow["access"]["indexed"], slow["access"]["index_used"]) == (False, False), slow
    assert fast["verdict"] in ("efficient", "acceptable")  # acceptable: nullable cursor caveat
    assert slow["verdict"] == "degraded" and "CREATE INDEX" in slow["reason"]
    assert fast["row_estimate"] == 200 and fast["row_width_bytes"] > 0


def test_chunked_on_unindexed_column_is_unsafe_and_pretty_output(tmp_path: Path, sqlite_mix: str) -> None:
    import sqlite3

    path = sqlite_mix.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE nokey (n INTEGER NOT NULL, v TEXT)")
        conn.executemany("INSERT INTO nokey VALUES (?, ?)", [(i, "x") for i in range(1, 1001)])
    chunk = {"mode": "chunked", "chunk_size": 50}
    config = write_config(tmp_path, source_block(sqlite_mix),
                          [_export("by_pk", "big_int", **chunk),
                           _export("by_n", "nokey", chunk_column="n", **chunk)])
    result = _check(config)
    assert result.returncode == 0, result.stderr
    assert "export by_pk: EFFICIENT" in result.stdout
    assert "export by_n: UNSAFE" in result.stdout and "full table scan" in result.stdout


def test_missing_table_exits_non_zero_naming_it(tmp_path: Path, sqlite_mix: str) -> None:
    config = write_config(tmp_path, source_block(sqlite_mix), [_export("ghost", "no_such_table")])
    result = _check(config)
    assert result.returncode == 1
    assert "no_such_table" in result.stderr and "not found" in result.stderr
