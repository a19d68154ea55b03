"""The MySQL/MariaDB binlog as a `ChangeReader` (rivet_core/source/changes.py).

The reader registers as a replica (`mysql-replication`, the `mysql-cdc` extra) and reads
the ROW binlog from a `{"file", "pos"}` position, the way Rivet's MySQL CDC does
(docs/cdc-mysql.md). What it promises the run:

* **Bounded.** `open` reads the server's binlog coordinates (`SHOW BINARY LOG STATUS`, or
  `SHOW MASTER STATUS` before MySQL 8.2 and on MariaDB) and the window ends there: a
  transaction whose commit lies past that bound belongs to the next run. The dump is
  requested non-blocking, so the stream also ends at the log's end instead of waiting.
* **Commit positions.** Every change of a transaction carries the position just after its
  commit event (the XID event, or the `COMMIT` query of a non-transactional engine) as
  `__pos`, and its 0-based ordinal among the captured changes of that transaction as
  `__seq`. That position is also where the next run resumes: the binlog dump starts at an
  event boundary, and the first event there is the next transaction's.
  On MariaDB the transaction's GTID (`domain-server-seq`) is added to the position as
  `"gtid"` for the operator; resuming is by file and offset (as in Rivet), which a GTID does
  not change, so a checkpoint stays tied to the server that wrote it.
* **Typed like a batch export.** Each captured table is described with the batch session
  (`MySQLSession.describe` of `SELECT * FROM <table>`), and the binlog's values go through
  the same converters (rivet_core/source/batching.py), so a CDC column has exactly the Arrow
  type `mode: full` writes for it. The library's values are first put into the shape PyMySQL
  gives a batch read (BIT as bytes, SET as its comma-joined text, JSON as text).
* **Deletes carry the key**, the other columns null; updates carry the after-image.
* **Bounded memory.** Changes leave in batches of at most `batch_rows` rows, one table per
  batch. A transaction is held until its commit (its position is known only then), as
  Arrow once its rows reach a batch, so memory is O(batch_rows + the largest transaction); a
  transaction above `max_transaction_mb` is refused with the setting to raise.

`binlog_row_metadata = FULL` is required besides ROW/FULL images: without it the binlog has
no column names, signedness, charsets or ENUM/SET labels, and the library cannot tell a
BLOB from a TEXT or an unsigned BIGINT from a signed one.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymysql

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import ConfigError, RivetError, SourceError
from rivet_core.lazy_modules import pa
from rivet_core.redact import redact_url
from rivet_core.source.base import wrap_driver_error
from rivet_core.source.batching import Converter, check_value_sizes, make_converter
from rivet_core.source.changes import (
    OP_COLUMN,
    POS_COLUMN,
    SEQ_COLUMN,
    ChangeBatch,
    ChangeOp,
    ChangePosition,
    ChangeTable,
    ChangeWindow,
)
from rivet_core.source.mysql import wire
from rivet_core.source.mysql.session import MySQLSession, mysql_connect, mysql_connect_args
from rivet_core.source.query import quote_ident_mysql

log = logging.getLogger(__name__)

#: Rivet's default replica id when `cdc.server_id` is not set (its config reference).
DEFAULT_SERVER_ID = 4271
#: A transaction larger than this (its captured rows, as Arrow) is refused, not buffered.
DEFAULT_MAX_TRANSACTION_MB = 1024

_FILE_SEQUENCE = re.compile(r"\.(\d+)$")
_ACCESS_DENIED = {1045, 1142, 1227, 1370}


def binlog_sort_key(file: str, pos: int) -> tuple[int, int]:
    """(file sequence number, offset): binlog files are numbered by their suffix, and a
    lexical comparison of names breaks when the suffix widens (…999999 → …1000000)."""
    match = _FILE_SEQUENCE.search(file)
    if match is None:
        raise SourceError(f"binlog file name {file!r} has no numeric suffix (expected e.g. mysql-bin.000003)")
    return (int(match.group(1)), int(pos))


def binlog_position(file: str, pos: int, gtid: str | None = None) -> ChangePosition:
    """The position of `file`:`pos` in Rivet's spelling (`gtid` only when known)."""
    fields: dict[str, str | int] = {"file": file, "pos": int(pos)}
    if gtid:
        fields["gtid"] = gtid
    return ChangePosition(binlog_sort_key(file, pos), fields)


