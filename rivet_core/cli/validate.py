"""`rivet validate`: verify each export's destination against its manifest and _SUCCESS.

`validate --format json` prints `{exports: [{export_name, resolved_prefix, verification}],
warnings: [{export_name, warning}], errors: []}` (docs/rivet-compat.md "CLI output and exit
codes"); a hard error aborts the command with the one `Error:` line, so `errors` is always
empty here.
"""

from __future__ import annotations

import json
from typing import Any

import click

from rivet_core.cli.shared import config_option, guard, load, param_option, worst_exit, write_report
from rivet_core.errors import RivetError


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


class _Ledger:
    """The run ledger, read without side effects and only when a prefix has no manifest:
    opened on first use (no store file created, no migration), and silent when it cannot
    answer (no store yet, an older schema, an unreachable server) — then the prefix reads as
    legacy, as it did before the ledger was asked."""

    def __init__(self, config_path: Any) -> None:
        self.config_path, self.store, self.opened = config_path, None, False

    def evidence(self, export_name: str, prefix: str) -> str | None:
        from rivet_core.state import StateStore

        try:
            if not self.opened:
                self.opened, self.store = True, StateStore.open_existing(self.config_path)
            if self.store is None:
                return None
            found = self.store.published_runs(export_name, prefix)
        except Exception as exc:  # error boundary: the ledger is a second witness, never a reason to fail
            import logging

            logging.getLogger("rivet.validate").debug("run ledger not read: %s", type(exc).__name__)
            return None
        return found.evidence() if found else None


@click.command()
@config_option
@click.option("-e", "--export", "export_names", multiple=True)
@click.option("--format", "fmt", type=click.Choice(["pretty", "json"]), default="pretty")
@click.option("--depth", type=click.Choice(["light", "sample", "full"]), default="full")
@click.option("--run-id", "run_id", help="Verify that run's manifest-<run_id>.json copy instead of manifest.json.")
@click.option("--date", "on_date", metavar="YYYY-MM-DD",
              help="The destination as of that day: a time-window export's partition <time_column>=<date>/, "
              "and {date} in the destination path.")
@click.option("--prefix", "sub_prefix", help="Verify this sub-prefix of the export's destination (a manifest "
              "must be there).")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False),
              help="Also write the JSON verdicts to this file (Rivet's flag; with --format json, instead of stdout).")
@param_option
@guard
def validate(config_path: str, export_names: tuple[str, ...], fmt: str, depth: str,
             params: tuple[str, ...], run_id: str | None = None, on_date: str | None = None,
             sub_prefix: str | None = None, output: str | None = None) -> int:
    """Verify each export's destination against its manifest and _SUCCESS (no source queries)."""
    # From unit/resolve.py, not api.py: the api module imports the whole engine (state, pipeline).
    from functools import partial

    from rivet_core.manifest import verify_at_destination as verify_prefix
    from rivet_core.pipeline.table_check import check_table

    verify_at_destination = partial(verify_prefix, table_check=check_table)
    from rivet_core.unit.resolve import export_destination, partition_prefixes

    config = load(config_path, params)
    when, pinned_sub = _validate_target(on_date, sub_prefix)
    ledger = _Ledger(config.config_path)
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
                                            require_manifest=bool(sub), export=export)
            codes.append(verdict.exit_code())
            label = export.name + (f" [{sub.rstrip('/')}]" if sub else "") + (f" run {run_id}" if run_id else "")
            results.append({"export_name": label, "resolved_prefix": target.uri,
                            "verification": verdict.to_dict()})
            continue
        # A daily-partitioned export (an orchestrator's time partitions) has one manifest per day;
        # a partition_by export one per bucket under the prefix before its {partition} token.
        if export.partition_by:
            from rivet_core.pipeline.buckets.run import (
                bucket_prefixes,
                bucket_targets,
                root_export,
                verify_bucket_set,
            )

            root, present = root_export(export), bucket_prefixes(config, export)
            root_uri, set_verdict = verify_bucket_set(config, export, present)
            if not set_verdict.legacy_run or present:  # the set (legacy: buckets but no record), then each bucket
                codes.append(set_verdict.exit_code())
                results.append({"export_name": f"{export.name} [bucket set]", "resolved_prefix": root_uri,
                                "verification": set_verdict.to_dict(), "bucket_set": True})
            targets = [(export_destination(config, root, sub_prefix=p, create=False), label, name)
                       for p, label, name in bucket_targets(export, present)]
            targets = targets if targets or not set_verdict.legacy_run else [
                (export_destination(config, root, create=False), export.name, export.name)]
        elif export.mode == "cdc":  # each table's stream and its snapshot (pipeline/cdc/layout.py)
            from rivet_core.pipeline.cdc.layout import cdc_datasets

            targets = [(export_destination(config, export, sub_prefix=p, create=False), label, name)
                       for p, label, name in cdc_datasets(export)]
        else:
            prefixes = partition_prefixes(config, export) if dest.head("manifest.json") is None else []
            targets = [(export_destination(config, export, sub_prefix=p, create=False),
                        f"{export.name} [{p.rstrip('/')}]", export.name)
                       for p in prefixes] or [(dest, export.name, export.name)]
        for target, label, expected_name in targets:
            verdict = verify_at_destination(target, depth=depth, export_name=expected_name, export=export)
            if verdict.legacy_run:  # no manifest: a legacy prefix only if the ledger never published here
                evidence = ledger.evidence(export.name, target.uri)
                if evidence:
                    verdict = verify_at_destination(target, depth=depth, export_name=expected_name,
                                                    export=export, published_evidence=evidence)
            codes.append(verdict.exit_code())
            results.append({"export_name": label, "resolved_prefix": target.uri,
                            "verification": verdict.to_dict()})
    document = json.dumps({"exports": results, "warnings": warnings, "errors": []}, indent=2, default=str)
    if output is not None:
        write_report(output, document)
    if fmt == "json":
        click.echo(f"Validation report written to: {output}" if output is not None else document)
    else:
        for w in warnings:
            click.echo(f"{w['export_name']}: SKIPPED ({w['warning']})")
        for r in results:
            _print_verdict(r)
    return worst_exit(codes)


