"""`verify_at_destination`: the M5/M6 verdict on a destination prefix (docs/rivet-compat.md "Manifest, verification and verdicts").

One function serves `rivet run --validate`, `rivet validate` and an orchestrator's data check.
It reads only what it must (head + capped reads of `manifest.json` and `_SUCCESS`, one
listing) and never downloads data parts:

1. `manifest.json`: absent → legacy verdict (M6: `legacy_run`, not passed, no failures) —
   unless the caller brings the run ledger's word that runs were published there
   (`published_evidence`): then `manifest_gone`, verified wrong (the data a reader expects
   was removed: the state store and the destination are cross-checked, docs/operations.md
   "Validate");
   I/O error, or a key held by what is not a file (a local directory or symbolic link:
   unreadable, not absent) → `manifest_read_error`; > 64 MiB → `manifest_oversized` (no manifest Rivet
   writes is that large: it was verified wrong); unparseable → `manifest_self_inconsistent`.
2. self-consistency problems → `manifest_self_inconsistent` (checking continues); when the
   caller names the export (`export_name=`), a manifest written by another export →
   `manifest_export_mismatch` (two exports pointed at one prefix: the verdict must not pass).
3. every depth: one listing; each committed part must exist at its recorded size;
   depth ≥ sample: where both the manifest and the listing carry a real MD5 they must match.
   Same-`export_family` sibling run copies (split units) contribute their parts; an
   incremental dataset's earlier runs since its last baseline (the run copies a reader
   reads with the current one) must have every part too (`_dataset_predecessors`).
   A manifest with a `table` block (`table_format: delta`): the table's version, files and
   row counts agree with it (rivet_core/tableformat/verify.py: `table_mismatch`, or
   `table_read_error` when the table cannot be read).
4. `_SUCCESS`: absent → `success_marker_missing` (a crash between the manifest and the
   marker, or a deleted marker: readers that wait for `_SUCCESS` never see this data);
   malformed / stale / unreadable → failure.
5. depth ≥ sample: listed keys that are neither claimed parts nor sidecars →
   `untracked_object` (advisory: it never fails `passed`).
6. depth full: every part that passed step 3 is downloaded and re-read: its content hash
   (`content_fingerprint` xxh3, `content_md5`) recomputed from the bytes, its row count
   from the Parquet footer (CSV: records counted) and, for Parquet, its Form-B per-column
   checksums (rivet_core/manifest/column_checksums.py) — per part where the part records
   them, and the run-level `column_checksums` against the fold over all parts — with the
   render the manifest names (Rivet's `xxh3-64-sum-v2` keyed by `checksum_key_column`, our
   older `rivet-colsum-v1`, or none: Rivet's XOR v1). Whatever a manifest does not carry
   (no checksums, a render we do not know) is reported in `column_checksums` ("not
   recorded" / "not recomputable: …"), never failed. A `mode: cdc` prefix also has its
   `__pos` column read back (rivet_core/manifest/cdc_positions.py): in log order, inside
   each run's range, each run starting where the previous ended (`cdc_position_violation`).

Depths: light = listing (presence, size) + `_SUCCESS`; sample = light + listing MD5 +
untracked objects; full = sample + the re-read of step 6.

Verdict exit codes (the table of rivet_core/errors.py): 0 passed / legacy / advisory-only;
3 when something was verified wrong; 2 when the only problems are could-not-verify I/O
errors a retry may clear (S3 unreachable, connection reset); else 1.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rivet_core.destination.base import Destination, ObjectInfo
from rivet_core.destination.checksums import md5_bytes, xxh3_fingerprint
from rivet_core.errors import ConfigError, DestinationError
from rivet_core.manifest.layout import (
    _RUN_COPY,
    MANIFEST_KEY,
    MAX_MANIFEST_BYTES,
    MAX_SUCCESS_BYTES,
    SUCCESS_KEY,
    is_sidecar,
    ledger_order,
    parse_success_marker,
    run_manifest_key,
)
from rivet_core.manifest.model import (
    Manifest,
    ManifestError,
    ManifestPart,
    parse_manifest,
    validate_self_consistency,
)
from rivet_core.redact import redact_secrets

#: The table step of a verification (`table_format:` exports): (dest, manifest, listing,
#: export, depth) → (findings as (kind, fields), the keys of the table's files and log).
#: The table readers live above this package (rivet_core/tableformat/verify.py), so the
#: caller hands the step in (rivet_core/pipeline/table_check.py) — see verify_at_destination.
TableCheck = Callable[[Destination, "Manifest", "list[ObjectInfo] | None", Any, str],
                      "tuple[list[tuple[str, dict[str, Any]]], set[str]]"]

log = logging.getLogger(__name__)

DEPTHS = ("light", "sample", "full")

_CODES = {
    "part_missing": "RIVET_VERIFY_PART_MISSING",
    "part_size_mismatch": "RIVET_VERIFY_PART_SIZE_MISMATCH",
    "part_checksum_mismatch": "RIVET_VERIFY_PART_CHECKSUM_MISMATCH",
    "manifest_self_inconsistent": "RIVET_VERIFY_MANIFEST_INCONSISTENT",
    "manifest_read_error": "RIVET_VERIFY_MANIFEST_READ_ERROR",
    "manifest_oversized": "RIVET_VERIFY_MANIFEST_OVERSIZED",
    "manifest_export_mismatch": "RIVET_VERIFY_MANIFEST_OTHER_EXPORT",
    "success_marker_missing": "RIVET_VERIFY_SUCCESS_MISSING",
    "success_marker_malformed": "RIVET_VERIFY_SUCCESS_MALFORMED",
    "success_marker_stale": "RIVET_VERIFY_SUCCESS_STALE",
    "success_marker_read_error": "RIVET_VERIFY_SUCCESS_READ_ERROR",
    "list_prefix_error": "RIVET_VERIFY_LIST_ERROR",
    "untracked_object": "RIVET_VERIFY_UNTRACKED_OBJECT",
    "manifest_required_but_absent": "RIVET_VERIFY_MANIFEST_REQUIRED",
    "manifest_gone": "RIVET_VERIFY_MANIFEST_GONE",
    "part_content_mismatch": "RIVET_VERIFY_PART_CONTENT",
    "part_row_count_mismatch": "RIVET_VERIFY_PART_ROW_COUNT",
    "value_checksum_mismatch": "RIVET_VERIFY_VALUE_CHECKSUM",
    "part_read_error": "RIVET_VERIFY_PART_READ_ERROR",
    # `table_format:` exports (rivet_core/tableformat/verify.py)
    "table_mismatch": "RIVET_VERIFY_TABLE_MISMATCH",
    "table_read_error": "RIVET_VERIFY_TABLE_READ_ERROR",
    # `partition_by` exports: the bucket set against `_partitions.json` (rivet_core/pipeline/buckets/run.py)
    "bucket_missing": "RIVET_VERIFY_BUCKET_MISSING",
    "bucket_unrecorded": "RIVET_VERIFY_BUCKET_UNRECORDED",
    "bucket_lost": "RIVET_VERIFY_BUCKET_LOST",
    "bucket_index_invalid": "RIVET_VERIFY_BUCKET_INDEX_INVALID",
    "bucket_index_read_error": "RIVET_VERIFY_BUCKET_INDEX_READ_ERROR",
    # `mode: cdc` at depth full (rivet_core/manifest/cdc_positions.py)
    "cdc_position_violation": "RIVET_VERIFY_CDC_POSITION",
}
ADVISORY_KINDS = frozenset({"untracked_object"})
COULD_NOT_VERIFY_KINDS = frozenset({"manifest_read_error", "success_marker_read_error", "list_prefix_error",
                                    "part_read_error", "table_read_error", "bucket_index_read_error"})


@dataclass(frozen=True)
class VerifyFailure:
    """One finding. `fields` holds the kind-specific wire fields (e.g. part_id, path,
    expected, actual); they are also readable as attributes (`failure.path`)."""

    kind: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in _CODES:
            raise ValueError(f"unknown verification failure kind {self.kind!r}")

    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__.get("fields")
        if fields is not None and name in fields:
            return fields[name]
        raise AttributeError(name)

    @property
    def code(self) -> str:
        return _CODES[self.kind]

    @property
    def fatal(self) -> bool:
        """Every kind fails the verdict except the advisory `untracked_object`."""
        return self.kind not in ADVISORY_KINDS

    @property
    def verified_wrong(self) -> bool:
        """True when the destination was read and found wrong (exit 3), not merely unreadable."""
        return self.fatal and self.kind not in COULD_NOT_VERIFY_KINDS

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.fields, "code": self.code}

    def describe(self) -> str:
        """One human line an operator can act on."""
        f = self.fields
        match self.kind:
            case "part_missing":
                return f"part {f['part_id']} '{f['path']}' is missing"
            case "part_size_mismatch":
                return f"part {f['part_id']} '{f['path']}' is {f['actual']} bytes, manifest says {f['expected']}"
            case "part_checksum_mismatch":
                return f"part {f['part_id']} '{f['path']}' has md5 {f['actual']}, manifest says {f['expected']}"
            case "success_marker_stale":
                return (f"_SUCCESS holds {f['marker_fingerprint']} but manifest.json fingerprints to "
                        f"{f['manifest_fingerprint']} (the manifest was rewritten after the marker)")
            case "success_marker_malformed":
                return f"_SUCCESS is malformed: {f['body_preview']}"
            case "success_marker_missing":
                return ("_SUCCESS is missing next to manifest.json (a run stopped between the manifest and "
                        "the marker, or the marker was deleted) — run the export again")
            case "manifest_export_mismatch":
                return (f"manifest.json was written by export '{f['actual']}', not by "
                        f"'{f['expected']}' — two exports write to this prefix; give each export its "
                        "own destination prefix, then run it again")
            case "manifest_oversized":
                return (f"manifest.json is {f['size_bytes']} bytes, over the {f['limit_bytes']}-byte cap "
                        "(Rivet never writes one that large: it is not a Rivet manifest or it is damaged) — "
                        "run the export again")
            case "untracked_object":
                return f"untracked object '{f['key']}' ({f['size_bytes']} bytes)"
            case "part_content_mismatch" | "part_row_count_mismatch" | "value_checksum_mismatch":
                return (f"part {f['part_id']} '{f['path']}': {f['check']} expected {f['expected']}, "
                        f"found {f['actual']}")
            case "part_read_error":
                return f"part {f['part_id']} '{f['path']}' could not be re-read: {f['detail']}"
            case "table_mismatch" | "table_read_error":
                return f"table: {f['detail']}"
            case "manifest_gone":
                return (f"no manifest.json at {f['prefix']}, but {f['evidence']} — the published data was "
                        "removed or moved; run the export again to publish it anew (rivet run -e <export>; "
                        "an incremental export: --full-refresh), or restore the prefix")
            case "bucket_missing":
                return (f"bucket '{f['bucket']}' is recorded in _partitions.json (run {f['run_id']}) but its "
                        "folder has no manifest.json — it was deleted or moved; run the export again")
            case "bucket_unrecorded":
                return (f"bucket '{f['bucket']}' has a manifest but no run recorded it in _partitions.json — "
                        "run the export again (it records or withdraws the bucket), or move the folder if "
                        "it is not this export's")
            case "bucket_lost":
                return (f"bucket '{f['bucket']}' (published by run {f['run_id']}) was deleted, and an "
                        "incremental run does not export its rows again (its cursor is past them) — run "
                        f"`rivet run --full-refresh -e {f['export']}`")
            case "bucket_index_invalid" | "bucket_index_read_error":
                return (f"the bucket record '{f['key']}' could not be read: {f['detail']} — run the export "
                        "again (it writes a new record from the buckets it publishes)")
            case "manifest_required_but_absent":
                return f"no '{f['key']}' at {f['prefix']} (validate --run-id / --prefix / --date asked for one)"
            case _:
                return f"{self.kind}: {f.get('detail', '')}"


@dataclass
class Verification:
    """The verdict. `to_dict()` is the wire shape used by `rivet validate --json`, run
    reports and an orchestrator's check metadata."""

    manifest_found: bool = False
    legacy_run: bool = False
    parts_verified: int = 0
    parts_md5_verified: int = 0
    parts_failed: int = 0
    success_marker_consistent: bool = False
    manifest_self_consistent: bool = False
    passed: bool = False
    failures: list[VerifyFailure] = field(default_factory=list)
    depth_level: str = "full"
    #: depth full: parts whose bytes were re-read and matched every recorded check.
    parts_content_verified: int = 0
    #: depth full: "verified" | "not recorded" | "not recomputable: …" | "failed"; None below full.
    column_checksums: str | None = None

    @property
    def failed(self) -> bool:
        """`rivet validate` counts an export as failing iff not passed AND failures exist."""
        return not self.passed and any(f.fatal for f in self.failures)

    def exit_code(self) -> int:
        if not self.failed:
            return 0  # passed, legacy prefix, or advisory-only findings
        if any(f.verified_wrong for f in self.failures):
            return 3
        could_not = [f for f in self.failures if f.fatal]
        if could_not and all(f.fields.get("transient") for f in could_not):
            return 2  # only unreadable because the destination is unreachable: retry (errors.py table)
        return 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "manifest_found": self.manifest_found,
            "legacy_run": self.legacy_run,
            "parts_verified": self.parts_verified,
            "parts_md5_verified": self.parts_md5_verified,
            "parts_failed": self.parts_failed,
            "success_marker_consistent": self.success_marker_consistent,
            "manifest_self_consistent": self.manifest_self_consistent,
            "passed": self.passed,
            "failures": [f.to_dict() for f in self.failures],
            "depth_level": self.depth_level,
            **({} if self.column_checksums is None else {
                "parts_content_verified": self.parts_content_verified,
                "column_checksums": self.column_checksums}),
        }

    def summary(self) -> str:
        if self.legacy_run:
            return "no manifest.json at the prefix (legacy run): only reduced checks are possible"
        head = "passed" if self.passed else "FAILED"
        full = "" if self.column_checksums is None else (
            f", {self.parts_content_verified} re-read in full, column checksums: {self.column_checksums}")
        return (f"{head}: {self.parts_verified} parts verified ({self.parts_md5_verified} by md5), "
                f"{self.parts_failed} failed, {len(self.failures)} finding(s){full}")


