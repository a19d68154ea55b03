"""PostgreSQL read path when the `_pgbinary` C extension is not built (`binary` is the
default): ADBC's binary-COPY record-batch stream, on a second connection that imports the
session's snapshot. (The ADBC PostgreSQL wheels 1.12/1.13 are compiled without
optimisation; `binary` decodes the same stream ~4× cheaper — see its docstring.)

Why it is kept (docs/benchmarks.md "Read paths"): the C extension is optional, and an
install without a compiler would otherwise read PostgreSQL through the row path, about 3–4×
longer; the ADBC wheels need no compiler and decode the binary COPY stream in C++ with the
GIL released. The COPY csv path that used to sit between this one and the row path was
removed: slower than this one on every measured table.

Semantics kept (the same as the row path):
- Snapshot: the session runs `pg_export_snapshot()` in its REPEATABLE READ READ ONLY
  transaction; the ADBC connection runs `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`,
  `SET TRANSACTION SNAPSHOT '<id>'` and the session's `SET LOCAL`s (statement and lock
  timeouts), so it sees exactly the rows `describe`, `scalar` and the cursor bounds saw.
- Parameters are bound client-side by psycopg (`copy.render_sql`), as for COPY.
- Types: only columns whose ADBC Arrow type is the schema's type (or numeric(p,s), which
  ADBC hands over as exact decimal text and `pyarrow.compute.cast` turns into decimal128
  without rounding — a value that does not fit fails) are eligible; the result's schema is
  checked again after the query starts and before anything is yielded. Values the other
  paths reject are rejected here too: numeric NaN/±Infinity (the row path's own error),
  timestamps and dates outside 0001-01-01..9999-12-31 (ADBC would wrap `infinity` into a
  wrong date), `24:00:00`.
- Errors: ADBC exceptions carry the SQLSTATE and are classified and redacted like
  psycopg's (`wrap_driver_error`): a terminated backend is transient, a statement timeout
  permanent. A failure to *open* the second connection or import the snapshot (a
  `CONNECTION LIMIT`, a standby that cannot export snapshots) is not an error: the stream
  falls back to the row path and logs why at WARNING.
- Memory: ADBC produces record batches of about `batch_rows` rows (a byte hint of 1..4
  MiB of COPY data: smaller batches measured as fast as 16 MiB ones, with ~50 MB less peak
  RSS); up to 32 MiB of them are decoded ahead on a reader thread
  (`read_ahead.ReadAhead`, `batch_budget`) while the consumer encodes, so the decode, the
  server's COPY and the Parquet encode overlap on two cores. Batches are sliced (never
  copied) to at most `batch_rows` rows.

`RIVET_PG_READ_PATH=adbc` starts at this path (skipping `binary`); `rows` forces the row path
(see `copy.read_path_mode`).
"""

from __future__ import annotations

import decimal
import logging
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rivet_core.errors import RivetError, best_effort
from rivet_core.lazy_modules import pa, pc
from rivet_core.redact import redact_secrets
from rivet_core.source.base import SourceColumn, wrap_driver_error
from rivet_core.source.batching import (
    check_value_sizes,
    estimate_row_bytes,
    split_batches,
    value_coercer,
)
from rivet_core.source.postgres.binary import (
    NO_TIME_24,
    OUT_OF_RANGE,
    ineligible_reason,
    numeric_fit_error,
    range_error,
)
from rivet_core.source.postgres.copy import (
    READ_PATH_ENV,
    PgReadSession,
    Probed,
    adbc_installed,
    first_ineligible,
)
from rivet_core.source.read_ahead import ReadAhead, batch_budget

if TYPE_CHECKING:
    from rivet_core.source.postgres.types import PgTypeInfo

log = logging.getLogger("rivet.source")

# Bounds the other read paths accept (Python datetime / Arrow's ISO parser): 0001..9999.
_MIN_DAY, _MAX_DAY = -719_162, 2_932_896                      # date32 days since 1970
_MIN_US, _MAX_US = _MIN_DAY * 86_400_000_000, (_MAX_DAY + 1) * 86_400_000_000 - 1
_DAY_US = 86_400_000_000
_MIN_BATCH_BYTES, _MAX_BATCH_BYTES = 1024 * 1024, 4 * 1024 * 1024


def batch_bytes(schema: pa.Schema, batch_rows: int) -> int:
    """ADBC's batch size hint: about `batch_rows` rows of this schema, within 1..4 MiB."""
    wanted = estimate_row_bytes(schema) * batch_rows
    return int(max(_MIN_BATCH_BYTES, min(wanted, _MAX_BATCH_BYTES)))



