"""`rivet metrics` and `rivet journal`: what recent runs did, read from the state store."""

from __future__ import annotations

import json

import click

from rivet_core.cli.shared import config_option, guard, load, open_store


@click.command()
@config_option
@click.option("-e", "--export", "export_name")
@click.option("-l", "--last", default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@guard
def metrics(config_path: str, export_name: str | None, last: int, as_json: bool) -> int:
    """Show recent run metrics."""
    rows = open_store(config_path).list_metrics(export_name, last)
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return 0
    click.echo(f"{'EXPORT':24} {'RUN_ID':40} {'STATUS':8} {'ROWS':>10} {'FILES':>5} {'BYTES':>12} {'MS':>8} ERROR")
    for r in rows:
        click.echo(f"{r['export_name']:24} {r['run_id']:40} {r['status']:8} {r['total_rows'] or 0:>10} "
                   f"{r['files_committed'] or 0:>5} {r['bytes_written'] or 0:>12} {r['duration_ms'] or 0:>8} "
                   f"{r['error_message'] or ''}")
    return 0


@click.command()
@config_option
@click.option("-e", "--export", "export_name", required=True)
@click.option("-l", "--last", default=5, show_default=True)
@click.option("--run-id")
@guard
def journal(config_path: str, export_name: str, last: int, run_id: str | None) -> int:
    """Show the event journal of recent runs."""
    journals = open_store(config_path).list_journals(export_name, last, run_id)
    if not journals and run_id is None:
        _require_export(config_path, export_name)
    for j in journals:
        click.echo(f"run {j['run_id']}")
        for entry in j["entries"]:
            (name, fields), = entry["event"].items()
            brief = ", ".join(f"{k}={v}" for k, v in fields.items() if k != "base_query")
            click.echo(f"  {entry['recorded_at']}  {name}  {brief}")
    return 0


def _require_export(config_path: str, export_name: str) -> None:
    """No journal for `export_name`: an export the config does not declare is an error (exit 1,
    as Rivet's), naming the known ones; a declared export that never ran is an empty journal."""
    from rivet_core.errors import ConfigError

    try:
        config = load(config_path, ())
    except ConfigError:  # a config that needs --param values: nothing to check the name against
        return
    config.export(export_name)
