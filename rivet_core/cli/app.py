"""The `rivet` command line: run, validate, state, metrics, journal, gc.

Exit codes (docs/operations.md "Exit codes"): 0 success, 1 config/generic, 2 transient, 3 data integrity
(quality gate, validation failure, unsafe retry), 4 schema drift with `fail`. A failing
command prints ONE clear line on stderr (`Error: …`), redacted; with `--json-errors` it
prints `{"error": …, "exit_class": n, "code": …}` instead. Logs go to stderr, data and
`--json` documents to stdout, so `rivet run … --json | jq` works — never both at once:
`run --json` is refused when an export streams to a stdout destination.
`validate --format json` prints `{exports: [{export_name, resolved_prefix, verification}],
warnings: [{export_name, warning}], errors: []}` (docs/rivet-compat.md "CLI output and exit codes"); a hard error aborts the
command with the one `Error:` line, so `errors` is always empty here.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

import click

from rivet_core import __version__
from rivet_core.cli.shared import config_option as _config_opt
from rivet_core.cli.shared import guard as _guard
from rivet_core.cli.shared import load as _load
from rivet_core.cli.shared import open_store as _store
from rivet_core.cli.shared import param_option as _param_opt
from rivet_core.cli.shared import worst_exit
from rivet_core.errors import RivetError
from rivet_core.redact import redact_secrets

log = logging.getLogger("rivet")


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact_secrets(super().format(record))


def _setup_logging(verbose: int) -> None:
    level = os.environ.get("RIVET_LOG", "").upper() or ("DEBUG" if verbose > 1 else "INFO" if verbose else "WARNING")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level, logging.WARNING))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rivet")
@click.option("--json-errors", is_flag=True, help="Print errors as JSON on stderr.")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def main(json_errors: bool, verbose: int) -> None:
    """Rivet: verifiable database exports to Parquet/CSV on local disk or S3."""
    from rivet_core.malloc_arenas import limit_malloc_arenas

    limit_malloc_arenas()  # before any reader/worker thread exists (see the module)
    _setup_logging(verbose)


# ---------------------------------------------------------------------------------- run
def _summary_lines(s: Any) -> list[str]:
    lines = [f"export {s.export_name}: {s.status.upper()}", f"  run_id:   {s.run_id}",
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


@main.command()
@_config_opt
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
              help="Incremental exports: ignore the cursor and export every row again.")
@_param_opt
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document with every run summary.")
@click.option("--progress", "progress_mode", type=click.Choice(["auto", "tty", "log", "none"]), default="auto",
              show_default=True, help="Progress on stderr: a live line on a terminal (tty), periodic log "
              "lines (log; interval RIVET_PROGRESS_INTERVAL seconds, default 10), or none.")
@_guard
def run(config_path: str, export_names: tuple[str, ...], validate: bool, resume: bool, force: bool,
        params: tuple[str, ...], as_json: bool, progress_mode: str = "auto", from_manifest: bool = False,
        full_refresh: bool = False, reconcile: bool = False) -> int:
    """Run exports."""
    validate = validate or reconcile  # Rivet: --reconcile implies --validate
    if from_manifest and full_refresh:
        raise RivetError("--from-manifest and --full-refresh contradict each other: continue from the "
                         "destination manifest's cursor, or export every row again — pass one of them")
    from rivet_core.pipeline.job import RunOptions, run_unit
    from rivet_core.progress import cli_tracker, resolve_mode
    from rivet_core.state import StateStore

    config = _load(config_path, params)
    exports = config.select(list(export_names) or None)
    streamed = [e.name for e in exports if e.destination.type == "stdout"]
    if as_json and streamed:
        raise RivetError(f"--json cannot be used with a stdout destination (export '{streamed[0]}'): the "
                         "JSON document would be mixed into the data stream — drop --json or write to "
                         "local/s3")
    from rivet_core.pipeline.lost_cursor import CursorLost
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
                if export.partition_by:  # one sub-export per date bucket (pipeline/buckets.py)
                    from rivet_core.pipeline.buckets import run_partitioned

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
    if as_json:
        click.echo(json.dumps({"runs": [summary_json(s) for s in summaries],
                               "refused": [{"export_name": e.export_name,
                                            "status": "locked" if isinstance(e, ExportLocked) else "cursor_lost",
                                            "exit_code": e.exit_code, "error": redact_secrets(e.message)}
                                           for e in refused]}, indent=2, default=str))
    return worst_exit([s.exit_code for s in summaries] + [e.exit_code for e in refused])


# ----------------------------------------------------------------------------- validate
def _with_run_id(export: Any, run_id: str | None) -> Any:
    """`{run_id}` in the destination path/prefix is kept verbatim by runs; `validate --run-id`
    renders it (docs/rivet-compat.md "File names and run ids") with the run token (`[A-Za-z0-9._-]`, as run copies name it)."""
    from rivet_core.manifest import run_token

    dest = export.destination
    update = {f: getattr(dest, f).replace("{run_id}", run_token(run_id)) for f in ("path", "prefix")
              if run_id and getattr(dest, f) and "{run_id}" in getattr(dest, f)}
    return export.model_copy(update={"destination": dest.model_copy(update=update)}) if update else export


def _validate_target(on_date: str | None, sub_prefix: str | None) -> tuple[Any, str]:
    """`--date` as a UTC datetime (None when absent) and `--prefix` as a clean relative
    sub-prefix ending in '/' ('' when absent); bad values are usage errors."""
    from datetime import UTC, datetime

    when = None
    if on_date:
        try:
            when = datetime.strptime(on_date, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError:
            raise RivetError(f"--date '{on_date}' must look like YYYY-MM-DD") from None
    sub = (sub_prefix or "").strip()
    if sub:
        parts = [p for p in sub.split("/") if p]
        if sub.startswith("/") or "\\" in sub or any(p in (".", "..") for p in parts) or not parts:
            raise RivetError(f"--prefix '{sub_prefix}' must be a relative sub-prefix of the export's "
                             "destination (no leading '/', no '..')")
        sub = "/".join(parts) + "/"
    return when, sub


@main.command()
@_config_opt
@click.option("-e", "--export", "export_names", multiple=True)
@click.option("--format", "fmt", type=click.Choice(["pretty", "json"]), default="pretty")
@click.option("--depth", type=click.Choice(["light", "sample", "full"]), default="full")
@click.option("--run-id", "run_id", help="Verify that run's manifest-<run_id>.json copy instead of manifest.json.")
@click.option("--date", "on_date", metavar="YYYY-MM-DD",
              help="The destination as of that day: a time-window export's partition <time_column>=<date>/, "
              "and {date} in the destination path.")
@click.option("--prefix", "sub_prefix", help="Verify this sub-prefix of the export's destination (a manifest "
              "must be there).")
@_param_opt
@_guard
def validate(config_path: str, export_names: tuple[str, ...], fmt: str, depth: str,
             params: tuple[str, ...], run_id: str | None = None, on_date: str | None = None,
             sub_prefix: str | None = None) -> int:
    """Verify each export's destination against its manifest and _SUCCESS (no source queries)."""
    # From plan.py, not api.py: the api module imports the whole engine (state, pipeline).
    from rivet_core.manifest import verify_at_destination
    from rivet_core.plan import export_destination, partition_prefixes

    config = _load(config_path, params)
    when, pinned_sub = _validate_target(on_date, sub_prefix)
    results, warnings, codes = [], [], []
    for export in config.select(list(export_names) or None):
        export = _with_run_id(export, run_id)
        dest = export_destination(config, export, create=False, now=when)  # validate has no side effects
        if not dest.supports_manifest:
            warnings.append({"export_name": export.name, "warning": "stdout destination has no manifest"})
            continue
        if run_id or when or pinned_sub:  # a pinned target: that run copy / day / sub-prefix only
            sub = pinned_sub or (f"{export.time_column}={on_date}/"
                                 if when and export.mode == "time_window" and export.time_column else "")
            target = export_destination(config, export, sub_prefix=sub, create=False, now=when)
            verdict = verify_at_destination(target, depth=depth, export_name=export.name, run_id=run_id,
                                            require_manifest=bool(sub))
            codes.append(verdict.exit_code())
            label = export.name + (f" [{sub.rstrip('/')}]" if sub else "") + (f" run {run_id}" if run_id else "")
            results.append({"export_name": label, "resolved_prefix": target.uri,
                            "verification": verdict.to_dict()})
            continue
        # A daily-partitioned export (written by the Dagster layer) has one manifest per day;
        # a partition_by export one per bucket under the prefix before its {partition} token.
        if export.partition_by:
            from rivet_core.pipeline.buckets import bucket_prefixes, bucket_targets, root_export

            root = root_export(export)
            targets = [(export_destination(config, root, sub_prefix=p, create=False), label, name)
                       for p, label, name in bucket_targets(export, bucket_prefixes(config, export))]
            targets = targets or [(export_destination(config, root, create=False), export.name, export.name)]
        else:
            prefixes = partition_prefixes(config, export) if dest.head("manifest.json") is None else []
            targets = [(export_destination(config, export, sub_prefix=p, create=False),
                        f"{export.name} [{p.rstrip('/')}]", export.name)
                       for p in prefixes] or [(dest, export.name, export.name)]
        for target, label, expected_name in targets:
            verdict = verify_at_destination(target, depth=depth, export_name=expected_name)
            codes.append(verdict.exit_code())
            results.append({"export_name": label, "resolved_prefix": target.uri,
                            "verification": verdict.to_dict()})
    if fmt == "json":
        click.echo(json.dumps({"exports": results, "warnings": warnings, "errors": []}, indent=2, default=str))
    else:
        for w in warnings:
            click.echo(f"{w['export_name']}: SKIPPED ({w['warning']})")
        for r in results:
            v = r["verification"]
            head = ("PASSED" if v["passed"] else "LEGACY (no manifest)" if v["legacy_run"] else "FAILED")
            click.echo(f"{r['export_name']}: {head}  {r['resolved_prefix']}")
            click.echo(f"  parts verified: {v['parts_verified']} (md5 {v['parts_md5_verified']}), "
                       f"failed: {v['parts_failed']}, _SUCCESS consistent: {v['success_marker_consistent']}")
            for f in v["failures"]:
                detail = ", ".join(f"{k}={x}" for k, x in f.items() if k not in ("kind", "code"))
                click.echo(f"  - {f['kind']}: {detail}")
    return worst_exit(codes)


