"""`rivet reconcile` and `rivet repair` for checkpointed chunked exports (docs/rivet-compat.md "Reconcile and repair").

Reconcile compares, per completed chunk of the latest chunk run, the source's
`COUNT(*)` of that window's query with the rows the checkpoint recorded: match /
mismatch / unknown. It never writes data (a clean report only advances the advisory
"verified" progression).

Repair re-exports each mismatched/unknown window of a completed task as NEW parts
(write_part_file → record_part, the per-part facade; never overwriting), and hands the rest
to its own finalize path, `finalize_repair` (finalize_repair.py): invariant check → the
destination manifest rewritten with those windows' old parts replaced (manifest.json →
copy → _SUCCESS) → old objects moved to `_quarantine/<repair_id>/` (nothing is deleted) →
checkpoint → journal, run ledger, metrics row and run report, labelled as a repair. The
repair first runs the schema-drift facade with policy `fail`, whatever the export's
policy: a window re-exported with another schema would sit in a manifest whose other
parts have the old one. A `table_format:` export's table is committed by the same finalize
path (one commit replacing the windows' files; rivet_core/tableformat/repair.py), and a
table a repair cannot keep true (a keyset-incremental chunked export's) is refused here,
before any window is re-exported.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rivet_core import __version__
from rivet_core.chunks import ChunkLayout, ChunkWindow
from rivet_core.chunks.sql import window_count_query
from rivet_core.config import ExportConfig, RivetConfig
from rivet_core.errors import (
    ConfigError,
    DataIntegrityError,
    RivetError,
    SchemaDriftError,
    exit_code_for,
)
from rivet_core.manifest import read_manifest, schema_fingerprint
from rivet_core.pipeline.facade.chunk_commit import attempt_key, export_window, part_prefixes
from rivet_core.pipeline.facade.commit import PartKind, record_part
from rivet_core.pipeline.facade.finalize_repair import RepairedWindow, finalize_repair
from rivet_core.pipeline.facade.run_store import commit_verified_progression
from rivet_core.pipeline.facade.schema_drift import check_schema_drift
from rivet_core.pipeline.single.job import RunOptions
from rivet_core.redact import redact_secrets
from rivet_core.runrecord.summary import RunSummary, new_run_id
from rivet_core.source import open_source
from rivet_core.source.query import dialect_for
from rivet_core.state import StateStore
from rivet_core.tableformat.repair import repair_refusal


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
    from rivet_core.pipeline.chunked.run import ChunkedRun

    if export.mode != "chunked" or not export.chunk_checkpoint:
        raise ConfigError(f"export '{export.name}': reconcile and repair need a chunked export with "
                          "chunk_checkpoint: true (they compare per-chunk counts recorded in the checkpoint); "
                          f"this export is mode '{export.mode}' — use `rivet validate` instead")
    cls = type("InspectChunkedRun", (ChunkedRun,), {"lock_mode": None}) if read_only else ChunkedRun
    return cls(config, export, RunOptions(ledger=False), notifications=None)


def _plan_for(run: Any, run_row: Any, tasks: list) -> ChunkLayout:
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
                except Exception as exc:  # error boundary: an uncountable window is "unknown"
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
        record_verified_progression(run.state, report)
        return report
    finally:
        run.close()


def record_verified_progression(state: StateStore, report: ReconcileReport) -> None:
    """A clean report (every window matched) advances the advisory "verified" progression,
    through RunStore's module (the only writer of progression)."""
    counts = report.counts()
    if counts["mismatch"] or counts["unknown"] or not report.checks:
        return
    commit_verified_progression(state, report.export_name, max(c.chunk_index for c in report.checks),
                                report.run_id)


@dataclass
class RepairResult:
    chunk_index: int
    status: str  # executed | skipped | failed
    rows_written: int | None = None
    detail: str | None = None


@dataclass
class RepairOutcome:
    """Per-window results and the repair's own summary (None when there was nothing to do)."""

    results: list[RepairResult]
    summary: RunSummary | None = None

    @property
    def exit_code(self) -> int:
        if self.summary is not None and self.summary.exit_code:
            return self.summary.exit_code
        return 1 if any(r.status != "executed" for r in self.results) else 0


