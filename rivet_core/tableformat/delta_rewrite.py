"""MERGE and the predicate overwrite for a Delta table whose log is a local copy (GCS:
gcs_delta_log.py), rewritten by rivet, copy-on-write, in one commit.

On every other store delta-rs does both (commit.py `_merge`, `_replace_where`): it reads the
table's files, writes the rows it keeps into files of its own and commits. On GCS delta-rs
works on a local copy of the log, so it cannot reach the data files; here the same commit is
made from the outside:

1. each current file of the table is read over the table's filesystem (only the columns the
   condition needs first); a file none of whose rows match is kept as it is, a file all of
   whose rows match is removed, and a file with some is rewritten — its other rows into a new
   file at the table root (named as delta-rs names its own), the old one removed;
2. the run's parts are added where they are (referenced, as for an append);
3. removes and adds go into one transaction: a reader sees the table before or after, never
   between. A run that fails before the commit leaves new files no version references.

The condition per operation:
- `merge` (`merge_on: [k, …]`): a row whose key is among the parts' keys — its new version is
  in the parts (an upsert: an updated row is not duplicated). The parts' keys are held in
  memory, as Iceberg's merge holds them (iceberg_commit.py).
- `replace_where` (time_window): a row whose time column is at or after the cutoff; a NULL
  time never matches (delta-rs's predicate `col >= cutoff` keeps it too).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from rivet_core.lazy_modules import pa, pq

#: Which rows of a file (a table of the condition's columns) the commit replaces.
Matcher = Callable[[Any], Any]


def key_matcher(keys: list[str], parts: Any) -> Matcher:
    """Rows whose `keys` tuple is among `parts`' (a pyarrow Table of the parts' key columns)."""
    import pyarrow.compute as pc

    if len(keys) == 1:
        wanted = parts.column(keys[0]).combine_chunks()
        return lambda t: pc.fill_null(pc.is_in(t.column(keys[0]), value_set=wanted.cast(t.column(keys[0]).type)),
                                      False)
    seen = set(zip(*(parts.column(k).to_pylist() for k in keys), strict=True))
    return lambda t: pa.array([tuple(r) in seen for r in zip(*(t.column(k).to_pylist() for k in keys),
                                                              strict=True)], pa.bool_())


def cutoff_matcher(column: str, start: datetime, column_type: Any, unix: bool) -> Matcher:
    """Rows whose `column` is at or after `start` (in the column's own type)."""
    import pyarrow.compute as pc

    if unix:
        bound = pa.scalar(int(start.timestamp()), column_type)
    elif pa.types.is_date(column_type):
        bound = pa.scalar(start.date(), column_type)
    elif pa.types.is_timestamp(column_type) and column_type.tz is None:
        bound = pa.scalar(start.replace(tzinfo=None), column_type)
    else:
        bound = pa.scalar(start, column_type)
    return lambda t: pc.fill_null(pc.greater_equal(t.column(column), bound), False)


def rewrite_actions(table: Any, fs: Any, root: str, columns: list[str], matches: Matcher) -> list[Any]:
    """Remove (and, for files some of whose rows stay, add a rewritten) file actions for every
    current file of `table` with rows that `matches` (module docstring, step 1)."""
    import pyarrow.compute as pc
    from deltalake.transaction import AddAction, RemoveAction

    adds = pa.table(table.get_add_actions(flatten=True))
    now = int(time.time() * 1000)
    actions: list[Any] = []
    for path, size in zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(), strict=True):
        with fs.open_input_file(f"{root}/{path}") as handle:  # one footer read per file
            part = pq.ParquetFile(handle)
            if not set(columns) <= set(part.schema_arrow.names):
                continue  # a file written before the column existed: its NULLs never match
            hit = matches(part.read(columns=columns))
            hits = int(pc.sum(hit).as_py() or 0)
            if hits == 0:
                continue
            actions.append(RemoveAction(path, True, now, size))
            if hits == len(hit):
                continue
            rows = part.read().filter(pc.invert(hit))
        name = f"part-00000-{uuid.uuid4()}-c000.zstd.parquet"
        pq.write_table(rows, f"{root}/{name}", filesystem=fs, compression="zstd")
        written = fs.get_file_info(f"{root}/{name}").size
        actions.append(AddAction(name, int(written), {}, now, True,
                                 json.dumps({"numRecords": rows.num_rows})))
    return actions
