"""A reconcile report read back from its JSON file, for `rivet repair --report FILE`.

Rivet's repair takes the partitions `rivet reconcile --format json` found wrong from the file
instead of counting the source again (its src/pipeline/repair_cmd.rs). The file is input a
person may have edited or kept for a day, so before it drives a re-export it must still
describe the checkpoint: the same export, the export's latest chunk run (repair rewrites that
run's manifest), and for each window it names the bounds that run recorded. A report that
fails any of these is refused naming the file and the fix — re-running reconcile — and
nothing is exported.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rivet_core.errors import ConfigError
from rivet_core.pipeline.chunked.reconcile import ChunkCheck, ReconcileReport
from rivet_core.state import StateStore

#: Rivet's partition identifier, `chunk 3 [1000..2000]` (src/plan/reconcile.rs).
_IDENTIFIER = re.compile(r"^chunk (\d+) \[(.*)\.\.(.*)\]$")
_STATUSES = ("match", "mismatch", "unknown")


def _check(path: str, partition: Any) -> ChunkCheck | str:
    """One partition as a ChunkCheck, or why it cannot drive a repair (Rivet: skipped)."""
    if not isinstance(partition, dict):
        return f"a partition is not an object: {partition!r}"
    identifier = str(partition.get("identifier", ""))
    status = partition.get("status")
    if status not in _STATUSES:
        raise ConfigError(f"invalid reconcile report '{path}': partition '{identifier}' has status {status!r} "
                          f"(expected one of {', '.join(_STATUSES)}) — re-run `rivet reconcile --format json -o`")
    found = _IDENTIFIER.match(identifier)
    if found is None:
        return f"cannot parse partition identifier '{identifier}' ({status})"
    return ChunkCheck(int(found.group(1)), identifier, found.group(2), found.group(3),
                      partition.get("source_count"), partition.get("exported_count"), status,
                      partition.get("note") or None)


def read_reconcile_report(path: str, export_name: str) -> tuple[ReconcileReport, list[str]]:
    """The report in `path` (ours or Rivet's: the same keys) and the partitions it names that
    cannot be repaired (unparseable identifiers). Raises ConfigError, naming the file, when it
    cannot be read or is for another export."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read reconcile report '{path}': {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ConfigError(f"invalid reconcile report '{path}': {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list) or not doc.get("run_id"):
        raise ConfigError(f"invalid reconcile report '{path}': expected the JSON of `rivet reconcile --format "
                          "json` (export_name, run_id, partitions)")
    if doc.get("export_name") != export_name:
        raise ConfigError(f"repair: reconcile report is for export '{doc.get('export_name')}' but config targets "
                          f"'{export_name}'")
    report = ReconcileReport(export_name, str(doc["run_id"]), str(doc.get("strategy", "")))
    skipped: list[str] = []
    for partition in doc["partitions"]:
        check = _check(path, partition)
        if isinstance(check, str):
            skipped.append(check)
        else:
            report.checks.append(check)
    return report, skipped


def check_against_checkpoint(path: str, report: ReconcileReport, state: StateStore) -> None:
    """Refuse a report that no longer describes the export's latest chunk run (module docstring)."""
    latest = state.get_latest_chunk_run(report.export_name)
    fix = (f"re-run `rivet reconcile -e {report.export_name} --format json -o {path}` and repair from the "
           "fresh report")
    if latest is None or latest.run_id != report.run_id:
        now = "no chunk run" if latest is None else f"chunk run {latest.run_id}"
        raise ConfigError(f"repair: reconcile report '{path}' is for chunk run {report.run_id}, but export "
                          f"'{report.export_name}' now has {now} — {fix}")
    tasks = {t.chunk_index: t for t in state.list_chunk_tasks(report.run_id)}
    for check in report.checks:
        task = tasks.get(check.chunk_index)
        if task is None or (str(task.start_key), str(task.end_key)) != (check.start_key, check.end_key):
            recorded = "no such chunk" if task is None else f"[{task.start_key}..{task.end_key}]"
            raise ConfigError(f"repair: reconcile report '{path}' names {check.identifier}, but chunk run "
                              f"{report.run_id} recorded {recorded} — {fix}")


__all__ = ["check_against_checkpoint", "read_reconcile_report"]
