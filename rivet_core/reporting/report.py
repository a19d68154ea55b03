"""The run report: `.rivet/runs/<run_id>/summary.json` and `summary.md` beside the config.

Written after the metrics row (I8), for every run that reaches the finalize tail. The
JSON follows Rivet's RunReport shape (docs/rivet-compat.md "Run report and journal") so existing readers
work; the markdown is what an operator opens at 2 a.m.: status, throughput, verdicts,
error and the exact command to resume or re-run. Everything is redacted.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rivet_core.orchestrator import with_legacy_run_id
from rivet_core.redact import redact_secrets

if TYPE_CHECKING:
    from rivet_core.runrecord.summary import RunSummary
    from rivet_core.unit.resolve import ResolvedUnit

_BADGES = {"success": "SUCCESS", "failed": "FAILED", "running": "INTERRUPTED", "skipped": "SKIPPED"}


def report_dir(report_root: Path, run_id: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in run_id)
    return report_root / ".rivet" / "runs" / safe


def report_dict(summary: RunSummary, plan: ResolvedUnit) -> dict[str, Any]:
    validation = None
    if summary.validated is not None:
        validation = {"passed": summary.validated, "manifest": summary.manifest_verification}
    # with the old run-id key as well, for one release (docs/manifest.md "Deprecated keys")
    return with_legacy_run_id({
        "run_id": summary.run_id,
        "export_name": summary.export_name,
        "status": summary.status,
        "started_at": summary.started_at.isoformat(),
        "finished_at": summary.finished_at.isoformat() if summary.finished_at else None,
        "duration_ms": summary.duration_ms,
        "source_engine": summary.source_engine,
        "destination_kind": summary.destination_kind,
        "destination_uri": summary.destination_uri,
        "format": summary.format,
        "compression": summary.compression,
        "tuning_profile": summary.tuning_profile,
        "batch_size": summary.batch_size,
        "governor": summary.governor,
        "mode": summary.mode,
        "strategy": plan.strategy,
        "total_rows": summary.total_rows,
        "files_produced": summary.files_produced,
        "bytes_written": summary.bytes_written,
        "peak_rss_mb": summary.peak_rss_mb,
        "retries": summary.retries,
        "cursor": {"column": summary.cursor_column, "low": summary.cursor_low, "high": summary.cursor_high,
                   "committed": summary.cursor_committed} if summary.cursor_column else None,
        "parts": [{"path": p.path, "rows": p.rows, "size_bytes": p.size_bytes} for p in summary.manifest_parts],
        "validation": validation,
        "reconciliation": None if summary.reconciled is None else {
            "source_count": summary.source_row_count, "exported_rows": summary.reconcile_counted_rows,
            "matched": summary.reconciled},
        "quality": [{"severity": i.severity, "message": i.message} for i in summary.quality_issues],
        "schema_changed": summary.schema_changed,
        "schema_changes": [summary.schema_changes] if summary.schema_changes else [],
        "schema_gate": summary.schema_gate,
        "warnings": summary.warnings,
        "error_message": summary.error_message,
        "orchestrator": summary.orchestrator,
        "orchestrator_run_id": summary.orchestrator_run_id,
        "partition_key": summary.partition_key,
        "repair_of": summary.repair_of,
        "resumable": False,
        "resume_command": None,
    })


def governor_lines(governor: dict[str, Any] | None) -> list[str]:
    """One line on the source governor (rivet_core/pipeline/resources/governor.py): what it paced."""
    if not governor or governor.get("mode") == "off":
        return []
    if governor["mode"] == "fixed":
        return [f"- Throttle: fixed, {governor['pauses']} pause(s), {governor['throttled_s']} s"]
    line = (f"- Source governor: throttled {governor['throttled_s']} s in {governor['pauses']} pause(s) "
            f"(floor {governor['floor_ms']} ms, ceiling {governor['ceiling_ms']} ms"
            + (f" or {governor['duty']}× the batch's time" if governor.get("duty") else "") + "); "
            f"{governor['samples']} pressure sample(s), max pressure {governor['pressure_max']}")
    if governor.get("active_max") is not None:
        line += f", max active sessions {governor['active_max']}"
    if governor.get("recent_max") is not None:
        line += f", max sessions busy within the last second {governor['recent_max']}"
    if governor.get("cpu_nice"):
        line += (f"; CPU priority lowered (nice +{governor['cpu_nice']}) once under pressure"
                 + ("" if governor.get("cpu_restored") else ", kept until the process exits"))
    if governor.get("probe_error"):
        line += f"; probe unavailable: {governor['probe_error']}"
    return [line]


def render_markdown(report: dict[str, Any], config_path: str | None) -> str:
    lines = [f"# Rivet run: `{report['run_id']}`", ""]
    lines += [f"- Export: `{report['export_name']}`",
              f"- Status: **{_BADGES.get(report['status'], 'UNKNOWN')}**",
              *([f"- Repair of chunk run `{report['repair_of']}` (`rivet repair --execute`)"]
                if report.get("repair_of") else []),
              f"- Started: {report['started_at']}", f"- Finished: {report['finished_at']}",
              f"- Duration: {report['duration_ms']} ms ({report['duration_ms'] / 1000:.2f} s)", ""]
    lines += ["## Plan", f"- Source engine: {report['source_engine']}",
              f"- Strategy: {report['strategy']}",
              f"- Destination: {report['destination_kind']} `{report['destination_uri']}`",
              f"- Format: {report['format']}", f"- Compression: {report['compression']}",
              f"- Tuning: profile={report['tuning_profile']}, batch_size={report['batch_size']}", ""]
    lines += ["## Throughput", f"- Rows: {report['total_rows']}", f"- Files: {report['files_produced']}",
              f"- Bytes: {report['bytes_written']}"]
    if report["peak_rss_mb"]:
        lines.append(f"- Peak RSS: {report['peak_rss_mb']} MB")
    if report["retries"]:
        lines.append(f"- Retries: {report['retries']}")
    lines += governor_lines(report.get("governor"))
    if report["cursor"]:
        c = report["cursor"]
        lines.append(f"- Cursor `{c['column']}`: {c['low']} → {c['high']} "
                     f"({'committed' if c['committed'] else 'not committed'})")
    lines += ["", "## Verdicts"]
    v = report["validation"]
    if v is None:
        lines.append("- Validation: not requested")
    else:
        lines.append(f"- Validation: {'PASSED' if v['passed'] else 'FAILED'}")
        m = v.get("manifest") or {}
        for f in m.get("failures", []):
            lines.append(f"  - {f.get('kind')}: {json.dumps({k: x for k, x in f.items() if k != 'kind'})}")
    r = report.get("reconciliation")
    lines.append("- Reconciliation: " + ("not requested" if r is None else
                                         f"MATCHED (source {r['source_count']})" if r["matched"] else
                                         f"MISMATCH (exported {r.get('exported_rows')} vs source "
                                         f"{r['source_count']}; nothing published)"))
    q = report["quality"]
    lines.append("- Quality: " + ("not configured" if not q else
                                  "; ".join(f"{i['severity']} {i['message']}" for i in q)))
    sc = report["schema_changed"]
    gate = report.get("schema_gate") or ""
    lines.append("- Schema: " + ("CHANGED" if sc else "not checked" if sc is None
                                 else f"unchanged (gated {gate})" if gate.startswith("upstream") else "unchanged"))
    if report["schema_changes"]:
        lines += ["", "## Schema changes"] + [f"- {json.dumps(c)}" for c in report["schema_changes"]]
    if report["parts"]:
        lines += ["", "## Parts", "| path | rows | bytes |", "|---|---:|---:|"]
        lines += [f"| `{p['path']}` | {p['rows']} | {p['size_bytes']} |" for p in report["parts"]]
    if report["warnings"]:
        lines += ["", "## Warnings"] + [f"- {w}" for w in report["warnings"]]
    if report["error_message"]:
        lines += ["", "## Error", "```", report["error_message"], "```"]
        if config_path:
            lines += ["", "## Re-run", "Nothing is lost: fix the cause and re-run "
                      f"`rivet run -c {shlex.quote(config_path)} -e {shlex.quote(report['export_name'])}`."]
    return redact_secrets("\n".join(lines) + "\n")


def write_run_report(summary: RunSummary, plan: ResolvedUnit, report_root: Path,
                     config_path: str | None = None) -> Path:
    """Write summary.json and summary.md; return the markdown path."""
    out = report_dir(report_root, summary.run_id)
    out.mkdir(parents=True, exist_ok=True)
    report = report_dict(summary, plan)
    (out / "summary.json").write_text(redact_secrets(json.dumps(report, indent=2, default=str)) + "\n")
    md = out / "summary.md"
    md.write_text(render_markdown(report, config_path))
    return md
