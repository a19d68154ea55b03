"""PostgreSQL binary COPY read path (`pg_binary`: COPY … FORMAT binary on the session's own
connection, decoded in C by `_pgbinary`), against the real server.

The row path is the oracle, as for the CSV and ADBC paths (tests/source/test_pg_read_paths.py):
the same query is read through both and must be identical, schema metadata included.
Around it: the session's snapshot is used, batches are bounded and in order, values Arrow
cannot hold are refused like on the row path, server errors keep their meaning (statement
timeout permanent, a terminated backend transient) and an abandoned stream leaves the
session usable. The decoder alone is tested without a server in test_pg_binary_decode.py.
"""

from __future__ import annotations

import logging

import psycopg
import pyarrow as pa
import pytest

from rivet_core.errors import SourceError, TransientError
from rivet_core.source import open_source
from tests.source.test_pg_adbc import ADBC_COLUMNS
from tests.source.test_pg_read_paths import (  # noqa: F401 - eligible_db is a fixture
    BIG,
    TUNING,
    assert_identical,
    eligible_db,
    paths_used,
    pg_exec,
    read,
)

pytestmark = pytest.mark.postgres


def read_both(url: str, sql: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
              batch_rows: int = 1000) -> tuple[pa.Table, list[int]]:
    """(binary table, its batch sizes), checked identical to the row path's; the binary path
    really ran (as the `auto` default)."""
    caplog.set_level(logging.INFO, logger="rivet.source")
    rows, _ = read(url, sql, "rows", monkeypatch, batch_rows=batch_rows)
    binary, sizes = read(url, sql, "auto", monkeypatch, batch_rows=batch_rows)
    assert paths_used(caplog)[-1].startswith("PG read path: binary"), paths_used(caplog)
    assert_identical(binary, rows)
    return binary, sizes


