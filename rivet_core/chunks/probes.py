"""Source probes of the chunk planner: the reads that look at a chunked export's rows or
result columns, each one statement on the planner's open session (one snapshot).

`column_type` is scan-free (`describe`); `has_null` stops at the first NULL; `min_max` is
two aggregate queries; `sample_boundaries` is one ordered scan of the key. The catalog
reads (keys, statistics) are `rivet_core/catalog/`'s; the decisions made from these
answers are `strategy.py`'s and `layout.py`'s.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Sequence
from typing import Any

from rivet_core.errors import ConfigError, SourceError, UnsupportedTypeError
from rivet_core.lazy_modules import pa
from rivet_core.source.base import NATIVE_TYPE_KEY, SourceSession

#: Alias of the wrapped base query in every probe.
ALIAS = "_rivet"


def has_null(session: SourceSession, base: str, column: str) -> bool:
    """True when `column` of the base query holds a NULL (stops at the first one)."""
    col = f"{ALIAS}.{session.quote_ident(column)}"
    sql = f"SELECT 1 FROM ({base}) AS {ALIAS} WHERE {col} IS NULL LIMIT 1"
    return session.scalar(sql) is not None


def min_max(session: SourceSession, base: str, column: str) -> tuple[Any, Any]:
    """(MIN, MAX) of `column` over the base query (None, None when it has no rows)."""
    col = f"{ALIAS}.{session.quote_ident(column)}"
    low = session.scalar(f"SELECT MIN({col}) FROM ({base}) AS {ALIAS}")
    high = session.scalar(f"SELECT MAX({col}) FROM ({base}) AS {ALIAS}")
    return low, high


def column_type(
    session: SourceSession, base: str, column: str,
    table_parts: tuple[str | None, str] | None,
) -> tuple[pa.DataType | None, str]:
    """(Arrow type or None when unmappable, native type) of one column of the base query.

    Scan-free (`describe`). A column the query does not have is a ConfigError.
    """
    sql = f"SELECT {ALIAS}.{session.quote_ident(column)} FROM ({base}) AS {ALIAS}"
    try:
        schema = session.describe(sql, (), None, table_parts)
    except UnsupportedTypeError as exc:
        return None, str(exc).splitlines()[-1].strip()
    except SourceError as exc:
        raise ConfigError(
            f"cannot read column '{column}' from the export's query ({exc}) — check that the "
            "column exists with exactly this spelling"
        ) from exc
    fld = schema.field(0)
    native = (fld.metadata or {}).get(NATIVE_TYPE_KEY, b"?").decode("utf-8", "replace")
    return fld.type, native


def whole_integer(value: Any) -> int | None:
    """`value` as an int when it is a whole number (`42`, `42.000`, Decimal('7')), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    try:
        number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value).strip())
    except (decimal.InvalidOperation, ValueError):
        return None
    if not number.is_finite() or number != number.to_integral_value():
        return None
    return int(number)


def as_date(value: Any) -> dt.date:
    """A MIN/MAX of a date or timestamp column as a date (aware timestamps in UTC)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        return value.date()
    if isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value).strip()[:10])


def sample_boundaries(session: SourceSession, base: str, key: str, size: int, *,
                      after: str | None = None) -> list[str]:
    """Every `size`-th key in key order, as the database renders it as text.

    One ordered scan: `ROW_NUMBER() OVER (ORDER BY k)`, keeping rows with rn MOD size = 0.
    The text is what `window_query` binds back, so it must parse as the key's type: PG
    `CAST(k AS TEXT)` (UTC session, ISO dates, shortest-exact floats), MySQL
    `CAST(k AS CHAR)`.
    """
    quote = session.quote_ident
    k = f"{ALIAS}.{quote(key)}"
    params: list[Any] = []
    where = ""
    body = base
    if after is not None:
        where = f" WHERE {k.replace('%', '%%')} > %s"
        params = [after]
        body = base.replace("%", "%%")
        k = k.replace("%", "%%")
    sql = (
        f"SELECT _rivet_s.k FROM (SELECT {session.dialect.text_cast(k)} AS k, "
        f"ROW_NUMBER() OVER (ORDER BY {k}) AS rn FROM ({body}) AS {ALIAS}{where}) AS _rivet_s "
        f"WHERE MOD(_rivet_s.rn, {int(size)}) = 0 ORDER BY _rivet_s.rn"
    )
    return [str(row[0]) for row in fetch_rows(session, sql, params)]


def fetch_rows(session: SourceSession, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
    """All rows of a small query through the session (describe + stream)."""
    schema = session.describe(sql, params)
    rows: list[tuple] = []
    for batch in session.stream(sql, params, schema, 10_000):
        rows.extend(zip(*(column.to_pylist() for column in batch.columns), strict=True))
    return rows
