"""Row groups of a chunk window's Parquet parts: small enough that a window's encoding
overlaps its read.

A window's rows are buffered into row groups and each group is encoded when it is full; the
last one only when the window's stream has ended, after the window's query is over. A full
export has ~76 groups in 5 M `orders` rows (the writer's memory budget cuts them), so only a
sliver of its encoding trails the read. A window of 156 k rows (the same table in 32
windows) had 3 groups, and a third of its encoding happened after its read, while the source
sat idle until the next window's query. Measured (PostgreSQL `orders`, 5 M rows, 32 windows,
`parallel: 1`, profile `fast`, two rounds each, docs/benchmarks.md): 26.2 s with the default
groups, 24.1 s with 40 k-row groups (4 per window), against 20.7 s for the full export; the
full export itself gains nothing from smaller groups (21.6 s).

So when the export has no `parquet:` block (which always wins), a chunked export's groups
are capped at a quarter of a window's expected rows, and never below `MIN_WINDOW_GROUP_ROWS`
(smaller groups cost more in footers and compression than the overlap gains).
"""

from __future__ import annotations

import dataclasses
import math

from rivet_core.chunks.model import ChunkLayout
from rivet_core.format.base import WriterOptions

#: Row groups per window the cap aims at.
GROUPS_PER_WINDOW = 4
#: The cap never goes below this many rows per group.
MIN_WINDOW_GROUP_ROWS = 10_000


def expected_window_rows(layout: ChunkLayout) -> int | None:
    """Rows one window is expected to hold: the layout's own size for row-numbered windows
    (dense, keyset), else the table's catalog estimate spread over the windows; None when
    neither is known (a `query:` export's id ranges)."""
    if layout.strategy in ("dense", "keyset"):
        return layout.size
    if layout.row_estimate and layout.windows:
        return math.ceil(layout.row_estimate / len(layout.windows))
    return None


def window_writer_options(options: WriterOptions, layout: ChunkLayout, *, user_sized: bool) -> WriterOptions:
    """`options` with row groups capped for the windows of `layout` (module docstring);
    unchanged when the export sizes its own groups (`parquet:`), is not Parquet, or the
    window's rows are unknown."""
    rows = expected_window_rows(layout)
    if user_sized or options.format != "parquet" or rows is None:
        return options
    cap = max(MIN_WINDOW_GROUP_ROWS, math.ceil(rows / GROUPS_PER_WINDOW))
    if options.row_group_row_cap is not None:
        cap = min(cap, options.row_group_row_cap)
    return dataclasses.replace(options, row_group_row_cap=cap)
