"""Order-independent correctness check: the same per-column checksums on the source table
(in PostgreSQL or MariaDB SQL) and on the exported files (re-read with DuckDB).

Why per column and not one row hash: the two sides must compute bit-identical values in
different SQL dialects, and every dialect renders timestamps, decimals and JSON
differently. Each column kind is therefore reduced to integers both sides can compute
exactly, then summed (a sum does not depend on row order or on how the rows were split
into files):

| kind  | checksum (besides the count of non-NULL values)                          |
|-------|---------------------------------------------------------------------------|
| int   | exact sum                                                                 |
| dec   | exact decimal sum (a float column fails it: lossy)                        |
| float | sum of the values rounded to 6 decimals, as a decimal                     |
| text  | sum of the first 60 bits of md5(value)                                    |
| uuid  | as text, on the canonical lower-case form                                 |
| ts    | sum of epoch microseconds (instants in UTC; naive timestamps as UTC)      |
| bool  | count of true                                                             |
| json  | sum of the text length with spaces removed (key order and spacing vary    |
|       | between serialisers; a struct column fails it)                           |

A single changed character in a text or uuid value, a shifted timestamp, a lost row or a
NULL turned into '' changes a checksum. The row count is checked too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

#: Column kinds of the two fixture tables (benchmarks/fixture_*.sql).
TABLE_KINDS: dict[str, dict[str, str]] = {
    "orders": {
        "id": "int", "customer_id": "int", "status": "text", "amount": "dec",
        "discount": "float", "note": "text", "created_at": "ts", "updated_at": "ts",
        "is_paid": "bool", "payload": "json", "ext_id": "uuid",
    },
    "narrow": {"id": "int", "k": "int", "v": "float", "t": "ts"},
}


def _pg_expr(col: str, kind: str) -> str:
    c = f'"{col}"'
    body = {
        "int": f"sum({c})::numeric",
        "dec": f"sum({c})",
        "float": f"sum(round({c}::numeric, 6))",
        "text": f"sum(('x' || substr(md5({c}), 1, 15))::bit(60)::bigint::numeric)",
        "uuid": f"sum(('x' || substr(md5({c}::text), 1, 15))::bit(60)::bigint::numeric)",
        "ts": f"sum(extract(epoch FROM {c}) * 1000000)",
        "bool": f"count(*) FILTER (WHERE {c})",
        "json": f"sum(length(replace({c}::text, ' ', '')))",
    }[kind]
    return f"count({c})::text || '|' || coalesce(({body})::text, '')"


def _mysql_expr(col: str, kind: str) -> str:
    c = f"`{col}`"
    body = {
        "int": f"SUM({c})",
        "dec": f"SUM({c})",
        "float": f"SUM(CAST(ROUND({c}, 6) AS DECIMAL(38,6)))",
        "text": f"SUM(CAST(CONV(SUBSTR(MD5({c}), 1, 15), 16, 10) AS UNSIGNED))",
        "uuid": f"SUM(CAST(CONV(SUBSTR(MD5(LOWER({c})), 1, 15), 16, 10) AS UNSIGNED))",
        "ts": f"SUM(UNIX_TIMESTAMP({c}) * 1000000)",
        "bool": f"SUM({c} <> 0)",
        "json": f"SUM(CHAR_LENGTH(REPLACE({c}, ' ', '')))",
    }[kind]
    return f"CONCAT(COUNT({c}), '|', COALESCE(CAST(({body}) AS CHAR), ''))"


def _duck_expr(col: str, kind: str) -> str:
    c = f'"{col}"'
    body = {
        "int": f"sum({c}::HUGEINT)",
        "dec": f"sum({c})",
        "float": f"sum(round({c}, 6)::DECIMAL(38,6))",
        "text": f"sum(('0x' || substr(md5({c}), 1, 15))::BIGINT::HUGEINT)",
        "uuid": f"sum(('0x' || substr(md5(lower({c}::VARCHAR)), 1, 15))::BIGINT::HUGEINT)",
        "ts": f"sum(epoch_us({c})::HUGEINT)",
        "bool": f"count_if({c}::BOOLEAN)",  # tinyint(1) read as 0/1 counts too
        "json": f"sum(length(replace({c}::VARCHAR, ' ', '')))",
    }[kind]
    return f"count({c})::VARCHAR || '|' || coalesce(({body})::VARCHAR, '')"


def source_checksums(engine: str, conn: Any, table: str) -> dict[str, str]:
    """{'rows': n, column: 'nonnull|checksum'} of the source table (DB-API connection).

    MariaDB must run with time_zone='+00:00' (naive DATETIMEs count as UTC, like the
    export's session)."""
    kinds = TABLE_KINDS[table]
    maker = _pg_expr if engine == "pg" else _mysql_expr
    exprs = ", ".join(maker(c, k) for c, k in kinds.items())
    quoted = f'"{table}"' if engine == "pg" else f"`{table}`"
    cur = conn.cursor()
    if engine == "mysql":
        cur.execute("SET time_zone = '+00:00'")
    cur.execute(f"SELECT count(*), {exprs} FROM {quoted}")
    row = cur.fetchone()
    cur.close()
    out = {"rows": str(row[0])}
    out.update({c: str(v) for c, v in zip(kinds, row[1:], strict=True)})
    return out


def file_checksums(files: Sequence[Path], table: str) -> dict[str, str]:
    """The same checksums over exported Parquet/CSV files, read with DuckDB.

    A column that is missing or cannot be reduced (e.g. JSON written as a struct) gets an
    `error:` value, which never equals the source's."""
    import duckdb

    kinds = TABLE_KINDS[table]
    paths = [str(p) for p in files]
    if not paths:
        return {"rows": "0"}
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        if paths[0].endswith(".csv"):
            rel = f"read_csv({paths!r}, header=true, union_by_name=true)"
        else:
            rel = f"read_parquet({paths!r}, union_by_name=true)"
        out = {"rows": str(con.execute(f"SELECT count(*) FROM {rel}").fetchone()[0])}
        for col, kind in kinds.items():
            try:
                out[col] = str(con.execute(f"SELECT {_duck_expr(col, kind)} FROM {rel}").fetchone()[0])
            except duckdb.Error as exc:
                out[col] = f"error: {str(exc).splitlines()[0][:80]}"
        return out
    finally:
        con.close()


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        (na, sa), (nb, sb) = a.split("|", 1), b.split("|", 1)
        return int(na) == int(nb) and (sa == sb or Decimal(sa) == Decimal(sb))
    except (ValueError, InvalidOperation):
        return False


def compare(source: Mapping[str, str], output: Mapping[str, str]) -> list[str]:
    """Names of the columns (or 'rows') whose checksum differs; [] means the output is exact."""
    return [key for key, want in source.items() if not _same(want, output.get(key, "missing"))]
