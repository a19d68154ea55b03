"""The columns an export's mode names (cursor, time, chunk) must be columns of its query.

Why: a misspelled `cursor_column` used to pass `rivet check` (which advised indexing the
column that does not exist) and fail `rivet run` only after the whole read, with pyarrow's
`Field "updatedat" does not exist in schema` — and SQLite reads an unknown double-quoted
identifier as a string literal, so its query even ran. Both now compare the named columns
with the query's described columns first and stop with the field, the column and the
closest real name.

The match is exact, case included: the run reads the cursor from each batch by the name the
query returned, so `UPDATED_AT` for a column `updated_at` — which MySQL/MariaDB and SQLite
accept in SQL — would still fail after the whole read; the message names `updated_at`.
"""

from __future__ import annotations

from collections.abc import Iterable

from rivet_core.config.models import ExportConfig
from rivet_core.config.suggest import suggest
from rivet_core.errors import ConfigError


def access_columns(export: ExportConfig) -> dict[str, str]:
    """Config field → column, for the columns the export's mode reads by name."""
    named = {"incremental": ("cursor_column", export.cursor_column),
             "time_window": ("time_column", export.time_column),
             "chunked": ("chunk_column", export.chunk_column)}.get(export.mode)
    return {named[0]: named[1]} if named is not None and named[1] else {}


def missing_access_column(export: ExportConfig, columns: Iterable[str]) -> str | None:
    """The message for the first named column the query does not return, or None."""
    names = list(columns)
    for field_name, column in access_columns(export).items():
        if column in names:
            continue
        close = suggest(column, names)
        hint = f" (did you mean '{close}'?)" if close else ""
        return (f"{field_name} '{column}' is not a column of the export's query"
                f"{hint} — fix exports[].{field_name}; the query returns: {', '.join(names[:20])}"
                + (", …" if len(names) > 20 else ""))
    return None


def require_access_columns(export: ExportConfig, columns: Iterable[str]) -> None:
    """Raise `ConfigError` (exit 1) with `missing_access_column`'s message, if any: what a
    run and `rivet check` call right after describing the query, before reading a row."""
    missing = missing_access_column(export, columns)
    if missing is not None:
        raise ConfigError(missing)
