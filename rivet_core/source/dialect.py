"""What the layers above the source need to know about an engine, in one object per engine.

Everything outside `rivet_core/source/` that used to branch on `session.engine == "…"`
asks the session's dialect instead (`session.dialect`, or `dialect_of(engine)` where only
a configured engine name is at hand): the catalog SQL (`rivet_core/catalog/`), the
estimator's EXPLAIN, the index-access probe of `rivet check`, the chunk planner's text
casts and tie-breaker rules, the fidelity grading of `rivet init`. One class per engine
lives beside its session (`source/postgres/dialect.py`, `source/mysql/dialect.py`,
`source/sqlite/dialect.py`); tests/test_dialects.py fails if an engine-name branch
reappears outside this package.

Catalog methods take the open session and run their statements through
`SourceSession.catalog_query`, so they read the export's own snapshot with its own
credentials, and driver errors come out redacted like every other source error.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rivet_core.errors import ConfigError

#: (column names, rows) of one raw statement.
RawResult = tuple[list[str], list[tuple[Any, ...]]]


class CatalogSession(Protocol):
    """What a dialect needs of the open session (a `SourceSession` is one)."""

    def catalog_query(self, sql: str, params: Sequence[Any] = (), *,
                      tolerate: bool = False) -> RawResult | None: ...


@dataclass(frozen=True)
class TableKeys:
    """Columns, NOT NULL and keys of one table, as its catalog states them."""

    #: Column names in table order.
    columns: list[str]
    not_null: set[str]
    #: Primary key columns in key order (empty when there is none).
    primary_key: tuple[str, ...]
    #: Single-column, non-partial PRIMARY/UNIQUE keys (primary key first).
    unique: list[str]
    #: True where column names compare case-insensitively (MySQL).
    case_insensitive: bool = False


@dataclass(frozen=True)
class TableStats:
    """Catalog statistics of one table; None where the catalog has none (never analyzed)."""

    row_estimate: int | None
    avg_row_bytes: float | None


@dataclass(frozen=True)
class IndexAccess:
    """Can a `column > value` predicate seek on an index? (None: could not tell)."""

    index_used: bool | None
    detail: str


class SourceDialect(Protocol):
    """The engine-specific SQL and rules, named for what the callers need."""

    #: Engine name: "postgres", "mysql" or "sqlite" (the `source.type` value).
    name: str
    #: True for a database that is a local file (no host, user or network to diagnose).
    file_based: bool
    #: True when the engine has no planner estimate for a query, so the estimator may
    #: count a query's rows (bounded) instead (SQLite: demos and tests only).
    counts_queries: bool
    #: How a `mode: cdc` export reads this engine's change log: "slot" (PostgreSQL: a logical
    #: replication slot on the server keeps the reader's position and retains WAL for it —
    #: `rivet doctor` reports both), "binlog" (MySQL/MariaDB: the log keeps no reader
    #: position, so the export keeps its anchor in `cdc.checkpoint`), "" (no change reader).
    change_log: str
    #: The schema an unqualified table name resolves to, as Rivet's discovery names it
    #: ("" where the engine has no schemas apart from databases).
    default_schema: str

    def quote_ident(self, name: str) -> str:
        """The identifier quoted for this engine (any name stays one name)."""
        ...

    def text_cast(self, expr: str) -> str:
        """`expr` cast to the engine's text type (`CAST(x AS TEXT)` / `CAST(x AS CHAR)`)."""
        ...

    def bucket_floor(self, expr: str, size: int) -> str:
        """`expr` rounded down to a multiple of `size` (negative values too): the range
        bucket of a window fingerprint (rivet_core/chunks/fingerprint.py)."""
        ...

    def orders_as_text(self, native_type: str) -> bool:
        """True when values of `native_type` have no default ordering and must be
        compared as text in an ORDER BY (PostgreSQL json, xml, geometric types)."""
        ...

    def schema_is_default(self, schema: str | None) -> bool:
        """True when a table in `schema` can be named without its schema."""
        ...

    def type_note(self, native_type: str) -> str | None:
        """Why the mapping of `native_type` is not exact (None: it is exact)."""
        ...

    def raw_fetch(self, connection: Any, sql: str, params: Sequence[Any],
                  tolerate: bool) -> RawResult:
        """Run one statement on the driver connection (the session's catalog_query)."""
        ...

    def table_keys(self, session: CatalogSession, schema: str | None, name: str) -> TableKeys:
        """Columns, NOT NULL and keys of the table (names as written in SQL)."""
        ...

    def table_stats(self, session: CatalogSession, schema: str | None, name: str, *,
                    exact_names: bool) -> TableStats:
        """Row estimate and average row bytes from the catalog statistics. `exact_names`:
        the names are the catalog's own spelling (quoted), not as written in SQL."""
        ...

    def table_exists(self, session: CatalogSession, schema: str | None, name: str) -> bool:
        ...

    def list_tables(self, session: CatalogSession, schema: str | None) -> list[str]:
        ...

    def list_indexes(self, session: CatalogSession, schema: str | None,
                     name: str) -> list[tuple[str, tuple[str, ...], bool]]:
        """(index name, key columns in order, unique) of every index of the table."""
        ...

    def explain_rows(self, session: CatalogSession, sql: str) -> int | None:
        """The planner's row estimate of `sql` (None when the engine has none)."""
        ...

    def index_access(self, session: CatalogSession, sql: str, value: Any) -> IndexAccess:
        """EXPLAIN `sql` (one `%s` bound to `value`) for its index-capable plan."""
        ...