def _detail(exc: BaseException) -> str:
    return redact_secrets(str(exc))[:1000]


def _io_fields(exc: BaseException) -> dict[str, Any]:
    """A could-not-verify finding: the redacted detail and whether a retry may clear it
    (S3 unreachable, connection reset: the destination error's `transient`)."""
    return {"detail": _detail(exc), "transient": bool(getattr(exc, "transient", False))}


def _preview(body: bytes, limit: int = 64) -> str:
    text = body[:limit].decode("utf-8", "replace")
    text = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in text)
    return redact_secrets(text + ("…" if len(body) > limit else ""))


def _other_run_copies(dest: Destination, m: Manifest, listing: list[ObjectInfo]) -> list[Manifest]:
    """Every run copy `manifest-<run>.json` at the prefix root but `m`'s own, parsed; a copy
    that is too large or does not parse is skipped with a warning (its parts then show up as
    untracked, advisory, rather than failing the verdict on a file we cannot interpret)."""
    own = run_manifest_key(m.run_id)
    copies: list[Manifest] = []
    for obj in listing:
        if obj.key == own or not _RUN_COPY.match(obj.key) or obj.size > MAX_MANIFEST_BYTES:
            continue
        try:
            copies.append(parse_manifest(dest.read_bytes(obj.key, max_bytes=MAX_MANIFEST_BYTES)))
        except (DestinationError, ManifestError) as exc:
            log.warning("skipping run manifest '%s' at %s: %s", obj.key, dest.uri, _detail(exc))
    return copies