# ----------------------------------------------------------------- reconcile / repair
def _print_reconcile(report_dict: dict, fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps(report_dict, indent=2, default=str))
        return
    s = report_dict["summary"]
    click.echo(f"{report_dict['export_name']} (run {report_dict['run_id']}): {s['matches']} match, "
               f"{s['mismatches']} mismatch, {s['unknown']} unknown — source {s['total_source_rows']} rows, "
               f"exported {s['total_exported_rows']}")
    for p in report_dict["partitions"]:
        if p["status"] != "match":
            click.echo(f"  {p['status'].upper():9} {p['identifier']}: {p.get('note', '')}")


@main.command()
@_config_opt
@click.option("-e", "--export", "export_name", required=True)
@click.option("--format", "fmt", type=click.Choice(["pretty", "json"]), default="pretty")
@_param_opt
@_guard
def reconcile(config_path: str, export_name: str, fmt: str, params: tuple[str, ...]) -> int:
    """Compare per-chunk source COUNT(*) with the rows each chunk exported (exit 3 on mismatch)."""
    from rivet_core.pipeline.reconcile import reconcile_export

    config = _load(config_path, params)
    report = reconcile_export(config, config.export(export_name))
    _print_reconcile(report.to_dict(), fmt)
    if report.counts()["unknown"]:
        click.echo("warning: some chunks could not be verified (unknown)", err=True)
    return report.exit_code()