class RepairIncomplete(RivetError):
    """Some windows were not repaired (re-export failed, or the task is not completed); the
    others were. The exit code is the first failing window's (errors.py), 1 for a skip."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message, code="repair_incomplete")
        self.exit_code = exit_code_for(cause)


def _repair_summary(run: Any, chunk_run_id: str) -> RunSummary:
    export, plan = run.export, run.plan
    # Milliseconds, as every run id (summary.new_run_id): two repairs in one second (a failed
    # one and its retry) must not share an id, or their metrics and run rows would merge.
    summary = RunSummary(run_id=new_run_id(f"{export.name}_repair"),
                         export_name=export.name, mode="repair", format=export.format,
                         compression=plan.writer_options.compression)
    summary.destination_kind, summary.destination_uri = run.dest.kind, run.dest.uri
    summary.tuning_profile, summary.source_engine = plan.tuning.profile, plan.engine
    summary.state_backed, summary.repair_of = True, chunk_run_id
    summary.extraction_strategy = "keyset" if run.chunk_plan.strategy == "keyset" else "chunked"
    summary.journal.record(
        "PlanResolved", export_name=export.name, base_query=export.resolved_query, strategy=plan.strategy,
        format=export.format, compression=summary.compression, destination_type=run.dest.kind,
        tuning_profile=plan.tuning.profile, validate=False, reconcile=False, resume=False, resumable=False,
        repair_of=chunk_run_id)
    return summary


def _gate_schema(run: Any, summary: RunSummary) -> None:
    """The drift facade with policy `fail` (module docstring)."""
    summary.schema_fingerprint = schema_fingerprint(run.output_schema)
    try:
        check_schema_drift(run.state, summary, run.output_schema, "fail")
    except SchemaDriftError as exc:
        raise SchemaDriftError(
            f"{exc} A repair never mixes schemas in one manifest: re-run the whole export instead of "
            "repairing it.") from exc


def _listed_parts_of(manifest: Any, export_name: str, chunk_run_id: str, task: Any) -> tuple[str, ...]:
    """The parts the manifest lists for one window: the attempt the checkpoint recorded (its
    rotated siblings too), and any part named for this window of this chunk run — an earlier
    repair whose manifest landed but whose checkpoint update did not (finalize_repair.py)."""
    recorded = attempt_key(task.file_name) if task.file_name else None
    named = tuple(f"{prefix}{task.chunk_index}_" for prefix in part_prefixes(export_name, chunk_run_id))
    return tuple(p.path for p in manifest.parts
                 if attempt_key(p.path) == recorded or p.path.rsplit("/", 1)[-1].startswith(named))


def execute_repair(config: RivetConfig, export: ExportConfig, report: ReconcileReport) -> RepairOutcome:
    """Re-export every mismatched/unknown window, then `finalize_repair` (module docstring)."""
    actions = [c for c in report.checks if c.status != "match"]
    if not actions:
        return RepairOutcome([])
    run = _chunked_run(config, export)
    try:
        state, dest = run.state, run.dest
        run_row = state.get_chunk_run(report.run_id)
        tasks = {t.chunk_index: t for t in state.list_chunk_tasks(report.run_id)}
        run.chunk_plan = _plan_for(run, run_row, list(tasks.values()))
        refusal = repair_refusal(run.plan)  # before any window is re-exported
        if refusal:
            raise ConfigError(refusal)
        found = read_manifest(dest)
        if found is None:
            raise DataIntegrityError(f"export '{export.name}': no manifest.json at {dest.uri} to repair")
        manifest = found[0]
        summary = run.summary = _repair_summary(run, report.run_id)
        run.open_ledger()
        results: list[RepairResult] = []
        windows: list[RepairedWindow] = []
        error: BaseException | None = None
        try:
            _gate_schema(run, summary)
            ctx = run.window_context(report.run_id)
            by_index = {w.index: w for w in run.chunk_plan.windows}
            first_failure: BaseException | None = None
            for action in actions:
                task = tasks[action.chunk_index]
                if task.status != "completed":
                    results.append(RepairResult(action.chunk_index, "skipped",
                                                detail=f"task is {task.status} — resume the run first"))
                    continue
                try:
                    result = export_window(ctx, by_index[action.chunk_index])
                except Exception as exc:  # error boundary: reported per action; the others go on
                    first_failure = first_failure or exc
                    results.append(RepairResult(action.chunk_index, "failed", detail=redact_secrets(exc)))
                    continue
                for record in result.records:
                    record_part(summary, state, record, PartKind.chunk(action.chunk_index))
                windows.append(RepairedWindow(
                    chunk_index=action.chunk_index, rows=result.rows,
                    new_paths=tuple(r.path for r in result.records),
                    replaces=_listed_parts_of(manifest, export.name, report.run_id, task),
                    old_file=task.file_name))
                results.append(RepairResult(action.chunk_index, "executed", rows_written=result.rows))
            left = [r.chunk_index for r in results if r.status != "executed"]
            if left:
                cause = first_failure or ConfigError("a chunk task that is not completed cannot be repaired")
                error = RepairIncomplete(
                    f"export '{export.name}': {len(left)} of {len(actions)} chunk(s) not repaired (chunks {left}; "
                    f"first: {redact_secrets(cause)}); the manifest lists their old parts", cause)
        except Exception as exc:  # error boundary: reported through finalize_repair
            error = exc
        finalize_repair(run.plan, summary, state, dest, previous=manifest, chunk_run_id=report.run_id,
                        windows=windows, error=error, report_root=config.config_dir)
        return RepairOutcome(results, summary)
    finally:
        run.close()