def position_of(fields: dict[str, Any]) -> ChangePosition:
    """A position back from its `__pos` / manifest fields (`{"file", "pos"[, "gtid"]}`)."""
    try:
        return binlog_position(str(fields["file"]), int(fields["pos"]), fields.get("gtid"))
    except (KeyError, TypeError, ValueError) as exc:
        raise SourceError(
            f"binlog position {fields!r} is not {{\"file\": …, \"pos\": …}} — the checkpoint "
            "was not written by a MySQL/MariaDB CDC export; re-snapshot (`cdc.initial: snapshot`)"
        ) from exc


def meta_fields() -> list[pa.Field]:
    """`__op`, `__pos`, `__seq` as the leading fields of every batch, never null, typed as
    Rivet writes them (utf8, utf8, int64)."""
    return [pa.field(OP_COLUMN, pa.string(), nullable=False),
            pa.field(POS_COLUMN, pa.string(), nullable=False),
            pa.field(SEQ_COLUMN, pa.int64(), nullable=False)]


@dataclass
class _Captured:
    """One captured table: what the run sees (`table`) and how binlog rows become Arrow."""

    table: ChangeTable
    schema_name: str
    table_name: str
    converters: list[Converter]
    normalizers: list[Any] = field(default_factory=list)
    key_mask: list[bool] = field(default_factory=list)
    checked_table_ids: set[int] = field(default_factory=set)
    columns: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.columns = self.table.schema.names  # once: Schema.names builds a new list per call


@dataclass
class _Run:
    """Consecutive changes of one table within one transaction, waiting for its commit:
    Python rows while small, sealed into Arrow chunks of `batch_rows` rows beyond that."""

    captured: int
    ops: list[str] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    sealed: list[tuple[list[str], list[int], pa.RecordBatch]] = field(default_factory=list)


