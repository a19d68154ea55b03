"""`rivet check`: what will go wrong before it does (see introspect/diagnose.py).

Exit codes: 0 when every export could be diagnosed (whatever the verdicts); 1 when an export
could not be (missing table or column, unplannable chunking, a destination that cannot be
opened — Rivet's "destination preflight", e.g. an unset credential variable) or, with
`--strict`, when any column is lossy or unsupported — a CI gate for "every column maps exactly".
The type names follow Rivet's (check_names.py), and `--json` is one compact line.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from rivet_core.cli.shared import config_option, guard, parse_params

if TYPE_CHECKING:  # cli/app.py imports this module to register `check`: keep pyarrow/pydantic out
    from rivet_core.introspect.diagnose import ExportDiagnosis


def run_checks(config_path: str, export_names: tuple[str, ...],
               params: dict[str, str]) -> tuple[str, list[ExportDiagnosis]]:
    """The source engine and the diagnosis of each selected export, on one source session
    (one snapshot)."""
    from rivet_core.config import load_config
    from rivet_core.introspect.diagnose import diagnose_export
    from rivet_core.source import open_source

    config = load_config(config_path, params)
    exports = config.select(list(export_names) or None)
    tuning = exports[0].resolved_tuning(config.source)
    with open_source(config.source_url(), tuning, engine=config.source.type) as session:
        diags = [diagnose_export(session, export) for export in exports]
    for export, diag in zip(exports, diags, strict=True):
        preflight = _destination_preflight(config, export)
        if preflight and not diag.error:
            diag.error = preflight
    return config.source.type, diags


def _destination_preflight(config: Any, export: Any) -> str | None:
    """Rivet's destination preflight, without touching the destination: it can be opened —
    its credentials' variables are set, its fields resolve. The error, or None."""
    from rivet_core.errors import RivetError
    from rivet_core.unit.resolve import export_destination

    try:
        export_destination(config, export, create=False)
    except RivetError as exc:
        return f"destination preflight failed: {exc.message}"
    return None


def _rows(d: ExportDiagnosis, engine: str, target: str | None) -> list[dict[str, Any]]:
    """The type report of one export in Rivet's vocabulary (check_names.py)."""
    from rivet_core.cli.check_names import arrow_rs_name, source_type_name, target_type

    rows = []
    for c in d.columns:
        row = {**c.to_dict(), "source_type": source_type_name(engine, c.source_type),
               "rivet_type": c.arrow_text, "arrow_type": arrow_rs_name(c.arrow_type)}
        if target is not None:
            row["target_type"], row["target_status"] = target_type(target, c.arrow_type)
        rows.append(row)
    return rows


def _print_type_report(d: ExportDiagnosis, rows: list[dict[str, Any]], target: str | None) -> None:
    """Rivet's type-report table: `Export: <name>` then Column / Source type / Rivet type /
    Arrow type / Fidelity (+ Target type / Status with --target)."""
    heads = ["Column", "Source type", "Rivet type", "Arrow type", "Fidelity"]
    keys = ["column", "source_type", "rivet_type", "arrow_type", "fidelity"]
    if target is not None:
        heads, keys = heads + ["Target type", "Status"], keys + ["target_type", "target_status"]
    widths = [max(len(h), *(len(str(r[k])) for r in rows)) for h, k in zip(heads, keys, strict=True)]
    click.echo("")
    click.echo(f"Export: {d.export_name}" + (f"  [target: {target}]" if target else ""))
    click.echo("  " + "  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)).rstrip())
    click.echo("  " + "  ".join("-" * w for w in widths))
    for r in rows:
        click.echo("  " + "  ".join(str(r[k]).ljust(w) for k, w in zip(keys, widths, strict=True)).rstrip())
        if r["note"] and r["fidelity"] != "exact":
            click.echo(f"  {'':{widths[0]}}    note: {r['note']}")


def _print(diags: list[ExportDiagnosis], engine: str, type_report: bool, target: str | None) -> None:
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
        if (type_report or target) and d.columns:
            _print_type_report(d, _rows(d, engine, target), target)


@click.command("check")
@config_option
@click.option("-e", "--export", "export_names", multiple=True, help="Export(s) to check (default: all).")
@click.option("-p", "--param", "params", multiple=True, metavar="K=V", help="Value for ${K} in the config.")
@click.option("--type-report", is_flag=True, help="Per column: source type → Arrow type → fidelity.")
@click.option("--strict", is_flag=True, help="Exit 1 when any column is lossy or unsupported.")
@click.option("--target", type=click.Choice(["bigquery", "bq", "duckdb", "duck"], case_sensitive=False),
              help="Also show each column's type in this warehouse when it loads the Parquet (implies "
              "--type-report).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document on stdout (compact, one line; every export's columns included).")
@guard
def check(config_path: str, export_names: tuple[str, ...], params: tuple[str, ...],
          type_report: bool, strict: bool, as_json: bool, target: str | None = None) -> int:
    """Diagnose exports: strategy, size, index use (EXPLAIN), verdict, type fidelity."""
    from rivet_core.cli.check_names import TARGETS
    from rivet_core.introspect.fidelity import LOSSY, UNSUPPORTED  # heavy (pyarrow): only when run

    target = TARGETS[target.lower()] if target else None
    engine, diags = run_checks(config_path, export_names, parse_params(params))
    problems = [(d.export_name, c) for d in diags for c in d.columns if c.fidelity in (LOSSY, UNSUPPORTED)]
    strict_failed = strict and bool(problems)
    if as_json:  # Rivet's keys per export (export, columns, violations) beside ours
        exports = [{"export": d.export_name, **d.to_dict(type_report=False), "columns": _rows(d, engine, target),
                    "violations": [{"column": c.name, "fidelity": c.fidelity, "fatal": strict}
                                   for name, c in problems if name == d.export_name and strict]}
                   for d in diags]
        click.echo(json.dumps({"exports": exports, "strict": strict, "strict_failed": strict_failed},
                              separators=(",", ":"), default=str))
    else:
        _print(diags, engine, type_report, target)
    errors = [d for d in diags if d.error]
    for d in errors:
        click.echo(f"Error: export '{d.export_name}': {d.error}", err=True)
    if strict_failed:
        listed = ", ".join(f"{name}.{c.name} ({c.fidelity})" for name, c in problems)
        click.echo(f"Error: --strict: {len(problems)} column(s) are not exact: {listed} — fix the "
                   "`columns:` overrides or cast in the query (see --type-report)", err=True)
    return 1 if errors or strict_failed else 0