@main.command()
@_config_opt
@click.option("-e", "--export", "export_name", required=True)
@click.option("--execute", is_flag=True, help="Re-export the mismatched chunks (default: dry run).")
@click.option("--format", "fmt", type=click.Choice(["pretty", "json"]), default="pretty")
@_param_opt
@_guard
def repair(config_path: str, export_name: str, execute: bool, fmt: str, params: tuple[str, ...]) -> int:
    """Plan (dry run) or execute the re-export of chunks that reconcile found wrong. Never deletes."""
    from rivet_core.pipeline.reconcile import execute_repair, reconcile_export

    config = _load(config_path, params)
    export = config.export(export_name)
    report = reconcile_export(config, export)
    actions = [c for c in report.checks if c.status != "match"]
    plan = {"export_name": export_name, "reconcile_run_id": report.run_id, "strategy": report.strategy,
            "actions": [{"chunk_index": c.chunk_index, "start_key": c.start_key, "end_key": c.end_key,
                         "reason": c.note or c.status} for c in actions]}
    if not execute:
        if fmt == "json":
            click.echo(json.dumps({"plan": plan, "executed": False}, indent=2))
        else:
            click.echo(f"repair plan for {export_name}: {len(actions)} chunk(s) to re-export (dry run; "
                       "add --execute)")
            for a in plan["actions"]:
                click.echo(f"  chunk {a['chunk_index']} [{a['start_key']}..{a['end_key']}]: {a['reason']}")
        return 0
    outcome = execute_repair(config, export, report)
    results, s = outcome.results, outcome.summary
    failed = [r for r in results if r.status == "failed"]
    executed = [r for r in results if r.status == "executed"]
    payload = {"plan": plan, "results": [r.__dict__ for r in results],
               "summary": {"planned": len(actions), "executed": len(executed),
                           "skipped": len(results) - len(executed) - len(failed),
                           "failed": len(failed), "rows_written": sum(r.rows_written or 0 for r in results)},
               "repair": None if s is None else {
                   "run_id": s.run_id, "status": s.status, "manifest_rewritten": s.manifest_written,
                   "error_message": s.error_message, "report": s.report_path, "warnings": s.warnings}}
    if fmt == "json":
        click.echo(json.dumps(payload, indent=2, default=str))
    else:
        rewritten = "manifest rewritten" if s is not None and s.manifest_written else "manifest unchanged"
        click.echo(f"repaired {payload['summary']['executed']} of {len(actions)} chunk(s) "
                   f"({payload['summary']['rows_written']} rows); {rewritten}")
        for r in results:
            if r.status != "executed":
                click.echo(f"  {r.status.upper()} chunk {r.chunk_index}: {r.detail}")
        if s is not None:
            if s.error_message:
                click.echo(f"error: {s.error_message}", err=True)
            if s.report_path:
                click.echo(f"report: {s.report_path}")
    return outcome.exit_code