def test_binary_path_is_identical_to_the_row_path_for_every_eligible_type(
    eligible_db: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sql = f"SELECT {ADBC_COLUMNS} FROM eligible ORDER BY id"
    binary, sizes = read_both(eligible_db, sql, monkeypatch, caplog, batch_rows=2)
    assert sizes == [2, 2, 1]
    by_id = {r["id"]: r for r in binary.to_pylist()}
    assert by_id[5]["txt"] == BIG and by_id[2]["txt"] == "" and by_id[4]["txt"] is None
    assert str(by_id[1]["n38"]) == "1234567890123456789012345678.9012345678"
    assert by_id[3]["ch"] == 'a"b' and by_id[5]["ch"] == " , "  # bpchar keeps its padding
    assert by_id[2]["f4"] != by_id[2]["f4"]  # NaN


def test_strings_bytes_json_and_uuid_match_the_row_path(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pg_exec(pg_url, """CREATE TABLE v (id int, b bytea, jb jsonb, j json, u uuid, ch char(5),
                       s text, vc varchar(10), nm name)""",
            """INSERT INTO v VALUES
            (1, '\\x00ff0a0d', '{"b": 1, "a": [1, 2.50, "é"], "c": null}', ' {"a" : 1} ',
             '6f1c2a4e-8b3d-4c5e-9f00-112233445566', 'ab', 'é 日本 🎉 \\N', 'ü', 'näme'),
            (2, '', '""', '""', '00000000-0000-0000-0000-000000000000', '', '', '', ''),
            (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
            (4, decode(repeat('00ff7f', 100000), 'hex'), '[]', '[]',
             'ffffffff-ffff-ffff-ffff-ffffffffffff', 'abcde', repeat('ß', 300000), 'x', 'y'),
            (5, '\\x00', 'null', 'null', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', ' a', ' ',
             ' ', ' ')""")
    binary, _ = read_both(pg_url, "SELECT * FROM v ORDER BY id", monkeypatch, caplog,
                             batch_rows=2)
    by_id = {r["id"]: r for r in binary.to_pylist()}
    assert by_id[1]["b"] == b"\x00\xff\n\r" and by_id[2]["b"] == b"" and by_id[3]["b"] is None
    # jsonb's version byte is stripped: the text is PostgreSQL's rendering, as on the row path
    assert by_id[1]["jb"] == '{"a": [1, 2.50, "é"], "b": 1, "c": null}'
    assert by_id[1]["j"] == ' {"a" : 1} '  # json is the text as stored
    assert by_id[1]["ch"] == "ab   " and by_id[5]["ch"] == " a   "  # bpchar padding
    assert by_id[2]["s"] == "" and by_id[3]["s"] is None  # empty string is not NULL
    assert by_id[1]["s"] == "é 日本 🎉 \\N" and by_id[4]["s"] == "ß" * 300000
    assert str(by_id[1]["u"]) == "6f1c2a4e-8b3d-4c5e-9f00-112233445566"


def test_numeric_edge_values_match_the_row_path(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # (numeric(p,s) with s > p is left out: the row and CSV paths refuse it, see the report)
    pg_exec(pg_url, """CREATE TABLE n (id int, n38 numeric(38,10), n38i numeric(38,0),
                       n12 numeric(12,2), n5 numeric(5,0), n10 numeric(10,5),
                       f38 numeric(38,38), n1 numeric(1,0))""",
            """INSERT INTO n VALUES
            (1, 0, 0, 0, 0, 0, 0, 0),
            (2, '9999999999999999999999999999.9999999999', '99999999999999999999999999999999999999',
             9999999999.99, 99999, 99999.99999, 0.99999999999999999999999999999999999999, 9),
            (3, '-9999999999999999999999999999.9999999999',
             '-99999999999999999999999999999999999999', -9999999999.99, -99999, -99999.99999,
             -0.99999999999999999999999999999999999999, -9),
            (4, 0.0000000001, 1, 0.01, 1, 0.00001, 0.00000000000000000000000000000000000001, 1),
            (5, -0.0000000001, -1, -0.5, -1, -0.1, -0.5, -1),
            (6, 1000000000000000000000000000, 10000000000000000000000000000000000000,
             100000000, 10000, 10000.00001, 0.1, 5),
            (7, '1234567890123456789012345678.9012345678', 100000000, 1234567890.12, 12345,
             12345.6789, 0.0001000100010001, 0),
            (8, 10000.0001, 10000, 10000.01, 10000, 1.5, 0.00010000, 0),
            (9, NULL, NULL, NULL, NULL, NULL, NULL, NULL)""")
    binary, _ = read_both(pg_url, "SELECT * FROM n ORDER BY id", monkeypatch, caplog,
                             batch_rows=4)
    by_id = {r["id"]: r for r in binary.to_pylist()}
    assert str(by_id[2]["n38"]) == "9999999999999999999999999999.9999999999"
    assert str(by_id[3]["n38i"]) == "-99999999999999999999999999999999999999"
    assert [str(by_id[i]["n12"]) for i in (2, 4, 5)] == ["9999999999.99", "0.01", "-0.50"]
    assert str(by_id[4]["f38"]) == "1E-38"


def test_numeric_nan_fails_with_the_row_paths_error(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pg_exec(pg_url, "CREATE TABLE money (id int, amount numeric(10,2))",
            "INSERT INTO money SELECT g, g FROM generate_series(1, 5000) g",
            "INSERT INTO money VALUES (5001, 'NaN')")
    caplog.set_level(logging.INFO, logger="rivet.source")
    errors = []
    for path in ("rows", "binary"):
        with pytest.raises(SourceError) as caught:
            read(pg_url, "SELECT id, amount FROM money ORDER BY id", path, monkeypatch)
        errors.append(caught.value)
    assert paths_used(caplog)[-1].startswith("PG read path: binary")
    assert type(errors[1]) is type(errors[0])
    assert str(errors[1]) == str(errors[0])
    assert "column 'amount' holds NaN" in str(errors[1])


def test_a_server_error_mid_stream_keeps_its_message_and_is_permanent(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An ERROR raised by the query after the COPY started (here: after 3000 rows) reaches
    the caller as the server's error, as on the row path."""
    pg_exec(pg_url, "CREATE TABLE d AS SELECT g AS id FROM generate_series(1, 5000) g")
    caplog.set_level(logging.INFO, logger="rivet.source")
    sql = "SELECT id, 1 / (3000 - id) AS x FROM d ORDER BY id"
    for path in ("rows", "binary"):
        with pytest.raises(SourceError, match="division by zero") as caught:
            read(pg_url, sql, path, monkeypatch)
        assert not isinstance(caught.value, TransientError), path
    assert paths_used(caplog)[-1].startswith("PG read path: binary")


def test_abandoning_a_binary_stream_leaves_the_session_usable(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pg_exec(pg_url, "CREATE TABLE wide AS SELECT g AS id, repeat(md5(g::text), 8) AS t "
                    "FROM generate_series(1, 300000) g")  # ~80 MB: far beyond any buffer
    caplog.set_level(logging.INFO, logger="rivet.source")
    monkeypatch.setenv("RIVET_PG_READ_PATH", "binary")
    with open_source(pg_url, TUNING) as session:
        assert session.scalar("SELECT count(*) FROM wide") == 300000  # the snapshot is taken
        pg_exec(pg_url, "INSERT INTO wide VALUES (0, 'late')")  # after the snapshot
        schema = session.describe("SELECT * FROM wide")
        for _ in range(3):
            stream = session.stream("SELECT * FROM wide", [], schema, 1000)
            assert next(stream).num_rows == 1000
            stream.close()
            assert session.scalar("SELECT count(*) FROM wide") == 300000
        ids = []
        for batch in session.stream("SELECT id FROM wide", [], session.describe(
                "SELECT id FROM wide"), 50_000):
            ids.extend(batch.column("id").to_pylist())
        assert sorted(ids) == list(range(1, 300001))
    assert {u.split(" (")[0] for u in paths_used(caplog)} == {"PG read path: binary"}


def test_a_terminated_backend_is_a_transient_error(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The binary path reads on the session's own connection: terminating its backend
    mid-stream fails the stream (and the session, which is left with the error) as
    transient — worth retrying on a fresh connection."""
    pg_exec(pg_url, "CREATE TABLE wide AS SELECT g AS id, repeat(md5(g::text), 8) AS t "
                    "FROM generate_series(1, 400000) g")
    monkeypatch.setenv("RIVET_PG_READ_PATH", "binary")
    with pytest.raises(TransientError, match="terminating connection|closed the connection"):
        with open_source(pg_url, TUNING) as session:
            own = session.scalar("SELECT pg_backend_pid()")
            schema = session.describe("SELECT * FROM wide")
            stream = session.stream("SELECT * FROM wide", [], schema, 1000)
            assert next(stream).num_rows == 1000
            with psycopg.connect(pg_url, autocommit=True) as admin:
                killed = admin.execute("SELECT pg_terminate_backend(%s)", [own]).fetchall()
            assert killed == [(True,)]
            for _ in stream:
                pass


def test_an_empty_result_yields_no_batches(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pg_exec(pg_url, "CREATE TABLE e (id int, s text, u uuid, n numeric(10,2))")
    caplog.set_level(logging.INFO, logger="rivet.source")
    table, sizes = read(pg_url, "SELECT * FROM e", "binary", monkeypatch)
    assert sizes == [] and table.num_rows == 0
    assert paths_used(caplog)[-1].startswith("PG read path: binary")


def read_rows_then_auto(pg_url: str, sql: str, overrides: dict[str, pa.DataType],
                        monkeypatch: pytest.MonkeyPatch) -> tuple[pa.Table, pa.Table]:
    """`sql` read with `overrides` on the row path pinned, then on the path chosen by default."""
    def read_with(path: str) -> pa.Table:
        monkeypatch.setenv("RIVET_PG_READ_PATH", path)
        with open_source(pg_url, TUNING) as session:
            schema = session.describe(sql, [], overrides)
            return pa.Table.from_batches(list(session.stream(sql, [], schema, 1000)), schema=schema)

    return read_with("rows"), read_with("auto")


def test_a_uuid_read_as_text_by_override_stays_on_the_binary_path(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`columns: {u: string}` (what a Delta table needs: it has no uuid type) used to send the
    whole query to the row path; the decoder now writes PostgreSQL's own text form, so the
    export keeps one binary COPY and reads exactly what the row path reads."""
    pg_exec(pg_url, "CREATE TABLE uu (id int, u uuid, n int)",
            """INSERT INTO uu SELECT g, CASE WHEN g % 7 = 0 THEN NULL ELSE md5(g::text)::uuid END, g
               FROM generate_series(1, 2500) g""",
            "INSERT INTO uu VALUES (0, '00000000-0000-0000-0000-000000000000', 0), "
            "(-1, 'ffffffff-ffff-ffff-ffff-ffffffffffff', -1)")
    caplog.set_level(logging.INFO, logger="rivet.source")
    sql, overrides = "SELECT * FROM uu ORDER BY id", {"u": pa.string()}

    rows, binary = read_rows_then_auto(pg_url, sql, overrides, monkeypatch)
    assert paths_used(caplog)[-1].startswith("PG read path: binary"), paths_used(caplog)
    assert binary.schema.field("u").type == pa.string()
    assert_identical(binary, rows)
    with psycopg.connect(pg_url) as conn:  # the oracle: PostgreSQL's own text rendering
        expected = [r[0] for r in conn.execute("SELECT u::text FROM uu ORDER BY id")]
    assert binary.column("u").to_pylist() == expected
    assert binary.column("u").null_count == 2500 // 7


def test_json_and_jsonb_read_as_text_by_override_stay_on_the_binary_path(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`columns: {j: string}` is what an Iceberg table needs (v2 has no JSON type): the
    decoder keeps the json text as sent and jsonb's text after its version byte — exactly
    PostgreSQL's `::text` — on one binary COPY, equal to the row path."""
    pg_exec(pg_url, "CREATE TABLE jj (id int, j json, b jsonb)",
            """INSERT INTO jj SELECT g, CASE WHEN g % 5 = 0 THEN NULL ELSE
                   json_build_object('k', g, 's', repeat('é', g % 4), 'a', json_build_array(g, 'x'))::json END,
                 CASE WHEN g % 6 = 0 THEN NULL ELSE
                   jsonb_build_object('k', g, 'nested', jsonb_build_object('z', g * 1.5, 'q', 'a"b')) END
               FROM generate_series(1, 2500) g""",
            """INSERT INTO jj VALUES (0, '  {"spaced" :  1 }', '{"b": 1, "a": [1, 2]}'), (-1, '[]', '"str"')""")
    caplog.set_level(logging.INFO, logger="rivet.source")
    sql, overrides = "SELECT * FROM jj ORDER BY id", {"j": pa.string(), "b": pa.string()}

    rows, binary = read_rows_then_auto(pg_url, sql, overrides, monkeypatch)
    assert paths_used(caplog)[-1].startswith("PG read path: binary"), paths_used(caplog)
    assert binary.schema.field("j").type == binary.schema.field("b").type == pa.string()
    with psycopg.connect(pg_url) as conn:  # the oracle: PostgreSQL's own text rendering
        expected = conn.execute("SELECT j::text, b::text FROM jj ORDER BY id").fetchall()
    assert binary.column("j").to_pylist() == [r[0] for r in expected]
    assert binary.column("b").to_pylist() == [r[1] for r in expected]
    assert binary.column("j").null_count == 2500 // 5 and binary.column("b").null_count == 2500 // 6
    assert_identical(binary, rows)



def test_the_binary_path_is_used_when_psycopg2_loaded_its_own_libpq_first(pg_url):
    """A Dagster run worker on dagster-postgres has psycopg2 loaded before the first read, and
    psycopg2's wheel ships a libpq of its own: the C reader must still drive psycopg's
    connection through psycopg's libpq (libpq_access.py `_libpq_rank`), not fall back to ADBC."""
    import os
    import subprocess
    import sys

    from tests.helpers import REPO

    child = (
        "import psycopg2, psycopg2.extensions\n"  # its libpq is mapped first, as in a run worker
        "import logging, sys\n"
        "logging.basicConfig(level=logging.INFO, stream=sys.stdout, format='%(name)s %(message)s')\n"
        "from rivet_core.source import open_source\n"
        "from tests.source.test_pg_read_paths import TUNING\n"
        "sql = 'SELECT g AS id, md5(g::text) AS t FROM generate_series(1, 2000) g'\n"
        f"with open_source({pg_url!r}, TUNING) as session:\n"
        "    schema = session.describe(sql, [])\n"
        "    rows = sum(b.num_rows for b in session.stream(sql, [], schema, 500))\n"
        "print('rows', rows)\n"
    )
    done = subprocess.run([sys.executable, "-c", child], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert "rows 2000" in done.stdout
    assert "rivet.source PG read path: binary" in done.stdout, done.stdout + done.stderr


def test_string_columns_of_types_without_a_decoder_kind_are_read_cast_on_the_server(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """interval (every sign and unit), "char" (high-bit bytes, which PostgreSQL escapes),
    citext, a domain over interval and oid up to 2^32 - 1: the binary path casts them on the
    server and its values equal the row path's (the oracle), whose text is the server's."""
    pg_exec(pg_url, "CREATE EXTENSION IF NOT EXISTS citext",
            "CREATE DOMAIN span AS interval",
            'CREATE TABLE casts (id int, iv interval, c1 "char", ci citext, sp span, o oid, '
            '"per%cent ""q""" text)',
            """INSERT INTO casts VALUES
            (1, '1 year 2 months 3 days 04:05:06.789', 'a', 'MiXeD Case é', '-1 day', 4294967295, 'x'),
            (2, '-1 year -2 mons +3 days -04:05:06.5', E'\\\\200', '', '0', 0, ''),
            (3, '0', E'\\\\377', '日本', '1 microsecond', 1, NULL),
            (4, '-0.000001 seconds', ' ', ' a ', '-178000000 years', 2147483648, '%s'),
            (5, NULL, NULL, NULL, NULL, NULL, NULL),
            (6, '100 days 25:00:00', '"', 'x''y', '2 hours -3 minutes', 42, ';')""")
    binary, _ = read_both(pg_url, "SELECT * FROM casts ORDER BY id", monkeypatch, caplog, batch_rows=4)
    assert paths_used(caplog)[-1].endswith(
        "cast on the server: iv (interval) as text, c1 (char) as text, ci (citext) as text, "
        "sp (interval) as text, o (oid) as int8)")
    by_id = {r["id"]: r for r in binary.to_pylist()}
    assert by_id[1]["iv"] == "P1Y2M3DT4H5M6.789S" and by_id[3]["iv"] == "PT0S"
    assert by_id[1]["o"] == 4294967295 and by_id[2]["c1"] == "\\200"
    assert by_id[4]["per%cent \"q\""] == "%s"


def test_a_cast_column_with_bound_parameters_and_a_percent_in_a_name_matches_the_row_path(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pg_exec(pg_url, """CREATE TABLE pct ("a%b" interval, id int)""",
            "INSERT INTO pct SELECT make_interval(secs => i * 1.5), i FROM generate_series(1, 50) i")
    sql = """SELECT "a%%b", id FROM pct WHERE id > %s ORDER BY id"""  # % doubled: the query has parameters
    caplog.set_level(logging.INFO, logger="rivet.source")
    rows, _ = read(pg_url, sql, "rows", monkeypatch, params=[10])
    binary, _ = read(pg_url, sql, "auto", monkeypatch, params=[10])
    assert "cast on the server: a%b (interval) as text" in paths_used(caplog)[-1]
    assert_identical(binary, rows)
    assert binary.num_rows == 40 and binary.column("a%b")[0].as_py() == "PT16.5S"


def test_a_cast_needed_on_a_result_with_duplicate_column_names_takes_the_row_path(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The server-side cast selects the result's columns by name: with two columns of the same
    name it cannot, and the query is read the row path's way instead, with the reason logged."""
    pg_exec(pg_url, "CREATE TABLE dup (id int, iv interval)", "INSERT INTO dup VALUES (1, '1 day')")
    sql = "SELECT d.iv, e.iv FROM dup d JOIN dup e USING (id)"
    caplog.set_level(logging.INFO, logger="rivet.source")
    monkeypatch.setenv("RIVET_PG_READ_PATH", "auto")
    with open_source(pg_url, TUNING) as session:
        schema = session.describe(sql, [], {})
        table = pa.Table.from_batches(list(session.stream(sql, [], schema, 10)))
    assert [f.name for f in schema] == ["iv", "iv"]
    assert [table.column(i).to_pylist() for i in (0, 1)] == [["P1D"], ["P1D"]]
    assert paths_used(caplog)[-1].startswith("PG read path: rows (")
    caplog.set_level(logging.DEBUG, logger="rivet.source")
    with open_source(pg_url, TUNING) as session:
        list(session.stream(sql, [], schema, 10))
    assert any(r.getMessage() == "PG binary COPY path not used (a column needs a cast on the server and "
               "the result's column names are not unique)" for r in caplog.records)
