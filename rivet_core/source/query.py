"""Pure SQL builders for the read modes (docs/rivet-compat.md "Read SQL").

Every builder returns `(sql, params)` with `%s` placeholders (the session translates them
for SQLite). Two safety rules hold for all of them, and are property-tested:

1. **Values are always bound parameters**, never spliced into the text — a cursor value
   such as `O'Brien` or `1; DROP TABLE t` is data, not SQL.
2. **Identifiers are quoted by the dialect** (PG/SQLite `"x"` with `"` doubled, MySQL
   `` `x` `` with `` ` `` doubled), so any column name, however hostile, stays one name.

Placeholder convention shared with the sessions: a statement executed WITH parameters has
every literal `%` written as `%%` (the psycopg/PyMySQL rule), so when a builder adds a
parameter it escapes the `%` in the user's base query; a statement with no parameters is
passed to the driver verbatim.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from rivet_core.errors import ConfigError
from rivet_core.source.dialect import FAMILY_MODULES, family_dialect

CursorMode = Literal["single_column", "coalesce"]
TimeColumnType = Literal["timestamp", "unix"]

#: Alias of the wrapped base query (docs/rivet-compat.md "Session setup").
BASE_ALIAS = "_rivet"
COALESCED_CURSOR = "_rivet_coalesced_cursor"


def quote_ident_pg(name: str) -> str:
    """PostgreSQL / SQLite: double quotes, embedded `"` doubled."""
    _reject_nul(name)
    return '"' + name.replace('"', '""') + '"'


def quote_ident_mysql(name: str) -> str:
    """MySQL / MariaDB: backticks, embedded `` ` `` doubled."""
    _reject_nul(name)
    return "`" + name.replace("`", "``") + "`"


def _reject_nul(name: str) -> None:
    if "\x00" in name:
        raise ValueError(f"identifier {name!r} contains a NUL character, which no database accepts")
    if not name:
        raise ValueError("identifier is empty")


class SupportsQuoteIdent(Protocol):
    """Anything that can quote an identifier for its engine (a Dialect or a SourceSession)."""

    def quote_ident(self, name: str) -> str: ...


@dataclass(frozen=True)
class Dialect:
    """The engine-specific bits a pure SQL builder needs."""

    name: str
    quoter: Callable[[str], str]

    def quote_ident(self, name: str) -> str:
        return self.quoter(name)


POSTGRES = Dialect("postgres", quote_ident_pg)
MYSQL = Dialect("mysql", quote_ident_mysql)
SQLITE = Dialect("sqlite", quote_ident_pg)
DIALECTS: dict[str, Dialect] = {"postgres": POSTGRES, "mysql": MYSQL, "sqlite": SQLITE}


def dialect_for(engine: str) -> Dialect:
    """The Dialect for an engine name ("postgres" | "mysql" | "sqlite"; `sqlalchemy:<backend>`
    quotes with that SQLAlchemy dialect's identifier preparer)."""
    if engine.partition(":")[0] in FAMILY_MODULES:
        return Dialect(engine, family_dialect(engine).quote_ident)
    try:
        return DIALECTS[engine]
    except KeyError:
        raise ValueError(
            f"unknown source engine '{engine}' — expected one of {sorted(DIALECTS)}"
        ) from None


def _resolve(dialect: SupportsQuoteIdent | str) -> SupportsQuoteIdent:
    return dialect_for(dialect) if isinstance(dialect, str) else dialect


def _base(base_sql: str, *, with_params: bool) -> str:
    text = base_sql.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    # With parameters, a literal % must be %% for the driver (see module doc).
    return text.replace("%", "%%") if with_params else text


def _quoter(dialect: SupportsQuoteIdent, *, with_params: bool) -> Callable[[str], str]:
    """Quote identifiers; with parameters, a `%` inside a name must be `%%` as well."""
    if with_params:
        return lambda name: dialect.quote_ident(name).replace("%", "%%")
    return dialect.quote_ident


# Public names for the chunk SQL builders (rivet_core.chunks.sql), which wrap the base query
# by the same rules.
resolve_dialect, escaped_base, param_safe_quoter = _resolve, _base, _quoter


def _refuse_sqlite_boolean_names(dialect: SupportsQuoteIdent, *names: str | None) -> None:
    """SQLite (3.40) cannot reference a subquery column named TRUE or FALSE: `_rivet."TRUE"`
    is "no such column" and a bare `"TRUE"` silently becomes the string 'TRUE' — an
    incremental read would quietly select the wrong rows. Refuse instead."""
    engine = getattr(dialect, "name", None) or getattr(dialect, "engine", None)
    if engine != "sqlite":
        return
    for name in names:
        if name is not None and name.upper() in ("TRUE", "FALSE"):
            raise ConfigError(
                f"SQLite cannot use a column named '{name}' as the cursor: the wrapping query "
                f"would read \"{name}\" as a boolean/string literal — rename it in `query:` "
                f"(SELECT \"{name}\" AS {name.lower()}_value, …) and use the new name"
            )