# -------------------------------------------------------------------------------- state
@main.group()
def state() -> None:
    """Inspect or reset the state store."""


@state.command("show")
@_config_opt
@click.option("--json", "as_json", is_flag=True)
@_guard
def state_show(config_path: str, as_json: bool) -> int:
    """Show the incremental cursors."""
    rows = _store(config_path).list_cursors()
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in rows], indent=2))
    else:
        click.echo(f"{'EXPORT':30} {'LAST CURSOR':32} LAST RUN")
        for r in rows:
            click.echo(f"{r.export_name:30} {str(r.last_cursor_value):32} {r.last_run_at}")
    return 0


@state.command("files")
@_config_opt
@click.option("-e", "--export", "export_name")
@click.option("-l", "--last", default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@_guard
def state_files(config_path: str, export_name: str | None, last: int, as_json: bool) -> int:
    """List committed parts from the file log."""
    rows = _store(config_path).list_files(export_name, last)
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in rows], indent=2))
    else:
        click.echo(f"{'RUN_ID':40} {'FILE':48} {'ROWS':>10} {'BYTES':>12} CREATED_AT")
        for r in rows:
            click.echo(f"{r.run_id:40} {r.file_name:48} {r.row_count:>10} {r.bytes:>12} {r.created_at}")
    return 0


@state.command("reset")
@_config_opt
@click.option("-e", "--export", "export_name", required=True)
@_guard
def state_reset(config_path: str, export_name: str) -> int:
    """Clear an export's cursor (its next run re-exports everything)."""
    config = _load(config_path)
    config.export(export_name)  # unknown names → error listing known exports
    from rivet_core.pipeline.facade.run_store import reset_export_state
    from rivet_core.state import StateStore

    reset_export_state(StateStore.open(config.config_path), export_name)
    click.echo(f"State reset for export '{export_name}'")
    return 0


