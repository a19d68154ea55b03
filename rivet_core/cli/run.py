"""`rivet run`: run exports, print a summary per export (`--json`: one document), exit
with the most severe exit class of them (shared.worst_exit).
"""

from __future__ import annotations

import json
from typing import Any

import click

from rivet_core.cli.shared import config_option, guard, load, param_option, worst_exit
from rivet_core.errors import RivetError
from rivet_core.redact import redact_secrets


def _summary_lines(s: Any) -> list[str]:
    lines = [f"export {s.export_name}: {s.status.upper()}", f"  run_id:   {s.run_id}", f"  status:   {s.status}",
             f"  rows:     {s.total_rows}", f"  files:    {s.files_committed} ({s.bytes_written} bytes)",
             f"  output:   {s.destination_uri}", f"  duration: {s.duration_ms} ms, peak RSS {s.peak_rss_mb} MB"]
    if s.cursor_column and s.cursor_high is None:
        lines.append(f"  cursor:   {s.cursor_column} stays at {s.cursor_low} (no new rows)")
    elif s.cursor_column:
        lines.append(f"  cursor:   {s.cursor_column} {s.cursor_low} -> {s.cursor_high}"
                     f"{'' if s.cursor_committed else ' (NOT committed)'}")
    if s.skip_reason:
        lines.append(f"  skipped:  {s.skip_reason}")
    if s.validated is not None:
        lines.append(f"  validated: {'PASSED' if s.validated else 'FAILED'}")
    if s.reconciled is not None:
        lines.append(f"  reconcile: {'MATCH' if s.reconciled else 'MISMATCH'} (source count {s.source_row_count})")
    if s.schema_changed:
        lines.append("  schema:   CHANGED")
    if s.retries:
        lines.append(f"  retries:  {s.retries}")
    if s.error_message:
        lines.append(f"  error:    {s.error_message}")
    if s.report_path:
        lines.append(f"  report:   {s.report_path}")
    return lines


def summary_json(s: Any) -> dict[str, Any]:
    return {
        "run_id": s.run_id, "export_name": s.export_name, "status": s.status, "exit_code": s.exit_code,
        "rows": s.total_rows, "files": s.files_committed, "bytes_written": s.bytes_written,
        "destination_uri": s.destination_uri, "duration_ms": s.duration_ms, "peak_rss_mb": s.peak_rss_mb,
        "cursor_column": s.cursor_column, "cursor_low": s.cursor_low, "cursor_high": s.cursor_high,
        "cursor_committed": s.cursor_committed, "validated": s.validated, "schema_changed": s.schema_changed,
        "source_row_count": s.source_row_count, "reconciled": s.reconciled,
        "skip_reason": s.skip_reason, "retries": s.retries, "error": s.error_message,
        "report": s.report_path, "parts": [p.path for p in s.manifest_parts], "warnings": s.warnings,
    }