class MySQLChangeReader:
    """See the module docstring. One reader per export; used as a context manager."""

    def __init__(self, url: str, tables: Sequence[str], *, server_id: int | None = None,
                 tuning: ResolvedTuning | None = None, export_name: str = "",
                 max_transaction_mb: int = DEFAULT_MAX_TRANSACTION_MB) -> None:
        if not tables:
            raise ConfigError(f"export '{export_name}': a MySQL CDC export needs at least one table")
        self._url = url
        self._table_names = list(tables)
        self.server_id = DEFAULT_SERVER_ID if server_id is None else int(server_id)
        if not 1 <= self.server_id <= 2**32 - 1:
            raise ConfigError(f"export '{export_name}': cdc.server_id {server_id} is outside 1..4294967295")
        self._tuning = tuning or ResolvedTuning()
        self._export = export_name
        self._max_tx_bytes = max_transaction_mb * 2**20
        self._conn: pymysql.connections.Connection[Any] | None = None
        self._captured: list[_Captured] = []
        self._anchor: ChangePosition | None = None
        self._window: ChangeWindow | None = None
        self.is_mariadb = False

    # --- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> MySQLChangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the control connection (a stream opened by `read` closes with it)."""
        if self._conn is not None:
            try:
                self._conn.close()
            except pymysql.err.Error:
                pass  # already broken; whatever broke it surfaced where it happened
            self._conn = None

    @property
    def _where(self) -> str:
        label = f"export '{self._export}': " if self._export else ""
        return f"{label}MySQL CDC at {redact_url(self._url)}"

    def _control(self) -> pymysql.connections.Connection[Any]:
        if self._conn is None:
            self._conn = mysql_connect(self._url)
            version = str(self._query_one("SELECT VERSION()")[0])
            self.is_mariadb = "mariadb" in version.lower()
        return self._conn

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._control().cursor() as cur:
                cur.execute(sql, list(params) or None)
                return list(cur.fetchall())
        except pymysql.err.ProgrammingError:
            raise  # a statement this server does not have: the caller chooses another
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] in _ACCESS_DENIED:
                raise  # the callers name the grant
            raise wrap_driver_error(exc, f"{self._where}: {sql.split()[0]} {sql.split()[1]}") from exc

    def _query_one(self, sql: str) -> tuple[Any, ...]:
        rows = self._query(sql)
        return rows[0] if rows else ()

    # --- preflight --------------------------------------------------------------------------

    def preflight(self) -> None:
        """Check the server before anything is read; one `SourceError` lists every problem,
        each with the setting and the fix."""
        problems = self._setting_problems() + self._grant_problems() + self._server_id_problems()
        problems += self._table_problems()
        if problems:
            raise SourceError(f"{self._where} cannot capture changes:\n  - " + "\n  - ".join(problems))

    def _setting_problems(self) -> list[str]:
        names = ("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata",
                 "log_bin_compress", "binlog_transaction_compression")
        found = {str(k).lower(): str(v) for k, v in self._query(
            "SHOW GLOBAL VARIABLES WHERE Variable_name IN (%s, %s, %s, %s, %s, %s)", names)}
        return binlog_setting_problems(found)

    def _grant_problems(self) -> list[str]:
        grants = [str(row[0]) for row in self._query("SHOW GRANTS FOR CURRENT_USER()")]
        return grant_problems(grants)

    def _server_id_problems(self) -> list[str]:
        own = int(self._query_one("SELECT @@GLOBAL.server_id")[0])
        if own == self.server_id:
            return [f"cdc.server_id {self.server_id} is the source server's own server_id — "
                    "set a cdc.server_id no server or replica uses"]
        try:
            hosts = self._query("SHOW SLAVE HOSTS")
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] in _ACCESS_DENIED:
                log.warning("%s: cannot list connected replicas (SHOW SLAVE HOSTS: %s); a "
                            "server_id clash is not checked — grant REPLICATION MASTER ADMIN "
                            "(MariaDB) to check it", self._where, exc.args[-1])
                return []
            raise
        if any(int(row[0]) == self.server_id for row in hosts):
            return [f"cdc.server_id {self.server_id} is in use by a connected replica (SHOW SLAVE "
                    "HOSTS) — the server would disconnect one of the two; set a distinct "
                    "cdc.server_id for this export"]
        return []

    def _table_problems(self) -> list[str]:
        problems: list[str] = []
        for name in self._table_names:
            schema, table = self._split(name)
            rows = self._query(
                "SELECT t.TABLE_TYPE, (SELECT COUNT(*) FROM information_schema.KEY_COLUMN_USAGE k "
                " WHERE k.TABLE_SCHEMA = t.TABLE_SCHEMA AND k.TABLE_NAME = t.TABLE_NAME "
                " AND k.CONSTRAINT_NAME = 'PRIMARY') "
                "FROM information_schema.TABLES t WHERE t.TABLE_SCHEMA = %s AND t.TABLE_NAME = %s",
                (schema, table))
            if not rows:
                problems.append(f"table {schema}.{table} does not exist (or this user cannot see it) — "
                                "fix `table:`/`tables:` or GRANT SELECT on it")
            elif int(rows[0][1]) == 0:
                problems.append(
                    f"table {schema}.{table} has no primary key — a delete would carry no key and "
                    "an update could not be matched to its row downstream, so the output could only "
                    "promise an append log, not a mirror; add a PRIMARY KEY to the table")
        return problems

    def _split(self, name: str) -> tuple[str, str]:
        schema, dot, table = name.partition(".")
        if dot:
            return schema, table
        database = str(mysql_connect_args(self._url).get("database") or "")
        if not database:
            raise ConfigError(f"export '{self._export}': table '{name}' has no database — write "
                              "`database.table` or put the database in the source URL")
        return database, name

    # --- anchor and window -------------------------------------------------------------------

    def current_position(self) -> ChangePosition:
        """The server's binlog end now (the bound of a window opened now)."""
        try:
            try:
                row = self._query_one("SHOW BINARY LOG STATUS")
            except pymysql.err.ProgrammingError:
                row = self._query_one("SHOW MASTER STATUS")  # before MySQL 8.2, and MariaDB
        except pymysql.err.MySQLError as exc:
            raise self._denied(exc, "REPLICATION CLIENT", "reading the binlog coordinates") from exc
        if not row:
            raise SourceError(f"{self._where}: the binary log is off (no binlog status) — start the "
                              "server with log_bin (log-bin in my.cnf)")
        return binlog_position(str(row[0]), int(row[1]))

    def create_anchor(self) -> ChangePosition:
        """A position no later than any snapshot started after this call sees.

        MariaDB: `START TRANSACTION WITH CONSISTENT SNAPSHOT` and the `binlog_snapshot_file/
        position` status, which is the binlog position exactly consistent with that snapshot
        (MariaDB commits in binlog order), so every transaction a later snapshot misses lies
        after it. A plain `SHOW MASTER STATUS` is not enough: a transaction may be in the
        binlog before its InnoDB commit, so it would be before the anchor yet invisible to a
        snapshot taken just after. MySQL has no such status: there `FLUSH TABLES WITH READ
        LOCK` holds commits for the instant the coordinates are read (needs RELOAD).
        The binlog has no server-side marker: the run must keep the returned position.
        """
        conn = self._control()
        try:
            with conn.cursor() as cur:
                if self.is_mariadb:
                    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                    cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
                    status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
                    cur.execute("COMMIT")
                    anchor = binlog_position(status["binlog_snapshot_file"],
                                             int(status["binlog_snapshot_position"]))
                else:
                    cur.execute("FLUSH TABLES WITH READ LOCK")
                    try:
                        anchor = self.current_position()
                    finally:
                        cur.execute("UNLOCK TABLES")
        except pymysql.err.MySQLError as exc:
            raise self._denied(exc, "RELOAD", "creating the anchor") from exc
        self._anchor = anchor
        return anchor

    def open(self, after: ChangePosition | None) -> ChangeWindow:
        """The window (after, binlog end now]. `after=None` starts at the anchor this reader
        created, else at the end now (an empty first window that records where the log
        was). A start in a purged binlog file is a loud error (never a silent restart).
        The bound is an event boundary after whole transactions, so a run that read the
        window may resume from it even when its last captured change is earlier."""
        bound = self.current_position()
        start = after or self._anchor or bound
        if start.sort_key > bound.sort_key:
            raise SourceError(
                f"{self._where}: the start position {start.to_json()} is past the binlog's end "
                f"{bound.to_json()} — the checkpoint belongs to another server (a failover, or a "
                "reset binlog); re-snapshot (`cdc.initial: snapshot`) and start a new checkpoint")
        self._require_binlog_file(start)
        self._captured = [self._describe(name) for name in self._table_names]
        self._window = ChangeWindow(start=start, bound=bound)
        return self._window

    def _require_binlog_file(self, start: ChangePosition) -> None:
        try:
            files = [str(row[0]) for row in self._query("SHOW BINARY LOGS")]
        except pymysql.err.MySQLError as exc:
            raise self._denied(exc, "REPLICATION CLIENT", "listing the binlog files") from exc
        if str(start.fields["file"]) not in files:
            raise SourceError(
                f"{self._where}: the binlog file {start.fields['file']} of the start position "
                f"{start.to_json()} is no longer on the server (purged; the oldest is "
                f"{files[0] if files else 'none'}) — changes since then are lost to this "
                "export: re-snapshot (`cdc.initial: snapshot` with a fresh checkpoint), and keep "
                "binlogs longer than the interval between runs (binlog_expire_logs_seconds)")

    def _describe(self, name: str) -> _Captured:
        schema_name, table_name = self._split(name)
        qualified = f"{quote_ident_mysql(schema_name)}.{quote_ident_mysql(table_name)}"
        with MySQLSession(self._url, self._tuning) as session:
            schema = session.describe(f"SELECT * FROM {qualified}", table_hint=(schema_name, table_name))
            keys = [str(r[0]) for r in session.catalog_query(
                "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s "
                "AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
                (schema_name, table_name))[1]]
        table = ChangeTable(f"{schema_name}.{table_name}", schema, tuple(keys))
        converters = [make_converter(f.type, f.name, direct=False) for f in schema]
        return _Captured(table, schema_name, table_name, converters,
                         key_mask=[f.name in keys for f in schema])

    def tables(self) -> list[ChangeTable]:
        """The captured tables in config order, described now if `open` has not yet."""
        if not self._captured:
            self._captured = [self._describe(name) for name in self._table_names]
        return [c.table for c in self._captured]

    def confirm(self, position: ChangePosition) -> None:
        """Nothing to tell the server: a binlog has no consumer marker (unlike a slot), and
        the published position in the manifest is the checkpoint. Binlog retention is the
        server's `binlog_expire_logs_seconds`, which must outlast the gap between runs."""

    # --- reading ------------------------------------------------------------------------------

    def read(self, batch_rows: int) -> Iterator[ChangeBatch]:
        """The window's changes in commit order (module docstring)."""
        if self._window is None:
            raise SourceError(f"{self._where}: read() before open()")
        if batch_rows < 1:
            raise ValueError("batch_rows must be >= 1")
        stream = self._stream(self._window.start or self._window.bound)
        try:
            yield from _Drain(self, batch_rows).run(stream, self._window.bound)
        except pymysql.err.MySQLError as exc:
            raise self._denied(exc, "REPLICATION SLAVE", "reading the binlog") from exc
        finally:
            stream.close()

    def _stream(self, start: ChangePosition) -> Any:
        try:
            from pymysqlreplication import BinLogStreamReader
            from pymysqlreplication.event import (
                GtidEvent,
                MariadbGtidEvent,
                NotImplementedEvent,
                QueryEvent,
                RotateEvent,
                XidEvent,
            )
            from pymysqlreplication.row_event import (
                DeleteRowsEvent,
                UpdateRowsEvent,
                WriteRowsEvent,
            )
        except ImportError as exc:
            raise ConfigError(
                f"export '{self._export}': MySQL CDC needs the mysql-replication package — "
                "pip install 'rivet-dagster[mysql-cdc]'") from exc
        settings = mysql_connect_args(self._url)
        settings.pop("database", None)  # the library's own connection picks its database
        return BinLogStreamReader(
            connection_settings=settings, pymysql_wrapper=wire.connect,
            server_id=self.server_id, report_slave="rivet",
            # is_mariadb=False: the library's MariaDB mode starts by GTID from the first
            # binlog and ignores log_file/log_pos; MariaDB serves file/offset dumps as well.
            is_mariadb=False, resume_stream=True, blocking=False,
            log_file=str(start.fields["file"]), log_pos=int(start.fields["pos"]),
            only_events=[RotateEvent, GtidEvent, MariadbGtidEvent, QueryEvent, XidEvent,
                         WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, NotImplementedEvent],
            filter_non_implemented_events=False,  # a compressed event must not pass unseen
            # parse a table's TABLE_MAP once per table id, not once per transaction (half the
            # library's cost on single-row transactions); an ALTER TABLE gets a new table id,
            # whose columns _check_columns compares with the described ones
            freeze_schema=True,
            only_schemas=sorted({c.schema_name for c in self._captured}),
            only_tables=sorted({c.table_name for c in self._captured}),
        )

    def _denied(self, exc: pymysql.err.MySQLError, grant: str, doing: str) -> RivetError:
        """A refused privilege names the grant; anything else is the driver error, still
        classified (a lost connection stays retryable)."""
        if exc.args and exc.args[0] in _ACCESS_DENIED:
            return SourceError(f"{self._where}: {exc.args[-1]} — GRANT {grant} ON *.* TO the "
                               "source user (docs/cdc-mysql.md \"Server settings and grants\")")
        return wrap_driver_error(exc, f"{self._where}: {doing}")


