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


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_T, _N, _U, _B = ord("t"), ord("n"), ord("u"), ord("b")


def _string(data: bytes, at: int) -> tuple[str, int]:
    end = data.index(b"\x00", at)
    return data[at:end].decode("utf-8"), end + 1


def _tuple_data(data: bytes, at: int) -> tuple[tuple[object, ...], int]:
    """TupleData at `at`: the values and the offset after them. The hot loop of a drain
    (one call per change), so it reads the bytes directly, without a reader object."""
    (count,) = _I16.unpack_from(data, at)
    at += 2
    values: list[object] = []
    append = values.append
    for _ in range(count):
        kind = data[at]
        at += 1
        if kind == _T or kind == _B:
            (size,) = _I32.unpack_from(data, at)
            at += 4
            raw = data[at:at + size]
            at += size
            append(raw.decode("utf-8") if kind == _T else bytes(raw))
        elif kind == _N:
            append(None)
        elif kind == _U:
            append(UNCHANGED)
        else:
            raise SourceError(f"pgoutput: unknown tuple value kind {chr(kind)!r}")
    return tuple(values), at


def _relation(data: bytes) -> Relation:
    (oid,) = _U32.unpack_from(data, 1)
    namespace, at = _string(data, 5)
    name, at = _string(data, at)
    identity = chr(data[at])
    (count,) = _I16.unpack_from(data, at + 1)
    at += 3
    columns = []
    for _ in range(count):
        flags = data[at]
        col_name, at = _string(data, at + 1)
        (type_oid,) = _U32.unpack_from(data, at)
        (typmod,) = _I32.unpack_from(data, at + 4)
        at += 8
        columns.append(RelationColumn(col_name, type_oid, typmod, bool(flags & 1)))
    return Relation(oid, namespace or "public", name, identity, tuple(columns))


def _update(data: bytes) -> RowChange:
    (oid,) = _U32.unpack_from(data, 1)
    marker, at = chr(data[5]), 6
    old: tuple[object, ...] = ()
    if marker in ("K", "O"):  # the old key/row first, then 'N' and the new row
        before, at = _tuple_data(data, at)
        old = before if marker == "O" else ()
        at += 1
    new, _ = _tuple_data(data, at)
    if old:  # REPLICA IDENTITY FULL: an unchanged TOASTed value is in the old row
        new = tuple(o if v is UNCHANGED else v for v, o in zip(new, old, strict=True))
    return RowChange("update", oid, new)


def decode(data: bytes) -> Message:
    """One pgoutput message; None for the kinds a change export ignores (origin, type,
    logical message)."""
    kind = data[0]
    if kind == 0x49:  # I: relid, 'N', new row
        return RowChange("insert", _U32.unpack_from(data, 1)[0], _tuple_data(data, 6)[0])
    if kind == 0x42:  # B: final LSN, commit time, xid
        return Begin(_U64.unpack_from(data, 1)[0], _U32.unpack_from(data, 17)[0])
    if kind == 0x43:  # C: flags, commit LSN, end LSN, commit time
        return Commit(_U64.unpack_from(data, 2)[0], _U64.unpack_from(data, 10)[0])
    if kind == 0x55:
        return _update(data)
    if kind == 0x44:  # D: relid, 'K' or 'O', the key or the old row
        return RowChange("delete", _U32.unpack_from(data, 1)[0], _tuple_data(data, 6)[0])
    if kind == 0x52:
        return _relation(data)
    if kind == 0x54:  # T: count, options, relids
        (count,) = _I32.unpack_from(data, 1)
        return Truncate(tuple(_U32.unpack_from(data, 6 + 4 * i)[0] for i in range(count)))
    return None


def lsn_text(lsn: int) -> str:
    """PostgreSQL's `X/Y` spelling of an LSN."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def lsn_int(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)
