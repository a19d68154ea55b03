"""The table commit: one Delta Lake (or Iceberg) commit per successful run, made inside the finalize facade.

`commit_table` is the one entry point; it dispatches on `table_format` — Delta here,
Iceberg in iceberg_commit.py (the same modes, one catalog transaction per run).

Called by `rivet_core/pipeline/facade/finalize.py` after every part is written and recorded
(docs/invariants.md I1/I2) and before `manifest.json`; the version it returns is recorded in
the manifest. A failure here fails the run before the manifest, so the cursor does not move.

Per mode (docs/adr/0009-table-formats.md):

| run | commit |
|---|---|
| full, chunked (every window done, I6) | the parts replace every file of the table (overwrite) |
| incremental | the parts are appended |
| incremental + `merge_on` | the parts are merged on the key (delta-rs MERGE; an updated row replaces its old version) |
| a time partition (`<col>=<key>/`) | the partition's previous files are removed and its parts added, in one commit |
| time_window (days_window) | rows at or after the cutoff are replaced by the parts' rows (a predicate overwrite) |

Parts are referenced where they are (`data/…` under the table root), not copied, so the
table's files are the manifest's parts — except for MERGE and the predicate overwrite,
where delta-rs rewrites rows into files of its own. A GCS table is opened through a local
copy of its log (delta_log.py), where delta-rs cannot reach the files: there rivet makes
those two commits itself, copy-on-write, with the parts referenced (delta_rewrite.py).

A crash after this commit and before the manifest (fault point `after_table_commit`)
leaves a commit no manifest names. Every mode but append is idempotent, so the re-run's
commit makes the same table; an append re-run first removes, in its own commit's actions,
the files that such orphan commits of this export added — one atomic commit, so the rows
the re-run exports again are in the table exactly once. An orphan is judged by the chain of
published runs (chain.py): a commit of this export whose run has no success manifest — never
"every commit after the last manifest's version", which an empty poll's manifest (it names
the unchanged version, finalize.py) would otherwise turn into the whole table.

Before anything is written:
- `merge_on` keys: a NULL or repeated key in the run's parts refuses the run (merge_keys.py);
- another writer: a commit no run of this export made since the last baseline refuses the
  run, naming the version(s) and the fix (`--full-refresh`, whose overwrite is allowed past
  the refusal and becomes the new baseline; chain.py) — at the schema gate before any part
  (`refuse_foreign_writer`, asked by pipeline/single/job.py and chunked.py), and again here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from rivet_core.destination import Destination
from rivet_core.lazy_modules import pa, pq
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
from rivet_core.tableformat.delta_log import delta_log, is_log_copy
from rivet_core.tableformat.errors import TableCommitError
from rivet_core.tableformat.location import part_filesystem, table_location
from rivet_core.tableformat.result import TableCommit
from rivet_core.tableformat.types import delta_arrow_schema, table_type_errors
from rivet_core.unit.resolve import ResolvedUnit


def commit_table(plan: ResolvedUnit, summary: RunSummary, dest: Destination) -> TableCommit:
    """Commit the run's recorded parts to the export's table (module docstring). Raises on
    any failure, having committed nothing."""
    fmt = plan.export.table_format
    if plan.export.merge_on:
        check_merge_keys(plan, summary, dest)
    if fmt == "iceberg":
        from rivet_core.tableformat.iceberg_commit import (
            IcebergCommitter,  # pyiceberg: only when used
        )

        result: TableCommit = IcebergCommitter(plan, summary, dest, operation_for(plan)).commit()
        return result
    if fmt != "delta":
        raise TableCommitError(f"export '{plan.export.name}': table_format '{fmt}' is not supported")
    return DeltaCommitter(plan, summary, dest).commit()


def commit_empty_table(plan: ResolvedUnit, summary: RunSummary, dest: Destination) -> TableCommit | None:
    """A replacing run (full, chunked, `--full-refresh`, a time partition) that found no row:
    its part of the table is emptied in one commit of removals — left alone, the table kept
    rows the source no longer has, and a time partition's superseded parts, which its manifest
    then moves to `_quarantine/`, stayed referenced (a reader failed on the missing file).
    None when nothing is committed (no table, or nothing to remove): the manifest then names
    the unchanged version (chain.py `unchanged_block`)."""
    if operation_for(plan) not in ("overwrite", "replace_partition"):
        return None
    if plan.export.table_format == "iceberg":
        from rivet_core.tableformat.iceberg_commit import IcebergCommitter

        result: TableCommit | None = IcebergCommitter(plan, summary, dest, operation_for(plan)).commit_empty()
        return result
    return DeltaCommitter(plan, summary, dest).commit_empty()


def check_merge_keys(plan: ResolvedUnit, summary: RunSummary, dest: Destination) -> None:
    """Refuse the run when its parts' `merge_on` keys are NULL or repeated (merge_keys.py):
    before the table is created or changed, whatever the store (delta_rewrite.py's GCS
    MERGE and Iceberg's delete-then-append included)."""
    from rivet_core.tableformat.merge_keys import refuse_unfit_keys

    keys = list(plan.export.merge_on or [])
    loc = table_location(plan, dest)
    fs, root = part_filesystem(loc)
    parts = [p for p in summary.manifest_parts if p.status == "committed"]
    if not parts:
        return
    rows = pa.concat_tables([pq.read_table(f"{root}/{loc.sub_prefix}{p.path}", columns=keys, filesystem=fs)
                             for p in parts], promote_options="permissive")
    refuse_unfit_keys(plan.export.name, keys, rows)


def refuse_foreign_writer(plan: ResolvedUnit, dest: Destination) -> None:
    """The run's preflight, at the schema gate (before any part reaches the destination):
    refuse when the export's table holds another writer's commit since the last baseline —
    unless this run re-baselines (`--full-refresh`). The commit checks again (a backstop)."""
    if plan.export.table_format is None or plan.full_refresh:
        return
    if plan.export.table_format == "iceberg":
        from rivet_core.tableformat.iceberg_commit import iceberg_foreign

        name, foreign = iceberg_foreign(plan, dest)
        refuse_foreign(plan.export.name, name, foreign, "snapshot(s)")
        return
    from deltalake import DeltaTable

    loc = table_location(plan, dest)
    with delta_log(loc) as log:  # a GCS table: a local copy of its log
        if not DeltaTable.is_deltatable(log.uri, storage_options=log.storage_options):
            return
        foreign = foreign_versions(DeltaTable(log.uri, storage_options=log.storage_options), plan.export.name)
    refuse_foreign(plan.export.name, loc.uri, foreign, "version(s)")


def operation_for(plan: ResolvedUnit) -> str:
    """The commit's kind for this run (module docstring table)."""
    export = plan.export
    if plan.window is not None:
        return "replace_partition"
    if plan.full_refresh:
        return "overwrite"  # every row again, whatever the mode: a new baseline
    if export.mode == "incremental" or (export.mode == "chunked" and export.keyset_incremental):
        return "merge" if export.merge_on else "append"
    if export.mode == "time_window":
        return "replace_where"
    return "overwrite"


class DeltaCommitter:
    """One run's Delta commit (see the module docstring)."""

    def __init__(self, plan: ResolvedUnit, summary: RunSummary, dest: Destination) -> None:
        self.plan, self.summary, self.dest = plan, summary, dest
        self.export = plan.export
        self.loc = table_location(plan, dest)
        self.fs, self.root = part_filesystem(self.loc)
        self.operation = operation_for(plan)
        #: Where delta-rs opens the table during `commit` (delta_log.py); the table itself elsewhere.
        self.log = self.loc

    # ------------------------------------------------------------------ inputs
    @property
    def parts(self) -> list[ManifestPart]:
        return [p for p in self.summary.manifest_parts if p.status == "committed"]

    def table_path(self, part: ManifestPart) -> str:
        return self.loc.sub_prefix + part.path

    def part_schema(self) -> pa.Schema:
        first = self.parts[0]
        schema = pq.read_schema(f"{self.root}/{self.table_path(first)}", filesystem=self.fs)
        problems = table_type_errors(schema, "delta")
        if problems:  # the schema gate refuses these before any part; a backstop
            raise TableCommitError(f"export '{self.export.name}': the Delta table cannot hold "
                                   + "; ".join(problems))
        return delta_arrow_schema(schema)

    def _add(self, part: ManifestPart) -> Any:
        from deltalake.transaction import AddAction

        return AddAction(self.table_path(part), part.size_bytes, {}, int(time.time() * 1000), True,
                         json.dumps({"numRecords": part.rows}))

    def _properties(self, operation: str | None = None) -> Any:
        from deltalake import CommitProperties

        return CommitProperties(custom_metadata=commit_props(self.summary.run_id, self.export.name,
                                                             operation or self.operation))

    # ------------------------------------------------------------------ commit
    def commit(self) -> TableCommit:
        """The run's commit, published before this returns (a GCS table: delta_log.py)."""
        return self.in_log(self._commit)

    def commit_empty(self) -> TableCommit | None:
        """The removals of a replacing run without rows (`commit_empty_table`)."""
        return self.in_log(self._commit_empty)

    def _commit_empty(self) -> TableCommit | None:
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(self.log.uri, storage_options=self.log.storage_options):
            return None
        table = self._table()
        if not self.plan.full_refresh:
            refuse_foreign(self.export.name, self.loc.uri, foreign_versions(table, self.export.name), "version(s)")
        sub = self.loc.sub_prefix
        removals = self._removals(table, lambda path: self.operation == "overwrite" or path.startswith(sub))
        if not removals:
            return None
        table.create_write_transaction(removals, mode="append", schema=table.schema(),
                                       commit_properties=self._properties())
        return self._result(self._table(), self.operation)

    def in_log(self, work: Callable[[], Any]) -> Any:
        """Run `work` with `self.log` opened for writing; its commits are published when it
        returns (a GCS table's log copy: delta_log.py), never when it raises."""
        with delta_log(self.loc, publish=True) as log:
            self.log = log
            try:
                return work()
            finally:
                self.log = self.loc

    def _table(self, version: int | None = None) -> Any:
        """The table as delta-rs opens it (`self.log`: the table, or a GCS table's log copy)."""
        from deltalake import DeltaTable

        return DeltaTable(self.log.uri, version=version, storage_options=self.log.storage_options)

    def _commit(self) -> TableCommit:
        from deltalake import DeltaTable
        from deltalake.transaction import create_table_with_add_actions

        from rivet_core.tableformat.delta_schema import deltalake_schema, evolve_schema

        schema = self.part_schema()
        if not DeltaTable.is_deltatable(self.log.uri, storage_options=self.log.storage_options):
            # First run: the table is created from the parts, whatever the mode.
            create_table_with_add_actions(
                self.log.uri, deltalake_schema(schema), [self._add(p) for p in self.parts], mode="error",
                name=self.export.name, storage_options=self.log.storage_options,
                commit_properties=self._properties("create"))
            return self._result(self._table(), "create")
        if self.operation != "overwrite" or not self.plan.full_refresh:
            refuse_foreign(self.export.name, self.loc.uri, foreign_versions(self._table(), self.export.name),
                           "version(s)")
        evolve_schema(self._table(), schema, self.export.name, self._properties("evolve"))
        table = self._table()
        if self.operation == "overwrite":
            table.create_write_transaction([self._add(p) for p in self.parts], mode="overwrite",
                                           schema=table.schema(), commit_properties=self._properties())
        elif self.operation == "append":
            actions = [*self._orphan_removals(table), *(self._add(p) for p in self.parts)]
            table.create_write_transaction(actions, mode="append", schema=table.schema(),
                                           commit_properties=self._properties())
        elif self.operation == "replace_partition":
            actions = [*self._removals(table, lambda path: path.startswith(self.loc.sub_prefix)),
                       *(self._add(p) for p in self.parts)]
            table.create_write_transaction(actions, mode="append", schema=table.schema(),
                                           commit_properties=self._properties())
        elif self.operation == "merge":
            self._merge(table)
        else:
            self._replace_where(table)
        return self._result(self._table(), self.operation)

    def _result(self, table: Any, operation: str) -> TableCommit:
        adds = pa.table(table.get_add_actions(flatten=True))
        rows = sum(int(n or 0) for n in adds.column("num_records").to_pylist()) if adds.num_rows else 0
        return TableCommit(format="delta", uri=self.loc.uri, version=int(table.version()),
                           operation=operation, files=adds.num_rows, rows=rows)

    # ------------------------------------------------------------------ removals
    def _removals(self, table: Any, keep_out: Any) -> list[Any]:
        from deltalake.transaction import RemoveAction

        now = int(time.time() * 1000)
        adds = pa.table(table.get_add_actions(flatten=True))
        return [RemoveAction(path, True, now, size)
                for path, size in zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(),
                                      strict=True) if keep_out(path)]

    def _orphan_removals(self, table: Any) -> list[Any]:
        """Files added by this export's commits whose run never published (a run that crashed
        between its table commit and its manifest; chain.py), still in the table. Only
        commits after the newest published one are candidates: before it, the published
        runs' appends already removed them."""
        published_runs = PublishedRuns(self.dest)
        published = self._published_version()
        orphans: set[str] = set()
        for entry in sorted(table.history(), key=lambda e: -int(e.get("version", -1))):  # newest first
            version = int(entry.get("version", -1))
            if version <= published:
                break
            if entry.get(EXPORT_KEY) != self.export.name:
                continue
            if entry.get(RUN_KEY) in published_runs:
                break  # that run's append already removed every orphan before it
            orphans |= self._added_by(version)
        if not orphans:
            return []
        self.summary.add_warning(
            f"table commit: {len(orphans)} file(s) appended by a run whose manifest never landed "
            "are removed from the table in this commit (their rows are exported again by this run)")
        self.summary.journal.record("Warning", context="table_commit",
                                    message=f"orphan table files removed: {sorted(orphans)}")
        return self._removals(table, lambda path: path in orphans)

    def _added_by(self, version: int) -> set[str]:
        def files(v: int) -> set[str]:
            if v < 0:
                return set()
            return set(pa.table(self._table(v).get_add_actions(flatten=True)).column("path").to_pylist())

        return files(version) - files(version - 1)

    def _published_version(self) -> int:
        """The table version the prefix's last success manifest records (-1: none; an empty
        poll's manifest records the unchanged version, finalize.py)."""
        found = read_manifest(self.dest)
        if found is None or found[0].table is None:
            return -1
        return int(found[0].table.get("version", -1))

    # ------------------------------------------------------------------ rewrites
    def _reader(self, schema: pa.Schema) -> pa.RecordBatchReader:
        paths = [f"{self.root}/{self.table_path(p)}" for p in self.parts]
        import pyarrow.dataset as pads  # here: it imports pandas, which an export without a table never needs

        dataset = pads.dataset(paths, filesystem=self.fs, format="parquet")
        return dataset.scanner(columns=schema.names).to_reader()

    def _merge(self, table: Any) -> None:
        keys = list(self.export.merge_on or [])
        if is_log_copy(self.loc):  # delta-rs cannot reach a GCS table's files: delta_rewrite.py
            from rivet_core.tableformat.delta_rewrite import key_matcher

            parts = pa.concat_tables([pq.read_table(f"{self.root}/{self.table_path(p)}", columns=keys,
                                                    filesystem=self.fs) for p in self.parts])
            self._rewrite(table, keys, key_matcher(keys, parts))
            return
        predicate = " AND ".join(f"t.{_quote(k)} = s.{_quote(k)}" for k in keys)
        source = _arrow_schema(table)
        (table.merge(self._reader(source), predicate=predicate, source_alias="s", target_alias="t",
                     commit_properties=self._properties())
         .when_matched_update_all().when_not_matched_insert_all().execute())

    def _replace_where(self, table: Any) -> None:
        from deltalake import write_deltalake

        start = self.plan.time_window_start
        assert start is not None and self.export.time_column
        column = self.export.time_column
        unix = (self.export.time_column_type or "timestamp") == "unix"
        if is_log_copy(self.loc):  # delta-rs cannot reach a GCS table's files: delta_rewrite.py
            from rivet_core.tableformat.delta_rewrite import cutoff_matcher

            column_type = _arrow_schema(table).field(column).type
            self._rewrite(table, [column], cutoff_matcher(column, start, column_type, unix))
            return
        bound = (str(int(start.timestamp())) if unix
                 else _timestamp_literal(start, _arrow_schema(table).field(column).type))
        write_deltalake(table, self._reader(_arrow_schema(table)), mode="overwrite",
                        predicate=f"{_quote(column)} >= {bound}", commit_properties=self._properties())

    def _rewrite(self, table: Any, columns: list[str], matches: Any) -> None:
        """The rows `matches` selects replaced by the parts' rows, copy-on-write, in one commit."""
        from rivet_core.tableformat.delta_rewrite import rewrite_actions

        actions = [*rewrite_actions(table, self.fs, self.root, columns, matches), *(self._add(p) for p in self.parts)]
        table.create_write_transaction(actions, mode="append", schema=table.schema(),
                                       commit_properties=self._properties())


def foreign_versions(table: Any, export: str) -> list[int]:
    """Versions since the export's last baseline (chain.py) that no run of `export` made,
    VACUUM's maintenance commits excepted (verify.py `MAINTENANCE`)."""
    from rivet_core.tableformat.verify import MAINTENANCE

    history = sorted(table.history(), key=lambda e: int(e.get("version", -1)))
    baseline = max((int(e["version"]) for e in history if is_baseline(e, export)), default=-1)
    return [int(e["version"]) for e in history if int(e.get("version", -1)) > baseline
            and e.get(EXPORT_KEY) != export and e.get("operation") not in MAINTENANCE]


def _arrow_schema(table: Any) -> pa.Schema:
    return pa.schema(table.schema().to_arrow())


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _timestamp_literal(start: datetime, column_type: pa.DataType) -> str:
    if pa.types.is_date(column_type):
        return f"'{start.date().isoformat()}'"
    if pa.types.is_timestamp(column_type) and column_type.tz is None:
        return f"'{start.replace(tzinfo=None).isoformat(sep=' ')}'"
    return f"'{start.isoformat()}'"
