"""One run's Iceberg commit: the verified parts become the table's data files, in one
catalog commit (docs/adr/0009-table-formats.md).

Called through `commit_table` (commit.py) by the finalize facade, after every part is
written and recorded (docs/invariants.md I1/I2) and before `manifest.json`. Everything a
run changes — a new column, the removal of the rows it replaces, its parts — is staged in
one pyiceberg transaction and lands as one swap of the catalog's metadata pointer, so a
reader sees the previous table or this run's whole table, never a part of it. A transaction
may hold more than one snapshot (a delete, then the append); every snapshot carries the
run's id and the export's name in its summary, which verification reads.

| run | staged in the transaction |
|---|---|
| first run of any mode | the table is created, its parts appended |
| full, chunked (every window done, I6) | delete every row; append the parts |
| incremental | append the parts (first removing files of a commit no manifest names) |
| incremental + `merge_on` | delete the rows whose key is in the parts; append the parts |
| a time partition | delete the rows of its window [start, end); append the parts |
| time_window (days_window) | delete the rows at or after the cutoff; append the parts |

The parts are added where they are (`add_files`: their Parquet footers give the file's
statistics), never copied, so the table's new files are the manifest's parts. A delete that
cuts through a file (a key or a cutoff inside it) rewrites that file's other rows into a
new file under the table's `iceberg-data/` (pyiceberg copy-on-write), so `data/` holds only
parts.
"""

from __future__ import annotations

import warnings
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rivet_core.destination import Destination
from rivet_core.manifest import ManifestPart, read_manifest
from rivet_core.runrecord.summary import RunSummary
from rivet_core.tableformat.chain import (
    EXPORT_KEY,
    RUN_KEY,
    PublishedRuns,
    commit_props,
    is_baseline,
    refuse_foreign,
)
from rivet_core.tableformat.errors import TableCommitError
from rivet_core.tableformat.iceberg_catalog import (
    identifier,
    location_uri,
    open_catalog,
    table_name,
)
from rivet_core.tableformat.location import table_location
from rivet_core.tableformat.types import table_type_errors
from rivet_core.unit.resolve import ResolvedUnit

#: Where pyiceberg writes the files it rewrites (a delete through a file), apart from the parts.
REWRITE_DIR = "iceberg-data"


def table_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """The table's columns from a part's schema: every column nullable (a later run may
    hold NULLs), no field metadata, JSON-free (types.py refuses JSON before any part)."""
    return pa.schema([pa.field(f.name, f.type, True) for f in schema])