def _family_parts(dest: Destination, m: Manifest, listing: list[ObjectInfo]) -> list[ManifestPart]:
    """Committed parts of the latest run copy of each same-family sibling unit (docs/rivet-compat.md "Manifest, verification and verdicts").

    Unreadable or foreign sibling copies are skipped: their parts then show up as
    untracked (advisory) rather than failing the verdict on a file we cannot interpret.
    """
    latest: dict[str, Manifest] = {}
    for sib in _other_run_copies(dest, m, listing):
        if sib.export_family != m.export_family or sib.export_name == m.export_name:
            continue
        prev = latest.get(sib.export_name)
        if prev is None or sib.finished_at > prev.finished_at:
            latest[sib.export_name] = sib
    return [p for sib in latest.values() for p in sib.committed_parts]


def _dataset_predecessors(dest: Destination, m: Manifest, listing: list[ObjectInfo]) -> list[Manifest]:
    """The earlier runs of an incremental dataset that a reader reads with `m` (docs/manifest.md:
    every success run copy at the prefix root since the last run that started from nothing,
    in the ledger's order — what `rivet_core.api.dataset_manifests` hands a reader), so that
    their parts are verified too: a reader of the dataset sees them, and a part of an earlier
    run that is gone is data gone. Empty for any other manifest. Copies that do not parse are
    skipped, as for a reader (manifest/layout.py `read_run_manifests`)."""
    extraction = m.source.extraction
    if extraction is None or extraction.strategy not in ("incremental", "cdc") or extraction.cursor_low is None:
        return []
    runs = sorted((run for run in _other_run_copies(dest, m, listing)
                   if run.status == "success" and run.export_name == m.export_name
                   and ledger_order(run) < ledger_order(m)), key=ledger_order)
    baseline = max((i for i, run in enumerate(runs)
                    if run.source.extraction is None or run.source.extraction.cursor_low is None), default=0)
    return runs[baseline:]


