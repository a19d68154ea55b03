"""`rivet state …`: inspect or reset the state store (cursors, file log, chunk checkpoints,
export locks).
"""

from __future__ import annotations

import json

import click

from rivet_core.cli.shared import config_option, guard, load, open_store
from rivet_core.errors import ConfigError, RivetError
from rivet_core.orchestrator import with_legacy_run_id


@click.group()
def state() -> None:
    """Inspect or reset the state store."""


@state.command("show")
@config_option
@click.option("--json", "as_json", is_flag=True)
@guard
def state_show(config_path: str, as_json: bool) -> int:
    """Show the incremental cursors."""
    rows = open_store(config_path).list_cursors()
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in rows], indent=2))
    else:
        click.echo(f"{'EXPORT':30} {'LAST CURSOR':32} LAST RUN")
        for r in rows:
            click.echo(f"{r.export_name:30} {str(r.last_cursor_value):32} {r.last_run_at}")
    return 0


@state.command("progression")
@config_option
@click.option("-e", "--export", "export_name", help="One export (default: every export of the config).")
@click.option("--json", "as_json", is_flag=True)
@guard
def state_progression(config_path: str, export_name: str | None, as_json: bool) -> int:
    """Show each export's committed and verified boundaries (Rivet's `state progression`)."""
    config = load(config_path)
    names = [export_name] if export_name else [e.name for e in config.exports]
    if export_name:
        config.export(export_name)  # an unknown name is an error naming the known ones
    store = open_store(config_path)
    rows = {name: store.get_progression(name) for name in names}
    if as_json:
        click.echo(json.dumps({n: (dict(r) if r is not None else None) for n, r in rows.items()}, indent=2,
                              default=str))
        return 0
    for name, row in rows.items():
        if row is None:
            click.echo(f"{name}: no progression recorded yet")
            continue
        click.echo(f"{name}:")
        for key, value in dict(row).items():
            if key != "export_name" and value is not None:
                click.echo(f"  {key:32} {value}")
    return 0


@state.command("files")
@config_option
@click.option("-e", "--export", "export_name")
@click.option("-l", "--last", default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@guard
def state_files(config_path: str, export_name: str | None, last: int, as_json: bool) -> int:
    """List committed parts from the file log."""
    rows = open_store(config_path).list_files(export_name, last)
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in rows], indent=2))
    else:
        click.echo(f"{'RUN_ID':40} {'FILE':48} {'ROWS':>10} {'BYTES':>12} CREATED_AT")
        for r in rows:
            click.echo(f"{r.run_id:40} {r.file_name:48} {r.row_count:>10} {r.bytes:>12} {r.created_at}")
    return 0


@state.command("reset")
@config_option
@click.option("-e", "--export", "export_name", required=True)
@guard
def state_reset(config_path: str, export_name: str) -> int:
    """Clear an export's cursor (its next run re-exports everything)."""
    config = load(config_path)
    if export_name not in {e.name for e in config.exports}:  # Rivet's wording, nothing deleted
        raise ConfigError(f"export '{export_name}' not found in config {config_path}. Known exports: "
                          f"{', '.join(e.name for e in config.exports)}. Hint: check the spelling, or list "
                          f"the exports with state with `rivet state show -c {config_path}`")
    from rivet_core.pipeline.facade.run_store import reset_export_state
    from rivet_core.state import StateStore

    reset_export_state(StateStore.open(config.config_path), export_name)
    click.echo(f"State reset for export '{export_name}'")
    return 0


@state.command("chunks")
@config_option
@click.option("-e", "--export", "export_name", required=True)
@click.option("--json", "as_json", is_flag=True)
@guard
def state_chunks(config_path: str, export_name: str, as_json: bool) -> int:
    """Show the latest chunk run of an export and its tasks."""
    config = load(config_path)
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
@config_option
@click.option("-e", "--export", "export_name")
@click.option("--stuck-checkpoints", "stuck", is_flag=True, help="Only in-progress runs, of every export.")
@guard
def state_reset_chunks(config_path: str, export_name: str | None, stuck: bool) -> int:
    """Delete chunk checkpoints (runs and tasks) so the next run plans afresh."""
    config = load(config_path)
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
@config_option
@click.option("-e", "--export", "export_name")
@click.option("--json", "as_json", is_flag=True)
@guard
def state_locks(config_path: str, export_name: str | None, as_json: bool) -> int:
    """Show who holds export locks (a running export, or an orchestrator's chunk workers)."""
    rows = open_store(config_path).list_export_locks(export_name)
    if as_json:
        click.echo(json.dumps([with_legacy_run_id({**r.__dict__, "stale": r.stale_reason()}) for r in rows],
                              indent=2))
        return 0
    if not rows:
        click.echo("no export is locked")
    for r in rows:
        stale = r.stale_reason()
        click.echo(f"{r.lock_key}: {r.mode}, {r.describe()}" + (f" — STALE ({stale})" if stale else ""))
    return 0


@state.command("unlock")
@config_option
@click.option("-e", "--export", "export_name", required=True)
@click.option("--force", is_flag=True, help="Also clear a lock whose holder still runs on this host.")
@guard
def state_unlock(config_path: str, export_name: str, force: bool) -> int:
    """Clear an export's lock left by a dead run (refuses a live holder on this host without --force)."""
    config = load(config_path)
    config.export(export_name)
    from rivet_core.state import StateStore

    removed = StateStore.open(config.config_path).clear_export_locks(export_name, force=force)
    for r in removed:
        click.echo(f"cleared {r.lock_key}: {r.mode}, {r.describe()}")
    click.echo(f"Removed {len(removed)} lock(s) for export '{export_name}'")
    return 0


#: Rivet's `state loads` lines for an empty ledger (its src/cli/dispatch.rs `empty_loads_message`).
NO_LOADS = "no loads recorded in the state DB yet"


@state.command("loads")
@config_option
@click.option("-t", "--target", help="Only loads into this fully-qualified target (proj.ds.table).")
@click.option("-l", "--last", default=50, show_default=True, type=click.IntRange(min=0),
              help="Number of recent loads to show.")
@guard
def state_loads(config_path: str, target: str | None, last: int) -> int:
    """Show the load ledger (Rivet's `rivet load` runs). This tool has no `rivet load`, so the
    ledger is always empty: the command says so in Rivet's words, and names the reason on stderr."""
    load(config_path)  # a missing or invalid config is an error, as for every `state` command
    if last == 0:  # Rivet: a zero-row request prints nothing
        return 0
    click.echo(f"no loads match --target '{target}'" if target else NO_LOADS)
    click.echo("note: this tool has no `rivet load` (warehouse loads are out of its scope), so nothing is ever "
               "recorded in the load ledger", err=True)
    return 0