def _ineligible_reason(field: pa.Field, live: SourceColumn, info: PgTypeInfo) -> str | None:
    """The binary path's rule, less enums: the ADBC driver does not hand them over as text."""
    if info.typtype == "e":
        return f"column '{field.name}' is an enum"
    return ineligible_reason(field, live, info)


def plan_adbc(probed: Probed, schema: pa.Schema) -> tuple[bool, str]:
    """(use ADBC?, why) from the query's probed columns (`_probe_with_types`)."""
    if not adbc_installed():
        return False, "the ADBC PostgreSQL driver is not installed"
    why = first_ineligible(schema, probed, _ineligible_reason)
    if why is not None:
        return False, why
    return True, f"all {len(schema)} column(s) have an exact binary form"


# --- the second connection ---------------------------------------------------------------

_DATABASES: dict[str, Any] = {}
_DATABASES_LOCK = threading.Lock()


def _database(conninfo: str) -> Any:
    """The process's AdbcDatabase for `conninfo` (created once, never closed).

    Initialising one connects and loads the server's type catalog (~50 ms measured); a
    connection from it then takes ~3 ms — which matters for chunked exports, where every
    window opens its own read. A type created later is unknown to the cached catalog: ADBC
    then returns it as opaque bytes, `_schema_mismatch` sees that, and the read falls back
    to the row path. The key holds the password; the dict lives in memory only."""
    import adbc_driver_postgresql as adbc_pg

    with _DATABASES_LOCK:
        database = _DATABASES.get(conninfo)
        if database is None:
            database = _DATABASES[conninfo] = adbc_pg.connect(conninfo)
        return database