def binlog_setting_problems(variables: dict[str, str]) -> list[str]:
    """The server variables CDC needs, each wrong one with its fix (`variables`: lowercase
    names → values as SHOW GLOBAL VARIABLES prints them)."""
    problems: list[str] = []
    fix = "(my.cnf [mysqld], then restart; or SET GLOBAL where the server allows it)"
    if variables.get("log_bin", "OFF").upper() not in ("ON", "1"):
        return ["log_bin is OFF: the server writes no binary log — start it with log-bin " + fix]
    if variables.get("binlog_format", "").upper() != "ROW":
        problems.append(f"binlog_format is {variables.get('binlog_format')}, not ROW: the binlog holds "
                        f"statements, not the rows they changed — set binlog_format = ROW {fix}")
    if variables.get("binlog_row_image", "").upper() != "FULL":
        problems.append(f"binlog_row_image is {variables.get('binlog_row_image')}, not FULL: an update's "
                        f"row lacks the unchanged columns — set binlog_row_image = FULL {fix}")
    if variables.get("binlog_row_metadata", "").upper() != "FULL":
        problems.append(
            f"binlog_row_metadata is {variables.get('binlog_row_metadata', 'absent')}, not FULL: the "
            "binlog has no column names, signedness or charsets to type the rows — set "
            f"binlog_row_metadata = FULL {fix} (MySQL 8.0.1+, MariaDB 10.5+); rows logged before "
            "the change cannot be read")
    for name in ("log_bin_compress", "binlog_transaction_compression"):
        if variables.get(name, "OFF").upper() in ("ON", "1"):
            problems.append(f"{name} is ON: compressed binlog events cannot be read by this reader "
                            f"(they would be skipped) — set {name} = OFF {fix}")
    return problems


