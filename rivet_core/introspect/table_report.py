"""One table as `rivet init` and `rivet check` report it: columns with their Arrow mapping
and fidelity, keys, indexes, statistics and cursor candidates.

The column mapping is the export's own (`SourceSession` probes the table's result
columns through the engine's `types` module), so what `init` and `check` print is
exactly what `rivet run` will write — there is no second type table here. Keys, indexes
and statistics come from the one catalog module (`rivet_core/catalog/`), which the chunk
planner and the chunked runner also use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from rivet_core.catalog import IndexInfo, list_indexes, table_exists, table_info
from rivet_core.errors import ConfigError
from rivet_core.introspect.estimate import estimate_rows_in
from rivet_core.introspect.fidelity import ColumnReport, column_reports
from rivet_core.introspect.session import qualified
from rivet_core.source.base import SourceSession

__all__ = ["IndexInfo", "TableReport", "cursor_candidates", "describe_table"]

#: Column names that usually track "last changed" (best first), then "created".
_UPDATED = re.compile(r"^(updated|modified|changed|last_?modified|last_?updated|mtime)(_?(at|on|ts|time|date))?$|^update_?(time|ts|date)$", re.I)
_CREATED = re.compile(r"^(created|inserted|added)(_?(at|on|ts|time|date))?$|^create_?(time|ts|date)$", re.I)


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
    columns = column_reports(session.dialect, probed, overrides or {},
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