@state.command("chunks")
@_config_opt
@click.option("-e", "--export", "export_name", required=True)
@click.option("--json", "as_json", is_flag=True)
@_guard
def state_chunks(config_path: str, export_name: str, as_json: bool) -> int:
    """Show the latest chunk run of an export and its tasks."""
    config = _load(config_path)
    config.export(export_name)
    from rivet_core.state import StateStore

    store = StateStore.open(config.config_path)
    run = store.get_latest_chunk_run(export_name)
    if run is None:
        click.echo(f"no chunk run recorded for export '{export_name}'")
        return 0
    tasks = store.list_chunk_tasks(run.run_id)
    if as_json:
        click.echo(json.dumps({"run": run.__dict__, "tasks": [t.__dict__ for t in tasks]}, indent=2, default=str))
        return 0
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.status] = counts.get(t.status, 0) + 1
    click.echo(f"run {run.run_id}: {run.status}, plan {run.plan_hash}, "
               + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    click.echo(f"{'CHUNK':>6} {'STATUS':10} {'ATTEMPTS':>8} {'ROWS':>10} {'START':>14} {'END':>14} FILE / ERROR")
    for t in tasks:
        click.echo(f"{t.chunk_index:>6} {t.status:10} {t.attempts:>8} {t.rows_written if t.rows_written is not None else '':>10} "
                   f"{t.start_key or '-':>14} {t.end_key or '-':>14} {t.file_name or t.last_error or ''}")
    return 0


@state.command("reset-chunks")
@_config_opt
@click.option("-e", "--export", "export_name")
@click.option("--stuck-checkpoints", "stuck", is_flag=True, help="Only in-progress runs, of every export.")
@_guard
def state_reset_chunks(config_path: str, export_name: str | None, stuck: bool) -> int:
    """Delete chunk checkpoints (runs and tasks) so the next run plans afresh."""
    config = _load(config_path)
    if bool(export_name) == bool(stuck):
        raise RivetError("pass exactly one of -e EXPORT or --stuck-checkpoints")
    from rivet_core.state import StateStore

    store = StateStore.open(config.config_path)
    names = [export_name] if export_name else [e.name for e in config.exports]
    if export_name:
        config.export(export_name)
    removed = sum(store.reset_chunk_checkpoint(name, stuck_only=stuck) for name in names)
    click.echo(f"Removed {removed} chunk run(s)" + (f" for export '{export_name}'" if export_name else ""))
    return 0


@state.command("locks")
@_config_opt
@click.option("-e", "--export", "export_name")
@click.option("--json", "as_json", is_flag=True)
@_guard
def state_locks(config_path: str, export_name: str | None, as_json: bool) -> int:
    """Show who holds export locks (a running export, or Dagster chunk workers)."""
    rows = _store(config_path).list_export_locks(export_name)
    if as_json:
        click.echo(json.dumps([{**r.__dict__, "stale": r.stale_reason()} for r in rows], indent=2))
        return 0
    if not rows:
        click.echo("no export is locked")
    for r in rows:
        stale = r.stale_reason()
        click.echo(f"{r.lock_key}: {r.mode}, {r.describe()}" + (f" — STALE ({stale})" if stale else ""))
    return 0


@state.command("unlock")
@_config_opt
@click.option("-e", "--export", "export_name", required=True)
@click.option("--force", is_flag=True, help="Also clear a lock whose holder still runs on this host.")
@_guard
def state_unlock(config_path: str, export_name: str, force: bool) -> int:
    """Clear an export's lock left by a dead run (refuses a live holder on this host without --force)."""
    config = _load(config_path)
    config.export(export_name)
    from rivet_core.state import StateStore

    removed = StateStore.open(config.config_path).clear_export_locks(export_name, force=force)
    for r in removed:
        click.echo(f"cleared {r.lock_key}: {r.mode}, {r.describe()}")
    click.echo(f"Removed {len(removed)} lock(s) for export '{export_name}'")
    return 0


# ------------------------------------------------------------------------ metrics/journal
@main.command()
@_config_opt
@click.option("-e", "--export", "export_name")
@click.option("-l", "--last", default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@_guard
def metrics(config_path: str, export_name: str | None, last: int, as_json: bool) -> int:
    """Show recent run metrics."""
    rows = _store(config_path).list_metrics(export_name, last)
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return 0
    click.echo(f"{'EXPORT':24} {'RUN_ID':40} {'STATUS':8} {'ROWS':>10} {'FILES':>5} {'BYTES':>12} {'MS':>8} ERROR")
    for r in rows:
        click.echo(f"{r['export_name']:24} {r['run_id']:40} {r['status']:8} {r['total_rows'] or 0:>10} "
                   f"{r['files_committed'] or 0:>5} {r['bytes_written'] or 0:>12} {r['duration_ms'] or 0:>8} "
                   f"{r['error_message'] or ''}")
    return 0


@main.command()
@_config_opt
@click.option("-e", "--export", "export_name", required=True)
@click.option("-l", "--last", default=5, show_default=True)
@click.option("--run-id")
@_guard
def journal(config_path: str, export_name: str, last: int, run_id: str | None) -> int:
    """Show the event journal of recent runs."""
    for j in _store(config_path).list_journals(export_name, last, run_id):
        click.echo(f"run {j['run_id']}")
        for entry in j["entries"]:
            (name, fields), = entry["event"].items()
            brief = ", ".join(f"{k}={v}" for k, v in fields.items() if k != "base_query")
            click.echo(f"  {entry['recorded_at']}  {name}  {brief}")
    return 0


# ------------------------------------- init / check / plan / apply / doctor / gc (own modules)
from rivet_core.cli import check, doctor, gc, init, plan  # noqa: E402 - registered after `main` exists

main.add_command(init.init)
main.add_command(check.check)
main.add_command(plan.plan)
main.add_command(plan.apply)
main.add_command(doctor.doctor)
main.add_command(gc.gc)
