"""The contract between a change-data-capture reader and the run that publishes its changes.

A CDC export (`mode: cdc`) reads a database's change log — PostgreSQL logical decoding, the
MySQL/MariaDB binlog — and publishes one row per change with the same trail as a batch export
(parts → `manifest.json` → `_SUCCESS` → checkpoint, docs/adr/0001-write-ordering-facades.md).
The run owns the ordering and the destination; an engine's reader owns only the log. This
module is the seam between them, so each engine's reader can be written, tested and replaced
without the other side.

A run is bounded: `open` fixes the end position as of that moment, and the reader yields only
changes whose transaction committed after the run's start (the last *published* position)
and at or before that bound. The reader never advances the server's own marker (a slot's
confirmed position) until the run calls `confirm`, which it does only after `_SUCCESS`.

Output shape (Rivet's): one row per change with `__op` (`insert` | `update` | `delete`),
`__pos` (the transaction's commit position as JSON text), `__seq` (0-based ordinal of the
change within its transaction), then the typed after-image (for a delete, the key columns,
the others null). A batch never straddles two transactions' boundaries in a way a part
cut could split: the run may cut a part only after a batch whose `ends_transaction` is true.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from rivet_core.lazy_modules import pa

ChangeOp = Literal["insert", "update", "delete"]
OP_COLUMN = "__op"
POS_COLUMN = "__pos"
SEQ_COLUMN = "__seq"
META_COLUMNS = (OP_COLUMN, POS_COLUMN, SEQ_COLUMN)


@dataclass(frozen=True, order=True)
class ChangePosition:
    """A transaction's commit position in one server's log, totally ordered within that log.

    `sort_key` orders positions (PostgreSQL: the LSN as an integer; binlog: (file sequence
    number, offset)); `fields` is what `__pos` and the manifest carry, in Rivet's spelling:
    `{"lsn": "X/Y"}` or `{"file": "mysql-bin.000003", "pos": 1234}` (a `"gtid"` key may be
    added where the server has one).
    """

    sort_key: tuple[int, ...]
    fields: dict[str, str | int] = field(compare=False, hash=False)

    def to_json(self) -> str:
        """The `__pos` text: compact JSON with sorted keys, identical for equal positions."""
        return json.dumps(self.fields, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class ChangeTable:
    """One captured table: its qualified name, the Arrow schema of its after-image columns
    (without the `__` columns) and its key columns (empty when the table has no primary key,
    which the run reports: deletes and updates then cannot be keyed downstream)."""

    name: str
    schema: pa.Schema
    key_columns: tuple[str, ...]


@dataclass(frozen=True)
class ChangeBatch:
    """Consecutive changes of one table: `__op`, `__pos`, `__seq`, then the table's columns.

    `ends_transaction` is true when the batch holds the last change of a transaction (for
    this table or any other), i.e. a part may be cut after it; `position` is the commit
    position of the transaction of the batch's last row.
    """

    table: str
    rows: pa.RecordBatch
    position: ChangePosition
    ends_transaction: bool


@dataclass(frozen=True)
class ChangeWindow:
    """What one run will read: changes committed after `start` (None: from the anchor the
    reader created) up to and including `bound`, the log's end as of `open`."""

    start: ChangePosition | None
    bound: ChangePosition


class ChangeReader(Protocol):
    """One engine's change log, read once per run. Used as a context manager."""

    def preflight(self) -> None:
        """Check the server before anything is written (log level/format, grants, the slot
        or server id not in use by another consumer, each table's key); raise `SourceError`
        naming the setting and the fix."""

    def create_anchor(self) -> ChangePosition:
        """Create the log marker (PostgreSQL: the slot) if missing and return a position
        such that every change committed after it is not in a snapshot read started after
        this call (`initial: snapshot` anchors before it snapshots, so nothing is lost)."""

    def open(self, after: ChangePosition | None) -> ChangeWindow:
        """Fix this run's window: changes committed after `after`, up to the log's end now.
        A marker that vanished after a snapshot raises `SourceError` (never a silent
        restart from the current position)."""

    def tables(self) -> list[ChangeTable]:
        """The captured tables, in the order the config names them."""

    def read(self, batch_rows: int) -> Iterator[ChangeBatch]:
        """The window's changes in commit order, at most `batch_rows` rows per batch,
        streaming (bounded memory whatever the window's size)."""

    def confirm(self, position: ChangePosition) -> None:
        """Tell the server everything up to `position` is published (PostgreSQL: advance
        the slot so its WAL may be recycled). Called only after `_SUCCESS`."""

    def close(self) -> None:
        """Release the connection(s)."""
