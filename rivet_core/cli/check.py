"""`rivet check`: what will go wrong before it does (see introspect/diagnose.py).

Exit codes: 0 when every export could be diagnosed (whatever the verdicts); 1 when an export
could not be (missing table or column, unplannable chunking) or, with `--strict`, when any
column is lossy or unsupported — a CI gate for "every column maps exactly".
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from rivet_core.cli.shared import config_option, guard, parse_params

if TYPE_CHECKING:  # cli/app.py imports this module to register `check`: keep pyarrow/pydantic out
    from rivet_core.introspect.diagnose import ExportDiagnosis


def run_checks(config_path: str, export_names: tuple[str, ...],
               params: dict[str, str]) -> list[ExportDiagnosis]:
    """Diagnose the selected exports on one source session (one snapshot)."""
    from rivet_core.config import load_config
    from rivet_core.introspect.diagnose import diagnose_export
    from rivet_core.source import open_source

    config = load_config(config_path, params)
    exports = config.select(list(export_names) or None)
    tuning = exports[0].resolved_tuning(config.source)
    with open_source(config.source_url(), tuning, engine=config.source.type) as session:
        return [diagnose_export(session, export) for export in exports]


def _print(diags: list[ExportDiagnosis], type_report: bool) -> None:
    for d in diags:
        click.echo(f"export {d.export_name}: {d.verdict.upper()}")
        click.echo(f"  strategy:     {d.strategy}")
        click.echo(f"  row estimate: {'unknown' if d.row_estimate is None else f'~{d.row_estimate:,}'}")
        click.echo(f"  row width:    {'unknown' if d.row_width_bytes is None else f'~{d.row_width_bytes:,.0f} B'}")
        if d.access_column:
            indexed = {True: "yes", False: "no", None: "unknown"}[d.indexed]
            explain = d.access.detail if d.access else "-"
            click.echo(f"  access:       {d.access_column} (indexed: {indexed}; EXPLAIN: {explain})")
        click.echo(f"  verdict:      {d.verdict} — {d.reason}")
        for w in d.warnings:
            click.echo(f"  warning:      {w}")
        if type_report and d.columns:
            width = max(6, *(len(c.name) for c in d.columns))
            click.echo(f"  {'COLUMN':{width}}  {'SOURCE TYPE':24} {'ARROW TYPE':28} FIDELITY")
            for c in d.columns:
                note = f"  ({c.note})" if c.note and c.fidelity != "exact" else ""
                click.echo(f"  {c.name:{width}}  {c.source_type:24} {c.arrow_text:28} {c.fidelity}{note}")


@click.command("check")
@config_option
@click.option("-e", "--export", "export_names", multiple=True, help="Export(s) to check (default: all).")
@click.option("-p", "--param", "params", multiple=True, metavar="K=V", help="Value for ${K} in the config.")
@click.option("--type-report", is_flag=True, help="Per column: source type → Arrow type → fidelity.")
@click.option("--strict", is_flag=True, help="Exit 1 when any column is lossy or unsupported.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@guard
def check(config_path: str, export_names: tuple[str, ...], params: tuple[str, ...],
          type_report: bool, strict: bool, as_json: bool) -> int:
    """Diagnose exports: strategy, size, index use (EXPLAIN), verdict, type fidelity."""
    from rivet_core.introspect.fidelity import LOSSY, UNSUPPORTED  # heavy (pyarrow): only when run

    diags = run_checks(config_path, export_names, parse_params(params))
    problems = [(d.export_name, c) for d in diags for c in d.columns if c.fidelity in (LOSSY, UNSUPPORTED)]
    strict_failed = strict and bool(problems)
    if as_json:
        click.echo(json.dumps({"exports": [d.to_dict(type_report) for d in diags],
                               "strict": strict, "strict_failed": strict_failed}, indent=2, default=str))
    else:
        _print(diags, type_report)
    errors = [d for d in diags if d.error]
    for d in errors:
        click.echo(f"Error: export '{d.export_name}': {d.error}", err=True)
    if strict_failed:
        listed = ", ".join(f"{name}.{c.name} ({c.fidelity})" for name, c in problems)
        click.echo(f"Error: --strict: {len(problems)} column(s) are not exact: {listed} — fix the "
                   "`columns:` overrides or cast in the query (see --type-report)", err=True)
    return 1 if errors or strict_failed else 0
