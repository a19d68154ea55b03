"""Fixtures for the operator commands (init / check / plan / apply): a source database with
a mix of table shapes, on PostgreSQL, MariaDB and SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.helpers import db_exec

#: Row counts: `--small-rows 500` makes SMALL a full export and the others "large".
SMALL, BIG, UUIDS, EVENTS, MONEY = 40, 2_500, 1_500, 1_200, 30
SMALL_ROWS = "500"
CHUNK = "400"


def make_pg_mix(url: str) -> None:
    db_exec(url, f"""
        CREATE TABLE small_t (id int PRIMARY KEY, name text);
        INSERT INTO small_t SELECT g, 'n' || g FROM generate_series(1, {SMALL}) g;
        CREATE TABLE big_int (id bigint PRIMARY KEY, v text, amount numeric(12,2));
        INSERT INTO big_int SELECT g, 'v' || g, g * 1.5 FROM generate_series(1, {BIG}) g;
        CREATE TABLE uuid_t (id uuid PRIMARY KEY, v int);
        INSERT INTO uuid_t SELECT gen_random_uuid(), g FROM generate_series(1, {UUIDS}) g;
        CREATE TABLE events (kind text, updated_at timestamptz NOT NULL);
        INSERT INTO events SELECT 'k' || g, TIMESTAMPTZ '2026-01-01 00:00:00+00' + g * INTERVAL '1 minute'
          FROM generate_series(1, {EVENTS}) g;
        CREATE TABLE money_t (id int PRIMARY KEY, amount numeric);
        INSERT INTO money_t SELECT g, g / 4.0 FROM generate_series(1, {MONEY}) g;
    """)


def make_mysql_mix(url: str) -> None:
    db_exec(url,
            "CREATE TABLE small_t (id INT PRIMARY KEY, name VARCHAR(20))",
            f"INSERT INTO small_t SELECT seq, CONCAT('n', seq) FROM seq_1_to_{SMALL}",
            "CREATE TABLE big_int (id BIGINT PRIMARY KEY, v VARCHAR(20), amount DECIMAL(12,2))",
            f"INSERT INTO big_int SELECT seq, CONCAT('v', seq), seq * 1.5 FROM seq_1_to_{BIG}",
            "CREATE TABLE uuid_t (id CHAR(36) NOT NULL PRIMARY KEY, v INT)",
            f"INSERT INTO uuid_t SELECT UUID(), seq FROM seq_1_to_{UUIDS}",
            "CREATE TABLE events (kind VARCHAR(20), updated_at DATETIME(6) NOT NULL)",
            f"INSERT INTO events SELECT CONCAT('k', seq), TIMESTAMP '2026-01-01 00:00:00' + INTERVAL seq MINUTE "
            f"FROM seq_1_to_{EVENTS}")


def make_sqlite_mix(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.executescript("""
            CREATE TABLE small_t (id INTEGER PRIMARY KEY, name TEXT);
            CREATE TABLE big_int (id INTEGER PRIMARY KEY, v TEXT, amount DECIMAL(12,2));
            CREATE TABLE events (kind TEXT, updated_at TIMESTAMP NOT NULL);
        """)
        conn.executemany("INSERT INTO small_t VALUES (?, ?)", [(i, f"n{i}") for i in range(1, SMALL + 1)])
        conn.executemany("INSERT INTO big_int VALUES (?, ?, ?)",
                         [(i, f"v{i}", f"{i * 1.5:.2f}") for i in range(1, BIG + 1)])
        conn.executemany("INSERT INTO events VALUES (?, ?)",
                         [(f"k{i}", f"2026-01-01 {i // 60 % 24:02d}:{i % 60:02d}:00") for i in range(1, EVENTS + 1)])


@pytest.fixture
def sqlite_mix(tmp_path: Path) -> str:
    path = tmp_path / "src.db"
    make_sqlite_mix(path)
    return f"sqlite:///{path}"