_MODULES = {"postgres": "rivet_core.source.postgres.dialect",
            "mysql": "rivet_core.source.mysql.dialect",
            "sqlite": "rivet_core.source.sqlite.dialect"}
#: Engine families named `<family>:<backend>`: the module whose `BACKEND_DIALECT(backend)`
#: gives one backend's dialect (loaded by name like `_MODULES`: those modules build on this one).
FAMILY_MODULES = {"sqlalchemy": "rivet_core.source.sqlalchemy.dialect"}


def family_dialect(engine: str) -> SourceDialect:
    """The dialect of a `<family>:<backend>` engine name (`sqlalchemy:duckdb`)."""
    family, _, backend = engine.partition(":")
    factory = importlib.import_module(FAMILY_MODULES[family]).BACKEND_DIALECT
    return factory(backend)  # type: ignore[no-any-return]


def dialect_of(engine: str) -> SourceDialect:
    """The dialect of an engine name ("postgres" | "mysql" | "sqlite").

    Imported on demand: the dialect modules import no driver, but there is no reason to
    load three of them when a run reads one engine.
    """
    if engine.partition(":")[0] in FAMILY_MODULES:
        return family_dialect(engine)
    try:
        module = _MODULES[engine]
    except KeyError:
        raise ConfigError(f"unknown source engine '{engine}' — expected postgres, mysql or sqlite") from None
    return importlib.import_module(module).DIALECT  # type: ignore[no-any-return]


def catalog_rows(session: CatalogSession, sql: str, params: Sequence[Any] = (), *,
                 tolerate: bool = False) -> list[tuple[Any, ...]] | None:
    """The rows of a catalog statement run on the session (None: tolerated failure)."""
    result = session.catalog_query(sql, params, tolerate=tolerate)
    return None if result is None else result[1]


def fetch_all(cursor: Any) -> RawResult:
    """(column names, rows) of a DB-API cursor that has run its statement."""
    names = [str(d[0]) for d in cursor.description or []]
    return names, [tuple(r) for r in cursor.fetchall()] if cursor.description else []


def positive(value: Any) -> float | None:
    """A statistic as a positive finite number; None for missing, zero, negative (the
    engines' "never analyzed") or unreadable values."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 and math.isfinite(number) else None


def positive_int(value: Any) -> int | None:
    number = positive(value)
    return int(number) if number is not None else None