_GLOBAL_GRANT = re.compile(r"^GRANT (.+?) ON \*\.\* TO ", re.IGNORECASE)
_SLAVE = {"REPLICATION SLAVE", "ALL PRIVILEGES", "ALL"}
_CLIENT = {"REPLICATION CLIENT", "BINLOG MONITOR", "SUPER", "ALL PRIVILEGES", "ALL"}


def grant_problems(grants: Sequence[str]) -> list[str]:
    """Missing global grants among SHOW GRANTS lines (privileges held through a role are not
    seen here; grant them to the user directly)."""
    held: set[str] = set()
    for line in grants:
        match = _GLOBAL_GRANT.match(line.strip())
        if match:
            held.update(p.strip().upper() for p in match.group(1).split(","))
    problems = []
    if not held & _SLAVE:
        problems.append("the source user lacks REPLICATION SLAVE (reading the binlog as a replica) — "
                        "GRANT REPLICATION SLAVE ON *.* TO the user")
    if not held & _CLIENT:
        problems.append("the source user lacks REPLICATION CLIENT (BINLOG MONITOR on MariaDB: reading "
                        "the binlog coordinates) — GRANT REPLICATION CLIENT ON *.* TO the user")
    return problems


# --- the drain ---------------------------------------------------------------------------------