def build_incremental_query(
    dialect: SupportsQuoteIdent | str,
    base_sql: str,
    cursor_column: str,
    last_value: str | None,
    *,
    mode: CursorMode = "single_column",
    fallback_column: str | None = None,
) -> tuple[str, list[Any]]:
    """Incremental read (docs/rivet-compat.md "Incremental"): rows with cursor > last_value, ordered by cursor.

    `single_column`: `SELECT * FROM (<base>) AS _rivet [WHERE c > %s] ORDER BY c`.
    `coalesce`: adds `COALESCE(_rivet.p, _rivet.f) AS _rivet_coalesced_cursor`, filters and
    orders by it (then p, f); the caller strips that column from the output.
    """
    with_params = last_value is not None
    resolved = _resolve(dialect)
    _refuse_sqlite_boolean_names(resolved, cursor_column, fallback_column)
    quote = _quoter(resolved, with_params=with_params)
    base = _base(base_sql, with_params=with_params)
    params: list[Any] = [last_value] if with_params else []
    if mode == "single_column":
        column = quote(cursor_column)
        where = f" WHERE {column} > %s" if with_params else ""
        sql = f"SELECT * FROM ({base}) AS {BASE_ALIAS}{where} ORDER BY {column}"
        return sql, params
    if mode != "coalesce":
        raise ValueError(f"unknown incremental_cursor_mode '{mode}' (single_column | coalesce)")
    if not fallback_column:
        raise ValueError("incremental_cursor_mode: coalesce requires cursor_fallback_column")
    primary = f"{BASE_ALIAS}.{quote(cursor_column)}"
    fallback = f"{BASE_ALIAS}.{quote(fallback_column)}"
    coalesced = f"COALESCE({primary}, {fallback})"
    where = f" WHERE {coalesced} > %s" if with_params else ""
    sql = (
        f"SELECT {BASE_ALIAS}.*, {coalesced} AS {quote(COALESCED_CURSOR)} "
        f"FROM ({base}) AS {BASE_ALIAS}{where} "
        f"ORDER BY {coalesced}, {primary}, {fallback}"
    )
    return sql, params


def _time_param(value: dt.datetime | dt.date, time_column_type: TimeColumnType) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        moment = value
    else:
        moment = dt.datetime(value.year, value.month, value.day)
    if time_column_type == "unix":
        return (moment - dt.datetime(1970, 1, 1)) // dt.timedelta(seconds=1)
    if time_column_type != "timestamp":
        raise ValueError(f"unknown time_column_type '{time_column_type}' (timestamp | unix)")
    # Sessions run in UTC, so a zone-less literal compares as a UTC instant.
    text = moment.isoformat(sep=" ", timespec="seconds")  # zero-padded, unlike strftime %Y
    return text + (f".{moment.microsecond:06d}" if moment.microsecond else "")


def build_time_window_query(
    dialect: SupportsQuoteIdent | str,
    base_sql: str,
    time_column: str,
    cutoff: dt.datetime | dt.date,
    time_column_type: TimeColumnType = "timestamp",
) -> tuple[str, list[Any]]:
    """time_window (docs/rivet-compat.md "Time window"): `SELECT * FROM (<base>) AS _rivet WHERE col >= cutoff`.

    `cutoff` is taken as UTC (an aware datetime is converted); `unix` binds epoch seconds.
    """
    column = _quoter(_resolve(dialect), with_params=True)(time_column)
    sql = f"SELECT * FROM ({_base(base_sql, with_params=True)}) AS {BASE_ALIAS} WHERE {column} >= %s"
    return sql, [_time_param(cutoff, time_column_type)]


def build_time_range_query(
    dialect: SupportsQuoteIdent | str,
    base_sql: str,
    time_column: str,
    start: dt.datetime | dt.date,
    end: dt.datetime | dt.date,
    time_column_type: TimeColumnType = "timestamp",
) -> tuple[str, list[Any]]:
    """Half-open window [start, end) on `time_column` (daily partitions, partition_by)."""
    column = _quoter(_resolve(dialect), with_params=True)(time_column)
    sql = (
        f"SELECT * FROM ({_base(base_sql, with_params=True)}) AS {BASE_ALIAS} "
        f"WHERE {column} >= %s AND {column} < %s"
    )
    return sql, [_time_param(start, time_column_type), _time_param(end, time_column_type)]


#: The synthetic column of a ranged time-partition query: the 0-based window of each row.
PARTITION_INDEX = "_rivet_partition"


def build_time_partitions_query(
    dialect: SupportsQuoteIdent | str,
    base_sql: str,
    time_column: str,
    bounds: list[dt.datetime | dt.date],
    time_column_type: TimeColumnType = "timestamp",
) -> tuple[str, list[Any]]:
    """One query over consecutive windows [b0, b1), [b1, b2), … [bn-1, bn) of `time_column`.

    `SELECT _rivet.*, <i> AS _rivet_partition FROM (<base>) AS _rivet WHERE col >= b0 AND
    col < bn ORDER BY col`: the server decides each row's window with the same comparisons
    as the one-window query (a balanced nested CASE on the inner bounds, log2(n) per row), so
    splitting the stream by `_rivet_partition` gives every row exactly the window that
    window's own query would have given it. Ordered by the column, the windows arrive one
    after another (the reader holds one window's writer at a time).
    """
    if len(bounds) < 2:
        raise ValueError("a ranged time query needs at least one window (two bounds)")
    column = _quoter(_resolve(dialect), with_params=True)(time_column)
    params: list[Any] = []

    def window_of(lo: int, hi: int) -> str:  # windows lo..hi-1, split at bound `mid`
        if hi - lo == 1:
            return str(lo)
        mid = (lo + hi) // 2
        params.append(_time_param(bounds[mid], time_column_type))
        return f"CASE WHEN {column} < %s THEN {window_of(lo, mid)} ELSE {window_of(mid, hi)} END"

    index = window_of(0, len(bounds) - 1)
    params += [_time_param(bounds[0], time_column_type), _time_param(bounds[-1], time_column_type)]
    sql = (
        f"SELECT {BASE_ALIAS}.*, {index} AS {_quoter(_resolve(dialect), with_params=True)(PARTITION_INDEX)} "
        f"FROM ({_base(base_sql, with_params=True)}) AS {BASE_ALIAS} "
        f"WHERE {column} >= %s AND {column} < %s ORDER BY {column}"
    )
    return sql, params
