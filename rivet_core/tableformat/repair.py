"""The table commit of a chunk repair: the repaired windows' new parts replace the
superseded ones in the export's Delta or Iceberg table, in ONE commit
(docs/adr/0009-table-formats.md, "Chunk repair").

`commit_repair` is the one entry point, called by the repair's finalize facade
(rivet_core/pipeline/facade/finalize_repair.py) after the new parts are written and recorded
(docs/invariants.md I1/I2) and before the rewritten manifest. `repair_refusal` is asked by
`rivet repair --execute` (rivet_core/pipeline/chunked/reconcile.py) before any window is re-exported.

The commit does not describe a change ("remove these, add those"); it makes the table's
files equal to the rewritten manifest's parts: remove every current file the manifest will
not list, add every listed part the table does not hold. That makes it idempotent, so a
repair that crashed after its table commit (fault point `after_table_commit`) and before its
manifest converges on the re-run: the crashed attempt's parts — which no manifest lists —
leave the table in the re-run's commit, and the re-run's parts take their place.

This holds only where the table's files ARE the manifest's parts: a chunked export whose
run committed an overwrite (every window, once; I6). A keyset-incremental chunked export
appends or MERGEs, so its table holds earlier runs' files (or delta-rs's rewrites) that no
chunk manifest lists; a repair of it is refused before anything is written.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import pyarrow as pa

from rivet_core.destination import Destination
from rivet_core.manifest import ManifestPart
from rivet_core.runrecord.summary import RunSummary
from rivet_core.tableformat.chain import OP_KEY
from rivet_core.tableformat.commit import EXPORT_KEY, RUN_KEY, DeltaCommitter, operation_for
from rivet_core.tableformat.errors import TableCommitError
from rivet_core.tableformat.location import table_location
from rivet_core.tableformat.result import TableCommit
from rivet_core.unit.resolve import ResolvedUnit

#: The manifest's `table.operation` for a repair's commit (tableformat/verify.py treats it as
#: referencing: the parts are the table's files).
OPERATION = "repair"


def repair_refusal(plan: ResolvedUnit) -> str | None:
    """Why a chunk repair of this export cannot keep its table true (None: it can)."""
    export = plan.export
    if export.table_format is None or operation_for(plan) == "overwrite":
        return None
    return (f"export '{export.name}': its {export.table_format} table is committed by "
            f"'{operation_for(plan)}' (a keyset-incremental chunked export), so the table holds files no chunk "
            "manifest lists and a repair cannot replace one window's files in it — nothing was repaired; "
            "re-run the whole export instead (rivet run -e " + export.name + " --full-refresh)")


def commit_repair(plan: ResolvedUnit, summary: RunSummary, dest: Destination,
                  parts: list[ManifestPart]) -> TableCommit:
    """Make the table's files the rewritten manifest's `parts` in one commit (module
    docstring). Raises on any failure, having committed nothing."""
    refusal = repair_refusal(plan)
    if refusal:  # reconcile.py refuses first; a backstop
        raise TableCommitError(refusal)
    if plan.export.table_format == "delta":
        return _DeltaRepair(plan, summary, dest).commit(parts)
    if plan.export.table_format == "iceberg":
        return _iceberg_repair(plan, summary, dest, parts)
    raise TableCommitError(f"export '{plan.export.name}': table_format '{plan.export.table_format}' "
                           "is not supported")


class _DeltaRepair(DeltaCommitter):
    """One transaction of remove actions (files the manifest will not list) and add actions
    (its parts the table lacks), referencing the parts where they are."""

    def commit(self, parts: list[ManifestPart]) -> TableCommit:  # type: ignore[override]
        return self.in_log(lambda: self._repair(parts))

    def _repair(self, parts: list[ManifestPart]) -> TableCommit:
        from deltalake import DeltaTable
        from deltalake.transaction import RemoveAction

        if not DeltaTable.is_deltatable(self.log.uri, storage_options=self.log.storage_options):
            raise TableCommitError(f"export '{self.export.name}': no Delta table at {self.loc.uri} to repair — "
                                   "re-run the whole export instead")
        table = self._table()
        wanted = {self.table_path(p): p for p in parts}
        adds = pa.table(table.get_add_actions(flatten=True))
        current = dict(zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(), strict=True)) \
            if adds.num_rows else {}
        now = int(time.time() * 1000)
        actions = [RemoveAction(path, True, now, size) for path, size in current.items() if path not in wanted]
        actions += [self._add(p) for path, p in wanted.items() if path not in current]
        table.create_write_transaction(actions, mode="append", schema=table.schema(),
                                       commit_properties=self._properties(OPERATION))
        return self._result(self._table(), OPERATION)


def _iceberg_repair(plan: ResolvedUnit, summary: RunSummary, dest: Destination,
                    parts: list[ManifestPart]) -> TableCommit:
    """One pyiceberg transaction — an overwrite snapshot deleting the files the manifest will
    not list, then `add_files` of its parts the table lacks — landing as one swap of the
    catalog's pointer."""
    from rivet_core.tableformat.iceberg_catalog import identifier, open_catalog
    from rivet_core.tableformat.iceberg_commit import IcebergCommitter, snapshot_data_files

    committer = IcebergCommitter(plan, summary, dest, OPERATION)
    loc = table_location(plan, dest)
    with open_catalog(plan.export, loc) as catalog, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            table = catalog.load_table(identifier(plan.export))
        except Exception as exc:  # error boundary: no table (or unreadable metadata) to repair
            raise TableCommitError(f"export '{plan.export.name}': the Iceberg table cannot be loaded to repair "
                                   f"({type(exc).__name__}) — re-run the whole export instead") from None
        committer.check_location(table)
        wanted = {committer.file_uri(p) for p in parts}
        current = snapshot_data_files(table, table.current_snapshot())
        props: dict[str, Any] = {RUN_KEY: summary.run_id, EXPORT_KEY: plan.export.name, OP_KEY: OPERATION}
        stale = [f for path, f in current.items() if path not in wanted]
        new = sorted(path for path in wanted if path not in current)
        tx = table.transaction()
        if stale:
            with tx.update_snapshot(snapshot_properties=props).overwrite() as overwrite:
                for data_file in stale:
                    overwrite.delete_data_file(data_file)
        if new:
            tx.add_files(new, snapshot_properties=props)
        result: TableCommit = committer.commit_result(tx.commit_transaction(), OPERATION)
        return result


__all__ = ["OPERATION", "commit_repair", "repair_refusal"]
