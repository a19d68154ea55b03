"""Chunk windows of a `mode: chunked` export: resolve its strategy (`strategy.py`), probe the
source (`probes.py`) and lay out its windows (`windows.py` has the math) as a `ChunkLayout`
(docs/rivet-compat.md "Chunk windows", "Keyset"). The word "plan" belongs to `rivet plan` /
`rivet apply` (rivet_core/ops/plan.py); this is the layout of one export's windows.

    layout = lay_out_windows(session, export, base_sql=export.resolved_query,
                             table_parts=export.table_parts)
    if layout is None: ...  # small table without an explicit shape → run a full export

    shape = describe_chunking(session, export)  # steps 1–3 only: no probe reads the table
    shape.strategy, shape.column, shape.chunk_size, shape.warnings

Strategy resolution (`strategy.py`), then the probes and windows, in order:

1. Static rules (also checked at load time): `chunk_by_key` excludes chunk_column /
   chunk_dense / chunk_by_days / chunk_count; `chunk_by_key` and `chunk_size_memory_mb`
   need the `table:` shortcut; counts and sizes ≥ 1.
2. `table:` exports are introspected from the catalog (`rivet_core.catalog.table_info`:
   columns, NOT NULL, single-column PRIMARY/UNIQUE keys, row estimate, average row bytes). `chunk_size_memory_mb` sizes
   windows as `mb·2^20 / avg_row_bytes` (PG: `pg_relation_size / reltuples`; MySQL:
   `avg_row_length`; fallback 512 B) clamped to [10,000, 5,000,000].
3. The shape: `chunk_by_key` → keyset; `chunk_dense` → dense; `chunk_by_days` → days;
   `chunk_count` → count; else range. Without `chunk_column`, a `table:` export uses its
   single-integer primary key (WARN "chunk_column not set — auto-resolved to 'id'"); a
   dense export may use any single-column NOT NULL unique key; with no shape knob at all
   and no integer primary key, a usable single-column unique key becomes an automatic
   keyset (WARN; on both engines — the reference does this on MySQL only). Otherwise
   "found no safe shape". A `query:` export must name its chunk_column.
4. Type checks through `SourceSession.describe` (scan-free): a range/count column must be
   integer-family (strict on `table:` exports; on `query:` exports only clearly
   non-numeric types are refused and fractional bounds are caught by the min/max probe);
   a day column must be a date or timestamp; a keyset key must be single-column,
   NOT NULL, PRIMARY/UNIQUE and of type int/float/text/timestamp/date/uuid (decimal,
   bool and binary refused).
5. Small-table fallback: a `table:` export whose row estimate is ≤ chunk_size and that
   sets none of chunk_count / chunk_by_days / chunk_checkpoint / chunk_by_key /
   chunk_dense returns None (INFO log) — unless `allow_downgrade=False` (an orchestrator's
   planner: a partition set must not flip between "full" and "chunked").
6. Probes and windows (see windows.py for the math): range/count/days run a NULL probe
   (`SELECT 1 … WHERE c IS NULL LIMIT 1`) and MIN/MAX probes; dense runs COUNT(*);
   keyset samples its boundaries in one ordered scan (`ROW_NUMBER() OVER (ORDER BY k)`,
   every `chunk_size`-th key). An empty source gives zero windows (keyset: one open
   window).
7. Guards: more than 50,000,000 windows → error; a range plan of ≥ 64 windows with a
   known row estimate and windows ≥ 4 × ceil(rows / chunk_size) → "refusing to run a
   sparse range plan"; no estimate and ≥ 1,000 windows → WARN.

Row estimates are catalog statistics only (PG `pg_class.reltuples`, MySQL
`information_schema.tables.table_rows`, SQLite `sqlite_stat1` after ANALYZE — all read by
`rivet_core/catalog/tables.py`) — never a COUNT(*) — and only for `table:` exports; an estimate of 0 (never analyzed, or InnoDB stats not yet computed) counts as
unknown, so a stale zero can neither refuse a plan nor downgrade a big table.

Dense determinism: ROW_NUMBER() over ties numbers the tied rows arbitrarily, and each
window is a separate query, so ties could make a row appear in two windows and another in
none. The ORDER BY is therefore made total: `column` alone when it is a NOT NULL unique
key of the table; else `column` + the table's single-column NOT NULL PRIMARY/UNIQUE key;
else `column` + every column of the query (PostgreSQL json/xml/geometric columns compared
as text). Rows that are equal in every column are indistinguishable, so which copy lands
in which window does not matter. Known limits: MySQL compares only the first
`max_sort_length` bytes (default 1024) of TEXT/BLOB values, and dense ordinals shift when
the table changes between window queries (dense is for static tables).

Errors are `ConfigError` (exit 1) naming the export, the column and the fix.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from rivet_core.chunks.model import ChunkLayout, ChunkWindow
from rivet_core.chunks.probes import (
    ALIAS,
    as_date,
    has_null,
    min_max,
    sample_boundaries,
    whole_integer,
)
from rivet_core.chunks.strategy import (
    ChunkContext,
    check_day_column,
    check_integer_column,
    checked_column_type,
    keyset_key_problem,
    resolve,
    small_table_fallback,
)
from rivet_core.chunks.windows import (
    MAX_WINDOWS,
    count_window_size,
    count_windows,
    day_window_count,
    day_windows,
    dense_windows,
    keyset_windows,
    plan_hash,
    range_window_count,
    range_windows,
)
from rivet_core.config.models import ExportConfig
from rivet_core.errors import ConfigError
from rivet_core.source.base import NATIVE_TYPE_KEY, SourceSession

log = logging.getLogger("rivet.chunks")

SPARSE_MIN_WINDOWS = 64
SPARSE_FACTOR = 4
UNKNOWN_ESTIMATE_WARN_WINDOWS = 1_000


def lay_out_windows(
    session: SourceSession,
    export: ExportConfig,
    *,
    base_sql: str,
    table_parts: tuple[str | None, str] | None,
    allow_downgrade: bool = True,
    keyset_after: str | None = None,
    keyset_boundaries: Sequence[str] | None = None,
) -> ChunkLayout | None:
    """The windows of a chunked export, or None for the small-table fallback (module doc).

    `session` must be open (one snapshot: every probe sees the same data). `base_sql` is
    the export's base query (`export.resolved_query`); `table_parts` is
    `export.table_parts` (None for `query:` exports). `allow_downgrade=False` always
    returns a plan. `keyset_after` (keyset only, for `keyset_incremental`) plans only the
    keys strictly after that stored high-water key: the first window's lo is it.
    `keyset_boundaries` (keyset only) are boundaries already planned (a checkpoint's
    windows): they are used as they are and the boundary scan is skipped.
    """
    ctx = ChunkContext(session, export, base_sql, table_parts, None)
    strategy, column, size = resolve(ctx)
    if strategy == "keyset":
        if keyset_after is None and small_table_fallback(ctx, size, allow_downgrade):
            return None
        return _lay_out_keyset(ctx, column, size, keyset_after, keyset_boundaries)
    if keyset_after is not None:
        raise ConfigError(f"{ctx.label}: keyset_after only applies to chunk_by_key exports")
    if strategy in ("range", "count"):
        check_integer_column(ctx, column)
    elif strategy == "days":
        check_day_column(ctx, column)
    if small_table_fallback(ctx, size, allow_downgrade):
        return None
    if strategy == "dense":
        return _lay_out_dense(ctx, column, size)
    if strategy == "days":
        return _lay_out_days(ctx, column)
    return _lay_out_range(ctx, strategy, column, size)


def _null_guard(ctx: ChunkContext, column: str) -> None:
    if ctx.info is not None and ctx.info.find(column) in ctx.info.not_null:
        return  # the catalog says NOT NULL: no probe (it may be a full scan)
    if has_null(ctx.session, ctx.base, column):
        raise ConfigError(
            f"{ctx.label}: found NULL in chunk_column '{column}' — rows with NULL would never "
            "be exported; use chunk_by_key or filter them in the query "
            f"(WHERE {column} IS NOT NULL), or pick a NOT NULL column"
        )


def _integer_bounds(ctx: ChunkContext, column: str) -> tuple[int, int] | None:
    low, high = min_max(ctx.session, ctx.base, column)
    if low is None or high is None:
        return None
    lo, hi = whole_integer(low), whole_integer(high)
    if lo is None or hi is None:
        raise ConfigError(
            f"{ctx.label}: chunk_column '{column}' has fractional or non-numeric bounds "
            f"(min {low!r}, max {high!r}) — range windows need whole-number ids; use "
            "chunk_by_key (keyset pages) or chunk_dense instead"
        )
    return lo, hi


def _finish(ctx: ChunkContext, strategy: str, column: str, size: int,
            windows: tuple[ChunkWindow, ...], **extra: Any) -> ChunkLayout:
    plan = ChunkLayout(
        export_name=ctx.export.name, strategy=strategy, column=column, size=size,
        windows=windows, plan_hash="", row_estimate=ctx.info.row_estimate if ctx.info else None,
        warnings=tuple(ctx.warnings), **extra,
    )
    return _with_hash(plan, ctx.base)


def _with_hash(plan: ChunkLayout, base: str) -> ChunkLayout:
    return replace(plan, plan_hash=plan_hash(base, plan.column, plan.kind))


def _guard_total(ctx: ChunkContext, total: int, column: str, hint: str) -> None:
    if total > MAX_WINDOWS:
        raise ConfigError(
            f"{ctx.label}: chunk_column '{column}' would produce {total:,} windows, more than "
            f"the {MAX_WINDOWS:,} limit — {hint}"
        )


def _lay_out_range(ctx: ChunkContext, strategy: str, column: str, size: int) -> ChunkLayout:
    _null_guard(ctx, column)
    bounds = _integer_bounds(ctx, column)
    if bounds is None:
        return _finish(ctx, strategy, column, size, ())
    lo, hi = bounds
    if strategy == "count":
        assert ctx.export.chunk_count is not None
        _guard_total(ctx, min(ctx.export.chunk_count, hi - lo + 1), column, "lower chunk_count")
        count_size = count_window_size(lo, hi, ctx.export.chunk_count)
        return _finish(ctx, "count", column, count_size,
                       count_windows(lo, hi, ctx.export.chunk_count, column=column))
    total = range_window_count(lo, hi, size)
    _guard_total(ctx, total, column, "raise chunk_size, or use chunk_count or chunk_dense")
    check_sparse(ctx.label, total, ctx.info.row_estimate if ctx.info else None, size,
                 warn=ctx.warn)
    return _finish(ctx, "range", column, size, range_windows(lo, hi, size, column=column))


def check_sparse(label: str, windows: int, row_estimate: int | None, size: int, *,
                 warn: Callable[[str], None] | None = None) -> None:
    """The sparse-plan guard of docs/rivet-compat.md "Chunk windows" (range windows; chunk_count unset)."""
    if row_estimate is not None and row_estimate > 0:
        justified = -(-row_estimate // size)
        if windows >= SPARSE_MIN_WINDOWS and windows >= SPARSE_FACTOR * justified:
            raise ConfigError(
                f"{label}: refusing to run a sparse range plan ({windows:,} windows for "
                f"~{row_estimate:,} rows) — use chunk_dense, chunk_count or a larger "
                f"chunk_size (ids are spread far wider than the row count; about {justified:,} "
                "windows would do)"
            )
    elif windows >= UNKNOWN_ESTIMATE_WARN_WINDOWS and warn is not None:
        warn(f"{label}: the plan has {windows:,} windows and no row estimate to check them "
             "against — if most are empty, use chunk_dense or chunk_count (PostgreSQL: run "
             "ANALYZE so the estimate exists)")


def _lay_out_days(ctx: ChunkContext, column: str) -> ChunkLayout:
    days = ctx.export.chunk_by_days
    assert days is not None
    _null_guard(ctx, column)
    low, high = min_max(ctx.session, ctx.base, column)
    if low is None or high is None:
        return _finish(ctx, "days", column, days, ())
    try:
        lo, hi = as_date(low), as_date(high)
    except ValueError:
        raise ConfigError(
            f"{ctx.label}: cannot read MIN/MAX of chunk_column '{column}' as dates "
            f"({low!r}, {high!r}) — chunk_by_days needs a date or timestamp column"
        ) from None
    _guard_total(ctx, day_window_count(lo, hi, days), column, "raise chunk_by_days")
    return _finish(ctx, "days", column, days, day_windows(lo, hi, days))


def _lay_out_dense(ctx: ChunkContext, column: str, size: int) -> ChunkLayout:
    checked_column_type(ctx, column)  # the column must exist (clear error before the scan)
    order_by, as_text = _dense_order(ctx, column)
    rows = ctx.session.scalar(f"SELECT COUNT(*) FROM ({ctx.base}) AS {ALIAS}")
    row_count = int(rows or 0)
    _guard_total(ctx, -(-row_count // size), column, "raise chunk_size")
    return _finish(ctx, "dense", column, size, dense_windows(row_count, size, column=column),
                   order_by=order_by, order_by_text=as_text)


def _dense_order(ctx: ChunkContext, column: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    info = ctx.info
    if info is not None:
        keys = [u for u in info.unique if u in info.not_null]
        found = info.find(column)
        if found is not None and found in keys:
            return (column,), ()
        if keys:
            return (column, keys[0]), ()
    schema = ctx.session.describe(ctx.base, (), ctx.export.column_overrides(), ctx.table_parts)
    order = [column]
    as_text: list[str] = []
    for fld in schema:
        if fld.name == column:
            continue
        order.append(fld.name)
        native = (fld.metadata or {}).get(NATIVE_TYPE_KEY, b"").decode("utf-8", "replace")
        if ctx.session.dialect.orders_as_text(native):
            as_text.append(fld.name)
    if ctx.info is None:
        log.info("%s: chunk_dense on a query orders ties by every column (%s) so the row "
                 "numbering is the same in every window query", ctx.label, ", ".join(order))
    return tuple(order), tuple(as_text)


def _lay_out_keyset(ctx: ChunkContext, key: str, size: int, after: str | None,
                 known: Sequence[str] | None = None) -> ChunkLayout:
    problem = keyset_key_problem(ctx, key)
    if problem is not None:
        raise ConfigError(
            f"{ctx.label}: chunk_by_key '{key}' is not a usable keyset key — {problem}; pick a "
            "single-column NOT NULL PRIMARY/UNIQUE key, or use chunk_column/chunk_dense"
        )
    estimate = ctx.info.row_estimate if ctx.info else None
    if estimate is not None and known is None:  # refuse before the boundary scan, not after it
        _guard_total(ctx, estimate // size + 1, key, "raise chunk_size")
    boundaries = list(known) if known is not None else sample_boundaries(ctx.session, ctx.base, key, size,
                                                                         after=after)
    windows = keyset_windows(boundaries)
    if after is not None:
        first = windows[0]
        windows = (ChunkWindow(index=0, lo=after, hi=first.hi, key=first.key), *windows[1:])
    _guard_total(ctx, len(windows), key, "raise chunk_size")
    return _finish(ctx, "keyset", key, size, windows)
