"""`rivet gc -c rivet.yaml [EXPORT…] [--dry-run]`: retention on demand (rivet_core/pipeline/retention/gc.py).

Which runs to keep comes from each export's `retention:` block; `--keep-runs`, `--keep-days`
and `--grace-hours` replace it for this call (a rule given here replaces both keep rules of
the block; the grace period falls back to the block's, else 24 h). Without exports named,
every export that has a `retention:` block is cleaned. Each step is printed (with
`--dry-run`: what would be done, and nothing is changed anywhere) and journaled
(`rivet journal -e EXPORT` shows run `<export>_gc_<stamp>`).

Every entry point goes through one policy (`rivet_core.pipeline.retention.gc.policy_for`): rules given
here get the bounds of a `retention:` block, and an export gc must never clean (a Delta or
Iceberg table, stdout) is refused whichever way the rules came.

Exit codes: 0 done (or nothing to do); 1 a step failed (the rest went on; run it again), no
rule says what to keep, a rule out of bounds, or an export gc never cleans; 2 the export is
locked by a run (retry later); 3 gc refused a prefix that holds a table or another export's
trail (nothing moved there; the message names it and the fix).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from rivet_core.cli.shared import config_option, guard, load, param_option

if TYPE_CHECKING:
    from collections.abc import Callable

    from rivet_core.config import ExportConfig
    from rivet_core.pipeline.retention.gc import GcReport


@click.command("gc")
@config_option
@click.argument("exports", nargs=-1)
@click.option("-e", "--export", "export_opts", multiple=True, help="Export to clean (repeatable; also positional).")
@click.option("--dry-run", is_flag=True, help="Print the steps; change nothing.")
# The ranges in the help are RETENTION_BOUNDS (config/limits.py; not imported here: start-up
# stays light); policy_for checks the values against them.
@click.option("--keep-runs", type=int, help="Keep the last N runs, 1 to 1000000 (replaces the config's rules).")
@click.option("--keep-days", type=float,
              help="Keep the runs of the last D days, above 0 up to 36600 (replaces the config's rules).")
@click.option("--grace-hours", type=float,
              help="Delete what spent this long in quarantine, 0 to 87600 (default: the config's, else 24).")
@param_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of lines.")
@guard
def gc(config_path: str, exports: tuple[str, ...], export_opts: tuple[str, ...], dry_run: bool,
       keep_runs: int | None, keep_days: float | None, grace_hours: float | None, params: tuple[str, ...],
       as_json: bool) -> int:
    """Move superseded files to _quarantine/gc/ and delete what outlived its grace period."""
    from rivet_core.errors import ConfigError
    from rivet_core.pipeline.retention.gc import policy_for, refuse_gc, run_gc

    config = load(config_path, params)
    named = list(dict.fromkeys([*exports, *export_opts]))
    selected = config.select(named or None)
    rules = {"keep_runs": keep_runs, "keep_days": keep_days, "grace_hours": grace_hours}
    if not named:
        selected = [e for e in selected if e.retention is not None or keep_runs is not None or keep_days is not None]
        selected = [e for e in selected if _cleanable(e, refuse_gc, as_json)]
        if not selected:
            raise ConfigError("no export has a `retention:` block — name the export and pass --keep-runs N "
                              "or --keep-days D, or add `retention: {keep_runs: N}` to it")
    policies = {}
    for export in selected:
        policy = policy_for(export, **rules)
        if policy is None:
            raise ConfigError(f"export '{export.name}' has no `retention:` block, so gc does not know what to keep "
                              f"— pass --keep-runs N or --keep-days D, or add `retention: {{keep_runs: N}}` to it")
        policies[export.name] = policy
    reports: list[GcReport] = []
    for export in selected:
        reports += run_gc(config, export, policies[export.name], dry_run=dry_run)
    if as_json:
        click.echo(json.dumps({"dry_run": dry_run, "prefixes": [r.to_dict() for r in reports]}, indent=2,
                              default=str))
    else:
        for report in reports:
            click.echo("\n".join(report.lines()))
    return 3 if any(r.refused for r in reports) else 1 if any(r.failed for r in reports) else 0


def _cleanable(export: ExportConfig, refuse_gc: Callable[[ExportConfig], None], quiet: bool) -> bool:
    """Without exports named, one gc never cleans (a table, stdout) is skipped with its
    reason rather than stopping the others; named, it is refused (exit 1)."""
    from rivet_core.errors import ConfigError

    try:
        refuse_gc(export)
    except ConfigError as exc:
        if not quiet:
            click.echo(f"{export.name}: skipped — {exc.message}")
        return False
    return True
