"""PyMySQL's private internals stay behind rivet_core/source/mysql/wire.py (issue 18 item 3):
the packet readers run only on a tested PyMySQL release; on another one the session reads
through the row path (PyMySQL's public cursor API) and says why, with the same table.
"""

from __future__ import annotations

import logging
import re
import ssl
from pathlib import Path
from typing import Any

import pyarrow as pa
import pymysql
import pytest

import rivet_core
from rivet_core.config.tuning import ResolvedTuning
from rivet_core.source import open_source
from rivet_core.source.mysql import wire
from tests.helpers import mysql_connect

TUNING = ResolvedTuning(statement_timeout_s=30, lock_timeout_s=5, throttle_ms=0)
SQL = "SELECT id, name, amount, at FROM t ORDER BY id"


def _connect(url: str) -> pymysql.connections.Connection[Any]:
    return mysql_connect(url, charset="utf8mb4")


@pytest.fixture
def table_url(mysql_url: str) -> str:
    conn = _connect(mysql_url)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(10,2), "
                        "at DATETIME(6))")
            cur.execute("INSERT INTO t VALUES (1, 'a', 1.50, '2024-01-02 03:04:05.000006'), "
                        "(2, NULL, -2.25, NULL), (3, 'ünï', 0.00, '1999-12-31 23:59:59')")
    finally:
        conn.close()
    return mysql_url


def _read(url: str) -> pa.Table:
    with open_source(url, TUNING) as src:
        schema = src.describe(SQL, ())
        table = pa.Table.from_batches(list(src.stream(SQL, (), schema, 2)), schema=schema)
        assert src.scalar("SELECT 1") == 1
    return table


def _source_rows(url: str) -> list[tuple[Any, ...]]:
    conn = _connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute(SQL)
            return [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()


def test_the_installed_pymysql_is_a_tested_release_and_takes_the_binary_path(
    table_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert wire.pymysql_version()[:2] in wire.TESTED, (
        f"PyMySQL {wire.pymysql_version()} is locked but wire.TESTED does not list it")
    with caplog.at_level(logging.INFO, logger="rivet.source"):
        table = _read(table_url)
    assert "MySQL read path: binary" in caplog.text
    assert [tuple(r.values()) for r in table.to_pylist()] == _source_rows(table_url)


@pytest.mark.parametrize("release", [(1, 3, 0), (1, 0, 3), (2, 0, 0)])
def test_an_untested_pymysql_release_reads_through_the_row_path(
    table_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    release: tuple[int, int, int],
) -> None:
    monkeypatch.setattr(wire, "pymysql_version", lambda: release)
    with caplog.at_level(logging.INFO, logger="rivet.source"):
        table = _read(table_url)
    shown = ".".join(map(str, release))
    assert f"MySQL read path: rows (PyMySQL {shown} is not a release the packet readers" in caplog.text
    assert "read path: binary" not in caplog.text and "read path: raw" not in caplog.text
    assert [tuple(r.values()) for r in table.to_pylist()] == _source_rows(table_url)


def test_a_connection_without_the_internals_is_refused_with_the_member_named() -> None:
    class Bare:
        _rfile = object()

    assert wire.unsupported_reason(Bare()) == (
        f"PyMySQL connection has no _next_seq_id (PyMySQL "
        f"{'.'.join(map(str, wire.pymysql_version()))})")


_PRIVATE = re.compile(r"\._(rfile|next_seq_id|read_packet|execute_command|force_close|"
                      r"current_timeout|read_timeout|sock|result)\b")


def test_no_module_but_the_adapter_names_pymysql_internals() -> None:
    root = Path(rivet_core.__file__).parent
    offenders = [
        f"{path.relative_to(root.parent)}:{n}"
        for path in sorted(root.rglob("*.py")) if path.name != "wire.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _PRIVATE.search(line.replace("self._result", ""))
    ]
    assert offenders == []


def test_the_preferred_tls_mode_shares_one_context_and_loads_no_ca_store(
        mysql_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """PyMySQL builds `ssl.create_default_context()` (the system CA store, ~40 ms of CPU) for
    every connection in the `preferred` mode, only to verify nothing. Our connections share
    one unverified context instead, and still connect and answer."""
    from rivet_core.source.mysql.session import mysql_connect as source_connect

    def no_ca_store(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("a preferred-mode connection built a default context")

    monkeypatch.setattr("ssl.create_default_context", no_ca_store)
    first, second = source_connect(mysql_url), source_connect(mysql_url)
    try:
        assert first.ctx is second.ctx is wire.preferred_tls_context()
        assert (first.ctx.verify_mode, first.ctx.check_hostname) == (ssl.CERT_NONE, False)
        with first.cursor() as cur:
            cur.execute("SELECT 41 + 1")
            assert cur.fetchone() == (42,)
    finally:
        first.close()
        second.close()
    # A mode with its own context (rivet_core/source/tls.py) keeps it: PyMySQL uses it as given.
    monkeypatch.undo()
    args = {"host": "127.0.0.1", "ssl": ssl.create_default_context(), "defer_connect": True}
    assert wire.connect(**args).ctx is args["ssl"]