class _Drain:
    """One pass over the stream: transactions buffered to their commit, then cut into
    per-table batches of at most `batch_rows` rows (see `ChangeReader.read`)."""

    def __init__(self, reader: MySQLChangeReader, batch_rows: int) -> None:
        self._reader = reader
        self._captured = reader._captured
        self._by_name = {(c.schema_name, c.table_name): i for i, c in enumerate(self._captured)}
        self._batch_rows = batch_rows
        self._file = ""
        self._gtid: str | None = None
        self._tx: list[_Run] = []
        self._tx_rows = 0
        self._tx_bytes = 0
        self._tx_python_rows = 0  # rows of the open transaction not yet sealed into Arrow
        # committed rows not yet in a batch: one table, Python values
        self._out_table = -1
        self._out_ops: list[str] = []
        self._out_pos: list[str] = []
        self._out_seqs: list[int] = []
        self._out_rows: list[tuple[Any, ...]] = []
        self._out_position: ChangePosition | None = None
        self._out_ends_tx = False

    def run(self, stream: Any, bound: ChangePosition) -> Iterator[ChangeBatch]:
        from pymysqlreplication.event import (
            GtidEvent,
            MariadbGtidEvent,
            NotImplementedEvent,
            QueryEvent,
            RotateEvent,
            XidEvent,
        )
        from pymysqlreplication.row_event import RowsEvent

        file_number = 0
        for event in stream:
            if isinstance(event, RotateEvent):
                self._file = event.next_binlog
                file_number = binlog_sort_key(self._file, 0)[0]
                continue
            end = event.packet.log_pos
            if end and (file_number, end) > bound.sort_key:
                break  # this event, and its transaction, belong to the next run
            if isinstance(event, RowsEvent):
                self._rows(event)
            elif isinstance(event, (MariadbGtidEvent, GtidEvent)):
                self._begin(str(event.gtid))
            elif isinstance(event, XidEvent) or (
                    isinstance(event, QueryEvent) and _query_text(event) in _ENDS_TRANSACTION):
                fields: dict[str, str | int] = {"file": self._file, "pos": end}
                if self._gtid:
                    fields["gtid"] = self._gtid
                yield from self._commit(ChangePosition((file_number, end), fields))
            elif isinstance(event, QueryEvent) and _query_text(event) == "BEGIN":
                self._begin(self._gtid)  # MySQL: after its GTID event, if any
            elif isinstance(event, NotImplementedEvent) and event.event_type in _COMPRESSED_EVENTS:
                raise SourceError(
                    f"{self._reader._where}: a compressed binlog event at {self._file}:"
                    f"{event.packet.log_pos}, which this reader cannot expand — turn binlog "
                    "compression off (MariaDB log_bin_compress, MySQL binlog_transaction_compression) "
                    "and re-snapshot (`cdc.initial: snapshot`): the compressed changes are not readable")
            # any other statement (DDL, SAVEPOINT, …) leaves the open transaction as it is
        if self._out_rows:
            yield self._flush()

    def _begin(self, gtid: str | None) -> None:
        self._gtid = gtid
        self._tx, self._tx_rows, self._tx_bytes, self._tx_python_rows = [], 0, 0, 0

    def _rows(self, event: Any) -> None:
        index = self._by_name.get((event.schema, event.table))
        if index is None:
            return
        captured = self._captured[index]
        self._check_columns(captured, event)
        op: ChangeOp
        kind = type(event).__name__
        op = "insert" if kind == "WriteRowsEvent" else "update" if kind == "UpdateRowsEvent" else "delete"
        normalize = captured.normalizers or _normalizers(captured, event)
        captured.normalizers = normalize
        names = captured.columns
        run = self._tx[-1] if self._tx and self._tx[-1].captured == index else None
        if run is None:
            run = _Run(index)
            self._tx.append(run)
        for row in event.rows:
            values = row["after_values"] if op == "update" else row["values"]
            image = tuple(norm(values[name]) for name, norm in zip(names, normalize, strict=True))
            nulled = row.get("after_none_sources" if op == "update" else "none_sources")
            if nulled:
                image = _empty_sets(image, names, nulled)
            if op == "delete":
                image = tuple(v if key else None for v, key in zip(image, captured.key_mask, strict=True))
            run.ops.append(op)
            run.seqs.append(self._tx_rows)
            run.rows.append(image)
            self._tx_rows += 1
            self._tx_python_rows += 1
            if self._tx_python_rows >= self._batch_rows:
                self._seal()

    def _seal(self) -> None:
        """The open transaction's Python rows (one batch's worth, over one or many tables)
        become Arrow chunks, compact, until its commit."""
        for run in self._tx:
            if not run.rows:
                continue
            data = _to_arrow(self._captured[run.captured], run.rows, self._reader._tuning.max_value_mb)
            run.sealed.append((run.ops, run.seqs, data))
            run.ops, run.seqs, run.rows = [], [], []
            self._tx_bytes += data.nbytes
        self._tx_python_rows = 0
        if self._tx_bytes > self._reader._max_tx_bytes:
            raise SourceError(
                f"{self._reader._where}: a transaction in {self._file} holds more than "
                f"{self._reader._max_tx_bytes // 2**20} MB of captured rows before its commit — "
                "raise the reader's max_transaction_mb if a transaction this large is expected")

    def _check_columns(self, captured: _Captured, event: Any) -> None:
        if event.table_id in captured.checked_table_ids:
            return
        logged = [c.name for c in event.columns]
        if logged != captured.columns:
            raise SourceError(
                f"{self._reader._where}: table {captured.table.name} is logged in {self._file} with "
                f"columns {logged}, but the export reads {captured.columns} — the table changed "
                "(ALTER TABLE) or binlog_row_metadata was not FULL when it was logged; "
                "re-snapshot (`cdc.initial: snapshot`) from a fresh checkpoint")
        captured.checked_table_ids.add(event.table_id)
        captured.normalizers = []  # a new table map: its columns' types may differ

    def _commit(self, position: ChangePosition) -> Iterator[ChangeBatch]:
        pos_json = position.to_json()
        self._gtid = None
        tx, self._tx = self._tx, []
        self._tx_rows, self._tx_bytes, self._tx_python_rows = 0, 0, 0
        for number, run in enumerate(tx):
            last_run = number == len(tx) - 1
            for chunk_number, (ops, seqs, data) in enumerate(run.sealed):
                if self._out_rows:
                    yield self._flush()
                ends = last_run and not run.rows and chunk_number == len(run.sealed) - 1
                yield self._batch(run.captured, ops, [pos_json] * len(ops), seqs, data, position, ends)
            for offset, image in enumerate(run.rows):
                if self._out_rows and (self._out_table != run.captured
                                       or len(self._out_rows) >= self._batch_rows):
                    yield self._flush()
                self._out_table = run.captured
                self._out_ops.append(run.ops[offset])
                self._out_pos.append(pos_json)
                self._out_seqs.append(run.seqs[offset])
                self._out_rows.append(image)
                self._out_position = position
                self._out_ends_tx = last_run and offset == len(run.rows) - 1
        if self._out_rows and len(self._out_rows) >= self._batch_rows:
            yield self._flush()

    def _flush(self) -> ChangeBatch:
        captured = self._captured[self._out_table]
        data = _to_arrow(captured, self._out_rows, self._reader._tuning.max_value_mb)
        assert self._out_position is not None
        batch = self._batch(self._out_table, self._out_ops, self._out_pos, self._out_seqs, data,
                            self._out_position, self._out_ends_tx)
        self._out_ops, self._out_pos, self._out_seqs, self._out_rows = [], [], [], []
        return batch

    def _batch(self, index: int, ops: list[str], positions: list[str], seqs: list[int],
               data: pa.RecordBatch, position: ChangePosition, ends_tx: bool) -> ChangeBatch:
        table = self._captured[index].table
        arrays = [pa.array(ops, pa.string()), pa.array(positions, pa.string()),
                  pa.array(seqs, pa.int64()), *data.columns]
        schema = pa.schema([*meta_fields(), *table.schema])
        return ChangeBatch(table.name, pa.RecordBatch.from_arrays(arrays, schema=schema), position, ends_tx)


