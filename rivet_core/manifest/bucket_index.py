"""`_partitions.json`: the record of the bucket set a `partition_by` export published.

A `partition_by` export is one folder per date bucket under a root prefix, each bucket
with its own manifest and `_SUCCESS` (rivet_core/pipeline/buckets/run.py). A bucket's manifest
proves what is *in* that bucket; nothing in a bucket can prove which buckets *should*
exist — a deleted bucket folder leaves no trace, and a bucket the last run never revisited
looks as good as a fresh one. This file is that missing record: at the root prefix, next
to the bucket folders, the export's name, its column, the partitioned run that wrote it
last and every bucket prefix a published run stands behind (with the run id of the
bucket's manifest then).

Why a file at the destination and not the state store: `rivet validate` reads only the
destination (no source, no state store — a second machine, a reader's account, an
orchestrator's check see the destination, not the local store), and the record must
travel with the data it describes (a copied or restored root carries its own bucket
set). Its name starts with `_`, so pyarrow, Spark and DuckDB's `*/data/*.parquet` globs
skip it, as they skip `_SUCCESS` and `_quarantine/`.

It is replaced whole with the destination's atomic write (M7: local temp file + rename,
one PUT on an object store), so a reader sees the previous set or the next, never half
of one. The writer is the partitioned run's bucket-set facade
(rivet_core/pipeline/facade/bucket_set.py); this module only names, encodes and reads it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime

from rivet_core.destination.base import Destination
from rivet_core.destination.errors import destination_error

INDEX_KEY = "_partitions.json"
INDEX_FORMAT = "rivet-partitions/1"
#: No bucket set Rivet writes comes near this (10,000 buckets × ~120 bytes): a larger
#: object is not ours, and is refused before it is downloaded.
MAX_INDEX_BYTES = 16 * 1024 * 1024


class BucketIndexError(ValueError):
    """`_partitions.json` exists but is not a bucket index this export wrote."""


@dataclass
class BucketIndex:
    """The bucket set of one `partition_by` export: bucket prefix (`<col>=<label>/…`) → the
    run id of the manifest published there."""

    export_name: str
    partition_by: str
    run_id: str
    buckets: dict[str, str] = field(default_factory=dict)
    #: Buckets of an append log (incremental) whose folder disappeared after a run published
    #: it: their rows are not exported again by the next run (its cursor is past them), so
    #: they stay listed here — and `rivet validate` FAILED — until a full refresh.
    lost: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        """The file's bytes: buckets sorted, so equal sets are equal files."""
        body = {"format": INDEX_FORMAT, "export_name": self.export_name, "partition_by": self.partition_by,
                "run_id": self.run_id, "written_at": datetime.now(UTC).isoformat(),
                "buckets": [{"prefix": p, "run_id": r} for p, r in sorted(self.buckets.items())],
                "lost": [{"prefix": p, "run_id": r} for p, r in sorted(self.lost.items())]}
        return json.dumps(body, indent=1).encode()


def decode_bucket_index(data: bytes) -> BucketIndex:
    """Parse the file's bytes; `BucketIndexError` names what is wrong."""
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BucketIndexError(f"{INDEX_KEY} is not JSON: {exc}") from None
    if not isinstance(body, dict) or body.get("format") != INDEX_FORMAT:
        raise BucketIndexError(f"{INDEX_KEY} is not a '{INDEX_FORMAT}' bucket index")
    return BucketIndex(export_name=str(body.get("export_name", "")), partition_by=str(body.get("partition_by", "")),
                       run_id=str(body.get("run_id", "")), buckets=_entries(body, "buckets"),
                       lost=_entries(body, "lost"))


def _entries(body: dict, name: str) -> dict[str, str]:
    rows = body.get(name, [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("prefix"), str)
                                             for r in rows):
        raise BucketIndexError(f"{INDEX_KEY}: '{name}' must be a list of {{prefix, run_id}}")
    return {r["prefix"]: str(r.get("run_id") or "") for r in rows}


def read_bucket_index(root: Destination) -> BucketIndex | None:
    """The index at the root prefix; None when there is none (an export not yet run by a
    version that records its bucket set). Raises `DestinationError` on I/O or when the
    object is over `MAX_INDEX_BYTES`, `BucketIndexError` when it does not parse."""
    info = root.head(INDEX_KEY)
    if info is None:
        return None
    if info.size > MAX_INDEX_BYTES:
        raise destination_error(f"{INDEX_KEY} at {root.uri} is {info.size} bytes, over the "
                                f"{MAX_INDEX_BYTES}-byte limit — refusing to read it")
    return decode_bucket_index(root.read_bytes(INDEX_KEY, max_bytes=MAX_INDEX_BYTES))


def write_bucket_index(root: Destination, index: BucketIndex) -> None:
    """Replace the index whole (the destination's atomic write, module docstring)."""
    root.write_bytes(index.encode(), INDEX_KEY)


__all__ = ["INDEX_KEY", "BucketIndex", "BucketIndexError", "decode_bucket_index", "read_bucket_index",
           "write_bucket_index"]
