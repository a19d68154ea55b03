"""Verify a manifest's `table` block against the Iceberg table it names (verify.py dispatches here).

The catalog says which metadata file is the table's current one, so this check needs the
export's `iceberg:` block (its catalog URL); `rivet validate -c`, the finalize facade and the
integration's manifest check pass the export. A prefix is consistent when:

- the catalog's table lives at this prefix (its root, or the root above a time
  partition's `<col>=<key>/`);
- the manifest's snapshot is the table's current one or an ancestor of it — a current
  snapshot older than the manifest's (a rollback) or a history without it (a rebuilt table)
  is a mismatch; the manifest's snapshot was made by the manifest's run (an empty poll's
  `unchanged` block: by a published run of the export, chain.py);
- every snapshot since the export's last baseline (its newest create or overwrite) was
  made by this export — not only those after the manifest's, so a later run cannot hide
  another writer's; `rivet run --full-refresh` re-baselines;
- the chain of published runs adds up (chain.py `chain_findings`): after an append, the previous
  published snapshot's rows plus the manifest's; after a create or overwrite, the
  manifest's rows;
- every data file of the current snapshot under this unit's prefix exists, with its size;
- the manifest's parts are data files of its snapshot with the same row counts (every
  Iceberg operation here adds the parts themselves), and the snapshot's total row count is
  the manifest's;
- depth `full`, an export with `merge_on`: the table's key columns are scanned, every key
  non-NULL and once (merge_keys.py).
"""

from __future__ import annotations

from typing import Any

from rivet_core.destination import Destination, ObjectInfo
from rivet_core.manifest.model import Manifest
from rivet_core.redact import redact_secrets
from rivet_core.tableformat.chain import (
    EXPORT_KEY,
    RUN_KEY,
    PublishedRuns,
    chain_findings,
    is_baseline,
    made_by_findings,
)

Finding = tuple[str, dict[str, Any]]


def _mismatch(detail: str) -> Finding:
    return "table_mismatch", {"detail": detail}


def _read_error(detail: str) -> Finding:
    return "table_read_error", {"detail": detail}


def check_iceberg(dest: Destination, manifest: Manifest, listing: list[ObjectInfo] | None,
                  export: Any, depth: str = "sample") -> tuple[list[Finding], set[str]]:
    """Findings for the Iceberg `manifest.table` at `dest`, and the keys (relative to `dest`)
    of the table's files and metadata, which verification must not call untracked."""
    block = dict(manifest.table or {})
    if export is None or getattr(export, "iceberg", None) is None:
        return [_read_error(f"the manifest names the Iceberg table {block.get('name')}; its catalog is in the "
                            "export's iceberg: block — verify with the config (rivet validate -c rivet.yaml)")], set()
    try:
        from pyiceberg.table.snapshots import ancestors_of

        from rivet_core.tableformat.iceberg_catalog import location_uri, open_catalog
        from rivet_core.tableformat.location import location_of, sub_prefix_of
    except ImportError:
        return [_read_error("the manifest names an Iceberg table but `pyiceberg` is not installed — "
                            "pip install 'rivet-dagster[iceberg]'")], set()
    uri = str(block.get("uri", ""))
    try:
        sub = sub_prefix_of(dest, uri, render=location_uri)
    except Exception as exc:  # error boundary: a destination the table's location cannot name
        return [_read_error(f"cannot locate the Iceberg table {block.get('name')}: {redact_secrets(exc)}")], set()
    if sub is None:
        return [_mismatch(f"manifest names the table at {uri!r}, which is not this prefix's")], set()
    loc = location_of(dest, sub)
    root = location_uri(loc)
    name = str(block.get("name") or "")
    try:
        with open_catalog(export, loc) as catalog:
            table = catalog.load_table(name)
            current = table.current_snapshot()
            history = list(ancestors_of(current, table.metadata)) if current is not None else []
            recorded_id = int(block["snapshot_id"])
            recorded = table.snapshot_by_id(recorded_id)
            files_now = _files(table, current)
            files_then = _files(table, recorded) if recorded is not None else {}
    except Exception as exc:  # error boundary: any reader failure is a finding (could not verify)
        return [_read_error(f"cannot read the Iceberg table {name} at {root}: {redact_secrets(exc)}")], set()
    findings: list[Finding] = []
    if table.location().rstrip("/") != root.rstrip("/"):
        findings.append(_mismatch(f"the catalog's table {name} lives at {table.location()}, not at {root}"))
    ids = [s.snapshot_id for s in history]
    if recorded_id not in ids:
        if recorded is not None:
            findings.append(_mismatch(
                f"the table's current snapshot {current.snapshot_id if current else None} is older than the "
                f"manifest's {recorded_id} (rolled back or restored after the run) — run the export again"))
        else:
            findings.append(_mismatch(f"the manifest's snapshot {recorded_id} is not in the table's history "
                                      "(the table was rebuilt or expired) — run the export again"))
    findings += _foreign(history, manifest.export_name)
    if recorded is not None:
        published = PublishedRuns(dest)
        findings += made_by_findings(f"snapshot {recorded_id}", _prop(recorded, RUN_KEY), manifest, block, published)
        total = _prop(recorded, "total-records")
        previous = _previous_published(table, recorded, manifest, published) \
            if block.get("operation") == "append" else None
        before = None if previous is None else _prop(previous, "total-records")
        findings += chain_findings(block, manifest, None if total is None else int(total),
                           None if before is None else int(before), f"snapshot {recorded_id}",
                           None if previous is None else previous.snapshot_id)
    base = f"{root}/{sub}"
    present = {o.key: o.size for o in listing} if listing is not None else None
    claimed: set[str] = set()
    for path, (size, _rows) in sorted(files_now.items()):
        if not path.startswith(base):
            continue
        key = path[len(base):]
        claimed.add(key)
        if present is None:
            continue
        if key not in present:
            findings.append(_mismatch(f"table file '{path}' (current snapshot) is missing"))
        elif present[key] != size:
            findings.append(_mismatch(f"table file '{path}' is {present[key]} bytes, the table says {size}"))
    if recorded is not None:
        for part in manifest.committed_parts:
            entry = files_then.get(base + part.path)
            if entry is None:
                findings.append(_mismatch(f"part '{part.path}' is not a data file of snapshot {recorded_id}"))
            elif entry[1] != part.rows:
                findings.append(_mismatch(f"part '{part.path}': the table counts {entry[1]} rows, the manifest "
                                          f"{part.rows}"))
    keys = list(getattr(export, "merge_on", None) or [])
    if depth == "full" and keys and current is not None:
        findings += _key_scan(table, keys, manifest.export_name, f"{name} ({root})")
    if present is not None and not sub:
        claimed |= {k for k in present if k.startswith("metadata/")}
    return findings, claimed