def _empty_sets(image: tuple[Any, ...], names: list[str], nulled: dict[str, str]) -> tuple[Any, ...]:
    """The library reads an empty SET as None (noting it); a batch read has ''."""
    from pymysqlreplication.constants import NONE_SOURCE

    return tuple("" if value is None and nulled.get(name) == NONE_SOURCE.EMPTY_SET else value
                 for value, name in zip(image, names, strict=True))


#: Statements that end a transaction in the binlog without an XID event: `COMMIT` after
#: changes to a non-transactional table, `ROLLBACK` after a transaction that also changed
#: one (its logged rows stayed applied).
_ENDS_TRANSACTION = frozenset({"COMMIT", "ROLLBACK"})
#: MySQL's TRANSACTION_PAYLOAD_EVENT (40) and MariaDB's compressed query/rows events
#: (165-171), which the library reads as NotImplementedEvent.
_COMPRESSED_EVENTS = frozenset({40, *range(165, 172)})


def _query_text(event: Any) -> str:
    return str(event.query).strip().upper()


def _to_arrow(captured: _Captured, rows: list[tuple[Any, ...]], max_value_mb: int) -> pa.RecordBatch:
    """Rows → the table's Arrow schema through the batch export's converters."""
    schema = captured.table.schema
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    arrays = []
    for values, convert, arrow_field in zip(columns, captured.converters, schema, strict=True):
        array = convert(values)
        check_value_sizes(array, arrow_field.name, max_value_mb)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _keep(value: Any) -> Any:
    return value


