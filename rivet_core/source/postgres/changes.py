"""PostgreSQL's change log through a logical replication slot: the `ChangeReader` of a
`mode: cdc` export on a PostgreSQL source (docs/adr/0012-postgres-cdc-pgoutput-over-sql.md).

The slot uses the `pgoutput` plugin over a publication the export manages; a run reads it
with `pg_logical_slot_peek_binary_changes` over an ordinary SQL connection, through a
server-side cursor (memory bounded by the fetch size, whatever the backlog), up to
`pg_current_wal_lsn()` as of `open`. *Peek* never moves the slot: only `confirm` does,
with `pg_replication_slot_advance`, after the run published (`_SUCCESS`). So a run killed
at any point leaves the slot where the last published run left it, and the next run
re-reads from there, skipping the transactions at or before the last published position.

Column types come from the catalog through the batch export's own mapping
(rivet_core/source/postgres/types.py `pg_column`), so a CDC column has exactly the Arrow
type a full export of the same table has; pgoutput's text values are parsed under the same
session settings the batch session uses (UTC, ISO dates and intervals).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID

import psycopg

from rivet_core.errors import SourceError
from rivet_core.lazy_modules import pa
from rivet_core.redact import redact_url
from rivet_core.source.changes import (
    ChangeBatch,
    ChangePosition,
    ChangeTable,
    ChangeWindow,
)
from rivet_core.source.postgres.pgoutput import (
    _U64,
    UNCHANGED,
    Relation,
    RowChange,
    Truncate,
    decode,
    lsn_int,
    lsn_text,
)
from rivet_core.source.postgres.session import pg_connect
from rivet_core.source.postgres.types import CATALOG_SQL, PgTypeInfo, pg_column

log = logging.getLogger("rivet.cdc.postgres")

#: The session settings pgoutput's text values are rendered under (the batch session's).
_SETTINGS = ("SET LOCAL TimeZone = 'UTC'", "SET LOCAL IntervalStyle = 'iso_8601'",
             "SET LOCAL DateStyle = 'ISO, YMD'", "SET LOCAL extra_float_digits = 1",
             "SET LOCAL bytea_output = 'hex'")
_FETCH_ROWS = 10_000
_BEGIN, _COMMIT = ord("B"), ord("C")


def position(lsn: int) -> ChangePosition:
    """A PostgreSQL commit position: sorted by the LSN, spelled `{"lsn": "X/Y"}`."""
    return ChangePosition((lsn,), {"lsn": lsn_text(lsn)})


def parse_position(fields: dict[str, Any]) -> ChangePosition:
    return position(lsn_int(str(fields["lsn"])))


@dataclass(frozen=True)
class PgChangeOptions:
    """What the reader needs from the export: the slot, its publication, the tables, and
    whether a run already published (a vanished slot is then an error, never a restart)."""

    url: str
    export_name: str
    slot: str
    publication: str
    tables: tuple[str, ...]
    has_history: bool = False


def _split(table: str) -> tuple[str, str]:
    schema, dot, name = table.partition(".")
    return (schema, name) if dot else ("public", table)


def _build(values: list[Any], target: pa.DataType) -> pa.Array:
    """`pa.array`, through the storage type for an extension type (uuid)."""
    if isinstance(target, pa.BaseExtensionType):
        return pa.ExtensionArray.from_storage(target, pa.array(values, type=target.storage_type))
    return pa.array(values, type=target)


def _parser(arrow_type: pa.DataType) -> Callable[[str], Any]:
    """Text value → the Python value `pa.array` takes for `arrow_type`."""
    if pa.types.is_boolean(arrow_type):
        return lambda s: s == "t"
    if pa.types.is_integer(arrow_type):
        return int
    if pa.types.is_floating(arrow_type):
        return float
    if pa.types.is_decimal(arrow_type):
        return Decimal
    if pa.types.is_date(arrow_type):
        return date.fromisoformat
    if pa.types.is_timestamp(arrow_type):
        return datetime.fromisoformat
    if pa.types.is_time(arrow_type):
        return time.fromisoformat
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return lambda s: bytes.fromhex(s[2:])
    if getattr(arrow_type, "extension_name", None) == "arrow.uuid":
        return lambda s: UUID(s).bytes
    return str


#: Arrow casts from PostgreSQL's text (UTC, ISO styles) that equal the Python parse: a
#: whole column at once in C. Anything else (uuid, bytea, time, a value the cast refuses)
#: goes through `_parser` value by value.
def _castable(arrow_type: pa.DataType) -> bool:
    return (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type)
            or pa.types.is_date32(arrow_type) or pa.types.is_timestamp(arrow_type)
            or pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type))


def _column(texts: list[Any], arrow_type: pa.DataType, parser: Callable[[str], Any], where: str) -> pa.Array:
    """One column of a batch from pgoutput's text values."""
    if pa.types.is_boolean(arrow_type):
        return pa.compute.equal(pa.array(texts, pa.string()), "t")
    if _castable(arrow_type):
        try:
            return pa.array(texts, pa.string()).cast(arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass  # the value by value path names the value
    try:
        return _build([None if t is None else parser(t) for t in texts], arrow_type)
    except (ValueError, TypeError, ArithmeticError, pa.ArrowInvalid) as exc:
        raise SourceError(f"{where}: a value cannot be represented as {arrow_type}: {exc} — cast or "
                          "clean the column at the source") from None


@dataclass
class _TableShape:
    table: ChangeTable
    parsers: dict[str, Callable[[str], Any]]
    column_order: list[str]
    #: relation oid → for each column of the Relation message, its index in `column_order`
    #: (checked once per Relation message, not per change).
    slots: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class _Buffer:
    """One batch being built, column by column: the values stay pgoutput's text until the
    batch is flushed, where each column is converted at once (`_column`)."""

    table: str = ""
    width: int = 0
    ops: list[str] = field(default_factory=list)
    pos: list[str] = field(default_factory=list)
    seq: list[int] = field(default_factory=list)
    cols: list[list[Any]] = field(default_factory=list)
    last_lsn: int = 0
    ends_transaction: bool = False

    def __post_init__(self) -> None:
        self.cols = [[] for _ in range(self.width)]

    def __len__(self) -> int:
        return len(self.ops)


class PgChangeReader:
    """`ChangeReader` over a pgoutput slot; see the module docstring."""

    def __init__(self, options: PgChangeOptions) -> None:
        self.options = options
        self._conn: psycopg.Connection[Any] | None = None
        self._window: ChangeWindow | None = None
        self._shapes: dict[str, _TableShape] = {}

    # -------------------------------------------------------------- connection
    def __enter__(self) -> PgChangeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def conn(self) -> psycopg.Connection[Any]:
        if self._conn is None:
            self._conn = pg_connect(self.options.url)
            self._conn.autocommit = True
        return self._conn

    def _one(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        row = self.conn.execute(sql, params).fetchone()
        return tuple(row) if row is not None else None

    def _where(self) -> str:
        return f"export '{self.options.export_name}' (slot '{self.options.slot}' on {redact_url(self.options.url)})"

    # -------------------------------------------------------------- preflight
    def preflight(self) -> None:
        """Each check names the setting and the fix; nothing is created or written here."""
        self._check_wal_level()
        self._check_grants()
        self._check_slot_free()
        for table in self.options.tables:
            self._check_identity(table)

    def _check_wal_level(self) -> None:
        level = (self._one("SHOW wal_level") or ("",))[0]
        if level != "logical":
            raise SourceError(
                f"{self._where()}: wal_level is '{level}', and logical decoding needs 'logical' — set "
                "wal_level = logical in postgresql.conf (ALTER SYSTEM SET wal_level = logical) and "
                "restart PostgreSQL")

    def _check_grants(self) -> None:
        row = self._one("SELECT rolsuper, rolreplication, current_user FROM pg_roles WHERE rolname = current_user")
        if row is None or not (row[0] or row[1]):
            user = row[2] if row else "the connecting role"
            raise SourceError(
                f"{self._where()}: role '{user}' has no REPLICATION attribute, which a logical slot "
                f"needs — run ALTER ROLE {user} WITH REPLICATION (as a superuser)")

    def _check_slot_free(self) -> None:
        row = self._one("SELECT plugin, active, active_pid, database, wal_status FROM pg_replication_slots "
                        "WHERE slot_name = %s", (self.options.slot,))
        if row is None:
            return
        plugin, active, pid, database, wal_status = row
        if plugin != "pgoutput":
            raise SourceError(
                f"{self._where()}: slot '{self.options.slot}' uses the '{plugin}' plugin, not pgoutput — "
                "another tool owns it; set cdc.slot to a slot name of this export's own")
        if database != self.conn.info.dbname:
            raise SourceError(
                f"{self._where()}: slot '{self.options.slot}' belongs to database '{database}' — set "
                "cdc.slot to a name of this export's own")
        if active and pid != self.conn.info.backend_pid:
            raise SourceError(
                f"{self._where()}: slot '{self.options.slot}' is in use by another consumer (backend pid "
                f"{pid}) — a slot has one reader; stop that consumer, or give this export its own "
                "cdc.slot")
        if wal_status == "lost":
            raise SourceError(
                f"{self._where()}: slot '{self.options.slot}' was invalidated (its WAL was removed, "
                "max_slot_wal_keep_size) — changes since its last confirm are gone; drop the slot, "
                "clear the export's state (rivet state reset) and re-snapshot with cdc.initial: snapshot")

    def _check_identity(self, table: str) -> None:
        schema, name = _split(table)
        row = self._one(
            "SELECT c.relreplident, EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid "
            "AND i.indisprimary) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')", (schema, name))
        if row is None:
            raise SourceError(f"{self._where()}: table {schema}.{name} does not exist — fix `table:`/`tables:`")
        identity, has_key = row
        if identity == "f" or (identity in ("d", "i") and (has_key or identity == "i")):
            return
        raise SourceError(
            f"{self._where()}: table {schema}.{name} has no primary key and REPLICA IDENTITY "
            f"{'NOTHING' if identity == 'n' else 'DEFAULT'}: once it is in a publication PostgreSQL "
            "refuses its UPDATEs and DELETEs, and the output could not say which row changed — add a "
            f"primary key, or run ALTER TABLE {schema}.{name} REPLICA IDENTITY FULL (then a delete "
            "carries the whole old row, but the output has no key to merge on: a downstream mirror "
            "cannot tell duplicate rows apart)")

    # -------------------------------------------------------------- anchor / window
    def _slot_exists(self) -> bool:
        return self._one("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (self.options.slot,)) is not None

    def _ensure_publication(self) -> None:
        pub = self.options.publication
        if self._one("SELECT 1 FROM pg_publication WHERE pubname = %s", (pub,)) is None:
            tables = ", ".join(".".join(psycopg.sql.Identifier(p).as_string(self.conn) for p in _split(t))
                               for t in self.options.tables)
            self.conn.execute(f"CREATE PUBLICATION {psycopg.sql.Identifier(pub).as_string(self.conn)} "
                              f"FOR TABLE {tables}")
            log.info("%s: created publication %s for %s", self._where(), pub, ", ".join(self.options.tables))
            return
        listed = {f"{s}.{n}" for s, n in self.conn.execute(
            "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s", (pub,))}
        missing = [t for t in self.options.tables if ".".join(_split(t)) not in listed]
        if missing:
            raise SourceError(
                f"{self._where()}: publication '{pub}' does not publish {', '.join(missing)} — run "
                f"ALTER PUBLICATION {pub} ADD TABLE {', '.join(missing)}, or set cdc.publication to "
                "a new name (the export creates it)")

    def create_anchor(self) -> ChangePosition:
        """Publication first, then the slot: decoding reads the publication as of each change's
        position, so a slot older than its publication would fail on its first changes."""
        self._ensure_publication()
        if not self._slot_exists():
            self.conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (self.options.slot,))
            log.info("%s: created logical replication slot", self._where())
        row = self._one("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                        (self.options.slot,))
        assert row is not None
        return position(lsn_int(row[0]))

    def open(self, after: ChangePosition | None) -> ChangeWindow:
        if not self._slot_exists():
            if self.options.has_history or after is not None:
                raise SourceError(
                    f"{self._where()}: the replication slot is gone, but this export already published "
                    f"changes (up to {after.to_json() if after else 'its snapshot'}) — a new slot would "
                    "start at the current position and silently skip every change since the slot was "
                    "dropped; re-snapshot: clear the export's state (rivet state reset) and run with "
                    "cdc.initial: snapshot")
            self.create_anchor()
        else:
            self._ensure_publication()
        bound = self._flushed_end()
        self._window = ChangeWindow(start=after, bound=position(lsn_int(bound)))
        self._shapes = {t: self._shape(t) for t in self.options.tables}
        return self._window

    def _flushed_end(self) -> str:
        """The log's end as of now, flushed: decoding reads only flushed WAL, and under
        `synchronous_commit = off` a committed transaction may not be flushed yet. Committing a
        transaction that wrote WAL (a transactional logical message, which pgoutput does not
        publish without its `messages` option) under `synchronous_commit = on` flushes the WAL
        up to its commit record, so every transaction committed before it is readable."""
        with self.conn.transaction():
            self.conn.execute("SET LOCAL synchronous_commit = on")
            self.conn.execute("SELECT pg_logical_emit_message(true, 'rivet', 'bound')")
        row = self._one("SELECT pg_current_wal_flush_lsn()::text")
        assert row is not None
        return str(row[0])

    def _shape(self, table: str) -> _TableShape:
        schema, name = _split(table)
        rows = self.conn.execute(
            "SELECT a.attname, a.atttypid, a.atttypmod, coalesce(a.attnum = ANY(i.indkey), false) "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary "
            "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped "
            "ORDER BY a.attnum", (schema, name)).fetchall()
        infos = [PgTypeInfo(*r[1:]) for r in self.conn.execute(
            CATALOG_SQL, ([r[1] for r in rows], [r[2] for r in rows])).fetchall()]
        fields, parsers, keys = [], {}, []
        for (col, _oid, mod, is_key), info in zip(rows, infos, strict=True):
            mapped = pg_column(col, mod, info)
            if mapped.arrow_type is None or pa.types.is_list(mapped.arrow_type):
                raise SourceError(
                    f"{self._where()}: column {schema}.{name}.{col} ({info.formatted}) cannot be captured: "
                    f"{mapped.unsupported_reason or 'arrays are not decoded from the change log yet'} — "
                    "leave the table to a batch export, or change the column's type")
            fields.append(pa.field(col, mapped.arrow_type))
            parsers[col] = _parser(mapped.arrow_type)
            if is_key:
                keys.append(col)
        table_schema = pa.schema(fields)
        return _TableShape(ChangeTable(f"{schema}.{name}", table_schema, tuple(keys)), parsers,
                           [f.name for f in fields])

    def tables(self) -> list[ChangeTable]:
        return [self._shapes[t].table for t in self.options.tables]

    # -------------------------------------------------------------- read
    def read(self, batch_rows: int) -> Iterator[ChangeBatch]:
        """Stream the window's transactions (see the module docstring), cutting a batch at
        `batch_rows` changes, when the table changes, and at the end."""
        if self._window is None:
            raise RuntimeError("PgChangeReader.read before open")
        window, after = self._window, self._window.start
        by_name = {shape.table.name: shape for shape in self._shapes.values()}
        relations: dict[int, Relation] = {}
        after_lsn = after.sort_key[0] if after is not None else -1
        bound_lsn = window.bound.sort_key[0]
        buf, lsn, txn_json, seq, keep = _Buffer(), 0, "", 0, False
        with self.conn.transaction():
            for statement in _SETTINGS:
                self.conn.execute(statement)
            with self.conn.cursor(name="rivet_cdc_peek") as cur:
                cur.execute("SELECT data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, NULL, "
                            "'proto_version', '1', 'publication_names', %s)",
                            (self.options.slot, lsn_text(bound_lsn), self.options.publication))
                while rows := cur.fetchmany(_FETCH_ROWS):
                    for (data,) in rows:
                        kind = data[0]
                        if kind == _BEGIN:  # the hot path dispatches on the byte, not on a decoded object
                            lsn = _U64.unpack_from(data, 1)[0]
                            keep = after_lsn < lsn <= bound_lsn
                            txn_json = f'{{"lsn":"{lsn_text(lsn)}"}}'  # = ChangePosition.to_json()
                            seq = 0
                            continue
                        if kind == _COMMIT:
                            if keep and len(buf):
                                buf.ends_transaction = True
                                if len(buf) >= batch_rows:
                                    yield self._flush(buf)
                                    buf = _Buffer()
                            continue
                        message = decode(data)
                        if isinstance(message, Relation):
                            relations[message.oid] = message
                        elif isinstance(message, RowChange) and keep:
                            relation = relations[message.relation_oid]
                            shape = by_name.get(relation.qualified)
                            if shape is None:
                                continue
                            if buf.table and (buf.table != shape.table.name or len(buf) >= batch_rows):
                                yield self._flush(buf)
                                buf = _Buffer()
                            if not buf.table:
                                buf = _Buffer(table=shape.table.name, width=len(shape.column_order))
                            buf.last_lsn = lsn
                            self._append(buf, shape, relation, message, txn_json, seq)
                            seq += 1
                        elif isinstance(message, Truncate) and keep:
                            names = [relations[o].qualified for o in message.relation_oids if o in relations]
                            if any(n in by_name for n in names):
                                raise SourceError(
                                    f"{self._where()}: TRUNCATE of {', '.join(names)} at {txn_json} cannot be "
                                    "written as row changes — re-snapshot the table (rivet state reset, then "
                                    "cdc.initial: snapshot)")
        if len(buf):
            yield self._flush(buf)

    def _slots(self, shape: _TableShape, relation: Relation) -> list[int]:
        """Where each column of `relation` goes in the output (once per Relation message)."""
        slots = shape.slots.get(relation.oid)
        if slots is None or len(slots) != len(relation.columns):
            order = {name: i for i, name in enumerate(shape.column_order)}
            missing = [c.name for c in relation.columns if c.name not in order]
            if missing:
                raise SourceError(
                    f"{self._where()}: {relation.qualified} has column(s) {', '.join(missing)} the run did not "
                    "see at its start (DDL inside the window) — re-run: the next run reads the new shape")
            slots = shape.slots[relation.oid] = [order[c.name] for c in relation.columns]
        return slots

    def _append(self, buf: _Buffer, shape: _TableShape, relation: Relation, change: RowChange,
                txn_json: str, seq: int) -> None:
        slots = self._slots(shape, relation)
        cols = buf.cols
        for slot, value in zip(slots, change.values, strict=True):
            if value is UNCHANGED:
                raise SourceError(
                    f"{self._where()}: {relation.qualified}.{shape.column_order[slot]} is an unchanged TOASTed "
                    f"value in an update at {txn_json}, which the log does not carry — run ALTER TABLE "
                    f"{relation.qualified} REPLICA IDENTITY FULL so updates carry the old row's value")
            cols[slot].append(value)
        if len(slots) < len(cols):  # columns the relation no longer has: null
            for col in cols:
                if len(col) <= len(buf.ops):
                    col.append(None)
        buf.ends_transaction = False
        buf.ops.append(change.op)
        buf.pos.append(txn_json)
        buf.seq.append(seq)

    def _flush(self, buf: _Buffer) -> ChangeBatch:
        """The buffer as one batch; it ends a transaction when a commit followed its last row
        (a batch cut mid-transaction, by size or by a change of table, does not)."""
        shape = next(s for s in self._shapes.values() if s.table.name == buf.table)
        arrays = [pa.array(buf.ops, pa.string()), pa.array(buf.pos, pa.string()), pa.array(buf.seq, pa.int64())]
        for f, texts in zip(shape.table.schema, buf.cols, strict=True):
            arrays.append(_column(texts, f.type, shape.parsers[f.name], f"{self._where()}: {buf.table}.{f.name}"))
        schema = pa.schema([pa.field("__op", pa.string()), pa.field("__pos", pa.string()),
                            pa.field("__seq", pa.int64()), *shape.table.schema])
        return ChangeBatch(buf.table, pa.RecordBatch.from_arrays(arrays, schema=schema), position(buf.last_lsn),
                           buf.ends_transaction)

    # -------------------------------------------------------------- confirm
    def confirm(self, position_: ChangePosition) -> None:
        """Advance the slot to `position_` (only forward: PostgreSQL refuses a move back)."""
        row = self._one("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                        (self.options.slot,))
        if row is None:
            raise SourceError(f"{self._where()}: the slot vanished before it could be confirmed")
        if lsn_int(row[0]) < position_.sort_key[0]:
            self.conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)",
                              (self.options.slot, lsn_text(position_.sort_key[0])))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def slot_report(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    """Every logical slot of the server with its retained WAL and lag (bytes), for
    `rivet doctor`: an abandoned slot pins WAL until the disk fills."""
    rows = conn.execute(
        "SELECT slot_name, plugin, database, active, "
        "pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, "
        "pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, wal_status "
        "FROM pg_replication_slots WHERE slot_type = 'logical' ORDER BY slot_name").fetchall()
    return [dict(slot=r[0], plugin=r[1], database=r[2], active=r[3], retained_wal_bytes=r[4],
                 lag_bytes=r[5], wal_status=r[6]) for r in rows]
