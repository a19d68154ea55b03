"""The part records a chunk step wrote, kept for the manifest step of the same process.

A `publish` run of the planner (rivet_dagster/chunked.py `fold_manifest`) commits the
chunk windows and then finalizes the chunk run, by default in one process (the
`in_process` executor, rivet_dagster/executors.py). The finalize puts every window's parts
in the manifest with their fingerprints (content xxh3, MD5, Form B column checksums); the
state store keeps only each part's size and rows, so the finalize reads every part back to
compute them again — at 5 M rows, seconds of reading and hashing data this process has just
written and fingerprinted while writing it. The IO manager remembers the records
`ChunkWindowRun.publish` returned; the manifest step hands them to
`ChunkFinalizeRun.publish(known=…)`, which uses a record only for a part of the same rows
and size at the destination (else it reads that part back, as before). Another process (a
manifest run of its own, the multiprocess executor) finds nothing here and reads back.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

#: Chunk runs whose records are kept at most (oldest dropped): a long-lived process that
#: exports many chunk runs without finalizing them here keeps a bounded memory.
KEEP_RUNS = 4

_records: OrderedDict[str, dict[str, object]] = OrderedDict()


def remember(chunk_run_id: str, results: Iterable[Any]) -> None:
    """Keep the records of the parts a window batch of chunk run `chunk_run_id` wrote
    (`ChunkWindowRun.publish`'s window results, each with its part records)."""
    found = _records.setdefault(chunk_run_id, {})
    _records.move_to_end(chunk_run_id)
    for result in results:
        for record in result.records:
            found[record.path] = record
    while len(_records) > KEEP_RUNS:
        _records.popitem(last=False)


def take(chunk_run_id: str) -> dict[str, object]:
    """The kept records of chunk run `chunk_run_id` (part key → record), forgotten here."""
    return _records.pop(chunk_run_id, {})