class IcebergCommitter:
    """One run's Iceberg commit (see the module docstring)."""

    def __init__(self, plan: ResolvedUnit, summary: RunSummary, dest: Destination, operation: str) -> None:
        self.plan, self.summary, self.dest = plan, summary, dest
        self.export = plan.export
        self.loc = table_location(plan, dest)
        self.root = location_uri(self.loc)
        self.operation = operation
        self.props = commit_props(summary.run_id, self.export.name, operation)

    # ------------------------------------------------------------------ inputs
    @property
    def parts(self) -> list[ManifestPart]:
        return [p for p in self.summary.manifest_parts if p.status == "committed"]

    def file_uri(self, part: ManifestPart) -> str:
        return f"{self.root}/{self.loc.sub_prefix}{part.path}"

    def _read(self, part: ManifestPart, columns: list[str] | None = None) -> pa.Table:
        from rivet_core.tableformat.location import part_filesystem

        fs, root = part_filesystem(self.loc)
        return pq.read_table(f"{root}/{self.loc.sub_prefix}{part.path}", columns=columns, filesystem=fs)

    def part_schema(self) -> pa.Schema:
        from rivet_core.tableformat.location import part_filesystem

        fs, root = part_filesystem(self.loc)
        schema = pq.read_schema(f"{root}/{self.loc.sub_prefix}{self.parts[0].path}", filesystem=fs)
        problems = table_type_errors(schema, "iceberg")
        if problems:  # the schema gate refuses these before any part; a backstop
            raise TableCommitError(f"export '{self.export.name}': the Iceberg table cannot hold "
                                   + "; ".join(problems))
        return table_arrow_schema(schema)

    # ------------------------------------------------------------------ commit
    def commit(self) -> Any:

        schema = self.part_schema()
        namespace, _ = identifier(self.export)
        with open_catalog(self.export, self.loc) as catalog, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "delete matched no rows" on an empty window is expected
            catalog.create_namespace_if_not_exists(namespace)
            table = load_existing(catalog, self.export)
            if table is None:
                tx = catalog.create_table_transaction(
                    identifier(self.export), schema=schema, location=self.root,
                    properties={"write.data.path": f"{self.root}/{REWRITE_DIR}"})
                tx.add_files([self.file_uri(p) for p in self.parts],
                             snapshot_properties=commit_props(self.summary.run_id, self.export.name, "create"))
                return self.commit_result(tx.commit_transaction(), "create")
            self.check_location(table)
            if self.operation != "overwrite" or not self.plan.full_refresh:
                refuse_foreign(self.export.name, f"{table_name(self.export)} ({self.root})",
                               foreign_snapshots(table, self.export.name), "snapshot(s)")
            tx = table.transaction()
            self._evolve(tx, schema)
            self._stage(tx, table)
            tx.add_files([self.file_uri(p) for p in self.parts], snapshot_properties=self.props)
            return self.commit_result(tx.commit_transaction(), self.operation)

    def commit_empty(self) -> Any:
        """A replacing run without rows: its rows deleted, nothing appended (commit.py
        `commit_empty_table`); None when there is no table or the delete matched nothing."""
        with open_catalog(self.export, self.loc) as catalog, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "delete matched no rows" is expected
            table = load_existing(catalog, self.export)
            if table is None:
                return None
            self.check_location(table)
            if not self.plan.full_refresh:
                refuse_foreign(self.export.name, f"{table_name(self.export)} ({self.root})",
                               foreign_snapshots(table, self.export.name), "snapshot(s)")
            before = table.current_snapshot()
            tx = table.transaction()
            self._stage(tx, table)
            after = tx.commit_transaction()
            if after.current_snapshot() is None or (before is not None and
                                                    after.current_snapshot().snapshot_id == before.snapshot_id):
                return None
            return self.commit_result(after, self.operation)

    def check_location(self, table: Any) -> None:
        if table.location().rstrip("/") != self.root.rstrip("/"):
            raise TableCommitError(
                f"export '{self.export.name}': the catalog's table {table_name(self.export)} lives at "
                f"{table.location()}, not at this export's prefix {self.root} — name another iceberg.table, "
                "or drop that table from the catalog")

    def _evolve(self, tx: Any, schema: pa.Schema) -> None:
        """A new source column is added to the table in this transaction (Iceberg's
        union-by-name: allowed promotions such as int → long are applied too); a changed type
        Iceberg cannot promote fails the run before anything is committed (the drift policy's
        `fail` stopped the run at the gate already)."""
        try:
            with tx.update_schema() as update:
                update.union_by_name(schema)
        except Exception as exc:  # error boundary: pyiceberg's ValidationError names the column
            raise TableCommitError(
                f"export '{self.export.name}': the Iceberg table {table_name(self.export)} cannot take this run's "
                f"columns ({exc}) — pin the old type with `columns:`, or drop the table from the catalog and run "
                "with --full-refresh") from None

    def _stage(self, tx: Any, table: Any) -> None:
        from pyiceberg.expressions import AlwaysTrue

        if self.operation == "overwrite":
            tx.delete(AlwaysTrue(), snapshot_properties=self.props)
        elif self.operation == "append":
            self._remove_orphans(tx, table)
        elif self.operation in ("replace_partition", "replace_where"):
            tx.delete(self._window_filter(table), snapshot_properties=self.props)
        elif self.operation == "merge":
            keys = self._key_filter()
            if keys is not None:
                tx.delete(keys, snapshot_properties=self.props)

    def commit_result(self, table: Any, operation: str) -> Any:
        """The `TableCommit` of `table` just committed (also the chunk repair's, tableformat/repair.py)."""
        from rivet_core.tableformat.result import TableCommit

        snapshot = table.current_snapshot()
        summary = snapshot.summary.additional_properties if snapshot and snapshot.summary else {}
        return TableCommit(
            format="iceberg", uri=self.root, version=int(snapshot.sequence_number), operation=operation,
            files=int(summary.get("total-data-files", 0)), rows=int(summary.get("total-records", 0)),
            snapshot_id=int(snapshot.snapshot_id), name=table_name(self.export),
            catalog=self.export.iceberg.catalog_name if self.export.iceberg else None,
            metadata_location=table.metadata_location)

    # ------------------------------------------------------------------ filters
    def _window_filter(self, table: Any) -> Any:
        """The rows this run replaces: a time partition's [start, end), or days_window's
        [cutoff, …) — the same bounds the source query used (unit/resolve.py)."""
        from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

        column = self.export.time_column
        assert column is not None
        kind = table.schema().find_field(column).field_type
        if self.plan.window is not None:
            if str(kind) == "date":
                start, end = self.plan.window.local_dates
                return And(GreaterThanOrEqual(column, start.isoformat()), LessThan(column, end.isoformat()))
            low, high = self.plan.window.utc_bounds
            return And(GreaterThanOrEqual(column, self._bound(low, kind)), LessThan(column, self._bound(high, kind)))
        cutoff = self.plan.time_window_start
        assert cutoff is not None
        return GreaterThanOrEqual(column, self._bound(cutoff, kind))

    def _bound(self, instant: datetime, kind: Any) -> Any:
        if (self.export.time_column_type or "timestamp") == "unix":
            return int(instant.timestamp())
        utc = instant.astimezone(UTC)
        if str(kind) == "timestamptz":
            return utc.isoformat()
        if str(kind) == "date":
            return utc.date().isoformat()
        return utc.replace(tzinfo=None).isoformat()  # a zone-less column holds UTC wall time

    def _key_filter(self) -> Any:
        """Rows whose `merge_on` key is among the parts' keys (None: no key in the parts)."""
        from pyiceberg.expressions import And, EqualTo, In, Or

        keys = list(self.export.merge_on or [])
        rows = pa.concat_tables([self._read(p, keys) for p in self.parts]) if self.parts else None
        if rows is None or not rows.num_rows:
            return None
        if len(keys) == 1:
            values = {v for v in rows.column(keys[0]).to_pylist() if v is not None}
            return In(keys[0], values) if values else None
        tuples = {t for t in zip(*(rows.column(k).to_pylist() for k in keys), strict=True) if None not in t}
        expression: Any = None
        for t in tuples:
            term: Any = EqualTo(keys[0], t[0])
            for k, v in zip(keys[1:], t[1:], strict=True):
                term = And(term, EqualTo(k, v))
            expression = term if expression is None else Or(expression, term)
        return expression

    # ------------------------------------------------------------------ orphans
    def _remove_orphans(self, tx: Any, table: Any) -> None:
        """Files added by this export's snapshots that no manifest names (a run that crashed
        between its table commit and its manifest), removed in this run's transaction: the
        rows they hold are exported again by this run (the cursor did not move)."""
        published = self._published_snapshot()
        published_runs = PublishedRuns(self.dest)
        orphans: dict[str, Any] = {}
        for snapshot in _ancestry(table):
            summary = snapshot.summary.additional_properties if snapshot.summary else {}
            if snapshot.snapshot_id == published:
                break
            if summary.get(EXPORT_KEY) != self.export.name:
                continue
            if summary.get(RUN_KEY) in published_runs:
                break  # that run's append already removed every orphan before it (chain.py)
            orphans |= _added_files(table, snapshot)
        current = snapshot_data_files(table, table.current_snapshot())
        still = [current[path] for path in orphans if path in current]
        if not still:
            return
        self.summary.add_warning(
            f"table commit: {len(still)} file(s) appended by a run whose manifest never landed are removed "
            "from the table in this commit (their rows are exported again by this run)")
        self.summary.journal.record("Warning", context="table_commit",
                                    message=f"orphan table files removed: {sorted(f.file_path for f in still)}")
        with tx.update_snapshot(snapshot_properties=self.props).overwrite() as overwrite:
            for data_file in still:
                overwrite.delete_data_file(data_file)

    def _published_snapshot(self) -> int | None:
        """The snapshot the prefix's last success manifest records (None: none; an empty
        poll's manifest records the unchanged snapshot, finalize.py)."""
        found = read_manifest(self.dest)
        if found is None or found[0].table is None:
            return None
        value = found[0].table.get("snapshot_id")
        return None if value is None else int(value)


