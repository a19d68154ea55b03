"""PostgreSQL read paths (binary COPY decoded in C, ADBC when the C extension is not built,
the row path; see also test_pg_binary.py and test_pg_adbc.py): identical to the row path.

The row path (named server-side cursor) is the oracle: every test reads the same query
through both paths, switched with the private RIVET_PG_READ_PATH variable, and requires
`Table.equals` including schema metadata.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
import pyarrow as pa
import pytest

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import SourceError, TransientError
from rivet_core.source import open_source

pytestmark = pytest.mark.postgres

TUNING = ResolvedTuning(statement_timeout_s=30, lock_timeout_s=5)
BIG = "é" * (512 * 1024) + "\n\",x"  # > 1 MiB of UTF-8 with CSV metacharacters


def pg_exec(url: str, *statements: str, params: list[Any] | None = None) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for index, statement in enumerate(statements):
            conn.execute(statement, params if index == len(statements) - 1 else None)


def read(url: str, sql: str, path: str, monkeypatch: pytest.MonkeyPatch,
         params: list[Any] | None = None, batch_rows: int = 1000,
         tuning: ResolvedTuning = TUNING) -> tuple[pa.Table, list[int]]:
    monkeypatch.setenv("RIVET_PG_READ_PATH", path)
    with open_source(url, tuning) as session:
        schema = session.describe(sql, params or [])
        batches = list(session.stream(sql, params or [], schema, batch_rows))
        # the snapshot transaction is still usable after the stream
        assert session.scalar("SELECT 1") == 1
    for batch in batches:
        assert batch.schema.equals(schema, check_metadata=True)
    return pa.Table.from_batches(batches, schema=schema), [b.num_rows for b in batches]


def paths_used(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "rivet.source" and r.getMessage().startswith("PG read path")]


@pytest.fixture
def eligible_db(pg_url: str) -> str:
    pg_exec(
        pg_url,
        "CREATE TYPE mood AS ENUM ('sad', 'happy', 'very ''happy''')",
        "CREATE DOMAIN posint AS int CHECK (VALUE > 0)",
        """CREATE TABLE eligible (
            id int PRIMARY KEY, s2 smallint, i8 bigint, o oid, flag boolean, f4 real,
            f8 double precision, n38 numeric(38,10), n38i numeric(38,0), n12 numeric(12,2),
            txt text, vc varchar(20), ch char(3), nm name, c1 "char", m mood, d date,
            t time, ts timestamp, tstz timestamptz, u uuid, j json, jb jsonb, iv interval,
            dom posint
        )""",
    )
    pg_exec(
        pg_url,
        """INSERT INTO eligible VALUES
        (1, -32768, -9223372036854775808, 4294967295, true, 1.1, 0.1,
         '1234567890123456789012345678.9012345678', '99999999999999999999999999999999999999',
         -1234567890.12, 'plain', 'unicode ✓ 日本', 'ab', 'nm', 'x', 'sad', '2026-01-31',
         '23:59:59.999999', '2026-01-01 12:00:00.123456', '2026-03-29 01:30:00.5+05:30',
         '6f1c2a4e-8b3d-4c5e-9f00-112233445566', '{"a": [1, 2.50, "x"]}',
         '{"b": 1, "a": [1, 2.50, "é"]}', '1 year 2 mons 3 days 04:05:06.789', 1),
        (2, 32767, 9223372036854775807, 0, false, 'NaN', 'Infinity',
         '-9999999999999999999999999999.9999999999', '-99999999999999999999999999999999999999',
         0, '', '', '', '', '', 'very ''happy''', '0001-01-01', '00:00:00',
         '1970-01-01 00:00:00', '1969-12-31 23:59:59.999999-08', 
         '00000000-0000-0000-0000-000000000000', '""', '[]', 'P-1D', 2),
        (3, 0, 0, 1, NULL, '-Infinity', '-Infinity', 0.0000000001, 0, 0.01,
         'quote " comma , newline
 cr ' || chr(13) || ' tab ' || chr(9) || ' backslash \\N NULL', 'NULL', 'a"b', 'z', '"',
         'happy', '9999-12-31', '12:00:00', '9999-12-31 23:59:59.999999',
         '2000-02-29 12:00:00+14', 'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF', 'null', 'null',
         '00:00:00', 3),
        (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
         NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
        (5, 1, 1, 1, true, -0.0, 1e-310, 1, 1, 1, %s, ',', ' , ', '', '', 'sad',
         '2024-02-29', '00:00:00.000001', '2024-02-29 00:00:00.000001',
         '2024-02-29 00:00:00.000001-00:00:01', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
         '  {"spaced" :  true }  ', '{"z": {"y": [true, false, null]}}',
         '-1 years -2 mons +3 days -04:05:06', 5)
        """,
        params=[BIG],
    )
    return pg_url


#: The `eligible` columns with an exact binary form (enum `m` included: sent as its label).
BINARY_COLUMNS = ("id, s2, i8, flag, f4, f8, n38, n38i, n12, txt, vc, ch, nm, m, d, t, ts, tstz, "
                  "u, j, jb, dom")


def test_binary_path_is_identical_to_the_row_path_for_every_eligible_type(
    eligible_db: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sql = f"SELECT {BINARY_COLUMNS} FROM eligible ORDER BY id"
    caplog.set_level(logging.INFO, logger="rivet.source")
    rows, _ = read(eligible_db, sql, "rows", monkeypatch, batch_rows=2)
    copy, sizes = read(eligible_db, sql, "auto", monkeypatch, batch_rows=2)
    used = paths_used(caplog)
    assert used[0].startswith("PG read path: rows") and used[1].startswith("PG read path: binary")
    assert sizes == [2, 2, 1]
    assert copy.schema.equals(rows.schema, check_metadata=True)
    assert_identical(copy, rows)
    # sanity: the interesting values really are there
    by_id = {r["id"]: r for r in copy.to_pylist()}
    assert by_id[2]["txt"] == "" and by_id[4]["txt"] is None and by_id[5]["txt"] == BIG
    assert by_id[3]["vc"] == "NULL" and "\n" in by_id[3]["txt"]
    assert str(by_id[1]["n38"]) == "1234567890123456789012345678.9012345678"
    assert by_id[2]["f4"] != by_id[2]["f4"]  # NaN
    assert [by_id[i]["m"] for i in (1, 2, 3)] == ["sad", "very 'happy'", "happy"]


def test_columns_without_a_decoder_kind_are_cast_on_the_server_and_match_the_row_path(
    eligible_db: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sql = "SELECT * FROM eligible ORDER BY id"  # oid, "char" and interval have no decoder kind
    caplog.set_level(logging.INFO, logger="rivet.source")
    rows, _ = read(eligible_db, sql, "rows", monkeypatch)
    auto, _ = read(eligible_db, sql, "auto", monkeypatch)
    assert paths_used(caplog)[1] == (
        "PG read path: binary (all 25 column(s) have an exact binary form; cast on the server: "
        "o (oid) as int8, c1 (char) as text, iv (interval) as text)")
    assert_identical(auto, rows)


def test_the_removed_copy_value_reads_through_the_row_path_with_a_warning(
    eligible_db: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rivet.source")
    table, _ = read(eligible_db, f"SELECT {BINARY_COLUMNS} FROM eligible ORDER BY id", "copy",
                    monkeypatch)
    rows, _ = read(eligible_db, f"SELECT {BINARY_COLUMNS} FROM eligible ORDER BY id", "rows",
                   monkeypatch)
    assert_identical(table, rows)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("RIVET_PG_READ_PATH=copy: the COPY csv read path was removed" in w
               and "set RIVET_PG_READ_PATH=rows|binary|adbc|auto" in w for w in warnings), warnings
    assert paths_used(caplog)[0] == "PG read path: rows (RIVET_PG_READ_PATH=rows)"


@pytest.mark.parametrize("path", ["adbc", "binary"])  # both bind parameters client-side
def test_fast_paths_with_bound_parameters_match_the_row_path(
    eligible_db: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    sql = ("SELECT id, txt, tstz FROM eligible WHERE (txt IS NULL OR txt <> %s) "
           "AND id >= %s ORDER BY id")
    params = ["it's; DROP TABLE eligible; --", 2]
    caplog.set_level(logging.INFO, logger="rivet.source")
    rows, _ = read(eligible_db, sql, "rows", monkeypatch, params=params)
    fast, _ = read(eligible_db, sql, path, monkeypatch, params=params)
    assert paths_used(caplog)[-1].startswith(f"PG read path: {path}")
    assert_identical(fast, rows)
    assert fast.num_rows == 4


def test_ineligible_columns_fall_back_to_the_row_path(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pg_exec(pg_url, "CREATE TABLE mixed (id int, ia int[], b bytea, s text)",
            "INSERT INTO mixed VALUES (1, '{1,NULL,3}', '\\x00ff', 'a'), (2, NULL, NULL, NULL)")
    caplog.set_level(logging.INFO, logger="rivet.source")
    for sql in ("SELECT id, ia, s FROM mixed ORDER BY id", "SELECT id, b FROM mixed ORDER BY id"):
        rows, _ = read(pg_url, sql, "rows", monkeypatch)
        auto, _ = read(pg_url, sql, "auto", monkeypatch)
        assert_identical(auto, rows)
        assert auto.num_rows == 2
    used = paths_used(caplog)
    # arrays take the row path; bytea has an exact binary form (binary COPY)
    assert [u.split(" (")[0] for u in used] == ["PG read path: rows"] * 3 + ["PG read path: binary"]
    assert "array" in used[1]


def test_an_override_changing_the_representation_falls_back(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pg_exec(pg_url, "CREATE TABLE o (x numeric, y numeric(10,2))",
            "INSERT INTO o VALUES (1.5, 2.25)")
    caplog.set_level(logging.INFO, logger="rivet.source")
    monkeypatch.setenv("RIVET_PG_READ_PATH", "auto")
    with open_source(pg_url, TUNING) as session:
        schema = session.describe("SELECT x, y FROM o", [],
                                  {"x": pa.decimal128(10, 3), "y": pa.float64()})
        table = pa.Table.from_batches(list(session.stream("SELECT x, y FROM o", [], schema, 10)))
    assert table.to_pylist()[0]["y"] == 2.25
    assert paths_used(caplog)[0].startswith("PG read path: rows")


def test_binary_yields_many_bounded_batches_for_100k_rows(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pg_exec(pg_url, "CREATE TABLE big AS SELECT g AS id, md5(g::text) AS h, "
                    "gen_random_uuid() AS u, now() AS at FROM generate_series(1, 100000) g")
    caplog.set_level(logging.INFO, logger="rivet.source")
    monkeypatch.setenv("RIVET_PG_READ_PATH", "binary")
    sql = "SELECT id, h, u, at FROM big ORDER BY id"
    with open_source(pg_url, TUNING) as session:
        schema = session.describe(sql)
        sizes: list[int] = []
        expected = 1
        for batch in session.stream(sql, [], schema, 7_000):
            assert batch.schema.equals(schema, check_metadata=True)
            sizes.append(batch.num_rows)
            assert batch.column("id").to_pylist() == list(range(expected, expected + batch.num_rows))
            expected += batch.num_rows
    assert paths_used(caplog)[0].startswith("PG read path: binary")
    # bounded by batch_rows (a fetch of COPY data may end a batch early)
    assert max(sizes) == 7_000 and sum(sizes) == 100_000 and len(sizes) >= 15


def test_abandoning_a_binary_stream_keeps_the_snapshot_usable(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg_exec(pg_url, "CREATE TABLE big AS SELECT g AS id FROM generate_series(1, 300000) g")
    monkeypatch.setenv("RIVET_PG_READ_PATH", "binary")
    with open_source(pg_url, TUNING) as session:
        before = session.scalar("SELECT count(*) FROM big")
        pg_exec(pg_url, "INSERT INTO big VALUES (0)")  # after the snapshot: invisible
        schema = session.describe("SELECT id FROM big")
        stream = session.stream("SELECT id FROM big", [], schema, 1000)
        assert next(stream).num_rows == 1000
        stream.close()
        assert session.scalar("SELECT count(*) FROM big") == before == 300000


def test_abandoning_wide_binary_streams_while_the_reader_reads_ahead_never_hangs(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The binary reader pulls COPY data on a read-ahead thread; abandoning the stream must
    take that thread off the connection before the COPY is left (a race with the savepoint
    rollback is a hang, or a crash at interpreter exit)."""
    pg_exec(pg_url, "CREATE TABLE wide AS SELECT g AS id, repeat(md5(g::text), 8) AS t "
                    "FROM generate_series(1, 60000) g")
    monkeypatch.setenv("RIVET_PG_READ_PATH", "binary")
    with open_source(pg_url, TUNING) as session:
        schema = session.describe("SELECT * FROM wide")
        for _ in range(5):
            stream = session.stream("SELECT * FROM wide", [], schema, 100)
            assert next(stream).num_rows == 100
            stream.close()
            assert session.scalar("SELECT count(*) FROM wide") == 60000


def test_fast_path_errors_match_the_row_path(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg_exec(pg_url, "CREATE TABLE money (amount numeric(10,2), note text)",
            "INSERT INTO money VALUES (1.25, 'x'), ('NaN', repeat('y', 2 * 1024 * 1024))")
    for path in ("rows", "adbc", "binary"):
        monkeypatch.setenv("RIVET_PG_READ_PATH", path)
        with pytest.raises(SourceError, match="column 'amount' holds NaN"):
            read(pg_url, "SELECT amount FROM money", path, monkeypatch)
        with pytest.raises(SourceError) as caught:
            read(pg_url, "SELECT note FROM money", path, monkeypatch,
                 tuning=ResolvedTuning(max_value_mb=1))
        assert caught.value.code == "RIVET_VALUE_TOO_LARGE"
        assert "column 'note' has a value of 2.0 MB, over max_value_mb=1" in str(caught.value)
        with pytest.raises(SourceError, match="division by zero") as caught:
            read(pg_url, "SELECT 1 / (amount - 1.25)::int AS x FROM money WHERE note = 'x'",
                 path, monkeypatch)
        assert not isinstance(caught.value, TransientError)  # permanent on every path


def assert_identical(a: pa.Table, b: pa.Table) -> None:
    """`Table.equals` (schema + metadata + values), but floats compared bit for bit so that
    NaN equals NaN (Arrow's equality says NaN != NaN) and -0.0 differs from 0.0."""
    assert a.schema.equals(b.schema, check_metadata=True)
    for name in a.column_names:
        left, right = a.column(name).combine_chunks(), b.column(name).combine_chunks()
        if pa.types.is_floating(left.type):
            bits = pa.int32() if left.type == pa.float32() else pa.int64()
            left, right = left.view(bits), right.view(bits)
        assert left.equals(right), (
            f"column {name}: {left.to_pylist()!r} != {right.to_pylist()!r}"[:2000]
        )
    if not any(pa.types.is_floating(f.type) for f in a.schema):
        assert a.equals(b, check_metadata=True)


def test_an_empty_result_yields_no_batches_on_every_path(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg_exec(pg_url, "CREATE TABLE e (id int, s text, u uuid)")
    for path in ("rows", "adbc", "binary"):
        table, sizes = read(pg_url, "SELECT * FROM e", path, monkeypatch)
        assert sizes == [] and table.num_rows == 0


def test_records_larger_than_a_fetch_are_read_exactly(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # 20 MiB records (> the 1..4 MiB fetch) first, in the middle, back to back and last.
    pg_exec(pg_url, "CREATE TABLE wide AS SELECT g AS id, md5(g::text) AS s "
                    "FROM generate_series(1, 50000) g",
            "UPDATE wide SET s = repeat('\"é,' || chr(10), 5 * 1024 * 1024) "
            "WHERE id IN (1, 20000, 20001, 50000)")
    caplog.set_level(logging.INFO, logger="rivet.source")
    sql = "SELECT id, s FROM wide ORDER BY id"
    rows, _ = read(pg_url, sql, "rows", monkeypatch, batch_rows=3000)
    copy, sizes = read(pg_url, sql, "binary", monkeypatch, batch_rows=3000)
    assert paths_used(caplog)[1].startswith("PG read path: binary")
    assert_identical(copy, rows)
    assert max(sizes) == 3000 and sum(sizes) == 50000
