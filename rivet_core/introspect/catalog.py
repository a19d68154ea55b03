"""One table as the catalog describes it: columns with their Arrow mapping and fidelity,
keys, indexes, statistics and cursor candidates.

The column mapping is the export's own (`SourceSession` probes the table's result
columns through the engine's `types_*` module), so what `init` and `check` print is
exactly what `rivet run` will write — there is no second type table here. Keys and
statistics come from the chunk planner's `table_info`, which the chunked runner also uses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from rivet_core.chunks.planner import table_info
from rivet_core.errors import ConfigError
from rivet_core.introspect.estimate import estimate_rows_in
from rivet_core.introspect.fidelity import ColumnReport, column_reports
from rivet_core.introspect.session import qualified, raw_rows
from rivet_core.source.base import SourceSession

#: Column names that usually track "last changed" (best first), then "created".
_UPDATED = re.compile(r"^(updated|modified|changed|last_?modified|last_?updated|mtime)(_?(at|on|ts|time|date))?$|^update_?(time|ts|date)$", re.I)
_CREATED = re.compile(r"^(created|inserted|added)(_?(at|on|ts|time|date))?$|^create_?(time|ts|date)$", re.I)


@dataclass(frozen=True)
class IndexInfo:
    name: str
    columns: tuple[str, ...]
    unique: bool


@dataclass
class TableReport:
    """Everything `init`/`check` need about one table."""

    schema: str | None
    name: str
    columns: list[ColumnReport]
    primary_key: tuple[str, ...]
    not_null: set[str]
    indexes: list[IndexInfo]
    row_estimate: int | None
    avg_row_bytes: float | None
    cursor_candidates: list[str] = field(default_factory=list)

    def column(self, name: str) -> ColumnReport | None:
        lowered = name.lower()
        for col in self.columns:
            if col.name == name or col.name.lower() == lowered:
                return col
        return None

    def is_indexed(self, column: str) -> bool:
        """True when `column` leads some index (so range/`>` predicates can seek on it)."""
        lowered = column.lower()
        return any(ix.columns and ix.columns[0].lower() == lowered for ix in self.indexes)

    @property
    def integer_pk(self) -> str | None:
        """The single-column integer primary key (monotonic ids: range chunking), if any."""
        if len(self.primary_key) != 1:
            return None
        col = self.column(self.primary_key[0])
        return col.name if col and col.arrow_type is not None and pa.types.is_integer(col.arrow_type) else None


def describe_table(session: SourceSession, schema: str | None, name: str,
                   overrides: Mapping[str, pa.DataType] | None = None) -> TableReport:
    """Introspect one table (ConfigError naming the table when it does not exist)."""
    if not table_exists(session, schema, name):
        shown = f"{schema}.{name}" if schema else name
        raise ConfigError(f"table '{shown}' was not found in the source — check the name (and "
                          "--schema) and that the source user may read it")
    sql = f"SELECT * FROM {qualified(session, schema, name)}"
    probed = session.probe_columns(sql, table_hint=(schema, name))
    info = table_info(session, (schema, name))
    indexes = list_indexes(session, schema, name)
    columns = column_reports(session.engine, probed, overrides or {},
                             indexed={c.name for c in probed
                                      if any(ix.columns and ix.columns[0] == c.name for ix in indexes)})
    report = TableReport(
        schema=schema, name=name, columns=columns, primary_key=tuple(info.primary_key),
        not_null=set(info.not_null), indexes=indexes,
        row_estimate=estimate_rows_in(session, table=f"{schema}.{name}" if schema else name),
        avg_row_bytes=info.avg_row_bytes,
    )
    report.cursor_candidates = cursor_candidates(report)
    return report


def cursor_candidates(report: TableReport) -> list[str]:
    """Columns an incremental export could use, best first: updated_at-like timestamps,
    then created_at-like timestamps, then a single-column integer primary key."""
    temporal = [c for c in report.columns if c.arrow_type is not None
                and (pa.types.is_timestamp(c.arrow_type) or pa.types.is_date(c.arrow_type))]
    found = [c.name for c in temporal if _UPDATED.match(c.name)]
    found += [c.name for c in temporal if _CREATED.match(c.name) and c.name not in found]
    if report.integer_pk and report.integer_pk not in found:
        found.append(report.integer_pk)
    return found


def table_exists(session: SourceSession, schema: str | None, name: str) -> bool:
    if session.engine == "postgres":
        rows = raw_rows(session, "SELECT to_regclass(%s) IS NOT NULL",
                        [qualified(session, schema, name)])
        return bool(rows and rows[0][0])
    if session.engine == "mysql":
        rows = raw_rows(session, "SELECT 1 FROM information_schema.TABLES WHERE "
                        "TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_NAME = %s", [schema, name])
        return bool(rows)
    rows = raw_rows(session, "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') "
                    "AND name = %s", [name])
    return bool(rows)


def list_tables(session: SourceSession, schema: str | None) -> list[str]:
    """Base tables of `schema` (PostgreSQL default: `public`; MySQL: the URL's database)."""
    if session.engine == "postgres":
        rows = raw_rows(session, "SELECT c.relname::text FROM pg_catalog.pg_class c JOIN "
                        "pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE "
                        "c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname = %s "
                        "ORDER BY 1", [schema or "public"])
    elif session.engine == "mysql":
        rows = raw_rows(session, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE "
                        "TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_TYPE = 'BASE TABLE' "
                        "ORDER BY 1", [schema])
    else:
        rows = raw_rows(session, "SELECT name FROM sqlite_master WHERE type = 'table' AND "
                        r"name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY 1")
    return [str(r[0]) for r in rows or []]


def list_indexes(session: SourceSession, schema: str | None, name: str) -> list[IndexInfo]:
    """Every index of the table with its key columns in order."""
    found: dict[str, tuple[list[str], bool]] = {}
    if session.engine == "postgres":
        rows = raw_rows(session, (
            "SELECT ic.relname::text, a.attname::text, i.indisunique, k.n FROM pg_catalog.pg_index i "
            "JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid "
            "JOIN LATERAL unnest(i.indkey[0:i.indnkeyatts - 1]) WITH ORDINALITY AS k(attnum, n) ON true "
            "LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
            "WHERE i.indrelid = to_regclass(%s) AND i.indisvalid ORDER BY 1, 4"),
            [qualified(session, schema, name)])
        for index, column, unique, _ in rows or []:
            found.setdefault(index, ([], bool(unique)))[0].append(column or "<expression>")
    elif session.engine == "mysql":
        rows = raw_rows(session, (
            "SELECT INDEX_NAME, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS "
            "WHERE TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_NAME = %s "
            "ORDER BY INDEX_NAME, SEQ_IN_INDEX"), [schema, name])
        for index, column, non_unique in rows or []:
            found.setdefault(str(index), ([], not int(non_unique)))[0].append(str(column or "<expression>"))
    else:
        for index, unique in raw_rows(session, "SELECT name, \"unique\" FROM pragma_index_list(%s)",
                                      [name]) or []:
            cols = raw_rows(session, "SELECT name FROM pragma_index_info(%s) ORDER BY seqno",
                            [index]) or []
            found[str(index)] = ([str(c[0] or "<expression>") for c in cols], bool(unique))
        pk = [str(r[0]) for r in raw_rows(session, "SELECT name FROM pragma_table_info(%s) "
                                          "WHERE pk > 0 ORDER BY pk", [name]) or []]
        if pk and not any(cols == pk for cols, _ in found.values()):
            found["<rowid primary key>"] = (pk, True)  # INTEGER PRIMARY KEY is the rowid itself
    return [IndexInfo(n, tuple(cols), unique) for n, (cols, unique) in found.items()]