def _check_parts(v: Verification, parts: list[ManifestPart], listing: list[ObjectInfo],
                 depth: str = "sample") -> list[ManifestPart]:
    """Presence and size (every depth), listing MD5 (sample and full). Returns the parts
    that passed, for the full re-read."""
    by_key = {o.key: o for o in listing}
    passed: list[ManifestPart] = []
    for part in parts:
        obj = by_key.get(part.path)
        if obj is None:
            v.parts_failed += 1
            v.failures.append(VerifyFailure("part_missing", {"part_id": part.part_id, "path": part.path}))
            continue
        if obj.size != part.size_bytes:
            v.parts_failed += 1
            v.failures.append(VerifyFailure("part_size_mismatch", {
                "part_id": part.part_id, "path": part.path, "expected": part.size_bytes, "actual": obj.size,
            }))
            continue
        want, got = md5_bytes(part.content_md5), md5_bytes(obj.md5_b64)
        if depth != "light" and want is not None and got is not None:
            if want != got:
                v.parts_failed += 1
                v.failures.append(VerifyFailure("part_checksum_mismatch", {
                    "part_id": part.part_id, "path": part.path, "check": "content_md5 (listing)",
                    "expected": part.content_md5, "actual": obj.md5_b64,
                }))
                continue
            v.parts_md5_verified += 1
        v.parts_verified += 1
        passed.append(part)
    return passed


