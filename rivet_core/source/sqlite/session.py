"""SQLite source session (stdlib sqlite3): read-only file, one read transaction.

Contract: the database is opened with a read-only URI (`file:…?mode=ro`), so the export
can never change the file; `BEGIN` plus a first read pins one consistent snapshot for
describe, stream and scalar. Column types come from the declared types of the result,
read through a TEMP VIEW (`CREATE TEMP VIEW … AS <sql>` + `PRAGMA temp.table_info`) —
the temp schema lives in SQLite's separate temp store, which stays writable when the main
file is opened read-only (tested against a chmod 0444 file) — and from the first rows
only for expressions without any declared type (see `types_sqlite`: otherwise the type never
depends on the values, so empty and non-empty results describe identically).

SQLite does not enforce declared types, so each declared column carries its own converter
that checks the storage class of every value against what the declared type admits and
fails naming table, column, declared type and value (never a silent coercion).

Placeholders: queries are written with `%s` like the other engines and translated to `?`
(`%%` → `%`) when parameters are bound. A bound ISO timestamp `YYYY-MM-DDTHH:MM:SS…` is
rewritten with a space separator, because SQLite compares timestamps as text and stores
them as `YYYY-MM-DD HH:MM:SS` — with the `T` form, `>` would compare the separator.
"""

from __future__ import annotations

import itertools
import os
import re
import sqlite3
import urllib.parse
from collections.abc import Iterator, Sequence
from typing import Any

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import ConfigError, SourceError
from rivet_core.lazy_modules import pa
from rivet_core.source.base import SourceColumn, SourceSession, wrap_driver_error
from rivet_core.source.batching import Converter, make_converter, value_coercer
from rivet_core.source.query import quote_ident_pg
from rivet_core.source.sqlite.dialect import DIALECT, translate_placeholders
from rivet_core.source.sqlite.types import (
    FLOAT_EXACT_INT,
    SQLiteMapping,
    infer_from_values,
    sqlite_mapping,
    sqlite_mismatch_message,
)

_INFER_SAMPLE_ROWS = 1_000
_ISO_T = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)$")
_COERCE_FAILURES = (TypeError, ValueError, ArithmeticError, UnicodeDecodeError, SourceError)


