"""The shapes of a chunk layout, shared by the layout code, the checkpoint, the runners and an orchestrator.

Bounds are text so they round-trip through the state store (chunk_task.start_key /
end_key) and through an orchestrator's partition keys without loss:

| strategy | lo | hi | window SQL predicate |
|---|---|---|---|
| range, count | inclusive integer text | inclusive integer text | `c BETWEEN lo AND hi` |
| dense | inclusive row ordinal (1-based) | inclusive row ordinal | `_rivet_chunk_rn BETWEEN lo AND hi` |
| days | inclusive ISO date | exclusive ISO date | `c >= lo AND c < hi` |
| keyset | exclusive key (None = −∞) | inclusive key (None = +∞) | `k > lo AND k <= hi` |

Range windows are grid-aligned with origin 0: window k covers [k·size, (k+1)·size − 1], so
a window's identity (and its partition key) never changes as the table grows.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ChunkWindow:
    #: Position in the plan, 0..n-1 (the checkpoint's chunk_index).
    index: int
    lo: str | None
    hi: str | None
    #: Stable, sortable partition key, [A-Za-z0-9_.-] only (e.g. "id_000000000100000-000000000199999"; see keys.py).
    key: str


@dataclass(frozen=True)
class ChunkLayout:
    export_name: str
    strategy: str  # "range" | "count" | "dense" | "days" | "keyset"
    column: str
    #: Ids (range), rows (dense, keyset page) or days (days) per window.
    size: int
    windows: tuple[ChunkWindow, ...]
    #: 16-hex xxh3 of (base_query, column, kind) — a resume must see the same plan.
    plan_hash: str
    row_estimate: int | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)
    #: dense: the whole ORDER BY of ROW_NUMBER() — `column`, then tie-breakers that make
    #: the numbering deterministic across separate queries (see layout.py).
    order_by: tuple[str, ...] = ()
    #: dense: the subset of `order_by` compared as text (PostgreSQL types without a btree
    #: ordering, e.g. json).
    order_by_text: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """The plan-hash kind label: range_<size> | count_<n> | dense_rn | date_<D>d | keyset_<size>."""
        return {"range": f"range_{self.size}", "count": f"count_{len(self.windows)}",
                "dense": "dense_rn", "days": f"date_{self.size}d",
                "keyset": f"keyset_{self.size}"}[self.strategy]
