"""End-to-end type round trips: source table → `rivet run` (real CLI) → files → independent re-read.

Each test builds one table holding every mapped type of an engine (docs/rivet-compat.md "Type mapping"),
runs the real CLI in a subprocess, lists the parts named by the `status: success`
manifests, re-reads them with pyarrow / DuckDB / Python's `csv` module and compares every
cell with the source queried directly through psycopg / PyMySQL (never through Rivet).

The CSV oracle (`expected_cell`) renders the source value by the rules of docs/rivet-compat.md "CSV text",
written here independently of `rivet_core.format.csv`.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import math
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pymysql
import pytest

from tests.helpers import (
    cursor_of,
    manifest_table,
    source_block,
    success_manifests,
    write_config,
)
from tests.helpers import rivet_quick as rivet  # no run here crashes or pauses: in-process

UTC = dt.UTC
D = decimal.Decimal

D38 = D("1234567890123456789012345678.1234567890")  # 38 significant digits, scale 10
NEG_D38 = D("-1234567890123456789012345678.1234567890")  # (`-D38` would round to 28 digits)
BYTES_ALL = bytes(range(256))
UNICODE = ("emoji 😀👍🏽 👨‍👩‍👧 · CJK 漢字かなカナ한글 · RTL עברית العربية \u200f· "
           "combining e\u0301 a\u0308 n\u0303")
TRICKY = 'line1\nline2, "quoted"\r\nend'  # needs RFC-4180 quoting
BIG_TEXT = "ab€😀" * 116_509  # ≈ 1 MB of UTF-8 (9 bytes a repetition)
UUID_A = uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")
UUID_B = uuid.UUID("ffffffff-0000-4000-8000-00000000abcd")


# ================================================================== shared plumbing
def _run(config: Path, *args: str) -> dict[str, Any]:
    """Run every export of `config`, verifying the destination against each manifest."""
    result = rivet("run", "-c", str(config), "--json", "--validate", *args)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert {r["status"] for r in out["runs"]} == {"success"}, out
    return out


def _manifest_paths(prefix: Path) -> list[Path]:
    paths = {p["path"] for m in success_manifests(prefix) for p in m["parts"]
             if p.get("status", "committed") == "committed"}
    return [prefix / p for p in sorted(paths)]


def _export(name: str, fmt: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "format": fmt, "destination": {"type": "local", "path": name},
            "verify": "content", **extra}


def _both_batchings(name: str, fmt: str, **extra: Any) -> list[dict[str, Any]]:
    """The export twice in one run: default fetch batches, and one row a batch (every batch
    then has a column that is all NULL, and a row never shares a batch)."""
    return [_export(name, fmt, **extra), _export(f"{name}1", fmt, tuning={"batch_size": 1}, **extra)]


def _same_float(a: float | None, b: float | None, width: int) -> bool:
    if a is None or b is None:
        return a is b
    if width == 32:
        a, b = float(np.float32(a)), float(np.float32(b))
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


def _same_decimal(a: D | None, b: D | None, scale: int) -> bool:
    if a is None or b is None:
        return a is b
    # exact: same number AND the full scale kept (never a float, never a shorter scale)
    return a == b and a.as_tuple().exponent == -scale


def _assert_rows_equal(got: list[dict[str, Any]], want: list[dict[str, Any]],
                       kinds: dict[str, str]) -> None:
    assert [r["id"] for r in got] == [r["id"] for r in want]
    for g, w in zip(got, want, strict=True):
        assert set(g) == set(w)
        for col, kind in kinds.items():
            a, b = g[col], w[col]
            where = f"row id={w['id']} column {col}"
            if kind.startswith("float"):
                assert _same_float(a, b, int(kind[5:])), f"{where}: {a!r} != {b!r}"
            elif kind.startswith("decimal"):
                assert _same_decimal(a, b, int(kind.split(":")[1])), f"{where}: {a!r} != {b!r}"
            elif kind == "tstz":
                assert (a is None and b is None) or (a.tzinfo is not None and a == b), f"{where}: {a!r} != {b!r}"
            elif kind == "ts":
                assert (a is None and b is None) or (a.tzinfo is None and a == b), f"{where}: {a!r} != {b!r}"
            elif kind == "uuid":
                a = uuid.UUID(bytes=a) if isinstance(a, bytes) else a
                assert a == b, f"{where}: {a!r} != {b!r}"
            else:
                assert a == b and type(a) is type(b), f"{where}: {a!r:.200} != {b!r:.200}"


# ================================================================== CSV oracle (docs/rivet-compat.md "CSV text")
def expected_cell(value: Any, kind: str) -> str | None:
    """The cell text docs/rivet-compat.md "CSV text" prescribes for a source value; None = NULL (empty cell).

    Floats are checked by `_float_cell_ok` (only the special spellings are prescribed)."""
    if value is None:
        return None
    if kind == "int":
        return str(int(value))
    if kind == "bool":
        return "true" if value else "false"
    if kind.startswith("decimal"):
        scale = int(kind.split(":")[1])
        exact = decimal.Context(prec=100, traps=[decimal.Inexact])  # never round
        return format(D(value).quantize(D(1).scaleb(-scale), context=exact), "f")
    if kind == "tstz":
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"
    if kind == "ts":
        return value.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if kind == "date":
        return value.isoformat()
    if kind == "time":
        if isinstance(value, dt.timedelta):  # PyMySQL's TIME
            value = (dt.datetime.min + value).time()
        return value.strftime("%H:%M:%S.%f")
    if kind == "uuid":
        return str(uuid.UUID(str(value)))  # hyphenated, lowercase
    if kind == "binary":
        return bytes(value).hex()
    if kind in ("text", "json"):
        return value
    raise AssertionError(f"no rendering for kind {kind}")


def _float_cell_ok(cell: str, value: float | None, width: int) -> bool:
    if value is None:
        return cell == ""
    special = {"nan": "NaN", "inf": "inf", "-inf": "-inf"}
    if math.isnan(value) or math.isinf(value):
        return cell == special[repr(value)]
    if value == 0 and math.copysign(1, value) < 0:
        return cell == "-0"
    if cell in ("NaN", "inf", "-inf", "-0") or " " in cell:
        return False
    return _same_float(float(cell), value, width)


def _strict_fields(text: str) -> list[list[tuple[str, bool]]]:
    """RFC-4180 records as (text, was_quoted) pairs — the csv module cannot tell NULL (empty
    unquoted cell) from the empty string (`""`) on Python 3.11. Strict: LF ends a record, an
    unquoted field never holds `"` or CR, a quoted field ends at a lone `"`."""
    records: list[list[tuple[str, bool]]] = []
    fields: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == '"':
            j, buf = i + 1, []
            while True:
                k = text.index('"', j)
                buf.append(text[j:k])
                if text.startswith('""', k):
                    buf.append('"')
                    j = k + 2
                else:
                    break
            fields.append(("".join(buf), True))
            i = k + 1
        else:
            k = i
            while k < n and text[k] not in ",\n":
                k += 1
            value = text[i:k]
            assert '"' not in value and "\r" not in value, f"bad unquoted field {value!r:.80}"
            fields.append((value, False))
            i = k
        assert i < n, "the last record must end with LF"
        if text[i] == ",":
            i += 1
        else:
            assert text[i] == "\n", f"junk after a field at {i}: {text[i:i + 20]!r}"
            records.append(fields)
            fields = []
            i += 1
    return records


def _parse_csv(path: Path) -> tuple[list[str], list[list[str]], list[list[tuple[str, bool]]]]:
    """Header and records (csv module), and the same records with their quoting."""
    text = path.read_bytes().decode("utf-8")
    csv.field_size_limit(max(csv.field_size_limit(), 16 * 1024 * 1024))  # the ~1 MB cell
    records = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    strict = _strict_fields(text)
    assert [[v for v, _ in r] for r in strict] == records  # both parsers agree
    return records[0], records[1:], strict[1:]


def _assert_csv_matches(path: Path, want: list[dict[str, Any]], kinds: dict[str, str]) -> None:
    header, records, quoting = _parse_csv(path)
    assert header == list(kinds)
    order = sorted(range(len(records)), key=lambda i: int(records[i][0]))
    records, quoting = [records[i] for i in order], [quoting[i] for i in order]
    assert [int(r[0]) for r in records] == [w["id"] for w in want]
    for rec, quoted, w in zip(records, quoting, want, strict=True):
        for cell, (_, was_quoted), (col, kind) in zip(rec, quoted, kinds.items(), strict=True):
            value = w[col]
            where = f"row id={w['id']} column {col}: {cell!r:.120}"
            if kind.startswith("float"):
                assert _float_cell_ok(cell, value, int(kind[5:])), f"{where} vs {value!r}"
            else:
                expect = expected_cell(value, kind)
                assert cell == (expect or ""), f"{where} != {expect!r:.120}"
            # NULL is an empty unquoted cell; a non-NULL empty text is `""`; a cell is
            # quoted iff it is empty non-NULL text or holds , " CR or LF.
            needs_quotes = value is not None and (cell == "" or any(ch in cell for ch in ',"\r\n'))
            assert was_quoted == needs_quotes, f"{where}: quoted={was_quoted}"


# ================================================================== PostgreSQL
PG_KINDS = {
    "id": "int", "i2": "int", "i4": "int", "i8": "int", "b": "bool", "f4": "float32",
    "f8": "float64", "d38": "decimal:10", "d12": "decimal:2", "tstz": "tstz", "ts": "ts",
    "d": "date", "t": "time", "j": "json", "jb": "json", "u": "uuid", "bin": "binary",
    "ia": "list", "ta": "list", "m": "text", "txt": "text", "d50": "decimal256:5",
}
PG_ARROW = {
    "id": pa.int32(), "i2": pa.int16(), "i4": pa.int32(), "i8": pa.int64(), "b": pa.bool_(),
    "f4": pa.float32(), "f8": pa.float64(), "d38": pa.decimal128(38, 10),
    "d12": pa.decimal128(12, 2), "tstz": pa.timestamp("us", tz="UTC"), "ts": pa.timestamp("us"),
    "d": pa.date32(), "t": pa.time64("us"), "bin": pa.binary(), "ia": pa.list_(pa.int32()),
    "ta": pa.list_(pa.string()), "m": pa.string(), "txt": pa.string(),
    "d50": pa.decimal256(50, 5),
}
PG_COLUMNS = ", ".join(PG_KINDS)
PG_CSV_KINDS = {c: k for c, k in PG_KINDS.items() if k not in ("list", "decimal256:5")}
D50 = D("12345678901234567890123456789012345678901234.12345")  # 49 digits: Decimal256


def _pg_setup(url: str) -> None:
    rows = [
        (1, -32768, -2147483648, -9223372036854775808, True, 1.5, 0.1, D38, D("1234567890.12"),
         "2026-03-04 05:06:07.123456+05:30", "2026-03-04 05:06:07.654321", "2026-03-04",
         "23:59:59.999999", '{"b": null,  "a": [1, 2.50, "x"], "big": 12345678901234567890.123}',
         '{"b": null,  "a": [1, 2.50, "x"], "big": 12345678901234567890.123}', UUID_A, BYTES_ALL,
         [1, None, 3], ["a", None, 'b,c"d'], "happy", UNICODE, D50),
        (2, 32767, 2147483647, 9223372036854775807, False, "NaN", "NaN", NEG_D38, D("-0.01"),
         "1999-12-31 23:59:59.999999-08:00", "1969-07-20 20:17:40.000001", "1900-01-01",
         "00:00:00", "[]", '{"k": "ünï ✓"}', UUID_B, b"", [], [], "sad", "",
         D("-12345678901234567890123456789012345678901234.12345")),
        (3, 0, 0, 0, True, "Infinity", "-Infinity", D("0.0000000001"), D("0.00"),
         "2026-01-01 00:00:00+00", "2026-01-01 00:00:00", "2026-01-01", "12:00:00.5", "{}",
         "{}", UUID_A, b"\x00", [None], [""], "ok", BIG_TEXT, D("0.00001")),
        (4, 1, 1, 1, False, "-Infinity", "Infinity", D("-0.0000000001"), D("9999999999.99"),
         "2026-06-30 23:30:00-02:00", "2026-06-30 23:30:00", "2026-06-30", "01:02:03", '"s"',
         "1.5e300", UUID_B, b"\xff", [7], ["x"], "happy", TRICKY, D("-1")),
        (5,) + (None,) * 21,
        (6, -1, -1, -1, True, -0.0, -0.0, D("-1"), D("-1"), "1969-12-31 23:59:59.999999+00",
         "2026-01-01 00:00:00.000001", "2026-01-01", "00:00:00.000001", "null", "null", UUID_A,
         b"a", [None, None], [None], "sad", "a", D("0")),
        (7, 0, 0, 0, False, 0.0, 0.0, D("0"), D("0"), "2026-01-01 00:00:00.000001+14:00",
         "2026-01-01 00:00:00", "2026-01-01", "00:00:00", "{}", "{}", None, None, None, None,
         None, None, None),
    ]
    db = urllib.parse.urlsplit(url).path.lstrip("/")
    with psycopg.connect(url, autocommit=True) as conn:
        # a non-UTC database default: the export must still carry UTC instants
        conn.execute(f"ALTER DATABASE \"{db}\" SET timezone = 'America/St_Johns'")
        conn.execute("CREATE TYPE mood AS ENUM ('happy', 'sad', 'ok')")
        conn.execute("""CREATE TABLE types (
            id int PRIMARY KEY, i2 smallint, i4 integer, i8 bigint, b boolean, f4 real,
            f8 double precision, d38 numeric(38,10), d12 numeric(12,2), tstz timestamptz,
            ts timestamp, d date, t time, j json, jb jsonb, u uuid, bin bytea, ia int[],
            ta text[], m mood, txt text, d50 numeric(50,5))""")
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO types ({PG_COLUMNS}) VALUES "
                            f"({', '.join(['%s'] * len(PG_KINDS))})", rows)


def _pg_source(url: str) -> tuple[list[dict[str, Any]], dict[int, tuple[str, str]]]:
    """Rows through psycopg's default loaders, plus json/jsonb as PostgreSQL's text."""
    with psycopg.connect(url) as conn:
        cur = conn.execute(f"SELECT {PG_COLUMNS} FROM types ORDER BY id")
        names = [d.name for d in cur.description]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        texts = {r[0]: (r[1], r[2]) for r in conn.execute("SELECT id, j::text, jb::text FROM types")}
    for r in rows:
        r["j"], r["jb"] = texts[r["id"]]
        r["m"] = r["m"] if r["m"] is None else str(r["m"])
    return rows, texts


@pytest.mark.postgres
def test_every_postgres_type_survives_cli_to_parquet_exactly(tmp_path: Path, pg_url: str) -> None:
    _pg_setup(pg_url)
    config = write_config(tmp_path, source_block(pg_url), _both_batchings("pq", "parquet", table="types"))
    _run(config)
    source, texts = _pg_source(pg_url)
    assert [source[0]["d38"], source[1]["d38"]] == [D38, NEG_D38]  # the source holds 38 digits
    for prefix in (tmp_path / "pq", tmp_path / "pq1"):
        _check_pg_parquet(prefix, source, texts)


def _check_pg_parquet(prefix: Path, source: list[dict[str, Any]], texts: dict[int, tuple[str, str]]) -> None:
    [path] = _manifest_paths(prefix)
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "ZSTD"

    table = manifest_table(prefix)
    schema = table.schema
    for col, want_type in PG_ARROW.items():
        assert schema.field(col).type == want_type, col
    for col in ("j", "jb"):
        assert schema.field(col).type in (pa.json_(pa.string()), pa.string(), pa.large_string()), col
    assert schema.field("u").type in (pa.uuid(), pa.binary(16)), schema.field("u").type
    # Parquet logical types of docs/rivet-compat.md "Parquet", read from the file itself
    pschema = pq.ParquetFile(path).schema
    logical = {pschema.column(i).name: str(pschema.column(i).logical_type)
               for i in range(len(pschema)) if pschema.column(i).path.count(".") == 0}
    assert logical["u"] == "UUID" and logical["j"] == "JSON" and logical["jb"] == "JSON"
    assert schema.field("d38").metadata[b"rivet.native_type"] == b"numeric(38,10)"
    assert schema.field("m").metadata[b"rivet.logical_type"] == b"enum"

    got = sorted(table.to_pylist(), key=lambda r: r["id"])
    _assert_rows_equal(got, source, PG_KINDS)
    assert len(got[2]["txt"].encode()) > 1_000_000

    # DuckDB reads the same files independently
    files = [str(p) for p in _manifest_paths(prefix)]
    con = duckdb.connect()
    d38, d12, u, j, jb, tstz = con.execute(
        "SELECT d38, d12, u, j, jb, tstz FROM read_parquet(?) WHERE id = 1", [files]).fetchone()
    assert d38 == D38 and str(d38) == "1234567890123456789012345678.1234567890"
    assert str(d12) == "1234567890.12"
    assert uuid.UUID(str(u)) == UUID_A
    assert j == texts[1][0] and json.loads(jb) == json.loads(texts[1][1])
    assert tstz.astimezone(UTC) == dt.datetime(2026, 3, 3, 23, 36, 7, 123456, tzinfo=UTC)
    neg, = con.execute("SELECT d38 FROM read_parquet(?) WHERE id = 2", [files]).fetchone()
    assert neg == NEG_D38
    assert con.execute("SELECT count(*) FROM read_parquet(?) WHERE u IS NULL", [files]).fetchone() == (2,)


@pytest.mark.postgres
def test_every_postgres_scalar_type_renders_in_csv_as_the_spec_says(tmp_path: Path, pg_url: str) -> None:
    _pg_setup(pg_url)
    cols = ", ".join(PG_CSV_KINDS)
    config = write_config(tmp_path, source_block(pg_url),
                          _both_batchings("csv", "csv", query=f"SELECT {cols} FROM types"))
    _run(config)
    source, _ = _pg_source(pg_url)
    for prefix in (tmp_path / "csv", tmp_path / "csv1"):
        [path] = _manifest_paths(prefix)
        assert path.suffix == ".csv"
        _assert_csv_matches(path, source, PG_CSV_KINDS)


@pytest.mark.postgres
def test_list_and_decimal256_columns_sent_to_csv_fail_clearly_and_write_nothing(
        tmp_path: Path, pg_url: str) -> None:
    _pg_setup(pg_url)
    config = write_config(tmp_path, source_block(pg_url), [_export(
        "lists", "csv", query="SELECT id, ia, ta, txt, d50 FROM types", mode="incremental",
        cursor_column="id")])
    result = rivet("run", "-c", str(config))
    assert result.returncode == 1, result.stdout + result.stderr
    err = result.stderr
    for needle in ("'ia'", "'ta'", "'d50'", "csv", "parquet"):
        assert needle in err, err
    assert "'txt'" not in err and "'id'" not in err
    assert "Traceback" not in err
    out = tmp_path / "lists"
    assert not out.exists() or not any(out.rglob("*"))
    assert cursor_of(config, "lists") is None


# ================================================================== MariaDB
MY_KINDS = {
    "id": "int", "ti": "int", "si": "int", "mi": "int", "i": "int", "bi": "int", "ubi": "int",
    "b": "bool", "f": "float32", "dbl": "float64", "d38": "decimal:10", "d12": "decimal:2",
    "tstz": "tstz", "ts": "ts", "d": "date", "t": "time", "j": "json", "uid": "uuid",
    "bin": "binary", "m": "text", "txt": "text",
    # added after the insert (see _my_setup): the rest of the integer family, BIT, SET
    "uti": "int", "usi": "int", "umi": "int", "ui": "int", "yr": "int", "bt": "bool",
    "b12": "int", "st": "text", "vb": "binary", "ub": "uuid",
}
MY_ARROW = {
    "id": pa.int32(), "ti": pa.int16(), "si": pa.int16(), "mi": pa.int32(), "i": pa.int32(),
    "bi": pa.int64(), "ubi": pa.uint64(), "b": pa.bool_(), "f": pa.float32(),
    "dbl": pa.float64(), "d38": pa.decimal128(38, 10), "d12": pa.decimal128(12, 2),
    "tstz": pa.timestamp("us", tz="UTC"), "ts": pa.timestamp("us"), "d": pa.date32(),
    "t": pa.time64("us"), "bin": pa.binary(), "m": pa.string(), "txt": pa.string(),
    "uti": pa.int16(), "usi": pa.int32(), "umi": pa.int64(), "ui": pa.int64(), "yr": pa.int16(),
    "bt": pa.bool_(), "b12": pa.int64(), "st": pa.string(), "vb": pa.binary(),
}
MY_COLUMNS = ", ".join(MY_KINDS)
MY_INSERTED = ", ".join(list(MY_KINDS)[:21])


def _my_connect(url: str, **kw: Any) -> pymysql.connections.Connection:
    u = urllib.parse.urlsplit(url)
    return pymysql.connect(host=u.hostname, port=u.port or 3306, user=urllib.parse.unquote(u.username or ""),
                           password=urllib.parse.unquote(u.password or ""), database=u.path.lstrip("/"),
                           charset="utf8mb4", autocommit=True, **kw)


def _my_setup(url: str) -> None:
    rows = [
        (1, -128, -32768, -8388608, -2147483648, -9223372036854775808, 18446744073709551615, 1,
         1.5, 0.1, D38, D("1234567890.12"), "2026-03-04 05:06:07.123456",
         "2026-03-04 05:06:07.654321", "2026-03-04", "23:59:59.999999",
         '{"b": null,  "a": [1, 2.50, "x"], "big": 12345678901234567890.123}',
         str(UUID_A).upper(), BYTES_ALL, "happy", UNICODE),
        (2, 127, 32767, 8388607, 2147483647, 9223372036854775807, 0, 0, -2.5, 1e300, NEG_D38,
         D("-0.01"), "1999-12-31 23:59:59.999999", "1969-07-20 20:17:40.000001", "1900-01-01",
         "00:00:00", "[]", str(UUID_B), b"", "sad", ""),
        (3, 0, 0, 0, 0, 0, 1, 1, 0.1, -0.0, D("0.0000000001"), D("0.00"), "2026-01-01 05:30:00",
         "2026-01-01 00:00:00", "2026-01-01", "12:00:00.5", "{}", "not-a-uuid", b"\x00", "ok",
         BIG_TEXT),
        (4, 1, 1, 1, 1, 1, 2, 0, -0.0, 2.2250738585072014e-308, D("-0.0000000001"),
         D("9999999999.99"), "2026-07-01 01:00:00", "2026-06-30 23:30:00", "2026-06-30",
         "01:02:03", '"s"', str(UUID_A), b"\xff", "happy", TRICKY),
        (5,) + (None,) * 20,  # stays NULL in the columns added below too
    ]
    conn = _my_connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("""CREATE TABLE types (
                id INT PRIMARY KEY, ti TINYINT, si SMALLINT, mi MEDIUMINT, i INT, bi BIGINT,
                ubi BIGINT UNSIGNED, b BOOL, f FLOAT, dbl DOUBLE, d38 DECIMAL(38,10),
                d12 DECIMAL(12,2), tstz TIMESTAMP(6) NULL DEFAULT NULL, ts DATETIME(6), d DATE,
                t TIME(6), j JSON, uid CHAR(36), bin BLOB, m ENUM('happy','sad','ok'),
                txt LONGTEXT) CHARACTER SET utf8mb4""")
            # TIMESTAMP literals are read in the session zone: +05:30 here, so the stored
            # instants are 5h30 earlier in UTC.
            cur.execute("SET time_zone = '+05:30'")
            cur.executemany(f"INSERT INTO types ({MY_INSERTED}) VALUES ({', '.join(['%s'] * 21)})", rows)
            cur.execute("ALTER TABLE types ADD uti TINYINT UNSIGNED, ADD usi SMALLINT UNSIGNED, "
                        "ADD umi MEDIUMINT UNSIGNED, ADD ui INT UNSIGNED, ADD yr YEAR, ADD bt BIT(1), "
                        "ADD b12 BIT(12), ADD st SET('a','b','c'), ADD vb VARBINARY(16), "
                        "ADD ub BINARY(16)")
            extra = ("uti", "usi", "umi", "ui", "yr", "bt", "b12", "st", "vb", "ub")
            for row_id, values in (
                (1, ("255", "65535", "16777215", "4294967295", "2155", "b'1'", "b'111111111111'",
                     "'a,c'", "x'00ff'", f"x'{UUID_A.hex}'")),
                (2, ("0", "0", "0", "0", "1901", "b'0'", "b'000000000001'", "''", "x''",
                     f"x'{UUID_B.hex}'")),
                (3, ("1", "1", "1", "1", "2026", "b'1'", "b'100000000000'", "'b'", "x'61'", "NULL")),
                (4, ("7", "7", "7", "7", "2000", "b'0'", "b'0'", "'a,b,c'", "x'0a0d2c22'",
                     "x'00000000000000000000000000000000'")),
            ):
                assignments = ", ".join(f"{c} = {v}" for c, v in zip(extra, values, strict=True))
                cur.execute(f"UPDATE types SET {assignments} WHERE id = {row_id}")
    finally:
        conn.close()


def _my_source(url: str) -> list[dict[str, Any]]:
    """Rows through PyMySQL, converted to the values the export must carry: tinyint(1) as
    bool, TIME as time, TIMESTAMP as the instant UNIX_TIMESTAMP() reports (zone-free),
    CHAR(36) uuid parsed (invalid → None, docs/rivet-compat.md "Type mapping")."""
    conn = _my_connect(url)
    try:
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(f"SELECT {MY_COLUMNS}, UNIX_TIMESTAMP(tstz) AS tstz_epoch FROM types ORDER BY id")
            rows = list(cur.fetchall())
    finally:
        conn.close()
    epoch = dt.datetime(1970, 1, 1, tzinfo=UTC)
    for r in rows:
        seconds = r.pop("tstz_epoch")
        r["tstz"] = None if seconds is None else epoch + dt.timedelta(microseconds=int(D(seconds) * 10**6))
        r["b"] = None if r["b"] is None else bool(r["b"])
        if r["bt"] is not None:  # BIT(n) arrives as big-endian bytes
            r["bt"] = int.from_bytes(r["bt"], "big") != 0
            r["b12"] = int.from_bytes(r["b12"], "big")
        if r["t"] is not None:
            r["t"] = (dt.datetime.min + r["t"]).time()
        if r["ub"] is not None:  # BINARY(16) holds the 16 raw bytes
            r["ub"] = uuid.UUID(bytes=r["ub"])
        if r["uid"] is not None:
            try:
                r["uid"] = uuid.UUID(r["uid"])
            except ValueError:
                r["uid"] = None
    return rows


@pytest.mark.mysql
def test_every_mariadb_type_survives_cli_to_parquet_exactly(tmp_path: Path, mysql_url: str) -> None:
    _my_setup(mysql_url)
    config = write_config(tmp_path, source_block(mysql_url),
                          _both_batchings("pq", "parquet", table="types", columns={"uid": "uuid", "ub": "uuid"}))
    _run(config)
    source = _my_source(mysql_url)
    assert [source[0]["d38"], source[1]["d38"]] == [D38, NEG_D38]  # the source holds 38 digits
    for prefix in (tmp_path / "pq", tmp_path / "pq1"):
        _check_mariadb_parquet(prefix, source)


def _check_mariadb_parquet(prefix: Path, source: list[dict[str, Any]]) -> None:
    [path] = _manifest_paths(prefix)
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "ZSTD"
    table = manifest_table(prefix)
    for col, want_type in MY_ARROW.items():
        assert table.schema.field(col).type == want_type, col
    assert table.schema.field("j").type in (pa.json_(pa.string()), pa.string(), pa.large_string())
    for col in ("uid", "ub"):
        assert table.schema.field(col).type in (pa.uuid(), pa.binary(16)), col
    pschema = pq.ParquetFile(path).schema
    logical = {pschema.column(i).name: str(pschema.column(i).logical_type) for i in range(len(pschema))}
    assert logical["uid"] == logical["ub"] == "UUID" and logical["j"] == "JSON"

    got = sorted(table.to_pylist(), key=lambda r: r["id"])
    _assert_rows_equal(got, source, MY_KINDS)
    # the +05:30 insert session really shifted the instant
    assert got[0]["tstz"] == dt.datetime(2026, 3, 3, 23, 36, 7, 123456, tzinfo=UTC)
    assert got[2]["uid"] is None  # 'not-a-uuid' → NULL

    files = [str(p) for p in _manifest_paths(prefix)]
    con = duckdb.connect()
    d38, ubi, uid, j = con.execute(
        "SELECT d38, ubi, uid, j FROM read_parquet(?) WHERE id = 1", [files]).fetchone()
    assert str(d38) == "1234567890123456789012345678.1234567890"
    assert ubi == 18446744073709551615
    assert str(uid) == str(UUID_A)
    assert json.loads(j) == {"b": None, "a": [1, 2.5, "x"], "big": 12345678901234567890.123}


@pytest.mark.mysql
def test_every_mariadb_type_renders_in_csv_as_the_spec_says(tmp_path: Path, mysql_url: str) -> None:
    _my_setup(mysql_url)
    config = write_config(tmp_path, source_block(mysql_url),
                          _both_batchings("csv", "csv", query=f"SELECT {MY_COLUMNS} FROM types",
                                          columns={"uid": "uuid", "ub": "uuid"}))
    _run(config)
    source = _my_source(mysql_url)
    for prefix in (tmp_path / "csv", tmp_path / "csv1"):
        [path] = _manifest_paths(prefix)
        _assert_csv_matches(path, source, MY_KINDS)
        # uuid text was upper case in the source; CSV is lower case
        assert str(UUID_A) in path.read_text(encoding="utf-8")


# ================================================================== unsupported types
def _assert_failed_cleanly(config: Path, export: str, result: Any) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    out = config.parent / export
    assert not out.exists() or not any(out.rglob("*")), list(out.rglob("*"))
    assert cursor_of(config, export) is None


@pytest.mark.postgres
def test_unsupported_postgres_columns_fail_the_run_by_name_until_overridden(tmp_path: Path, pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE geo (id int PRIMARY KEY, p point, n numeric(10,2))")
        conn.execute("INSERT INTO geo VALUES (1, point(1.5, -2), 3.25), (2, NULL, NULL)")
    export = _export("geo", "parquet", query="SELECT id, p, n * 2 AS doubled FROM geo",
                     mode="incremental", cursor_column="id")
    config = write_config(tmp_path, source_block(pg_url), [export])
    result = rivet("run", "-c", str(config))
    _assert_failed_cleanly(config, "geo", result)
    err = result.stderr
    for needle in ("p (PG type 'point')", "doubled (PG type 'numeric')", "columns"):
        assert needle in err, err
    assert "id (" not in err  # only the bad columns are listed

    export["columns"] = {"p": "text", "doubled": "decimal(12,2)"}
    config = write_config(tmp_path, source_block(pg_url), [export])
    _run(config)
    table = manifest_table(tmp_path / "geo")
    assert table.schema.field("doubled").type == pa.decimal128(12, 2)
    assert sorted(table.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "p": "(1.5,-2)", "doubled": D("6.50")}, {"id": 2, "p": None, "doubled": None}]
    assert cursor_of(config, "geo") is not None


@pytest.mark.mysql
def test_mariadb_geometry_fails_the_run_by_name_until_overridden(tmp_path: Path, mysql_url: str) -> None:
    conn = _my_connect(mysql_url)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE geo (id INT PRIMARY KEY, g POINT, shape POLYGON, note VARCHAR(10))")
            cur.execute("INSERT INTO geo VALUES (1, ST_GeomFromText('POINT(1 2)'), "
                        "ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))'), 'x'), (2, NULL, NULL, NULL)")
            cur.execute("SELECT id, g, shape FROM geo ORDER BY id")
            raw = [dict(zip(("id", "g", "shape"), r, strict=True)) for r in cur.fetchall()]
    finally:
        conn.close()
    export = _export("geo", "csv", table="geo", mode="incremental", cursor_column="id")
    config = write_config(tmp_path, source_block(mysql_url), [export])
    result = rivet("run", "-c", str(config))
    _assert_failed_cleanly(config, "geo", result)
    err = result.stderr
    for needle in ("g (MySQL type 'geometry')", "shape (MySQL type 'geometry')", "columns"):
        assert needle in err, err
    assert "note (" not in err

    export["columns"] = {"g": "binary", "shape": "binary"}
    config = write_config(tmp_path, source_block(mysql_url), [export])
    _run(config)
    [path] = _manifest_paths(tmp_path / "geo")
    header, records, _ = _parse_csv(path)
    assert header == ["id", "g", "shape", "note"]
    assert [(int(r[0]), r[1], r[2]) for r in records] == [
        (w["id"], expected_cell(w["g"], "binary") or "", expected_cell(w["shape"], "binary") or "")
        for w in raw]
    assert cursor_of(config, "geo") is not None
