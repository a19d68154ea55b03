"""Where delta-rs opens an export's Delta table: the table itself, or — on GCS — a local copy
of its log whose new commits are published when the block ends (gcs_delta_log.py).

Every reader and writer of a Delta table in rivet_core (commit.py, repair.py, verify.py,
read.py) opens it through `delta_log`, so the GCS path is one implementation, not one per
caller. Data files are always reached through `location.part_filesystem(loc)` of the real
location, never through the table delta-rs opened.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from rivet_core.tableformat.location import TableLocation


def is_log_copy(loc: TableLocation) -> bool:
    """True when delta-rs works on a local copy of the log (a GCS table)."""
    return loc.uri.startswith("gs://")


@contextmanager
def delta_log(loc: TableLocation, *, publish: bool = False) -> Iterator[TableLocation]:
    """The location to give delta-rs for the table at `loc`. With `publish`, the commits made in
    the block are published when it ends without an exception (GCS: created in the bucket,
    raising `TableCommitError` when another writer took a version first); a block that raises
    publishes nothing."""
    if not is_log_copy(loc):
        yield loc
        return
    from rivet_core.tableformat.gcs_delta_log import GcsDeltaLog

    log = GcsDeltaLog(loc)
    try:
        log.pull()
        yield replace(log.local, sub_prefix=loc.sub_prefix)
        if publish:
            log.push()
    finally:
        log.close()
