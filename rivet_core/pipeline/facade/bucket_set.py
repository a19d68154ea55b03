"""The bucket set of a `partition_by` run: record it, withdraw what the source no longer holds.

Each bucket of a `partition_by` export publishes through the ordinary facades (parts →
manifest → `_SUCCESS` → cursor); this facade owns the one write group above them — the
record of which buckets the export stands behind (`_partitions.json` at the root prefix,
rivet_core/manifest/bucket_index.py) and the withdrawal of buckets the source no longer
has rows for. Its order, so a crash at any step leaves either the old truth or a verdict
that says FAILED until the next run, never a stale bucket that validates:

1. `open` (after the source was probed, before any bucket runs): the recorded set shrinks
   to the buckets the source still holds (a replacing export: full, chunked) and is
   written; only then are the stale buckets withdrawn. A crash between the two leaves a
   stale bucket that is no longer recorded: `rivet validate` names it (unrecorded) and the
   next run withdraws it.
2. `published` (after each bucket's run): the bucket joins the set with its run id, and the
   set is written again — so the record lags a published bucket by one small write.

Withdrawing a bucket moves its trail under the root's `_quarantine/<run>/<bucket>/` (M9:
never deleted): `_SUCCESS` first (a reader waiting for it stops trusting the bucket),
then the parts its manifests list, then its run copies, `manifest.json` last — the trail a
retry finds again. A Delta bucket's `_delta_log/` moves with its parts (the table lives
entirely under the bucket prefix, so after the move there is no table to read there; an
Iceberg bucket, which a catalog outside the prefix names, is refused with a replacing mode
at load: rivet_core/config/partition_by.py). Only a bucket whose manifest names the
sub-export this export would have written there (`<export>__<label>`) is touched; another
export's manifest is refused and named, and left in place.

An incremental export (and a keyset-incremental chunked one) adds rows run after run: its
buckets are an append log, none is stale, and the set only grows (docs/modes.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rivet_core.destination.base import Destination, ObjectInfo
from rivet_core.errors import DestinationError
from rivet_core.manifest.bucket_index import (
    BucketIndex,
    BucketIndexError,
    read_bucket_index,
    write_bucket_index,
)
from rivet_core.manifest.layout import _RUN_COPY, MANIFEST_KEY, MAX_MANIFEST_BYTES, SUCCESS_KEY
from rivet_core.manifest.model import Manifest, ManifestError, parse_manifest
from rivet_core.manifest.quarantine import quarantine_object
from rivet_core.pipeline.faults import fault_point

log = logging.getLogger("rivet.run")


@dataclass(frozen=True)
class BucketSlot:
    """One bucket folder: its prefix under the root (`<col>=<label>/<suffix>`) and the
    sub-export whose manifest belongs there."""

    prefix: str
    export_name: str


@dataclass
class StaleBucket:
    """A recorded or present bucket the source no longer has rows for, and its manifest."""

    slot: BucketSlot
    manifest: Manifest | None


class BucketSetFacade:
    """The bucket-set write group of one partitioned run (module docstring)."""

    def __init__(self, root: Destination, export_name: str, column: str, run_id: str, *, replacing: bool,
                 full_refresh: bool = False) -> None:
        self.root, self.run_id, self.replacing = root, run_id, replacing
        #: Every row is exported again: buckets lost from an append log are whole again.
        self.rebaselines = replacing or full_refresh
        self.index = BucketIndex(export_name=export_name, partition_by=column, run_id=run_id)
        self.warnings: list[str] = []

    # ------------------------------------------------------------------ 1. open
    def open(self, planned: list[BucketSlot], present: list[BucketSlot]) -> None:
        """Shrink and write the record, then withdraw the stale buckets (module docstring)."""
        recorded = self._recorded()
        wanted = {s.prefix for s in planned}
        ours = {s.prefix: s for s in present}
        known = dict(recorded)
        for slot in present:
            if slot.prefix not in known:
                manifest = self._manifest(slot)
                if manifest is not None and manifest.export_name == slot.export_name:
                    known[slot.prefix] = manifest.run_id
                elif manifest is not None:
                    self._warn(f"bucket folder {slot.prefix} holds a manifest of export '{manifest.export_name}', "
                               f"not '{slot.export_name}': left in place and not recorded (`rivet validate` "
                               "fails on it) — give that export its own destination prefix, then move the folder")
        if not self.replacing:
            self._keep_append_log(known, {s.prefix for s in present})
            return
        stale = [StaleBucket(ours.get(p) or self._slot_for(p, planned, present), None)
                 for p in sorted(known) if p not in wanted]
        self.index.buckets = {p: r for p, r in known.items() if p in wanted}
        self._write()
        fault_point("after_bucket_set_recorded")
        for bucket in stale:
            bucket.manifest = self._manifest(bucket.slot)
            self._withdraw(bucket)

    def _keep_append_log(self, known: dict[str, str], present: set[str]) -> None:
        """An append log (incremental) keeps every bucket; one whose folder is gone is lost
        (BucketIndex.lost) until a full refresh exports its rows again."""
        lost = {} if self.rebaselines else dict(self._previously_lost)
        for prefix in sorted(set(known) - present):
            if not self.rebaselines:
                lost[prefix] = known.pop(prefix)
                self._warn(f"bucket {prefix} (run {lost[prefix]}) was published but its folder is gone: an "
                           "incremental run does not export its rows again (its cursor is past them) — "
                           "`rivet validate` fails until `rivet run --full-refresh` re-exports them")
        self.index.buckets, self.index.lost = known, lost
        self._write()

    def _recorded(self) -> dict[str, str]:
        """The previous run's record ({} when there is none, or it cannot be read: then the
        folders present stand in for it, and a warning says so)."""
        self._previously_lost: dict[str, str] = {}
        try:
            index = read_bucket_index(self.root)
        except (DestinationError, BucketIndexError) as exc:
            self._warn(f"the bucket record at {self.root.uri} could not be read ({exc}); the bucket folders "
                       "present stand in for it, and this run writes a new one")
            return {}
        if index is None:
            return {}
        self._previously_lost = dict(index.lost)
        return dict(index.buckets)

    def _slot_for(self, prefix: str, planned: list[BucketSlot], present: list[BucketSlot]) -> BucketSlot:
        """A recorded bucket that is no longer present: its expected sub-export name is only
        needed to check a manifest, and there is none."""
        return next((s for s in planned + present if s.prefix == prefix), BucketSlot(prefix, ""))

    # ------------------------------------------------------------------ 2. published
    def published(self, slot: BucketSlot, run_id: str) -> None:
        """The bucket's run published its manifest: it joins the record."""
        self.index.buckets[slot.prefix] = run_id
        self._write()

    # ------------------------------------------------------------------ withdrawal
    def _withdraw(self, bucket: StaleBucket) -> None:
        """Move a stale bucket's trail to `_quarantine/` (module docstring for the order)."""
        slot, manifest = bucket.slot, bucket.manifest
        try:
            listing = {o.key: o for o in self.root.list(slot.prefix)}
        except DestinationError as exc:
            self._warn(f"bucket {slot.prefix} is stale but could not be listed ({exc}) — it stays until the "
                       "next run")
            return
        if manifest is None:
            if any(k.startswith(slot.prefix + "data/") for k in listing):
                self._warn(f"bucket {slot.prefix} is stale and has no manifest: its files stay (nothing "
                           "names them as this export's) — remove the folder if it is yours")
            return
        if manifest.export_name != slot.export_name:
            self._warn(f"bucket {slot.prefix} holds a manifest of export '{manifest.export_name}', not "
                       f"'{slot.export_name}': refused to withdraw another export's trail — give that export "
                       "its own destination prefix, then move the folder")
            return
        copies = [k for k in listing if _is_run_copy(slot.prefix, k)]
        parts = {p.path for p in manifest.committed_parts}
        for key in copies:
            parts |= {p.path for p in self._copy_parts(slot, key)}
        delta_log = [k[len(slot.prefix):] for k in sorted(listing) if _is_delta_log(slot.prefix, k)]
        order = ([SUCCESS_KEY] + sorted(parts) + delta_log + [k[len(slot.prefix):] for k in sorted(copies)]
                 + [MANIFEST_KEY])
        moved = sum(self._move(slot.prefix + key, listing) for key in order)
        log.info("bucket %s withdrawn (the source has no rows for it): %d object(s) moved to %s_quarantine/",
                 slot.prefix, moved, self.root.uri)
        self._warn(f"bucket {slot.prefix} withdrawn: the source no longer has rows for it ({manifest.row_count} "
                   f"row(s) of run {manifest.run_id} moved to _quarantine/)")

    def _move(self, key: str, listing: dict[str, ObjectInfo]) -> bool:
        return key in listing and quarantine_object(self.root, self.run_id, key)

    def _manifest(self, slot: BucketSlot) -> Manifest | None:
        return self._parse(slot.prefix + MANIFEST_KEY)

    def _copy_parts(self, slot: BucketSlot, key: str) -> tuple:
        copy = self._parse(key)
        return copy.committed_parts if copy is not None and copy.export_name == slot.export_name else ()

    def _parse(self, key: str) -> Manifest | None:
        """A manifest at `key`, None when absent or unreadable (a warning: it names nothing)."""
        try:
            if self.root.head(key) is None:
                return None
            return parse_manifest(self.root.read_bytes(key, max_bytes=MAX_MANIFEST_BYTES))
        except (DestinationError, ManifestError) as exc:
            self._warn(f"'{key}' could not be read ({exc}): left in place")
            return None

    # ------------------------------------------------------------------ the record
    def _write(self) -> None:
        """Write the record; a failure is a warning (the next run writes it again), and
        `rivet validate` reports the difference meanwhile."""
        try:
            write_bucket_index(self.root, self.index)
        except DestinationError as exc:
            self._warn(f"the bucket record at {self.root.uri} could not be written ({exc}); `rivet validate` "
                       "reports the buckets it misses until the next run writes it")

    def _warn(self, message: str) -> None:
        log.warning("%s", message)
        self.warnings.append(message)


def _is_delta_log(prefix: str, key: str) -> bool:
    rest = key[len(prefix):]
    return key.startswith(prefix) and rest.startswith("_delta_log/") and rest.count("/") == 1


def _is_run_copy(prefix: str, key: str) -> bool:
    rest = key[len(prefix):]
    return key.startswith(prefix) and "/" not in rest and bool(_RUN_COPY.match(rest))


__all__ = ["BucketSetFacade", "BucketSlot", "StaleBucket"]