def _key_scan(table: Any, keys: list[str], export: str, where: str) -> list[Finding]:
    """Depth full: the current snapshot's `merge_on` columns, scanned (merge_keys.py)."""
    from rivet_core.tableformat.merge_keys import table_key_problem

    try:
        rows = table.scan(selected_fields=tuple(keys)).to_arrow()
    except Exception as exc:  # error boundary: a reader failure is a finding (could not verify)
        return [_read_error(f"cannot read the merge_on columns of {where}: {redact_secrets(exc)}")]
    problem = table_key_problem(export, keys, rows, where)
    return [] if problem is None else [_mismatch(problem)]


def _foreign(history: list[Any], export: str) -> list[Finding]:
    """Snapshots (newest first) since the export's last baseline that another writer made."""
    foreign: list[int] = []
    for snapshot in history:
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if is_baseline(summary, export):
            break
        if summary.get(EXPORT_KEY) != export:
            foreign.append(int(snapshot.snapshot_id))
    if not foreign:
        return []
    return [_mismatch(f"snapshot(s) {foreign} since the export's last baseline were not made by export '{export}' "
                      "— another writer changed the table; check what it did, then re-baseline from the source: "
                      f"rivet run -e {export} --full-refresh")]


def _previous_published(table: Any, recorded: Any, manifest: Manifest, published: PublishedRuns) -> Any:
    """The newest ancestor of `recorded` made by another published run of the export."""
    from pyiceberg.table.snapshots import ancestors_of

    for snapshot in ancestors_of(recorded, table.metadata):
        run = _prop(snapshot, RUN_KEY)
        if _prop(snapshot, EXPORT_KEY) == manifest.export_name and run != manifest.run_id and run in published:
            return snapshot
    return None


def _prop(snapshot: Any, key: str) -> str | None:
    summary = snapshot.summary.additional_properties if snapshot.summary else {}
    value = summary.get(key)
    return None if value is None else str(value)


def _files(table: Any, snapshot: Any) -> dict[str, tuple[int, int]]:
    """path → (size, rows) of a snapshot's data files."""
    if snapshot is None:
        return {}
    return {t.file.file_path: (int(t.file.file_size_in_bytes), int(t.file.record_count))
            for t in table.scan(snapshot_id=snapshot.snapshot_id).plan_files()}