def _success_line(v: dict[str, Any]) -> str:
    if v["success_marker_consistent"]:
        return "consistent"
    marker_kinds = ("success_marker_stale", "success_marker_malformed", "success_marker_read_error",
                    "success_marker_missing")
    return ("INCONSISTENT (see failures)" if any(f["kind"] in marker_kinds for f in v["failures"])
            else "absent (no signal)")


def _print_verdict(r: dict[str, Any]) -> None:
    """One export's verdict: our one-line head (`name: PASSED  uri`), then Rivet's lines
    (`prefix:`, `depth:`, `status:`, `parts:`, `_SUCCESS:`, `manifest:`), so a Rivet user's
    greps keep working (docs/rivet-compat.md "Rivet's CLI matrix"), then one line per finding
    (`  - kind: detail`, its stable code in the JSON form)."""
    from rivet_core.manifest.verify import VerifyFailure

    v = r["verification"]
    head = "PASSED" if v["passed"] else "LEGACY (no manifest)" if v["legacy_run"] else "FAILED"
    click.echo(f"{r['export_name']}: {head}  {r['resolved_prefix']}")
    click.echo(f"  prefix:    {r['resolved_prefix']}")
    click.echo(f"  depth:     {v.get('depth_level', '')}")
    if v["legacy_run"] and not v["failures"]:
        click.echo("  status:    LEGACY (no manifest at the destination)")
        if r.get("bucket_set"):
            click.echo("  buckets:   no _partitions.json: published before the bucket set was recorded — run "
                       "the export once to record it")
        return
    click.echo(f"  status:    {'PASSED' if v['passed'] else 'FAILED'}")
    if r.get("bucket_set"):
        click.echo(f"  buckets:   {v['parts_verified']} recorded and present")
    else:
        md5 = v["parts_md5_verified"]
        click.echo(f"  parts:     {v['parts_verified']} verified ({md5} md5, {v['parts_verified'] - md5} size-only), "
                   f"{v['parts_failed']} failed")
        click.echo(f"  _SUCCESS:  {_success_line(v)}")
        click.echo(f"  manifest:  {'self-consistent' if v['manifest_self_consistent'] else 'INCONSISTENT (see failures)'}")
    for f in v["failures"]:
        fields = {k: x for k, x in f.items() if k not in ("kind", "code")}
        says_the_fix = r.get("bucket_set") or f["kind"] == "manifest_gone"
        detail = (VerifyFailure(f["kind"], fields).describe() if says_the_fix
                  else ", ".join(f"{k}={x}" for k, x in fields.items()))
        click.echo(f"  - {f['kind']}: {detail}")
    if any(f["kind"] == "untracked_object" and str(f.get("key", "")).startswith("data/") for f in v["failures"]):
        click.echo("    (untracked files under data/ are usually earlier runs' parts: data/ keeps "
                   "them until a `retention:` block moves them, and manifest.json lists the "
                   "current ones)")