class _AdbcRead:
    """One ADBC connection in the session's snapshot, running one query."""

    def __init__(self, session: PgReadSession) -> None:
        import adbc_driver_manager as dm

        self._connection: Any = None
        self._statement: Any = None
        self.reader: pa.RecordBatchReader | None = None
        self._in_transaction = False
        try:
            snapshot = session.connection.execute("SELECT pg_export_snapshot()").fetchone()[0]
        except Exception as exc:
            # Not a fallback case: the failed statement aborted the session's transaction
            # (and pg_export_snapshot refuses to run inside a savepoint).
            raise wrap_driver_error(
                exc, "PG error while exporting the read snapshot for the ADBC read path",
                f"set {READ_PATH_ENV}=rows to read through the session's own connection",
            ) from exc
        try:
            self._connection = dm.AdbcConnection(_database(session.adbc_conninfo()))
            self._statement = dm.AdbcStatement(self._connection)
            self._run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            self._in_transaction = True
            self._run(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
            for statement in session.transaction_settings():
                self._run(statement)
        except BaseException:
            self.close(success=False)
            raise

    def _run(self, sql: str) -> None:
        self._statement.set_sql_query(sql)
        self._statement.execute_update()

    def start(self, sql: str, batch_bytes: int) -> pa.RecordBatchReader:
        self._statement.set_options(**{"adbc.postgresql.batch_size_hint_bytes": str(batch_bytes)})
        self._statement.set_sql_query(sql)
        handle, _ = self._statement.execute_query()
        self.reader = pa.RecordBatchReader._import_from_c(handle.address)
        return self.reader

    def cancel(self) -> None:
        """Interrupt a read in flight (from another thread); the reader then raises."""
        if self._statement is not None:
            with best_effort("cancel the ADBC read", logger=log):
                self._statement.cancel()

    def close(self, *, success: bool) -> None:
        """End the transaction and release everything; never raises on the failure path."""
        if self.reader is not None:
            with best_effort("close the ADBC reader", logger=log):
                self.reader.close()
            self.reader = None
        if self._in_transaction and self._statement is not None:
            self._in_transaction = False
            if success:
                self._run("COMMIT")
            else:
                with best_effort("ADBC rollback", logger=log):  # the run is failing already
                    self._run("ROLLBACK")
        for handle in (self._statement, self._connection):
            if handle is not None:
                with best_effort("close an ADBC handle", logger=log):
                    handle.close()
        self._statement = self._connection = None


# --- column finishing ------------------------------------------------------------------

def _check_range(array: pa.Array, field: pa.Field) -> None:
    t = field.type
    if pa.types.is_timestamp(t):
        lo, hi, what = _MIN_US, _MAX_US, OUT_OF_RANGE
        view = array.view(pa.int64())
    elif pa.types.is_date32(t):
        lo, hi, what = _MIN_DAY, _MAX_DAY, OUT_OF_RANGE
        view = array.view(pa.int32())
    elif pa.types.is_time64(t):
        lo, hi, what = 0, _DAY_US - 1, NO_TIME_24
        view = array.view(pa.int64())
    else:
        return
    if array.null_count == len(array):
        return
    bounds = pc.min_max(view)
    if bounds["min"].as_py() < lo or bounds["max"].as_py() > hi:
        raise range_error(field, what)


def _decimal(array: pa.Array, field: pa.Field) -> pa.Array:
    """ADBC's exact numeric text → decimal128(p, s); NaN/Infinity get the row path's error."""
    text = array.storage if isinstance(array, pa.ExtensionArray) else array
    try:
        return pc.cast(text, field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        special = pc.is_in(pc.utf8_lower(text), pa.array(["nan", "infinity", "-infinity"]))
        if pc.any(special).as_py():
            value = pc.filter(text, special)[0].as_py()
            value_coercer(field.type, field.name)(decimal.Decimal(value))  # raises its error
        raise numeric_fit_error(field, f" ({exc})") from exc


def _finish(batch: pa.RecordBatch, schema: pa.Schema, max_value_mb: int) -> pa.RecordBatch:
    arrays: list[pa.Array] = []
    for array, field in zip(batch.columns, schema, strict=True):
        if pa.types.is_decimal(field.type):
            array = _decimal(array, field)
        elif array.type != field.type:  # same storage, canonical extension type
            array = pa.ExtensionArray.from_storage(field.type, array.storage) \
                if isinstance(field.type, pa.BaseExtensionType) else array.cast(field.type)
        _check_range(array, field)
        check_value_sizes(array, field.name, max_value_mb)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _schema_mismatch(result: pa.Schema, schema: pa.Schema) -> str | None:
    """Why ADBC's result schema cannot be finished into `schema` (None when it can)."""
    if len(result) != len(schema):
        return f"ADBC returned {len(result)} column(s), the schema has {len(schema)}"
    for got, want in zip(result, schema, strict=True):
        if pa.types.is_decimal(want.type):
            storage = got.type.storage_type if isinstance(got.type, pa.BaseExtensionType) else got.type
            if storage == pa.string():
                continue
        elif got.type == want.type:
            continue
        elif (isinstance(got.type, pa.BaseExtensionType) and isinstance(want.type, pa.BaseExtensionType)
              and got.type.extension_name == want.type.extension_name):
            continue
        return f"column '{want.name}': ADBC returned {got.type}, the schema needs {want.type}"
    return None


def _finished_batches(
    reader: pa.RecordBatchReader, schema: pa.Schema, max_value_mb: int
) -> Iterator[pa.RecordBatch]:
    """Decoded and finished batches (runs on the read-ahead thread: decode + numeric casts +
    range checks there, the Parquet encode on the consumer's)."""
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        if batch.num_rows:
            yield _finish(batch, schema, max_value_mb)


# --- the stream ------------------------------------------------------------------------

class AdbcUnavailable(Exception):
    """The second connection could not be set up; the caller falls back to the row path."""


def open_adbc(session: PgReadSession) -> _AdbcRead:
    """The ADBC connection in the session's snapshot, or AdbcUnavailable (with the reason)."""
    try:
        return _AdbcRead(session)
    except RivetError:
        raise
    except Exception as exc:
        raise AdbcUnavailable(redact_secrets(str(exc).strip()) or type(exc).__name__) from exc


def stream_adbc(
    session: PgReadSession, read: _AdbcRead, sql: str, schema: pa.Schema, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """Yield `schema` batches of `batch_rows` rows (the last may be shorter) of `sql`.

    `read` comes from `open_adbc`; this generator owns it from here and closes it (commit
    on success, rollback otherwise). Raises AdbcUnavailable before yielding anything when the
    result's types turn out not to match (the caller then uses the row path).
    """
    max_value_mb = session.tuning.max_value_mb
    success = False
    ahead: ReadAhead[pa.RecordBatch] | None = None
    try:
        try:
            reader = read.start(sql, batch_bytes(schema, batch_rows))
        except Exception as exc:
            raise wrap_driver_error(exc, "PG error while starting the query") from exc
        mismatch = _schema_mismatch(reader.schema, schema)
        if mismatch is not None:
            raise AdbcUnavailable(mismatch)
        ahead = ReadAhead(_finished_batches(reader, schema, max_value_mb), cancel=read.cancel,
                          **batch_budget(), name="rivet-pg-adbc-read")
        try:
            yield from split_batches(iter(ahead), batch_rows)
        except RivetError:
            raise
        except Exception as exc:
            raise wrap_driver_error(exc, "PG error while reading rows") from exc
        success = True
    finally:
        if ahead is not None:
            ahead.close()
        try:
            read.close(success=success)
        except Exception as exc:
            raise wrap_driver_error(exc, "PG error while ending the ADBC read") from exc