def sqlite_path(url: str) -> str:
    """File path of `sqlite:////abs/path.db` (absolute) or `sqlite:///rel.db` (relative)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        raise ConfigError(
            f"SQLite URL '{url}' must look like sqlite:////absolute/path.db or sqlite:///relative.db"
        )
    path = urllib.parse.unquote(url[len(prefix):].split("?", 1)[0])
    if not path:
        raise ConfigError(f"SQLite URL '{url}' names no database file")
    return path


def _bind_value(value: Any) -> Any:
    if isinstance(value, str):
        match = _ISO_T.match(value)
        if match:
            return f"{match.group(1)} {match.group(2)}"
    return value


class SQLiteSession(SourceSession):
    """See module docstring."""

    engine = "sqlite"
    engine_label = "SQLite"
    dialect = DIALECT

    def __init__(self, url: str, tuning: ResolvedTuning) -> None:
        super().__init__(url, tuning)
        self.path = sqlite_path(url)
        self._conn: sqlite3.Connection | None = None
        self._view_ids = itertools.count(1)
        # Probed columns per SQL text. Safe to reuse for the whole session: it reads one
        # snapshot, so declared types cannot change between describe and stream.
        self._probed: dict[str, list[SourceColumn]] = {}
        self._where = "query result"

    def quote_ident(self, name: str) -> str:
        return quote_ident_pg(name)

    # --- lifecycle ----------------------------------------------------------------------

    def _connect(self) -> None:
        if not os.path.isfile(self.path):
            raise SourceError(
                f"SQLite database file '{self.path}' does not exist — check the source URL "
                f"(sqlite:////absolute/path.db)"
            )
        uri = f"file:{urllib.parse.quote(os.path.abspath(self.path))}?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            timeout_ms = int(self.tuning.lock_timeout_s) * 1000
            conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")
            conn.execute("BEGIN")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # pins the snapshot
        except sqlite3.Error as exc:
            raise wrap_driver_error(exc, f"cannot open SQLite database '{self.path}'") from exc
        self._conn = conn

    def _close(self, *, success: bool) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.execute("COMMIT" if success else "ROLLBACK")
        except sqlite3.Error:
            pass  # a read transaction has nothing to keep; closing releases it anyway
        finally:
            conn.close()

    @property
    def connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._require_open()
            raise AssertionError("unreachable: session is open but has no connection")
        return self._conn

    # --- engine hooks -------------------------------------------------------------------

    def _execute(self, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
        if params:
            return self.connection.execute(
                translate_placeholders(sql), [_bind_value(v) for v in params]
            )
        return self.connection.execute(sql)

    def _declared_types(self, sql: str, has_params: bool) -> list[str] | None:
        """Declared type per result column via a temp view; None if SQLite refuses the view."""
        view = f"_rivet_probe_{os.getpid()}_{next(self._view_ids)}"
        # Views cannot hold parameters; NULL in their place leaves declared types intact.
        body = translate_placeholders(sql, "NULL") if has_params else sql
        try:
            self.connection.execute(f"CREATE TEMP VIEW {quote_ident_pg(view)} AS {body}")
        except sqlite3.OperationalError:
            return None
        try:
            info = self.connection.execute(
                f"PRAGMA temp.table_info({quote_ident_pg(view)})"
            ).fetchall()
        finally:
            self.connection.execute(f"DROP VIEW temp.{quote_ident_pg(view)}")
        return [str(row[2] or "") for row in info]

    def _probe_columns(
        self, sql: str, params: Sequence[Any], table_hint: tuple[str | None, str] | None
    ) -> list[SourceColumn]:
        if table_hint is not None:
            schema, table = table_hint
            self._where = f"table '{schema}.{table}'" if schema else f"table '{table}'"
        declared = self._declared_types(sql, bool(params))
        cursor = self._execute(f"SELECT * FROM ({sql}) LIMIT 0", params)
        names = [d[0] for d in cursor.description or []]
        cursor.close()
        if declared is None or len(declared) != len(names):
            declared = [""] * len(names)
        mapped = [sqlite_mapping(d) for d in declared]
        sample: list[tuple[Any, ...]] = []
        if any(m.arrow_type is None for m in mapped):
            # Only undeclared expressions cost a (bounded) read of the first rows.
            sample = self._execute(
                f"SELECT * FROM ({sql}) LIMIT {_INFER_SAMPLE_ROWS}", params
            ).fetchall()
        columns: list[SourceColumn] = []
        for index, (name, decl, mapping) in enumerate(zip(names, declared, mapped, strict=True)):
            if mapping.arrow_type is None:
                arrow_type = infer_from_values(row[index] for row in sample)
                columns.append(SourceColumn(name, "untyped", arrow_type, direct=False))
                continue
            columns.append(SourceColumn(
                name, decl, mapping.arrow_type, logical_type=mapping.logical_type,
                direct=False,
                converter=_checked_converter(mapping.arrow_type, name, decl, self._where, mapping),
            ))
        self._probed[sql] = columns
        return columns

    def _open_cursor(
        self, sql: str, params: Sequence[Any], batch_rows: int
    ) -> tuple[list[SourceColumn] | None, Iterator[Sequence[Sequence[Any]]]]:
        # Live columns from this session's probe of the same SQL, so the checking
        # converters of declared columns apply; a SQL never described streams with the
        # generic converters (the base class's behaviour).
        live = self._probed.get(sql)
        cursor = self._execute(sql, params)
        cursor.arraysize = batch_rows
        return live, _fetch_chunks(cursor, batch_rows)

    def _scalar(self, sql: str, params: Sequence[Any]) -> Any:
        row = self._execute(sql, params).fetchone()
        return None if row is None else row[0]


def _fetch_chunks(cursor: sqlite3.Cursor, batch_rows: int) -> Iterator[Sequence[Sequence[Any]]]:
    try:
        while True:
            rows = cursor.fetchmany(batch_rows)
            if not rows:
                return
            yield rows
    finally:
        cursor.close()


def _checked_converter(target: pa.DataType, column: str, declared: str, where: str,
                       mapping: SQLiteMapping) -> Converter:
    """Converter for a declared column: refuse storage classes the declared type does not
    admit, and integers a float64 cannot hold exactly, before the generic conversion.

    The storage-class test is a set of types (C speed); the per-value search only runs to
    name the offending value once a mismatch is known.
    """
    generic = make_converter(target, column, direct=False)
    accepts = mapping.accepts | {type(None)}
    to_float = pa.types.is_floating(target)

    def fail(value: Any, why: str = "") -> SourceError:
        return SourceError(sqlite_mismatch_message(where, column, declared, target, value, why))

    def convert(values: Sequence[Any]) -> pa.Array:
        kinds = set(map(type, values))
        if not kinds <= accepts:
            raise fail(next(v for v in values if type(v) not in accepts))
        if to_float and int in kinds:
            for value in values:
                if type(value) is int and abs(value) > FLOAT_EXACT_INT and int(float(value)) != value:
                    raise fail(value, "no exact float64 for this integer")
        try:
            return generic(values)
        except SourceError as exc:
            # Name the first value the declared type cannot take (1.5 in an INTEGER column,
            # 'n/a' in a BOOLEAN one) in the same words as a storage-class mismatch.
            coerce = value_coercer(target, column)
            for value in values:
                if value is None:
                    continue
                try:
                    coerce(value)
                except _COERCE_FAILURES as inner:
                    raise fail(value, str(inner) or type(inner).__name__) from exc
            raise SourceError(
                f"SQLite {where}, column '{column}' declared {declared}: {exc}"
            ) from exc

    return convert