def _fail_part(v: Verification, kind: str, part: ManifestPart, check: str, expected: Any, actual: Any) -> None:
    v.failures.append(VerifyFailure(kind, {"part_id": part.part_id, "path": part.path, "check": check,
                                           "expected": expected, "actual": actual}))


def _count_csv_rows(data: bytes) -> int:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if not data:
        return 0
    opts = pacsv.ConvertOptions(column_types=None, strings_can_be_null=False)
    reader = pacsv.open_csv(pa.BufferReader(data), convert_options=opts,
                            read_options=pacsv.ReadOptions(autogenerate_column_names=False),
                            parse_options=pacsv.ParseOptions(newlines_in_values=True))
    return sum(b.num_rows for b in reader)


def _reread_parts(v: Verification, dest: Destination, manifest: Manifest, parts: list[ManifestPart],
                  all_parts: int) -> None:
    """Step 6 (depth full): download and re-read each part; see the module docstring."""
    from rivet_core.destination.checksums import Fingerprinter
    from rivet_core.manifest.column_checksums import (
        KNOWN_RENDERS,
        ColumnSum,
        combine,
        parquet_sums,
    )

    run_checks = manifest.column_checksums
    render, key_column = manifest.checksum_render, manifest.checksum_key_column
    render_ok = render in KNOWN_RENDERS
    found_sums: list[dict[str, ColumnSum]] = []
    part_checks_seen = 0
    failed_checksums = False
    for part in parts:
        try:
            data = dest.read_bytes(part.path)
        except Exception as exc:  # error boundary: any read failure is a verdict, never a traceback
            v.failures.append(VerifyFailure("part_read_error", {"part_id": part.part_id, "path": part.path,
                                                                 **_io_fields(exc)}))
            continue
        ok = True
        fp = Fingerprinter()
        fp.update(data)
        if part.content_fingerprint and part.content_fingerprint != fp.xxh3:
            _fail_part(v, "part_content_mismatch", part, "content_fingerprint", part.content_fingerprint, fp.xxh3)
            ok = False
        want = md5_bytes(part.content_md5)
        if want is not None and want != md5_bytes(fp.md5_b64):
            _fail_part(v, "part_content_mismatch", part, "content_md5", part.content_md5, fp.md5_b64)
            ok = False
        is_parquet = manifest.format == "parquet" or part.path.endswith(".parquet")
        sums: dict[str, ColumnSum] | None = None
        try:
            if is_parquet:
                import pyarrow as pa
                import pyarrow.parquet as pq

                rows = pq.ParquetFile(pa.BufferReader(data)).metadata.num_rows
                if (part.column_checksums is not None or run_checks is not None) and render_ok:
                    sums = parquet_sums(data, key_column=key_column, render=render)
            else:
                rows = _count_csv_rows(data)
        except Exception as exc:  # error boundary: unreadable bytes are verified wrong, not a traceback
            _fail_part(v, "part_row_count_mismatch", part, "readable " + ("parquet" if is_parquet else "csv"),
                       "a readable file", _detail(exc))
            v.parts_failed += 1
            continue
        if rows != part.rows:
            _fail_part(v, "part_row_count_mismatch", part, "rows", part.rows, rows)
            ok = False
        if sums is not None:
            found_sums.append(sums)
            if part.column_checksums is not None:
                part_checks_seen += 1
                for c in part.column_checksums:
                    got = sums.get(c.name)
                    if got is None:
                        _fail_part(v, "value_checksum_mismatch", part, f"column '{c.name}' checksum",
                                   c.checksum, "column absent")
                        ok = False
                        failed_checksums = True
                    elif str(got.checksum) != c.checksum or (c.nulls is not None and got.nulls != c.nulls):
                        _fail_part(v, "value_checksum_mismatch", part, f"column '{c.name}' checksum",
                                   f"{c.checksum} ({c.nulls} nulls)", f"{got.checksum} ({got.nulls} nulls)")
                        ok = False
                        failed_checksums = True
        if ok:
            v.parts_content_verified += 1
        else:
            v.parts_failed += 1
    # the run-level Form B: only comparable when every part was re-read
    run_compared = False
    if run_checks is not None and render_ok and len(found_sums) == all_parts == len(parts):
        total = combine(found_sums, render)
        for c in run_checks:
            got = total.get(c.name)
            if got is None or str(got.checksum) != c.checksum or (c.nulls is not None and got.nulls != c.nulls):
                v.failures.append(VerifyFailure("value_checksum_mismatch", {
                    "part_id": "*", "path": "(all parts)", "check": f"column '{c.name}' checksum (run level)",
                    "expected": f"{c.checksum} ({c.nulls} nulls)",
                    "actual": "column absent" if got is None else f"{got.checksum} ({got.nulls} nulls)"}))
                failed_checksums = True
        run_compared = True
    if failed_checksums:
        v.column_checksums = "failed"
    elif not render_ok:
        v.column_checksums = f"not recomputable: render '{manifest.checksum_render}'"
    elif run_compared or (parts and part_checks_seen == len(parts)):
        v.column_checksums = "verified"
    elif run_checks is None and part_checks_seen == 0:
        v.column_checksums = "not recorded"
    else:
        v.column_checksums = f"partly verified ({part_checks_seen} of {len(parts)} parts)"


