"""SQLite source session (stdlib sqlite3): read-only file, one read transaction.

Contract: the database is opened with a read-only URI (`file:…?mode=ro`), so the export
can never change the file; `BEGIN` plus a first read pins one consistent snapshot for
describe, stream and scalar. Column types come from the declared types of the result,
read through a TEMP VIEW (`CREATE TEMP VIEW … AS <sql>` + `PRAGMA temp.table_info`) —
the temp schema lives in SQLite's separate temp store, which stays writable when the main
file is opened read-only (tested against a chmod 0444 file) — and from the first rows for
expressions without a declared type (see `types_sqlite`).

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
from rivet_core.source.base import SourceColumn, SourceSession, wrap_driver_error
from rivet_core.source.query import quote_ident_pg
from rivet_core.source.types_sqlite import infer_from_values, sqlite_declared_type

_INFER_SAMPLE_ROWS = 1_000
_ISO_T = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)$")
_PLACEHOLDER = re.compile(r"%%|%s")


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


def translate_placeholders(sql: str, replacement: str = "?") -> str:
    """`%s` → `?` (or another token) and `%%` → `%`, the psycopg/PyMySQL escaping rule."""
    return _PLACEHOLDER.sub(lambda m: "%" if m.group(0) == "%%" else replacement, sql)


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

    def __init__(self, url: str, tuning: ResolvedTuning) -> None:
        super().__init__(url, tuning)
        self.path = sqlite_path(url)
        self._conn: sqlite3.Connection | None = None
        self._view_ids = itertools.count(1)

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
        declared = self._declared_types(sql, bool(params))
        cursor = self._execute(f"SELECT * FROM ({sql}) LIMIT 0", params)
        names = [d[0] for d in cursor.description or []]
        cursor.close()
        if declared is None or len(declared) != len(names):
            declared = [""] * len(names)
        mapped = [sqlite_declared_type(d) for d in declared]
        sample: list[tuple[Any, ...]] = []
        if any(arrow_type is None for arrow_type, _ in mapped):
            # Only undeclared expressions cost a (bounded) read of the first rows.
            sample = self._execute(
                f"SELECT * FROM ({sql}) LIMIT {_INFER_SAMPLE_ROWS}", params
            ).fetchall()
        columns: list[SourceColumn] = []
        for index, (name, decl, (arrow_type, logical)) in enumerate(zip(names, declared, mapped, strict=True)):
            if arrow_type is None:
                arrow_type = infer_from_values(row[index] for row in sample)
            columns.append(
                SourceColumn(name, decl or "untyped", arrow_type, logical_type=logical, direct=False)
            )
        return columns

    def _open_cursor(
        self, sql: str, params: Sequence[Any], batch_rows: int
    ) -> tuple[list[SourceColumn] | None, Iterator[Sequence[Sequence[Any]]]]:
        cursor = self._execute(sql, params)
        cursor.arraysize = batch_rows
        return None, _fetch_chunks(cursor, batch_rows)

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
