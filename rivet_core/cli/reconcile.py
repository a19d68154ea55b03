"""`rivet reconcile` (per-chunk source counts against what each chunk exported) and
`rivet repair` (re-export the chunks reconcile found wrong; a dry run unless --execute).
"""

from __future__ import annotations

import json
from typing import Any

import click

from rivet_core.cli.shared import config_option, guard, load, param_option, write_report


def _print_reconcile(report_dict: dict, fmt: str, output: str | None = None) -> None:
    if output is not None:
        write_report(output, json.dumps(report_dict, indent=2, default=str))
    if fmt == "json":
        click.echo(f"Reconcile report written to: {output}" if output is not None
                   else json.dumps(report_dict, indent=2, default=str))
        return
    s = report_dict["summary"]
    click.echo(f"{report_dict['export_name']} (run {report_dict['run_id']}): {s['matches']} match, "
               f"{s['mismatches']} mismatch, {s['unknown']} unknown — source {s['total_source_rows']} rows, "
               f"exported {s['total_exported_rows']}")
    for p in report_dict["partitions"]:
        if p["status"] != "match":
            click.echo(f"  {p['status'].upper():9} {p['identifier']}: {p.get('note', '')}")


@click.command()
@config_option
@click.option("-e", "--export", "export_name", required=True)
@click.option("--format", "fmt", type=click.Choice(["pretty", "json"]), default="pretty")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False),
              help="Also write the JSON report to this file (Rivet's flag; with --format json, instead of stdout).")
@param_option
@guard
def reconcile(config_path: str, export_name: str, fmt: str, params: tuple[str, ...],
              output: str | None = None) -> int:
    """Compare per-chunk source COUNT(*) with the rows each chunk exported (exit 3 on mismatch)."""
    from rivet_core.pipeline.chunked.reconcile import reconcile_export

    config = load(config_path, params)
    report = reconcile_export(config, config.export(export_name))
    _print_reconcile(report.to_dict(), fmt, output)
    counts = report.counts()
    if counts["unknown"]:
        click.echo("warning: some chunks could not be verified (unknown)", err=True)
    if counts["mismatch"]:  # the verdict on stderr as Rivet's, the report stays on stdout
        click.echo(f"Error: reconcile: {counts['mismatch']} of {len(report.checks)} chunk(s) disagree with the "
                   f"source — see the report above; re-export them with `rivet repair -c {config_path} -e "
                   f"{export_name} --execute`", err=True)
    return report.exit_code()


def _reconcile_for_repair(config: Any, export: Any, report_path: str | None) -> tuple[Any, list[str]]:
    """The reconcile report repair works from: counted afresh, or read from `--report` and
    checked against the checkpoint (rivet_core/ops/reconcile_report.py) — with the partitions
    it names that cannot be repaired."""
    from rivet_core.pipeline.chunked.reconcile import reconcile_export

    if report_path is None:
        return reconcile_export(config, export), []
    from rivet_core.ops.reconcile_report import check_against_checkpoint, read_reconcile_report
    from rivet_core.state import StateStore

    if export.mode != "chunked" or not export.chunk_checkpoint:
        reconcile_export(config, export)  # its refusal names the mode and the fix
    report, skipped = read_reconcile_report(report_path, export.name)
    store = StateStore.open(config.config_path)
    try:
        check_against_checkpoint(report_path, report, store)
    finally:
        store.close()
    return report, skipped


@click.command()
@config_option
@click.option("-e", "--export", "export_name", required=True)
@click.option("--report", "report_path", type=click.Path(dir_okay=False),
              help="A report from `rivet reconcile --format json -o FILE` (Rivet's flag): repair the chunks it "
                   "names instead of counting the source again; refused unless it still matches the checkpoint.")
@click.option("--execute", is_flag=True, help="Re-export the mismatched chunks (default: dry run).")
@click.option("--format", "fmt", type=click.Choice(["pretty", "json"]), default="pretty")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False),
              help="Also write the JSON plan (and, with --execute, its results) to this file (Rivet's flag).")
@param_option
@guard
def repair(config_path: str, export_name: str, execute: bool, fmt: str, params: tuple[str, ...],
           output: str | None = None, report_path: str | None = None) -> int:
    """Plan (dry run) or execute the re-export of chunks that reconcile found wrong. Never deletes."""
    from rivet_core.pipeline.chunked.reconcile import execute_repair

    config = load(config_path, params)
    export = config.export(export_name)
    report, skipped = _reconcile_for_repair(config, export, report_path)
    actions = [c for c in report.checks if c.status != "match"]
    plan = {"export_name": export_name, "reconcile_run_id": report.run_id, "strategy": report.strategy,
            "actions": [{"chunk_index": c.chunk_index, "start_key": c.start_key, "end_key": c.end_key,
                         "reason": c.note or c.status} for c in actions], "skipped": skipped}
    for reason in skipped:
        click.echo(f"warning: repair: {reason} — not repaired", err=True)
    if not execute:
        if output is not None:
            write_report(output, json.dumps({"plan": plan, "executed": False}, indent=2))
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
    if output is not None:
        write_report(output, json.dumps(payload, indent=2, default=str))
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