def _check_success_marker(v: Verification, dest: Destination, manifest_bytes: bytes) -> None:
    try:
        info = dest.head(SUCCESS_KEY)
    except DestinationError as exc:
        v.failures.append(VerifyFailure("success_marker_read_error", _io_fields(exc)))
        return
    if info is None:  # the manifest landed but the marker did not: readers never see the data
        v.failures.append(VerifyFailure("success_marker_missing", {"key": SUCCESS_KEY}))
        return
    if info.size > MAX_SUCCESS_BYTES:
        v.failures.append(VerifyFailure("success_marker_malformed", {
            "body_preview": f"<{info.size} bytes, over the {MAX_SUCCESS_BYTES}-byte cap>",
        }))
        return
    try:
        body = dest.read_bytes(SUCCESS_KEY, max_bytes=MAX_SUCCESS_BYTES)
    except DestinationError as exc:
        v.failures.append(VerifyFailure("success_marker_read_error", _io_fields(exc)))
        return
    marker = parse_success_marker(body)
    if marker is None:
        v.failures.append(VerifyFailure("success_marker_malformed", {"body_preview": _preview(body)}))
        return
    expected = xxh3_fingerprint(manifest_bytes)
    if marker != expected:
        v.failures.append(VerifyFailure("success_marker_stale", {
            "marker_fingerprint": marker, "manifest_fingerprint": expected,
        }))
        return
    v.success_marker_consistent = True


