"""Decode PostgreSQL's `pgoutput` logical replication messages (protocol version 1).

`pg_logical_slot_peek_binary_changes(slot, upto, NULL, 'proto_version', '1',
'publication_names', pub)` returns one `bytea` per message, in commit order; this module
turns each into a small record (docs/adr/0012-postgres-cdc-pgoutput-over-sql.md). The
message layouts are PostgreSQL's "Logical Replication Message Formats" chapter: all
integers big-endian, strings NUL-terminated, tuple values as text (`t`), null (`n`) or an
unchanged TOASTed value (`u`, never sent for a table with `REPLICA IDENTITY FULL`'s old row,
but possible in a new row of an update that did not touch a large column).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rivet_core.errors import SourceError

#: A tuple value: the text rendering, None for SQL NULL, or UNCHANGED for an unchanged TOAST.
UNCHANGED = object()


@dataclass(frozen=True)
class RelationColumn:
    name: str
    type_oid: int
    typmod: int
    is_key: bool


@dataclass(frozen=True)
class Relation:
    """A `R` message: a table's identity and columns as of this point in the log."""

    oid: int
    namespace: str
    name: str
    replica_identity: str  # d default, n nothing, f full, i index
    columns: tuple[RelationColumn, ...]

    @property
    def qualified(self) -> str:
        return f"{self.namespace}.{self.name}"


@dataclass(frozen=True)
class Begin:
    final_lsn: int  # the commit record's LSN: the transaction's `__pos`
    xid: int


@dataclass(frozen=True)
class Commit:
    commit_lsn: int
    end_lsn: int


@dataclass(frozen=True)
class RowChange:
    """`I` / `U` / `D`: the op, the relation's oid and the values (new row; for a delete,
    the old row's key or full image)."""

    op: str
    relation_oid: int
    values: tuple[object, ...]


@dataclass(frozen=True)
class Truncate:
    relation_oids: tuple[int, ...]


Message = Relation | Begin | Commit | RowChange | Truncate | None


class _Reader:
    """A cursor over one message's bytes."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return int(value)

    def byte(self) -> str:
        value = chr(self.data[self.at])
        self.at += 1
        return value

    def string(self) -> str:
        end = self.data.index(b"\x00", self.at)
        value = self.data[self.at:end].decode("utf-8")
        self.at = end + 1
        return value

    def tuple_data(self) -> tuple[object, ...]:
        values: list[object] = []
        for _ in range(self.take(">h")):
            kind = self.byte()
            if kind == "n":
                values.append(None)
            elif kind == "u":
                values.append(UNCHANGED)
            elif kind in ("t", "b"):
                size = self.take(">i")
                raw = self.data[self.at:self.at + size]
                self.at += size
                values.append(raw.decode("utf-8") if kind == "t" else bytes(raw))
            else:
                raise SourceError(f"pgoutput: unknown tuple value kind {kind!r}")
        return tuple(values)


def _relation(r: _Reader) -> Relation:
    oid = r.take(">I")
    namespace, name = r.string(), r.string()
    identity = r.byte()
    columns = []
    for _ in range(r.take(">h")):
        flags = r.take(">b")
        col_name = r.string()
        columns.append(RelationColumn(col_name, r.take(">I"), r.take(">i"), bool(flags & 1)))
    return Relation(oid, namespace or "public", name, identity, tuple(columns))


def _row_change(kind: str, r: _Reader) -> RowChange:
    oid = r.take(">I")
    marker = r.byte()
    if kind == "I":
        return RowChange("insert", oid, r.tuple_data())
    if kind == "D":  # marker K (key) or O (old full row)
        return RowChange("delete", oid, r.tuple_data())
    old: tuple[object, ...] = ()
    if marker in ("K", "O"):  # an update with the old key/row first, then 'N' and the new row
        before = r.tuple_data()
        old = before if marker == "O" else ()
        r.byte()
    new = r.tuple_data()
    if old:  # REPLICA IDENTITY FULL: an unchanged TOASTed value is in the old row
        new = tuple(o if v is UNCHANGED else v for v, o in zip(new, old, strict=True))
    return RowChange("update", oid, new)


def decode(data: bytes) -> Message:
    """One pgoutput message; None for the kinds a change export ignores (origin, type,
    logical message)."""
    r = _Reader(data)
    kind = r.byte()
    if kind == "B":
        final_lsn = r.take(">Q")
        r.take(">q")  # commit timestamp
        return Begin(final_lsn, r.take(">I"))
    if kind == "C":
        r.take(">b")
        return Commit(r.take(">Q"), r.take(">Q"))
    if kind == "R":
        return _relation(r)
    if kind in ("I", "U", "D"):
        return _row_change(kind, r)
    if kind == "T":
        count = r.take(">i")
        r.take(">b")
        return Truncate(tuple(r.take(">I") for _ in range(count)))
    return None


def lsn_text(lsn: int) -> str:
    """PostgreSQL's `X/Y` spelling of an LSN."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def lsn_int(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)