def _bits(value: Any) -> Any:
    """BIT: the library's '0101' text → the bytes PyMySQL gives a batch read."""
    if value is None:
        return None
    width = max((len(value) + 7) // 8, 1)
    return int(value, 2).to_bytes(width, "big")


def _set_text(order: Sequence[str]) -> Any:
    """SET: the library's Python set → 'a,c', members in definition order (as the server prints)."""
    def convert(value: Any) -> Any:
        if value is None:
            return None
        return ",".join(member for member in order if member in value)
    return convert


def _json_text(value: Any) -> Any:
    """MySQL's binary JSON arrives parsed; the batch read has its text."""
    if value is None or isinstance(value, str):
        return value

    def default(item: Any) -> Any:
        if isinstance(item, bytes):
            return item.decode("utf-8")
        if isinstance(item, (dt.date, dt.time, dt.timedelta)):
            return str(item)
        return str(item)

    return json.dumps(value, default=default, ensure_ascii=False)


def _normalizers(captured: _Captured, event: Any) -> list[Any]:
    """Per column, the function taking the library's value to PyMySQL's shape."""
    from pymysql.constants import FIELD_TYPE

    out = []
    for column in event.columns:
        if column.type == FIELD_TYPE.BIT:
            out.append(_bits)
        elif column.type == FIELD_TYPE.SET:
            out.append(_set_text([v for v in (column.set_values or []) if v]))
        elif column.type == FIELD_TYPE.JSON:
            out.append(_json_text)
        else:
            out.append(_keep)
    return out