def _finish(v: Verification) -> Verification:
    v.passed = v.manifest_found and not any(f.fatal for f in v.failures)
    return v


def verify_at_destination(dest: Destination, depth: str = "sample", *,
                          export_name: str | None = None, run_id: str | None = None,
                          require_manifest: bool = False, export: Any = None,
                          published_evidence: str | None = None,
                          table_check: TableCheck | None = None) -> Verification:
    """Verify the prefix `dest` points at; see the module docstring for the steps.
    `export_name`: the export the prefix belongs to (its manifest must name it); None skips
    that check (a prefix inspected without a config). `run_id` (`rivet validate --run-id`):
    verify that run's `manifest-<run>.json` copy instead of `manifest.json`; `_SUCCESS`
    belongs to the canonical manifest, so it only counts when it fingerprints this copy.
    `require_manifest` (or `run_id`): no manifest is `manifest_required_but_absent`, not a
    legacy prefix. `export`: the export's config, for a table whose catalog it names
    (`table_format: iceberg`; rivet_core/tableformat/iceberg_verify.py). `published_evidence`:
    the run ledger's word that runs were published here (`rivet validate` reads it from the
    state store) — then a prefix without a manifest is `manifest_gone` (verified wrong,
    exit 3), never a legacy prefix. `table_check`: the table step for a manifest that names a
    table (`TableCheck`; the callers pass rivet_core/pipeline/table_check.py's)."""
    if depth not in DEPTHS:
        raise ConfigError(f"unknown verification depth {depth!r} — use one of {', '.join(DEPTHS)}")
    v = Verification(depth_level=depth)
    manifest_key = run_manifest_key(run_id) if run_id else MANIFEST_KEY

    # 1. the manifest
    try:
        info = dest.head(manifest_key)
    except DestinationError as exc:
        v.failures.append(VerifyFailure("manifest_read_error", _io_fields(exc)))
        return _finish(v)
    if info is None and (occupant := dest.not_an_object(manifest_key)) is not None:
        v.failures.append(VerifyFailure("manifest_read_error", {  # unreadable is not absent (not legacy)
            "detail": f"{manifest_key} at {dest.uri} is {occupant}, not a file — restore the manifest file "
                      "or move what is there away", "transient": False}))
        return _finish(v)
    if info is None:
        if published_evidence and not run_id:
            v.failures.append(VerifyFailure("manifest_gone", {"prefix": dest.uri, "evidence": published_evidence}))
            return _finish(v)
        if run_id or require_manifest:
            v.failures.append(VerifyFailure("manifest_required_but_absent", {"key": manifest_key,
                                                                             "prefix": dest.uri}))
            return _finish(v)
        v.legacy_run = True
        return _finish(v)
    v.manifest_found = True
    if info.size > MAX_MANIFEST_BYTES:
        v.failures.append(VerifyFailure("manifest_oversized", {
            "size_bytes": info.size, "limit_bytes": MAX_MANIFEST_BYTES,
        }))
        return _finish(v)
    try:
        data = dest.read_bytes(manifest_key, max_bytes=MAX_MANIFEST_BYTES)
    except DestinationError as exc:
        v.failures.append(VerifyFailure("manifest_read_error", _io_fields(exc)))
        return _finish(v)
    try:
        manifest = parse_manifest(data)
    except ManifestError as exc:
        v.failures.append(VerifyFailure("manifest_self_inconsistent", {
            "detail": f"cannot parse {manifest_key}: {_detail(exc)}",
        }))
        return _finish(v)

    # 2. self-consistency
    problems = validate_self_consistency(manifest)
    v.manifest_self_consistent = not problems
    v.failures.extend(VerifyFailure("manifest_self_inconsistent", {"detail": p}) for p in problems)
    if run_id and manifest.run_id != run_id:
        v.failures.append(VerifyFailure("manifest_self_inconsistent", {
            "detail": f"{manifest_key} names run '{manifest.run_id}', not '{run_id}'"}))
    if export_name is not None and manifest.export_name != export_name:
        v.failures.append(VerifyFailure("manifest_export_mismatch", {  # expected/actual: the export names
            "expected": export_name, "actual": manifest.export_name,
        }))

    # 3. parts against one listing
    listing: list[ObjectInfo] | None = None
    claimed: set[str] = set()
    try:
        listing = dest.list("")
    except DestinationError as exc:
        v.failures.append(VerifyFailure("list_prefix_error", _io_fields(exc)))
    if listing is not None:
        parts = list(manifest.committed_parts)
        if manifest.export_family:
            seen = {p.path for p in parts}
            parts += [p for p in _family_parts(dest, manifest, listing) if p.path not in seen]
        claimed = {p.path for p in parts}
        intact = _check_parts(v, parts, listing, depth)
        if depth == "full":
            # 6. the re-read (own parts only: sibling units carry their own run-level checksums)
            own = {p.path for p in manifest.committed_parts}
            _reread_parts(v, dest, manifest, [p for p in intact if p.path in own], len(own))

    # 3b. the table the manifest publishes (table_format exports; rivet_core/tableformat/verify.py)
    if manifest.table is not None and run_id is None:
        if table_check is None:
            raise ConfigError("this prefix publishes a table and the verification was given no table "
                              "check (pass table_check=rivet_core.pipeline.table_check.check_table)")
        table_findings, table_keys = table_check(dest, manifest, listing, export, depth)
        v.failures.extend(VerifyFailure(kind, fields) for kind, fields in table_findings)
        claimed |= table_keys

    # 3c. an appending dataset: the earlier runs a reader reads together with this one
    if listing is not None and run_id is None and manifest.table is None:
        earlier_runs = _dataset_predecessors(dest, manifest, listing)
        if manifest.mode == "cdc" and depth == "full":  # __pos order, ranges, the run chain
            from rivet_core.manifest.cdc_positions import check_chain, check_run

            for run in [*earlier_runs, manifest]:
                v.failures += [VerifyFailure(kind, fields) for kind, fields in check_run(dest, run)]
            v.failures += [VerifyFailure(kind, fields) for kind, fields in check_chain([*earlier_runs, manifest])]
        for earlier in earlier_runs:
            claimed |= {p.path for p in earlier.committed_parts}
            probe = Verification()
            _check_parts(probe, list(earlier.committed_parts), listing, "light")
            v.parts_failed += probe.parts_failed
            v.failures += [VerifyFailure(f.kind, {**f.fields, "run_id": earlier.run_id}) for f in probe.failures]

    # 4. the success marker (a run copy: only whether the marker is this run's)
    if run_id is None:
        _check_success_marker(v, dest, data)
    else:
        probe = Verification()
        _check_success_marker(probe, dest, data)
        v.success_marker_consistent = probe.success_marker_consistent

    # 5. untracked objects (advisory; sample and full)
    if listing is not None and depth != "light":
        own_datasets = ("snapshot/",) if manifest.mode == "cdc" else ()  # verified as datasets of their own
        for obj in listing:
            if obj.key not in claimed and not is_sidecar(obj.key) and not obj.key.startswith(own_datasets):
                v.failures.append(VerifyFailure("untracked_object", {"key": obj.key, "size_bytes": obj.size}))
    return _finish(v)


__all__ = ["Verification", "VerifyFailure", "verify_at_destination", "DEPTHS", "ADVISORY_KINDS",
           "COULD_NOT_VERIFY_KINDS"]