def iceberg_foreign(plan: ResolvedUnit, dest: Destination) -> tuple[str, list[int]]:
    """(the table's name, its foreign snapshots since the baseline) for the run's preflight
    (commit.py `refuse_foreign_writer`, chain.py `refuse_foreign`); no table yet: no snapshot."""
    loc = table_location(plan, dest)
    name = f"{table_name(plan.export)} ({location_uri(loc)})"
    with open_catalog(plan.export, loc) as catalog:
        table = load_existing(catalog, plan.export)
        return name, [] if table is None else foreign_snapshots(table, plan.export.name)


def load_existing(catalog: Any, export: Any) -> Any:
    """The export's table from the catalog (None: not created yet); a catalog row whose
    metadata is gone fails the run, naming the fix."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table(identifier(export))
    except NoSuchTableError:
        return None
    except Exception as exc:  # error boundary: the catalog row outlived its metadata
        from rivet_core.redact import redact_secrets

        raise TableCommitError(
            f"export '{export.name}': the catalog names the table {table_name(export)}, but its "
            f"metadata cannot be read ({redact_secrets(exc)}) — if the export's prefix was removed, drop the "
            "table from the catalog (pyiceberg: catalog.drop_table) and run again") from None


def foreign_snapshots(table: Any, export: str) -> list[int]:
    """Snapshots since the export's last baseline (chain.py), newest first, that no run of
    `export` made."""
    foreign: list[int] = []
    for snapshot in _ancestry(table):
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if is_baseline(summary, export):
            break
        if summary.get(EXPORT_KEY) != export:
            foreign.append(int(snapshot.snapshot_id))
    return foreign


def _ancestry(table: Any) -> list[Any]:
    """The current snapshot and its ancestors, newest first."""
    from pyiceberg.table.snapshots import ancestors_of

    current = table.current_snapshot()
    return [] if current is None else list(ancestors_of(current, table.metadata))


def snapshot_data_files(table: Any, snapshot: Any) -> dict[str, Any]:
    """path → DataFile of a snapshot's data files."""
    if snapshot is None:
        return {}
    return {task.file.file_path: task.file for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files()}


def _added_files(table: Any, snapshot: Any) -> dict[str, Any]:
    parent = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    before = snapshot_data_files(table, parent)
    return {p: f for p, f in snapshot_data_files(table, snapshot).items() if p not in before}