def _write_summary(path: str, document: str) -> None:
    """`--summary-output`: the run's JSON document, written whole (temp file, then rename) so
    a scheduler never reads half of it. A failure is a warning: the runs themselves are done."""
    import os
    from pathlib import Path

    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(document + "\n", encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        click.echo(f"warning: --summary-output: cannot write {path}: {exc.strerror or exc}", err=True)


@click.command()
@config_option
@click.option("-e", "--export", "export_names", multiple=True, help="Export(s) to run (default: all).")
@click.option("--validate", is_flag=True, help="Verify the destination against the manifest after the run.")
@click.option("--reconcile", is_flag=True,
              help="Count the export's query in its own snapshot; a difference with the rows written fails "
              "the run (exit 3) before anything is published. Implies --validate.")
@click.option("--resume", is_flag=True, help="Continue the in-progress checkpointed chunk run.")
@click.option("--force", is_flag=True, help="With --resume: allow resuming into a prefix that holds _SUCCESS.")
@click.option("--from-manifest", "from_manifest", is_flag=True,
              help="Incremental exports whose state store has no cursor (lost or replaced): continue from the "
              "cursor_high recorded in the destination's manifest.json.")
@click.option("--full-refresh", "full_refresh", is_flag=True,
              help="Incremental exports: ignore the cursor and export every row again. A Delta/Iceberg "
              "table export (incremental, full, chunked) commits an overwrite: a new baseline, also past "
              "another writer's commit.")
@param_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document with every run summary.")
@click.option("--summary-output", "summary_output", type=click.Path(dir_okay=False),
              help="Also write that JSON document to this file (Rivet's flag; the directory is created).")
@click.option("--parallel-exports", "parallel_exports", is_flag=True,
              help="Rivet's flag: accepted for one export; several exports are refused (they run one after "
              "the other here — run them as separate processes, or as assets of the orchestrator integration).")
@click.option("--parallel-export-processes", "parallel_processes", is_flag=True,
              help="As --parallel-exports.")
@click.option("--progress", "progress_mode", type=click.Choice(["auto", "tty", "log", "none"]), default="auto",
              show_default=True, help="Progress on stderr: a live line on a terminal (tty), periodic log "
              "lines (log; interval RIVET_PROGRESS_INTERVAL seconds, default 10), or none.")
@guard
def run(config_path: str, export_names: tuple[str, ...], validate: bool, resume: bool, force: bool,
        params: tuple[str, ...], as_json: bool, progress_mode: str = "auto", from_manifest: bool = False,
        full_refresh: bool = False, reconcile: bool = False, summary_output: str | None = None,
        parallel_exports: bool = False, parallel_processes: bool = False) -> int:
    """Run exports."""
    validate = validate or reconcile  # Rivet: --reconcile implies --validate
    if force and not resume:  # Rivet says so too: a typo'd flag must not pass silently
        click.echo("warning: --force without --resume is a no-op (force only overrides the resume gate "
                   "against a destination prefix whose _SUCCESS is already present)", err=True)
    if from_manifest and full_refresh:
        raise RivetError("--from-manifest and --full-refresh contradict each other: continue from the "
                         "destination manifest's cursor, or export every row again — pass one of them")
    from rivet_core.pipeline.runner import run_unit
    from rivet_core.pipeline.single.job import RunOptions
    from rivet_core.reporting.progress import cli_tracker, resolve_mode
    from rivet_core.state import StateStore

    config = load(config_path, params)
    exports = config.select(list(export_names) or None)
    if (parallel_exports or parallel_processes) and len(exports) > 1:
        flag = "--parallel-exports" if parallel_exports else "--parallel-export-processes"
        raise RivetError(f"{flag}: {len(exports)} exports selected, and this rivet runs the exports of one "
                         "command one after the other — drop the flag, run one `rivet run -e <export>` process "
                         "per export, or run them as assets of the orchestrator integration (docs/rivet-compat.md \"Rivet's CLI matrix\")")
    streamed = [e.name for e in exports if e.destination.type == "stdout"]
    if as_json and streamed:
        raise RivetError(f"--json cannot be used with a stdout destination (export '{streamed[0]}'): the "
                         "JSON document would be mixed into the data stream — drop --json or write to "
                         "local/s3")
    from rivet_core.pipeline.single.lost_cursor import CursorLost
    from rivet_core.state import ExportLocked

    state = StateStore.open(config.config_path)
    summaries = []
    refused: list[ExportLocked | CursorLost] = []
    try:
        for export in exports:
            try:
                tracker = (None if export.partition_by  # its buckets run without a bar
                           else cli_tracker(config, export, resolve_mode(progress_mode)))
                options = RunOptions(validate=validate, resume=resume, force=force, progress=tracker,
                                     from_manifest=from_manifest, full_refresh=full_refresh, reconcile=reconcile)
                if export.partition_by:  # one sub-export per date bucket (pipeline/buckets/run.py)
                    from rivet_core.pipeline.buckets.run import run_partitioned

                    result = run_partitioned(config, export, options, state=state)
                    for _bucket, bucket_summary in result.buckets[:-1]:
                        click.echo("\n".join(_summary_lines(bucket_summary)), err=True)
                    summaries.extend(s for _, s in result.buckets)
                    if not result.buckets:
                        summaries.append(result.summary)
                else:
                    summaries.append(run_unit(config, export, options, state=state))
            except (ExportLocked, CursorLost) as exc:  # refused before anything was read or written
                refused.append(exc)
                click.echo(f"Error: {redact_secrets(exc.message)}", err=True)
                continue
            if tracker is not None:
                tracker.finish()
            s = summaries[-1]
            click.echo("\n".join(_summary_lines(s)), err=True)
    finally:
        state.close()
    if as_json or summary_output:
        document = json.dumps({"runs": [summary_json(s) for s in summaries],
                               "refused": [{"export_name": e.export_name,
                                            "status": "locked" if isinstance(e, ExportLocked) else e.code,
                                            "exit_code": e.exit_code, "error": redact_secrets(e.message)}
                                           for e in refused]}, indent=2, default=str)
        if as_json:
            click.echo(document)
        if summary_output:
            _write_summary(summary_output, document)
    return worst_exit([s.exit_code for s in summaries] + [e.exit_code for e in refused])
