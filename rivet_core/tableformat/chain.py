"""The chain of an export's published runs, which a table's history is judged by.

A commit (Delta) or snapshot (Iceberg) carries the run id and export name of the run that
made it, and the kind of commit (`rivet_operation`: create, overwrite, append, merge, …).
Whether that run *published* is not in the table: it is the run's success manifest —
`manifest.json`, the run's copy `manifest-<run>.json` at the prefix, or that copy parked by
gc under `_quarantine/gc/<stamp>/` (rivet_core/manifest/retention.py). Three judgements rest
on this, never on "every commit after the last manifest's version":

- an **orphan** is a commit made by a run of this export that never published (a crash
  between the table commit and the manifest); only its files may be removed by an append;
- a **foreign** commit is one no run of this export made (VACUUM's START/END excepted,
  verify.py `MAINTENANCE`) since the **baseline** — the newest create or overwrite made by
  this export, which replaced every row before it. A run refuses to commit on top of a
  foreign commit, and verification fails, until `--full-refresh` makes a new baseline;
- the **previous published commit**, against which an append's row count is checked.

The refusal's message (`refuse_foreign`) and the verification findings both formats share
(`made_by_findings`, `chain_findings`) live here, so the Delta and Iceberg modules do not
import each other.
"""

from __future__ import annotations

from typing import Any

from rivet_core.destination import Destination
from rivet_core.manifest.layout import MANIFEST_KEY, read_manifest, run_manifest_key
from rivet_core.manifest.model import Manifest, parse_manifest
from rivet_core.tableformat.errors import TableCommitError

#: commitInfo / snapshot-summary keys (commit.py and iceberg_commit.py write them).
RUN_KEY, EXPORT_KEY, OP_KEY = "rivet_run_id", "rivet_export", "rivet_operation"
#: Operations after which the table's files are exactly the committing run's manifest's
#: parts (a chunk repair makes them so too: tableformat/repair.py).
BASELINE_OPS = frozenset({"create", "overwrite", "repair"})
#: Where gc parks the run copies it retires (rivet_core/manifest/retention.py).
GC_PARK = "_quarantine/gc/"
#: Where a superseded time partition's run copy goes (`_quarantine/<run>/`, finalize.py).
QUARANTINE = "_quarantine/"
_MAX_COPY_BYTES = 64 * 1024 * 1024


class PublishedRuns:
    """Which run ids published a success manifest at a prefix (looked up one run id at a
    time and remembered: a verification or a commit asks about a handful of runs)."""

    def __init__(self, dest: Destination) -> None:
        self.dest = dest
        self._known: dict[str, bool] = {}
        self._parked: dict[str, str] | None = None
        self._current: str | None = None
        self._read_current = False

    def __contains__(self, run_id: object) -> bool:
        if not isinstance(run_id, str) or not run_id:
            return False
        if run_id not in self._known:
            self._known[run_id] = self._published(run_id)
        return self._known[run_id]

    def _published(self, run_id: str) -> bool:
        if run_id == self._current_run():
            return True
        copy = run_manifest_key(run_id)
        if self._success_at(copy):
            return True
        parked = self._parked_copies().get(copy)
        return parked is not None and self._success_at(parked)

    def _current_run(self) -> str | None:
        if not self._read_current:
            self._read_current = True
            found = read_manifest(self.dest, key=MANIFEST_KEY)
            self._current = found[0].run_id if found and found[0].status == "success" else None
        return self._current

    def _success_at(self, key: str) -> bool:
        info = self.dest.head(key)
        if info is None or info.size > _MAX_COPY_BYTES:
            return False
        return parse_manifest(self.dest.read_bytes(key, max_bytes=_MAX_COPY_BYTES)).status == "success"

    def _parked_copies(self) -> dict[str, str]:
        """`manifest-<run>.json` → its key under `_quarantine/gc/<stamp>/` (gc) or
        `_quarantine/<run>/` (a time partition's superseded run, finalize.py), listed once."""
        if self._parked is None:
            self._parked = {}
            for o in self.dest.list(QUARANTINE):
                name = o.key.rsplit("/", 1)[-1]
                depth = 3 if o.key.startswith(GC_PARK) else 2
                if o.key.count("/") == depth and name.startswith("manifest-"):
                    self._parked[name] = o.key
        return self._parked


