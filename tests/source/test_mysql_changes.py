"""The MariaDB binlog through `MySQLChangeReader` (rivet_core/source/mysql/changes.py).

Real MariaDB (TEST_MYSQL_DSN; scripts/services.sh starts it with a ROW binlog, full row
image and full row metadata). The oracle is what each test executed: the expected changes
are written out value by value, or read back from the source with a plain PyMySQL query,
and the type oracle is the Parquet a real `mode: full` export wrote for the same table.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rivet_core import api
from rivet_core.errors import SourceError
from rivet_core.source.changes import ChangeBatch, ChangePosition
from rivet_core.source.mysql.changes import (
    DEFAULT_SERVER_ID,
    MySQLChangeReader,
    binlog_position,
    position_of,
)
from tests.helpers import mysql_connect, mysql_exec, source_block, write_config

pytestmark = pytest.mark.mysql

SPECTRUM = (
    "CREATE TABLE spectrum (id INT PRIMARY KEY, small SMALLINT, big BIGINT UNSIGNED, flag TINYINT(1), "
    "amount DECIMAL(12,3), ratio DOUBLE, day DATE, at DATETIME(6), stamp TIMESTAMP(3) NULL, "
    "note TEXT, raw BLOB, doc JSON, color ENUM('red','green'), tags SET('a','b','c'), "
    "bits BIT(5), bit1 BIT(1))"
)
SPECTRUM_ROW_1 = (
    "(1, -7, 18446744073709551615, 1, 123456789.125, 0.5, '2024-02-29', '2024-02-29 23:59:59.123456', "
    "'2024-03-01 01:02:03.456', 'héllo ✓', x'00ff10', '{\"k\": [1, \"x\"]}', 'green', 'a,c', b'10101', b'1')"
)
SPECTRUM_ROW_2 = "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '', NULL, NULL)"


def reader_for(url: str, *tables: str, **options: Any) -> MySQLChangeReader:
    return MySQLChangeReader(url, list(tables) or ["spectrum"], export_name="t_cdc",
                             server_id=options.pop("server_id", 50_000 + uuid.uuid4().int % 10_000),
                             **options)


def drain(reader: MySQLChangeReader, after: ChangePosition | None, batch_rows: int = 1000) -> list[ChangeBatch]:
    reader.open(after)
    return list(reader.read(batch_rows))


def rows_of(batches: list[ChangeBatch]) -> list[dict[str, Any]]:
    return [{"table": b.table, **row} for b in batches for row in b.rows.to_pylist()]


def anchor_of(url: str) -> ChangePosition:
    with reader_for(url) as reader:
        return reader.current_position()


@pytest.fixture
def spectrum(mysql_url: str) -> str:
    mysql_exec(mysql_url, SPECTRUM)
    return mysql_url


def test_inserts_updates_and_deletes_over_the_type_spectrum_arrive_typed_value_by_value(spectrum):
    start = anchor_of(spectrum)
    mysql_exec(spectrum, f"INSERT INTO spectrum VALUES {SPECTRUM_ROW_1}", f"INSERT INTO spectrum VALUES {SPECTRUM_ROW_2}",
               "UPDATE spectrum SET amount = -0.001, note = NULL, tags = 'b', flag = 0 WHERE id = 1",
               "DELETE FROM spectrum WHERE id = 2")
    with reader_for(spectrum) as reader:
        reader.preflight()
        [table] = reader.tables()  # described before open, for a run that plans first
        assert table.key_columns == ("id",) and table.schema.names[:2] == ["id", "small"]
        rows = rows_of(drain(reader, start))
    first = {"table": rows[0]["table"], "__op": "insert", "__seq": 0, "id": 1, "small": -7,
             "big": 18446744073709551615, "flag": True, "amount": Decimal("123456789.125"), "ratio": 0.5,
             "day": dt.date(2024, 2, 29), "at": dt.datetime(2024, 2, 29, 23, 59, 59, 123456),
             "stamp": dt.datetime(2024, 3, 1, 1, 2, 3, 456000, tzinfo=dt.UTC), "note": "héllo ✓",
             "raw": b"\x00\xff\x10", "doc": '{"k": [1, "x"]}', "color": "green", "tags": "a,c",
             "bits": 21, "bit1": True}
    assert {k: v for k, v in rows[0].items() if k != "__pos"} == first
    assert rows[0]["table"].endswith(".spectrum")
    nulls = {k: v for k, v in rows[1].items() if k not in ("table", "__pos", "__op", "__seq", "id")}
    assert nulls == {**dict.fromkeys(nulls), "tags": ""}  # every column NULL; the empty SET is ''
    updated = {**first, "__op": "update", "amount": Decimal("-0.001"), "note": None, "tags": "b", "flag": False}
    assert {k: v for k, v in rows[2].items() if k != "__pos"} == updated
    deleted = {k: v for k, v in rows[3].items() if k not in ("table", "__pos")}
    assert deleted == {**dict.fromkeys(deleted), "__op": "delete", "__seq": 0, "id": 2}  # the key only
    positions = [json.loads(r["__pos"]) for r in rows]
    assert len({(p["file"], p["pos"]) for p in positions}) == 4  # four autocommit transactions
    assert all(p["gtid"].count("-") == 2 for p in positions)  # MariaDB's domain-server-seq


def test_cdc_columns_have_the_arrow_types_a_full_export_writes_for_the_same_table(spectrum, tmp_path: Path):
    start = anchor_of(spectrum)
    mysql_exec(spectrum, f"INSERT INTO spectrum VALUES {SPECTRUM_ROW_1}")
    export = {"name": "spectrum", "table": "spectrum", "mode": "full", "format": "parquet",
              "destination": {"type": "local", "path": str(tmp_path / "out")}}
    config = write_config(tmp_path, source_block(spectrum), [export])
    assert api.run_export(api.load_config(config), "spectrum").status == "success"
    [part] = [p for p in (tmp_path / "out").rglob("*.parquet")]
    full_schema = pq.read_schema(part)
    with reader_for(spectrum) as reader:
        [batch] = drain(reader, start)
    cdc_schema = batch.rows.schema
    assert cdc_schema.names[:3] == ["__op", "__pos", "__seq"]
    assert [(f.name, f.type) for f in cdc_schema][3:] == [(f.name, f.type) for f in full_schema]
    assert pa.Table.from_batches([batch.rows]).drop(["__op", "__pos", "__seq"]).to_pylist() == \
        pq.read_table(part).to_pylist()  # and the same values


def test_a_multi_statement_transaction_keeps_one_pos_with_seq_zero_to_n_minus_one(mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    start = anchor_of(mysql_url)
    mysql_exec(mysql_url, "BEGIN", "INSERT INTO t VALUES (1, 1), (2, 2)", "UPDATE t SET v = 10 WHERE id = 1",
               "DELETE FROM t WHERE id = 2", "INSERT INTO t VALUES (3, 3)", "COMMIT",
               "INSERT INTO t VALUES (4, 4)")
    with reader_for(mysql_url, "t") as reader:
        batches = drain(reader, start)
    rows = rows_of(batches)
    assert [(r["__op"], r["__seq"], r["id"], r["v"]) for r in rows] == [
        ("insert", 0, 1, 1), ("insert", 1, 2, 2), ("update", 2, 1, 10), ("delete", 3, 2, None),
        ("insert", 4, 3, 3), ("insert", 0, 4, 4)]
    assert len({r["__pos"] for r in rows[:5]}) == 1 and rows[5]["__pos"] != rows[0]["__pos"]
    assert batches[-1].position.to_json() == rows[5]["__pos"] and batches[-1].ends_transaction


def test_savepoints_inside_a_transaction_keep_its_changes_and_drop_the_rolled_back_ones(mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY)")
    start = anchor_of(mysql_url)
    mysql_exec(mysql_url, "BEGIN", "INSERT INTO t VALUES (1)", "SAVEPOINT a", "INSERT INTO t VALUES (2)",
               "SAVEPOINT b", "INSERT INTO t VALUES (3)", "ROLLBACK TO SAVEPOINT b", "INSERT INTO t VALUES (4)",
               "COMMIT")
    with reader_for(mysql_url, "t") as reader:
        rows = rows_of(drain(reader, start))
    assert [(r["id"], r["__seq"]) for r in rows] == [(1, 0), (2, 1), (4, 2)]
    assert len({r["__pos"] for r in rows}) == 1


def test_changes_committed_after_open_are_not_returned_and_the_read_does_not_wait(mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    start = anchor_of(mysql_url)
    mysql_exec(mysql_url, "INSERT INTO t VALUES (1, 1)", "INSERT INTO t VALUES (2, 2)")
    with reader_for(mysql_url, "t") as reader:
        window = reader.open(start)
        mysql_exec(mysql_url, "INSERT INTO t VALUES (3, 3)", "BEGIN", "UPDATE t SET v = 9", "COMMIT")
        rows = rows_of(list(reader.read(1000)))
    assert [r["id"] for r in rows] == [1, 2]
    assert json.loads(rows[-1]["__pos"])["pos"] <= window.bound.fields["pos"]


def test_reopening_after_the_last_position_returns_exactly_the_later_changes(mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    start = anchor_of(mysql_url)
    mysql_exec(mysql_url, *(f"INSERT INTO t VALUES ({i}, {i})" for i in range(1, 6)))
    with reader_for(mysql_url, "t") as reader:
        first = drain(reader, start, batch_rows=2)
        assert [b.rows.num_rows for b in first] == [2, 2, 1] and all(b.ends_transaction for b in first)
        mysql_exec(mysql_url, "BEGIN", "UPDATE t SET v = -1 WHERE id <= 2", "COMMIT", "DELETE FROM t WHERE id = 5")
        second = drain(reader, first[-1].position)
        again = drain(reader, second[-1].position)
    assert [r["id"] for r in rows_of(first)] == [1, 2, 3, 4, 5]
    assert [(r["__op"], r["id"], r["__seq"]) for r in rows_of(second)] == [
        ("update", 1, 0), ("update", 2, 1), ("delete", 5, 0)]
    assert again == []
    assert first[-1].position < second[0].position
    assert position_of(json.loads(rows_of(second)[-1]["__pos"])) == second[-1].position
    with pytest.raises(SourceError, match="not written by a MySQL/MariaDB CDC export"):
        position_of({"lsn": "0/16B3748"})


def test_a_window_spanning_a_binlog_rotation_reads_both_files_in_order(mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY)")
    start = anchor_of(mysql_url)
    mysql_exec(mysql_url, "INSERT INTO t VALUES (1)", "FLUSH BINARY LOGS", "INSERT INTO t VALUES (2)")
    with reader_for(mysql_url, "t") as reader:
        batches = drain(reader, start, batch_rows=1)
        assert drain(reader, batches[0].position)[0].rows.column("id").to_pylist() == [2]
    files = [b.position.fields["file"] for b in batches]
    assert [r["id"] for r in rows_of(batches)] == [1, 2]
    assert files[0] == start.fields["file"] and files[1] != files[0]
    assert batches[0].position < batches[1].position


def test_rows_of_tables_not_captured_are_skipped_and_several_tables_share_one_stream(mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE a (id INT PRIMARY KEY, v TEXT)", "CREATE TABLE b (id INT PRIMARY KEY, w INT)",
               "CREATE TABLE skipped (id INT PRIMARY KEY)")
    start = anchor_of(mysql_url)
    mysql_exec(mysql_url, "INSERT INTO skipped VALUES (1)", "BEGIN", "INSERT INTO a VALUES (1, 'x')",
               "INSERT INTO skipped VALUES (2)", "INSERT INTO b VALUES (7, 70)", "UPDATE a SET v = 'y'",
               "COMMIT", "INSERT INTO b VALUES (8, 80)")
    with reader_for(mysql_url, "a", "b") as reader:
        batches = drain(reader, start)
        names = [t.name for t in reader.tables()]
    table = {name.split(".")[1]: name for name in names}
    assert [(b.table, b.rows.num_rows, b.ends_transaction) for b in batches] == [
        (table["a"], 1, False), (table["b"], 1, False), (table["a"], 1, True), (table["b"], 1, True)]
    rows = rows_of(batches)
    assert [(r["__op"], r["__seq"], r["id"]) for r in rows] == [
        ("insert", 0, 1), ("insert", 1, 7), ("update", 2, 1), ("insert", 0, 8)]
    assert rows[2]["v"] == "y" and rows[3]["w"] == 80
    assert [b.rows.schema.names[3:] for b in batches[:2]] == [["id", "v"], ["id", "w"]]


def test_a_transaction_larger_than_a_batch_is_cut_only_where_it_ends(mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    start = anchor_of(mysql_url)
    mysql_exec(mysql_url, "BEGIN", *(f"INSERT INTO t VALUES ({i}, {i})" for i in range(7)), "COMMIT")
    with reader_for(mysql_url, "t") as reader:
        batches = drain(reader, start, batch_rows=3)
    assert [(b.rows.num_rows, b.ends_transaction) for b in batches] == [(3, False), (3, False), (1, True)]
    assert [r["__seq"] for r in rows_of(batches)] == list(range(7))
    assert len({r["__pos"] for r in rows_of(batches)}) == 1


def test_an_anchor_created_before_a_snapshot_misses_no_change_the_snapshot_does_not_hold(mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1)")
    with reader_for(mysql_url, "t") as reader:
        anchor = reader.create_anchor()
        mysql_exec(mysql_url, "INSERT INTO t VALUES (2, 2)")  # between the anchor and the snapshot
        snapshot = sorted(mysql_exec(mysql_url, "SELECT id FROM t"))
        mysql_exec(mysql_url, "INSERT INTO t VALUES (3, 3)")  # after the snapshot
        assert reader.open(None).start == anchor  # no position yet: from the anchor
        rows = rows_of(list(reader.read(1000)))
    assert snapshot == [(1,), (2,)]
    assert [r["id"] for r in rows] == [2, 3]  # the overlap (2) dedupes; nothing is missing


def test_a_table_altered_inside_the_window_is_refused_naming_the_re_snapshot(mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    start = anchor_of(mysql_url)
    # added then dropped: the table ends as described, so only the middle row's table map
    # (a new table id, decoded anew) shows the change
    mysql_exec(mysql_url, "INSERT INTO t VALUES (1, 1)", "ALTER TABLE t ADD COLUMN w INT",
               "INSERT INTO t VALUES (2, 2, 2)", "ALTER TABLE t DROP COLUMN w", "INSERT INTO t VALUES (3, 3)")
    with reader_for(mysql_url, "t") as reader, pytest.raises(SourceError) as refused:
        drain(reader, start)
    message = str(refused.value)
    assert "columns ['id', 'v', 'w'], but the export reads ['id', 'v']" in message
    assert "ALTER TABLE" in message and "re-snapshot" in message


def test_a_transaction_above_the_memory_cap_is_refused_naming_the_setting(mysql_url):
    # tables interleaved, so no run of one table reaches a batch: the transaction's size counts
    mysql_exec(mysql_url, "CREATE TABLE a (id INT PRIMARY KEY)", "CREATE TABLE b (id INT PRIMARY KEY)")
    start = anchor_of(mysql_url)
    mysql_exec(mysql_url, "BEGIN", *(f"INSERT INTO {t} VALUES ({i})" for i in range(3) for t in "ab"), "COMMIT")
    with reader_for(mysql_url, "a", "b", max_transaction_mb=0) as reader, pytest.raises(SourceError) as refused:
        drain(reader, start, batch_rows=2)
    assert "max_transaction_mb" in str(refused.value)
    with reader_for(mysql_url, "a", "b") as reader:
        batches = drain(reader, start, batch_rows=2)
    assert [(b.table.split(".")[1], b.rows.column("id").to_pylist(), b.ends_transaction) for b in batches] == [
        ("a", [0], False), ("b", [0], False), ("a", [1], False), ("b", [1], False), ("a", [2], False),
        ("b", [2], True)]
    assert [r["__seq"] for r in rows_of(batches)] == list(range(6))


def _set_global(url: str, name: str, value: str) -> Iterator[None]:
    """A server variable changed for the test's block and restored (numbers unquoted:
    MariaDB refuses '1' for a boolean)."""
    def literal(v: object) -> str:
        return str(v) if str(v).isdigit() else f"'{v}'"

    [(before,)] = mysql_exec(url, f"SELECT @@GLOBAL.{name}")
    mysql_exec(url, f"SET GLOBAL {name} = {literal(value)}")
    try:
        yield
    finally:
        mysql_exec(url, f"SET GLOBAL {name} = {literal(before)}")


@pytest.mark.parametrize(("name", "value", "fix"), [
    ("binlog_format", "STATEMENT", "set binlog_format = ROW"),
    ("binlog_row_image", "MINIMAL", "set binlog_row_image = FULL"),
    ("binlog_row_metadata", "MINIMAL", "set binlog_row_metadata = FULL"),
    ("log_bin_compress", "ON", "set log_bin_compress = OFF"),
])
def test_preflight_refuses_a_binlog_setting_cdc_cannot_read_naming_the_setting_and_the_fix(
        mysql_url, name, value, fix):
    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY)")
    with contextmanager_of(_set_global(mysql_url, name, value)), reader_for(mysql_url, "t") as reader:
        with pytest.raises(SourceError) as refused:
            reader.preflight()
    message = str(refused.value)
    assert f"{name} is {value}" in message and fix in message and "export 't_cdc'" in message


def test_compressed_events_in_the_window_are_refused_not_skipped(mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY, v TEXT)")
    start = anchor_of(mysql_url)
    with contextmanager_of(_set_global(mysql_url, "log_bin_compress_min_len", "10")), \
            contextmanager_of(_set_global(mysql_url, "log_bin_compress", "ON")):
        mysql_exec(mysql_url, f"INSERT INTO t VALUES (1, '{'x' * 500}')")
    with reader_for(mysql_url, "t") as reader, pytest.raises(SourceError) as refused:
        drain(reader, start)
    assert "a compressed binlog event" in str(refused.value) and "log_bin_compress" in str(refused.value)


def contextmanager_of(generator: Iterator[None]) -> Any:
    from contextlib import contextmanager

    return contextmanager(lambda: generator)()


@pytest.fixture(scope="module")
def mariadb_without_binlog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second, private MariaDB started without a binary log (log_bin cannot be switched
    off at run time); the binaries are the ones scripts/services.sh starts."""
    for binary in ("mariadb-install-db", "mariadbd", "mariadb-admin"):
        if shutil.which(binary) is None:
            pytest.fail(f"{binary} is not on PATH: the MariaDB server binaries are needed (apt-get install "
                        "mariadb-server)", pytrace=False)
    root = tmp_path_factory.mktemp("nobinlog")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={root}/data", "--user=root",
                    "--auth-root-authentication-method=normal", "--skip-test-db"],
                   check=True, capture_output=True, timeout=300)
    server = subprocess.Popen(
        ["mariadbd", "--no-defaults", f"--datadir={root}/data", f"--socket={root}/s.sock", f"--port={port}",
         "--bind-address=127.0.0.1", "--user=root", f"--pid-file={root}/s.pid", f"--log-error={root}/error.log",
         "--skip-name-resolve", "--skip-log-bin", "--innodb-buffer-pool-size=16M"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # mariadb-admin retries the ping until the server accepts connections
        ready = subprocess.run(["mariadb-admin", "--no-defaults", f"--socket={root}/s.sock", "-uroot",
                                "--wait=120", "--connect-timeout=2", "ping"], capture_output=True, timeout=300)
        if ready.returncode != 0:
            pytest.fail(f"the MariaDB without a binlog did not start: {(root / 'error.log').read_text()[-2000:]}")
        mysql_exec(f"mysql://root@127.0.0.1:{port}/mysql", "CREATE DATABASE app", "CREATE TABLE app.t (id INT PRIMARY KEY)")
        yield f"mysql://root@127.0.0.1:{port}/app"
    finally:
        server.terminate()
        server.wait(timeout=120)


def test_a_server_without_a_binary_log_is_refused_naming_log_bin(mariadb_without_binlog):
    with reader_for(mariadb_without_binlog, "t") as reader, pytest.raises(SourceError) as refused:
        reader.preflight()
    assert "log_bin is OFF" in str(refused.value) and "start it with log-bin" in str(refused.value)
    with reader_for(mariadb_without_binlog, "t") as reader, pytest.raises(SourceError) as refused:
        reader.open(None)
    assert "the binary log is off" in str(refused.value)


def test_a_user_without_the_replication_grants_is_refused_naming_them(mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY)")
    user = f"cdc_{uuid.uuid4().hex[:8]}"
    database = mysql_url.rsplit("/", 1)[1]
    mysql_exec(mysql_url, f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'",
               f"GRANT SELECT ON `{database}`.* TO '{user}'@'%'")
    limited = mysql_url.replace("root@", f"{user}:pw@", 1)
    try:
        with reader_for(limited, "t") as reader, pytest.raises(SourceError) as refused:
            reader.preflight()
        message = str(refused.value)
        assert "lacks REPLICATION SLAVE" in message and "GRANT REPLICATION SLAVE ON *.*" in message
        assert "lacks REPLICATION CLIENT" in message
        mysql_exec(mysql_url, f"GRANT REPLICATION CLIENT ON *.* TO '{user}'@'%'")
        with reader_for(limited, "t") as reader, pytest.raises(SourceError) as refused:
            reader.preflight()
        assert "lacks REPLICATION SLAVE" in str(refused.value)
        assert "REPLICATION CLIENT" not in str(refused.value)
        with reader_for(limited, "t") as reader, pytest.raises(SourceError) as refused:
            drain(reader, None)  # without the preflight: the binlog dump itself is refused
        assert "GRANT REPLICATION SLAVE ON *.*" in str(refused.value)
    finally:
        mysql_exec(mysql_url, f"DROP USER '{user}'@'%'")


def test_a_server_id_used_by_a_connected_replica_or_the_source_is_refused(mysql_url):
    from pymysqlreplication import BinLogStreamReader

    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY)")
    taken = 60_000 + uuid.uuid4().int % 1000
    conn = mysql_connect(mysql_url)
    settings = {"host": conn.host, "port": conn.port, "user": conn.user.decode() if isinstance(conn.user, bytes)
                else conn.user, "passwd": ""}
    conn.close()
    other = BinLogStreamReader(connection_settings=settings, server_id=taken, report_slave="other-replica",
                               blocking=True, resume_stream=False)
    try:
        assert other.fetchone() is not None  # registered and streaming
        with reader_for(mysql_url, "t", server_id=taken) as reader, pytest.raises(SourceError) as refused:
            reader.preflight()
        assert f"cdc.server_id {taken} is in use by a connected replica" in str(refused.value)
    finally:
        other.close()
    [(own,)] = mysql_exec(mysql_url, "SELECT @@GLOBAL.server_id")
    with reader_for(mysql_url, "t", server_id=own) as reader, pytest.raises(SourceError) as refused:
        reader.preflight()
    assert "source server's own server_id" in str(refused.value)
    assert MySQLChangeReader(mysql_url, ["t"]).server_id == DEFAULT_SERVER_ID


def test_a_table_without_a_primary_key_is_refused_saying_what_the_output_could_not_promise(mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE keyless (id INT, v INT)")
    with reader_for(mysql_url, "keyless", "missing") as reader, pytest.raises(SourceError) as refused:
        reader.preflight()
    message = str(refused.value)
    assert "keyless has no primary key" in message and "add a PRIMARY KEY" in message
    assert "missing does not exist" in message


def test_a_start_position_in_a_purged_binlog_file_is_a_loud_error_naming_the_retention(mysql_url):
    # The file before the server's oldest binlog is what a purge leaves behind. The test
    # does not PURGE: the server is shared with other tests whose readers need their
    # binlogs, and MariaDB silently keeps a file a replica is reading.
    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY)")
    oldest = str(mysql_exec(mysql_url, "SHOW BINARY LOGS")[0][0])
    stem, number = oldest.rsplit(".", 1)
    purged = binlog_position(f"{stem}.{int(number) - 1:0{len(number)}d}", 4)
    with reader_for(mysql_url, "t") as reader, pytest.raises(SourceError) as refused:
        reader.open(purged)
    message = str(refused.value)
    assert f"binlog file {purged.fields['file']}" in message and f"the oldest is {oldest}" in message
    assert "binlog_expire_logs_seconds" in message and "re-snapshot" in message and "purged" in message
    assert binlog_position("mariadb-bin.999999", 4) < binlog_position("mariadb-bin.1000000", 4)


def test_a_start_position_past_the_binlog_end_is_refused_as_another_servers_checkpoint(mysql_url):
    mysql_exec(mysql_url, "CREATE TABLE t (id INT PRIMARY KEY)")
    end = anchor_of(mysql_url)
    ahead = binlog_position(str(end.fields["file"]), int(end.fields["pos"]) + 1_000_000)
    with reader_for(mysql_url, "t") as reader, pytest.raises(SourceError) as refused:
        reader.open(ahead)
    assert "past the binlog's end" in str(refused.value) and "re-snapshot" in str(refused.value)
