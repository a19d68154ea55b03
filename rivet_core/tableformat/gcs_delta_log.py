"""A Delta table on Google Cloud Storage: delta-rs commits against a local copy of the table's
log, and the run's new log entries are then created in the bucket with GCS's atomic create.

Why not delta-rs straight at `gs://`: delta-rs (object_store) writes through GCS's XML API,
which the GCS server the tests run against (fake-gcs-server) does not implement for writes
(docs/adr/0009-table-formats.md), so such a commit could never be tested here. What a Delta
commit needs from a store is one primitive — create `_delta_log/<version>.json` only if no
object has that name, so two writers cannot both commit one version — and GCS's JSON API has
it: an upload with `ifGenerationMatch=0` (`GCSDestination.create_bytes`). A commit is then:

1. `pull`: the table's `_delta_log/` objects are copied into a temporary directory — the log
   only; the data files stay in the bucket (every commit made through this only adds and
   removes file references; MERGE and the predicate overwrite, which rewrite rows, write
   their files over the table's filesystem first: delta_rewrite.py);
2. delta-rs commits to the local table exactly as on every other store (commit.py);
3. `push`: each new commit file is created in the bucket in version order. A name another
   writer created first fails the run before its manifest ("another writer committed version
   N first"); nothing of this run's commit is visible then, and a re-run commits on top.
   A checkpoint delta-rs wrote follows its commit, `_last_checkpoint` last — both derived
   data a reader can rebuild from the commits, so they are plain puts.

Reads (verification, the downstream loader) use the same local copy for the log and read
data files through pyarrow's GCS filesystem (gcs_store.py), which speaks the JSON API.
Readers other than ours — delta-rs, DuckDB, Spark on `gs://` — read the table directly.

Cost: one listing and one GET per log object on every commit and read; a table with a long
history is pulled whole (no checkpoint-based pruning yet).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from rivet_core.tableformat.errors import TableCommitError
from rivet_core.tableformat.gcs_store import BUCKET, gcs_spec
from rivet_core.tableformat.location import TableLocation

LOG = "_delta_log/"
#: Files of the log a reader uses: commits, checkpoints (single or multi-part), the pointer.
_COMMIT = re.compile(r"^\d{20}\.json$")
_CHECKPOINT = re.compile(r"^\d{20}\.checkpoint(\.\d{10}\.\d{10})?\.parquet$")
_POINTER = "_last_checkpoint"


class GcsDeltaLog:
    """The local copy of one GCS table's log (module docstring)."""

    def __init__(self, loc: TableLocation) -> None:
        from rivet_core.destination.gcs import GCSDestination

        options = loc.storage_options
        prefix = loc.uri[len(f"gs://{options[BUCKET]}"):].lstrip("/")
        self.bucket = GCSDestination(gcs_spec(options, prefix + "/" if prefix else ""))
        self.where = loc.uri
        self.dir = Path(tempfile.mkdtemp(prefix="rivet-delta-log-"))
        (self.dir / LOG).mkdir()
        self._pulled: set[str] = set()

    @property
    def local(self) -> TableLocation:
        """The local table delta-rs opens (no storage options: a local path)."""
        return TableLocation(uri=str(self.dir), storage_options={}, sub_prefix="")

    def pull(self) -> None:
        """Copy the bucket's log objects (top level of `_delta_log/`) into the local table."""
        for info in self.bucket.list(LOG):
            name = info.key[len(LOG):]
            if "/" in name or not (_COMMIT.match(name) or _CHECKPOINT.match(name) or name == _POINTER):
                continue
            (self.dir / LOG / name).write_bytes(self.bucket.read_bytes(info.key))
            self._pulled.add(name)

    def new_entries(self) -> list[str]:
        """The log files delta-rs wrote locally since `pull`, in the order they are published:
        commits by version, then checkpoints, then the checkpoint pointer."""
        names = {p.name for p in (self.dir / LOG).iterdir() if p.is_file()} - self._pulled
        commits = sorted(n for n in names if _COMMIT.match(n))
        checkpoints = sorted(n for n in names if _CHECKPOINT.match(n))
        pointer = [_POINTER] if (self.dir / LOG / _POINTER).is_file() and (
            _POINTER in names or checkpoints) else []
        return [*commits, *checkpoints, *pointer]

    def push(self) -> list[int]:
        """Create the new commits in the bucket (module docstring); the versions published."""
        published: list[int] = []
        for name in self.new_entries():
            data = (self.dir / LOG / name).read_bytes()
            if _COMMIT.match(name):
                if not self.bucket.create_bytes(data, LOG + name):
                    raise TableCommitError(
                        f"another writer committed version {int(name[:20])} of the Delta table at {self.where} "
                        f"first — nothing of this run's commit is in the table"
                        + (f" (its version(s) {published} are)" if published else "")
                        + "; run the export again: it commits on top of the table as it is now")
                published.append(int(name[:20]))
            else:
                self.bucket.write_bytes(data, LOG + name)
        return published

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
