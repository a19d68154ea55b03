"""Verify a manifest's `table` block against the Delta table it names (an Iceberg table:
iceberg_verify.py, which `check_table` dispatches to).

`rivet validate`, the finalize facade's validation and an integration's manifest check
all go through `rivet_core/manifest/verify.py`, which calls `check_table` when the
manifest names a table. A prefix is consistent when:

- the manifest's table is the one at this prefix (its root, or the root above a time
  partition's `<col>=<key>/`);
- the table's current version is the manifest's, or a later one made by this export
  (another time partition, a later run being published) — never an older one (a restore or
  a rebuild behind our back), and the manifest's version was committed by the manifest's run
  (an empty poll's `unchanged` block: by a published run of the export, chain.py);
- no commit since the export's last baseline (its newest create or overwrite) was made by
  another writer (VACUUM's excepted) — not only those after the manifest's version, so a
  later run cannot hide one; the run refuses to commit on top of it too (commit.py), and
  `rivet run --full-refresh` re-baselines;
- the chain of published runs adds up: the manifest's version holds the rows its
  `table` block records; after a create or overwrite, exactly the manifest's rows; after an
  append, the previous published version's rows plus the manifest's (an append that removed
  a published run's files — as an empty poll once made happen — fails here);
- every file the current version holds under this unit's prefix exists, with its size;
- the manifest's parts are the table's files at the manifest's version, with the same row
  counts (runs whose commit referenced the parts; a MERGE or a predicate overwrite rewrote
  rows into files of delta-rs's own, whose existence is what can be checked);
- depth `full`, an export with `merge_on`: the table's key columns are read (the one data
  scan here) and every key must be non-NULL and once (merge_keys.py).

The cost below `full` is the history, the add actions of the current, the manifest's and
(for an append) the previous published version, and a manifest-copy read per run asked about.

Each finding is a (kind, fields) pair for `VerifyFailure`; `table_read_error` means the
table could not be read (could not verify), `table_mismatch` that it was read and is wrong.
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
                export: Any = None, depth: str = "sample") -> tuple[list[Finding], set[str]]:
    """Findings for `manifest.table` at `dest`, and the keys (relative to `dest`) of the table's
    files and log, which verification must not call untracked. `export`: the export's config,
    which an Iceberg table needs (its catalog; iceberg_verify.py) and whose `merge_on` keys a
    `full` depth scans."""
    block = dict(manifest.table or {})
    if block.get("format") == "iceberg":
        from rivet_core.tableformat.iceberg_verify import check_iceberg

        return check_iceberg(dest, manifest, listing, export, depth)
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
    published = PublishedRuns(dest)
    try:
        with delta_log(loc) as log:  # a GCS table: a local copy of its log (delta_log.py)
            current = DeltaTable(log.uri, storage_options=log.storage_options)
            history = {int(h["version"]): h for h in current.history() if "version" in h}

            def at(v: int) -> dict[str, tuple[int | None, int | None]]:
                return _adds(current if current.version() == v else DeltaTable(
                    log.uri, version=v, storage_options=log.storage_options))

            files_now = _adds(current)
            files_then = at(recorded)
            previous = _previous_published(history, recorded, manifest, published) \
                if block.get("operation") == "append" else None
            files_before = at(previous) if previous is not None else None
            version = int(current.version())
    except Exception as exc:  # error boundary: any reader failure is a finding (could not verify)
        return [("table_read_error", {"detail": f"cannot read the Delta table at {loc.uri}: "
                                                f"{redact_secrets(exc)}"})], set()
    findings: list[Finding] = []
    if version < recorded:
        findings.append(_mismatch(f"the table is at version {version}, older than the manifest's {recorded} "
                                  "(restored or rebuilt after the run) — run the export again"))
    findings += made_by_findings(f"table version {recorded}", (history.get(recorded) or {}).get(RUN_KEY),
                                 manifest, block, published)
    findings += _foreign(history, manifest.export_name)
    findings += chain_findings(block, manifest, _row_total(files_then),
                               None if files_before is None else _row_total(files_before),
                               f"table version {recorded}", previous)
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
    if depth == "full" and getattr(export, "merge_on", None):
        findings += _delta_key_scan(loc, files_now, list(export.merge_on), manifest.export_name)
    claimed = {p[len(sub):] for p in files_now if p.startswith(sub)}
    if present is not None:
        claimed |= {k for k in present if k.startswith("_delta_log/")}
    return findings, claimed


def _foreign(history: dict[int, dict[str, Any]], export: str) -> list[Finding]:
    """Versions since the export's last baseline that another writer made (chain.py)."""
    baseline = max((v for v, h in history.items() if is_baseline(h, export)), default=-1)
    foreign = sorted(v for v, h in history.items()
                     if v > baseline and h.get(EXPORT_KEY) != export and h.get("operation") not in MAINTENANCE)
    if not foreign:
        return []
    return [_mismatch(f"table version(s) {foreign} since the export's last baseline (version {baseline}) were not "
                      f"made by export '{export}' — another writer changed the table; check what it did, then "
                      f"re-baseline from the source: rivet run -e {export} --full-refresh")]


def _previous_published(history: dict[int, dict[str, Any]], recorded: int, manifest: Manifest,
                        published: PublishedRuns) -> int | None:
    """The newest version before `recorded` committed by another published run of the
    export (chain.py); None when there is none (the append is the first commit)."""
    for v in sorted((v for v in history if v < recorded), reverse=True):
        entry = history[v]
        run = entry.get(RUN_KEY)
        if entry.get(EXPORT_KEY) == manifest.export_name and run != manifest.run_id and run in published:
            return v
    return None


def _row_total(files: dict[str, tuple[int | None, int | None]]) -> int | None:
    """The rows a version's files hold (None: a file without a row count)."""
    counts = [rows for _size, rows in files.values()]
    return None if any(c is None for c in counts) else sum(int(c) for c in counts if c is not None)


def _delta_key_scan(loc: Any, files: dict[str, Any], keys: list[str], export: str) -> list[Finding]:
    """Depth full: the current version's `merge_on` columns, read from its files."""
    import pyarrow.dataset as pads  # here: it imports pandas

    from rivet_core.tableformat.location import part_filesystem
    from rivet_core.tableformat.merge_keys import table_key_problem

    if not files:
        return []
    try:
        fs, root = part_filesystem(loc)
        rows = pads.dataset([f"{root}/{p}" for p in files], filesystem=fs, format="parquet").to_table(columns=keys)
    except Exception as exc:  # error boundary: a reader failure is a finding (could not verify)
        return [("table_read_error", {"detail": f"cannot read the merge_on columns of {loc.uri}: "
                                                f"{redact_secrets(exc)}"})]
    problem = table_key_problem(export, keys, rows, loc.uri)
    return [] if problem is None else [_mismatch(problem)]


def _adds(table: Any) -> dict[str, tuple[int | None, int | None]]:
    """path → (size, rows) of a table version's files."""
    import pyarrow as pa

    adds = pa.table(table.get_add_actions(flatten=True))
    if not adds.num_rows:
        return {}
    return {p: (s, r) for p, s, r in zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(),
                                         adds.column("num_records").to_pylist(), strict=True)}
