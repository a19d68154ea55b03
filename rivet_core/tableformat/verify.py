"""Verify a manifest's `table` block against the Delta table it names (an Iceberg table:
iceberg_verify.py, which `check_table` dispatches to).

`rivet validate`, the finalize facade's validation and an integration's manifest check
all go through `rivet_core/manifest/verify.py`, which calls `check_table` when the
manifest names a table. A prefix is consistent when:

- the manifest's table is the one at this prefix (its root, or the root above a time
  partition's `<col>=<key>/`);
- the table's current version is the manifest's, or a later one made by this export
  (another time partition, a later run being published) — never an older one (a restore or
  a rebuild behind our back), and the manifest's version was committed by the manifest's run;
- every file the current version holds under this unit's prefix exists, with its size;
- the manifest's parts are the table's files at the manifest's version, with the same row
  counts (runs whose commit referenced the parts; a MERGE or a predicate overwrite rewrote
  rows into files of delta-rs's own, whose existence is what can be checked).

Each finding is a (kind, fields) pair for `VerifyFailure`; `table_read_error` means the
table could not be read (could not verify), `table_mismatch` that it was read and is wrong.
"""

from __future__ import annotations

from typing import Any

from rivet_core.destination import Destination, ObjectInfo
from rivet_core.manifest.model import Manifest
from rivet_core.redact import redact_secrets

#: Commits another writer may make without changing the table's rows or files: a VACUUM
#: (delta-rs logs a START and an END commit) deletes only files no current version
#: references — what the ADR tells users to run in place of `retention:`.
MAINTENANCE = frozenset({"VACUUM START", "VACUUM END"})

#: Operations whose commit referenced the manifest's parts as the table's files.
REFERENCING = frozenset({"create", "overwrite", "append", "replace_partition", "repair"})

Finding = tuple[str, dict[str, Any]]


def _mismatch(detail: str) -> Finding:
    return "table_mismatch", {"detail": detail}


def check_table(dest: Destination, manifest: Manifest, listing: list[ObjectInfo] | None,
                export: Any = None) -> tuple[list[Finding], set[str]]:
    """Findings for `manifest.table` at `dest`, and the keys (relative to `dest`) of the table's
    files and log, which verification must not call untracked. `export`: the export's config,
    which an Iceberg table needs (its catalog; iceberg_verify.py)."""
    block = dict(manifest.table or {})
    if block.get("format") == "iceberg":
        from rivet_core.tableformat.iceberg_verify import check_iceberg

        return check_iceberg(dest, manifest, listing, export)
    if block.get("format") != "delta":
        return [_mismatch(f"manifest names a '{block.get('format')}' table; this build reads delta and iceberg")], set()
    try:
        from deltalake import DeltaTable

        from rivet_core.tableformat.delta_log import delta_log
        from rivet_core.tableformat.location import location_of, sub_prefix_of
    except ImportError:
        return [("table_read_error", {"detail": "the manifest names a Delta table but `deltalake` is not "
                                                "installed — pip install 'rivet-dagster[delta]'"})], set()
    sub = sub_prefix_of(dest, str(block.get("uri", "")))
    if sub is None:
        return [_mismatch(f"manifest names the table at {block.get('uri')!r}, which is not this prefix's")], set()
    loc = location_of(dest, sub)
    recorded = int(block["version"])
    try:
        with delta_log(loc) as log:  # a GCS table: a local copy of its log (delta_log.py)
            current = DeltaTable(log.uri, storage_options=log.storage_options)
            history = {int(h["version"]): h for h in current.history() if "version" in h}
            at_recorded = current if current.version() == recorded else DeltaTable(
                log.uri, version=recorded, storage_options=log.storage_options)
            files_now = _adds(current)
            files_then = _adds(at_recorded)
            version = int(current.version())
    except Exception as exc:  # error boundary: any reader failure is a finding (could not verify)
        return [("table_read_error", {"detail": f"cannot read the Delta table at {loc.uri}: "
                                                f"{redact_secrets(exc)}"})], set()
    findings: list[Finding] = []
    if version < recorded:
        findings.append(_mismatch(f"the table is at version {version}, older than the manifest's {recorded} "
                                  "(restored or rebuilt after the run) — run the export again"))
    made_by = (history.get(recorded) or {}).get("rivet_run_id")
    if made_by is not None and made_by != manifest.run_id:
        findings.append(_mismatch(f"table version {recorded} was committed by run '{made_by}', "
                                  f"not by the manifest's run '{manifest.run_id}'"))
    foreign = sorted(v for v, h in history.items()
                     if v > recorded and h.get("rivet_export") != manifest.export_name
                     and h.get("operation") not in MAINTENANCE)
    if foreign:
        findings.append(_mismatch(f"table version(s) {foreign} after the manifest's {recorded} were not made by "
                                  f"export '{manifest.export_name}' — another writer changed the table"))
    present = {o.key: o.size for o in listing} if listing is not None else None
    for path, (size, _rows) in sorted(files_now.items()):
        if not path.startswith(sub) or present is None:
            continue
        key = path[len(sub):]
        if key not in present:
            findings.append(_mismatch(f"table file '{path}' (version {version}) is missing"))
        elif size is not None and present[key] != size:
            findings.append(_mismatch(f"table file '{path}' is {present[key]} bytes, the table says {size}"))
    if block.get("operation") in REFERENCING:
        for part in manifest.committed_parts:
            entry = files_then.get(sub + part.path)
            if entry is None:
                findings.append(_mismatch(f"part '{part.path}' is not a file of table version {recorded}"))
            elif entry[1] is not None and entry[1] != part.rows:
                findings.append(_mismatch(f"part '{part.path}': the table counts {entry[1]} rows, "
                                          f"the manifest {part.rows}"))
    claimed = {p[len(sub):] for p in files_now if p.startswith(sub)}
    if present is not None:
        claimed |= {k for k in present if k.startswith("_delta_log/")}
    return findings, claimed


def _adds(table: Any) -> dict[str, tuple[int | None, int | None]]:
    """path → (size, rows) of a table version's files."""
    import pyarrow as pa

    adds = pa.table(table.get_add_actions(flatten=True))
    if not adds.num_rows:
        return {}
    return {p: (s, r) for p, s, r in zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(),
                                         adds.column("num_records").to_pylist(), strict=True)}