def unchanged_block(dest: Destination) -> dict[str, Any] | None:
    """The `table` block of a run that exported no row (an empty incremental poll): the last
    published manifest's, operation `unchanged` — the published version stays named, so
    the next append's orphans are judged from it (commit.py) and verification checks the
    version against the chain. None when the prefix has no table block to carry on."""
    found = read_manifest(dest)
    if found is None or found[0].table is None:
        return None
    return {**dict(found[0].table), "operation": "unchanged", "files": found[0].table.get("files", 0)}


def commit_props(run_id: str, export: str, operation: str) -> dict[str, str]:
    """What every commit of a run carries (the table's own record of who made it, and how)."""
    return {RUN_KEY: run_id, EXPORT_KEY: export, OP_KEY: operation}


def is_baseline(entry: dict[str, Any], export: str) -> bool:
    """A create or overwrite commit of `export` (`entry`: a Delta history entry or an
    Iceberg snapshot summary). Commits made before `rivet_operation` was recorded count by
    delta-rs's own write mode."""
    if entry.get(EXPORT_KEY) != export:
        return False
    op = entry.get(OP_KEY)
    if op is not None:
        return op in BASELINE_OPS
    mode = (entry.get("operationParameters") or {}).get("mode")
    return mode in ("Overwrite", "ErrorIfExists")


def refuse_foreign(export: str, table_name: str, foreign: list[Any], what: str) -> None:
    """Raise `TableCommitError` when `foreign` (versions or snapshot ids since the baseline
    no run of `export` made) is not empty: a run never commits on top of another writer."""
    if foreign:
        raise TableCommitError(
            f"export '{export}': the table {table_name} holds {what} {foreign} that no run of this export made "
            "(another writer changed the table) — nothing was committed and the cursor did not move; check what "
            f"that writer did, then re-baseline the table from the source: rivet run -e {export} --full-refresh "
            "(an incremental, full or chunked export; a time_window or time-partitioned one: move the table's "
            "prefix aside and run again — docs/operations.md \"A table another writer changed\")")


#: A verification finding (verify.py's shape): (kind, fields).
Finding = tuple[str, dict[str, Any]]


def _mismatch(detail: str) -> Finding:
    return "table_mismatch", {"detail": detail}


def made_by_findings(what: str, made_by: str | None, manifest: Manifest, block: dict[str, Any],
                     published: PublishedRuns) -> list[Finding]:
    """The manifest's version was committed by its run — or, for an empty poll's `unchanged`
    block, by a published run of the export (verify.py, iceberg_verify.py)."""
    if made_by is None:
        return []
    if block.get("operation") == "unchanged":
        if made_by == manifest.run_id or made_by in published:
            return []
        return [_mismatch(f"{what}, which the empty run '{manifest.run_id}' names as unchanged, was committed by "
                          f"run '{made_by}', which never published — run the export again")]
    if made_by != manifest.run_id:
        return [_mismatch(f"{what} was committed by run '{made_by}', not by the manifest's run '{manifest.run_id}'")]
    return []


def chain_findings(block: dict[str, Any], manifest: Manifest, rows: int | None, rows_before: int | None,
                   what: str, previous: Any) -> list[Finding]:
    """The rows at the manifest's version against what the chain of published runs implies
    (verify.py's module docstring); shared by verify.py and iceberg_verify.py."""
    if rows is None:
        return []
    findings: list[Finding] = []
    if block.get("rows") is not None and int(block["rows"]) != rows:
        findings.append(_mismatch(f"{what} holds {rows} rows, the manifest's table block says {block['rows']}"))
    operation = block.get("operation")
    if operation in ("create", "overwrite") and rows != manifest.row_count:
        findings.append(_mismatch(f"{what} ({operation}) holds {rows} rows, the run's parts {manifest.row_count}"))
    if operation == "append" and rows_before is not None and rows != rows_before + manifest.row_count:
        findings.append(_mismatch(
            f"{what} holds {rows} rows, but the previous published commit ({previous}) held {rows_before} and the "
            f"run appended {manifest.row_count} — rows of published runs left the table; re-baseline from the "
            f"source: rivet run -e {manifest.export_name} --full-refresh"))
    return findings


__all__ = ["refuse_foreign", "chain_findings", "made_by_findings", "PublishedRuns", "commit_props",
           "unchanged_block", "is_baseline", "RUN_KEY", "EXPORT_KEY", "OP_KEY", "BASELINE_OPS"]
