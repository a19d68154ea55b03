"""`rivet reconcile` and `rivet repair` for checkpointed chunked exports (reference §3.7).

Reconcile compares, per completed chunk of the latest chunk run, the source's
`COUNT(*)` of that window's query with the rows the checkpoint recorded: match /
mismatch / unknown. It never writes data (a clean report only advances the advisory
"verified" progression).

Repair is the ordered write group that fixes mismatched windows, in one function
(`execute_repair`): re-export each window as NEW parts (write_part_file → record_part, the
per-part facade; never overwriting), mark the task repaired, then rewrite the destination
manifest with the window's old parts replaced by the new ones and the old objects moved to
`_quarantine/<repair_run_id>/` — nothing is deleted — through the normal manifest write
group (manifest.json → copy → _SUCCESS).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rivet_core import __version__
from rivet_core.chunks import ChunkPlan, ChunkWindow
from rivet_core.chunks.sql import window_count_query
from rivet_core.config import ExportConfig, RivetConfig
from rivet_core.errors import ConfigError, DataIntegrityError
from rivet_core.manifest import quarantine_object, read_manifest, write_manifest_files
from rivet_core.manifest.column_checksums import run_level
from rivet_core.pipeline.chunk_commit import attempt_key, export_window
from rivet_core.pipeline.commit import PartKind, record_part
from rivet_core.pipeline.job import RunOptions
from rivet_core.pipeline.summary import RunSummary
from rivet_core.redact import redact_secrets
from rivet_core.source import open_source
from rivet_core.source.query import dialect_for

log = logging.getLogger("rivet.reconcile")


@dataclass
class ChunkCheck:
    chunk_index: int
    identifier: str
    start_key: str | None
    end_key: str | None
    source_count: int | None
    exported_count: int | None
    status: str  # match | mismatch | unknown
    note: str | None = None


@dataclass
class ReconcileReport:
    export_name: str
    run_id: str
    strategy: str
    checks: list[ChunkCheck] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.checks) for s in ("match", "mismatch", "unknown")}

    def to_dict(self) -> dict[str, Any]:
        counts = self.counts()
        return {
            "rivet_version": __version__, "export_name": self.export_name, "run_id": self.run_id,
            "strategy": self.strategy,
            "partitions": [{"kind": "chunk", "identifier": c.identifier, "chunk_index": c.chunk_index,
                            "source_count": c.source_count, "exported_count": c.exported_count,
                            "status": c.status, **({"note": c.note} if c.note else {})} for c in self.checks],
            "summary": {"total_partitions": len(self.checks), "matches": counts["match"],
                        "mismatches": counts["mismatch"], "unknown": counts["unknown"],
                        "total_source_rows": sum(c.source_count or 0 for c in self.checks),
                        "total_exported_rows": sum(c.exported_count or 0 for c in self.checks)},
        }

    def exit_code(self) -> int:
        return DataIntegrityError.exit_code if self.counts()["mismatch"] else 0


def _chunked_run(config: RivetConfig, export: ExportConfig, *, read_only: bool = False):  # noqa: ANN202
    """The chunked run object reconcile/repair plan with. Reconcile only reads, so it takes no
    export lock (it must work beside running chunk workers); repair writes, so it locks."""
    from rivet_core.pipeline.chunked import ChunkedRun

    if export.mode != "chunked" or not export.chunk_checkpoint:
        raise ConfigError(f"export '{export.name}': reconcile and repair need a chunked export with "
                          "chunk_checkpoint: true (they compare per-chunk counts recorded in the checkpoint); "
                          f"this export is mode '{export.mode}' — use `rivet validate` instead")
    cls = type("InspectChunkedRun", (ChunkedRun,), {"lock_mode": None}) if read_only else ChunkedRun
    return cls(config, export, RunOptions(ledger=False), notifications=None)


def _plan_for(run: Any, run_row: Any, tasks: list) -> ChunkPlan:
    plan = run.plan_windows()
    if plan is None:
        raise ConfigError(f"export '{run.export.name}': the table is now planned as a full export; "
                          "reconcile needs the chunk plan of the run")
    if plan.plan_hash != run_row.plan_hash:
        raise ConfigError(f"export '{run.export.name}': the config plans {plan.plan_hash} but run "
                          f"{run_row.run_id} was planned as {run_row.plan_hash} — reconcile the run with the "
                          "config it ran with")
    windows = tuple(ChunkWindow(t.chunk_index, t.start_key, t.end_key, t.window_key) for t in tasks)
    return dataclasses.replace(plan, windows=windows)


def reconcile_export(config: RivetConfig, export: ExportConfig) -> ReconcileReport:
    """Per completed chunk: source COUNT vs rows written (see the module docstring)."""
    run = _chunked_run(config, export, read_only=True)
    try:
        run_row = run.state.get_latest_chunk_run(export.name)
        if run_row is None:
            raise ConfigError(f"export '{export.name}': no chunk run recorded — run the export first")
        tasks = run.state.list_chunk_tasks(run_row.run_id)
        plan = _plan_for(run, run_row, tasks)
        report = ReconcileReport(export.name, run_row.run_id, plan.strategy)
        dialect = dialect_for(run.plan.engine)
        with open_source(run.plan.source_url, run.plan.tuning) as src:
            for task, window in zip(tasks, plan.windows, strict=True):
                identifier = f"chunk {task.chunk_index} [{task.start_key}..{task.end_key}]"
                exported = task.rows_written if task.status == "completed" else None
                try:
                    sql, params = window_count_query(dialect, run.plan.base_query, plan, window)
                    source = int(src.scalar(sql, params))
                except Exception as exc:  # noqa: BLE001 - an uncountable window is "unknown"
                    report.checks.append(ChunkCheck(task.chunk_index, identifier, task.start_key, task.end_key,
                                                    None, exported, "unknown", redact_secrets(exc)))
                    continue
                if exported is None:
                    status, note = "unknown", f"task is {task.status}"
                elif exported == source:
                    status, note = "match", None
                else:
                    status, note = "mismatch", f"source={source}, exported={exported}, diff={source - exported}"
                report.checks.append(ChunkCheck(task.chunk_index, identifier, task.start_key, task.end_key,
                                                source, exported, status, note))
        counts = report.counts()
        if not counts["mismatch"] and not counts["unknown"] and report.checks:
            try:
                run.state.record_verified_chunked(export.name, max(c.chunk_index for c in report.checks),
                                                  run_row.run_id)
            except Exception as exc:  # noqa: BLE001 - progression is advisory
                log.warning("verified progression not written: %s", redact_secrets(exc))
        return report
    finally:
        run.close()


@dataclass
class RepairResult:
    chunk_index: int
    status: str  # executed | skipped | failed
    rows_written: int | None = None
    detail: str | None = None


def execute_repair(config: RivetConfig, export: ExportConfig, report: ReconcileReport) -> list[RepairResult]:
    """Re-export every mismatched/unknown chunk and rewrite the manifest (module docstring)."""
    actions = [c for c in report.checks if c.status != "match"]
    results: list[RepairResult] = []
    if not actions:
        return results
    run = _chunked_run(config, export)
    try:
        state, dest = run.state, run.dest
        run_row = state.get_chunk_run(report.run_id)
        tasks = {t.chunk_index: t for t in state.list_chunk_tasks(report.run_id)}
        plan = _plan_for(run, run_row, list(tasks.values()))
        run.chunk_plan = plan
        found = read_manifest(dest)
        if found is None:
            raise DataIntegrityError(f"export '{export.name}': no manifest.json at {dest.uri} to repair")
        manifest, _ = found
        repair_id = f"{export.name}_repair_{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}"
        summary = RunSummary(run_id=repair_id, export_name=export.name, mode="chunked", format=export.format,
                             compression=run.plan.writer_options.compression)
        ctx = run.window_context(report.run_id)
        windows = {w.index: w for w in plan.windows}
        superseded: set[str] = set()
        for action in actions:
            task = tasks[action.chunk_index]
            try:
                result = export_window(ctx, windows[action.chunk_index])
            except Exception as exc:  # noqa: BLE001 - report per action, keep going
                results.append(RepairResult(action.chunk_index, "failed", detail=redact_secrets(exc)))
                continue
            for record in result.records:
                record_part(summary, state, record, PartKind.chunk(action.chunk_index))
            state.record_repaired_chunk(report.run_id, action.chunk_index, result.rows, result.first_file)
            if task.file_name:
                superseded.add(attempt_key(task.file_name))
            results.append(RepairResult(action.chunk_index, "executed", rows_written=result.rows))
        kept = [p for p in manifest.parts if attempt_key(p.path) not in superseded]
        moved = [p for p in manifest.parts if attempt_key(p.path) in superseded]
        parts = [dataclasses.replace(p, part_id=i + 1) for i, p in enumerate(kept + summary.manifest_parts)]
        rewritten = dataclasses.replace(
            manifest, run_id=repair_id, finished_at=datetime.now(UTC).isoformat(), parts=parts,
            part_count=len(parts), row_count=sum(p.rows for p in parts),
            **dict(zip(("column_checksums", "checksum_render"), run_level(parts), strict=True)))
        write_manifest_files(dest, rewritten)
        for part in moved:
            quarantine_object(dest, repair_id, part.path)
        return results
    finally:
        run.close()
