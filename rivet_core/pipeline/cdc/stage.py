"""Stage one captured table's changes into part files, cutting only between transactions.

A part holds about `cdc.rollover` changes, but is cut only between two rows of different
`__pos` — rows of one transaction share it — so a transaction's changes of one table are
never split over two parts, whichever way the reader cut its batches, so a reader that loads whole parts never applies half a
transaction. Nothing here touches the destination: the run publishes the staged parts
through the publish facade (rivet_core/pipeline/facade/publish.py).
"""

from __future__ import annotations

from pathlib import Path

from rivet_core.format import PartRotator, StagedPart, WriterOptions
from rivet_core.lazy_modules import pa
from rivet_core.pipeline.cdc.positions import parse_position
from rivet_core.source.changes import OP_COLUMN, POS_COLUMN, ChangeBatch, ChangePosition


def _op_counts(rows: pa.RecordBatch) -> tuple[list[str], list[int]]:
    counts = pa.compute.value_counts(rows.column(OP_COLUMN))
    return counts.field("values").to_pylist(), counts.field("counts").to_pylist()


class TableStager:
    """The open part and the finished parts of one table in one run."""

    def __init__(self, staging_dir: Path, schema: pa.Schema, options: WriterOptions, rollover: int,
                 published: ChangePosition | None) -> None:
        self.staging_dir, self.schema, self.options = staging_dir, schema, options
        self.rollover = rollover
        #: This table's last published position: changes at or before it were published by an
        #: earlier run (the stream may restart before it when another table lags behind).
        self.published = published
        self.parts: list[StagedPart] = []
        self.rows = 0
        self.first_pos: str | None = None
        self.last_pos: str | None = None
        #: Changes written, by `__op` (the run's journal and the orchestrator's metadata carry them).
        self.ops: dict[str, int] = {}
        self._rotator: PartRotator | None = None
        self._open_rows = 0
        staging_dir.mkdir(parents=True, exist_ok=True)

    def _unpublished(self, batch: ChangeBatch) -> pa.RecordBatch:
        rows = batch.rows
        if self.published is None or batch.position <= self.published:
            return rows if self.published is None else rows.slice(0, 0)
        first = parse_position(rows.column(POS_COLUMN)[0].as_py())
        if first > self.published:
            return rows
        keep = [parse_position(p) > self.published for p in rows.column(POS_COLUMN).to_pylist()]
        return rows.filter(pa.array(keep))

    def add(self, batch: ChangeBatch) -> None:
        """Write the batch's rows this table has not published yet, cutting the part where
        it is full and the next row belongs to another transaction (rows of one transaction
        share their `__pos`, so a cut between two different `__pos` never splits one)."""
        rows = self._unpublished(batch)
        while rows.num_rows:
            cut_at = self._cut_index(rows)
            if cut_at == 0:
                self._cut()
                continue
            self._write(rows.slice(0, cut_at))
            rows = rows.slice(cut_at)

    def _cut_index(self, rows: pa.RecordBatch) -> int:
        """How many of `rows` go into the open part: all of them, unless the part fills up
        first — then up to the first transaction boundary at or after the fill point."""
        room = self.rollover - self._open_rows
        if room > rows.num_rows:
            return rows.num_rows
        positions = rows.column(POS_COLUMN).to_pylist()
        previous = self.last_pos if self._open_rows else None
        for i in range(max(room, 0), len(positions)):
            before = positions[i - 1] if i > 0 else previous
            if before is not None and positions[i] != before:
                return i
        return rows.num_rows

    def _write(self, rows: pa.RecordBatch) -> None:
        if self._rotator is None:
            self._rotator = PartRotator(self.staging_dir, f"cdc{len(self.parts)}", self.schema, self.options, None)
            self._open_rows = 0
        self._rotator.write_batch(rows.cast(self.schema) if rows.schema != self.schema else rows)
        self._open_rows += rows.num_rows
        self.rows += rows.num_rows
        for op, count in zip(*_op_counts(rows), strict=True):
            self.ops[op] = self.ops.get(op, 0) + count
        positions = rows.column(POS_COLUMN)
        self.first_pos = self.first_pos or positions[0].as_py()
        self.last_pos = positions[-1].as_py()

    def _cut(self) -> None:
        if self._rotator is not None:
            self.parts.extend(self._rotator.finish())
        self._rotator, self._open_rows = None, 0

    @property
    def bytes_written(self) -> int:
        """Bytes of this table's staged parts so far, the open one included."""
        open_part = self._rotator.bytes_written if self._rotator is not None else 0
        return sum(p.size_bytes for p in self.parts) + open_part

    def finish(self) -> list[StagedPart]:
        if self._rotator is not None:
            self._cut()
        return self.parts

    def abort(self) -> None:
        if self._rotator is not None:
            self._rotator.abort()
            self._rotator = None


class TableFanout:
    """The sink a CDC drain's one loop writes to (pipeline/staging/stream.py
    `stream_to_parts`): each batch goes to its table's stager, which cuts parts only where a
    transaction ends. The running totals are the stagers' together."""

    def __init__(self, stagers: dict[str, TableStager]) -> None:
        self.stagers = stagers

    @property
    def rows_written(self) -> int:
        return sum(s.rows for s in self.stagers.values())

    @property
    def bytes_written(self) -> int:
        return sum(s.bytes_written for s in self.stagers.values())

    def write_batch(self, batch: ChangeBatch) -> None:
        self.stagers[batch.table].add(batch)
