"""Chunk planning: resolve the strategy of a `mode: chunked` export, probe the source, and
build its `ChunkPlan` (docs/rivet-compat.md "Chunk windows", "Keyset").

    plan = plan_chunks(session, export, base_sql=export.resolved_query,
                       table_parts=export.table_parts)
    if plan is None: ...  # small table without an explicit shape → run a full export

    shape = describe_chunking(session, export)  # steps 1–3 only: no probe reads the table
    shape.strategy, shape.column, shape.chunk_size, shape.warnings

Strategy resolution, in order:

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

import datetime as dt
import decimal
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from rivet_core.catalog import TableInfo, table_info
from rivet_core.chunks.model import ChunkPlan, ChunkWindow
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
from rivet_core.errors import ConfigError, SourceError, UnsupportedTypeError
from rivet_core.source.base import NATIVE_TYPE_KEY, SourceSession

log = logging.getLogger("rivet.chunks")

_ALIAS = "_rivet"
SPARSE_MIN_WINDOWS = 64
SPARSE_FACTOR = 4
UNKNOWN_ESTIMATE_WARN_WINDOWS = 1_000
MEMORY_CHUNK_MIN, MEMORY_CHUNK_MAX = 10_000, 5_000_000
FALLBACK_ROW_BYTES = 512
_BIG_CHUNK_BYTES = 512 * 2**20
_STRATEGY_HINT = "chunk_column, chunk_by_key, chunk_dense, chunk_by_days or chunk_count"


@dataclass(frozen=True)
class ChunkShape:
    """How a chunked export will be cut, as resolved from config + catalog alone.

    Produced by `describe_chunking`: steps 1–3 of the module docstring (static rules,
    catalog introspection, memory sizing, strategy/column resolution) and nothing after,
    so no NULL, MIN/MAX, COUNT or boundary probe runs. `plan_chunks` resolves through the
    same code, so what `rivet check` reports is what a run will do.
    """

    #: "range", "count", "dense", "days" or "keyset" (an auto-resolved keyset included).
    strategy: str
    #: The chunk column (keyset: the key), as configured or auto-resolved.
    column: str
    #: Rows per window: `chunk_size`, or the `chunk_size_memory_mb` sizing.
    chunk_size: int
    #: Non-fatal findings of the resolution (auto-resolved column, huge memory chunks),
    #: in the order the planner logged them. Fatal ones raise `ConfigError` instead.
    warnings: tuple[str, ...] = ()


@dataclass
class _Ctx:
    session: SourceSession
    export: ExportConfig
    base: str
    table_parts: tuple[str | None, str] | None
    info: TableInfo | None
    warnings: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"export '{self.export.name}'"

    def warn(self, message: str) -> None:
        log.warning("%s", message)
        self.warnings.append(message)

    def q(self, name: str) -> str:
        return self.session.quote_ident(name)

    def col(self, name: str) -> str:
        return f"{_ALIAS}.{self.q(name)}"


# --------------------------------------------------------------------------- public API


def plan_chunks(
    session: SourceSession,
    export: ExportConfig,
    *,
    base_sql: str,
    table_parts: tuple[str | None, str] | None,
    allow_downgrade: bool = True,
    keyset_after: str | None = None,
    keyset_boundaries: Sequence[str] | None = None,
) -> ChunkPlan | None:
    """The windows of a chunked export, or None for the small-table fallback (module doc).

    `session` must be open (one snapshot: every probe sees the same data). `base_sql` is
    the export's base query (`export.resolved_query`); `table_parts` is
    `export.table_parts` (None for `query:` exports). `allow_downgrade=False` always
    returns a plan. `keyset_after` (keyset only, for `keyset_incremental`) plans only the
    keys strictly after that stored high-water key: the first window's lo is it.
    `keyset_boundaries` (keyset only) are boundaries already planned (a checkpoint's
    windows): they are used as they are and the boundary scan is skipped.
    """
    ctx = _Ctx(session, export, base_sql, table_parts, None)
    strategy, column, size = _resolve(ctx)
    if strategy == "keyset":
        if keyset_after is None and _downgrade(ctx, size, allow_downgrade):
            return None
        return _plan_keyset(ctx, column, size, keyset_after, keyset_boundaries)
    if keyset_after is not None:
        raise ConfigError(f"{ctx.label}: keyset_after only applies to chunk_by_key exports")
    if strategy in ("range", "count"):
        _check_integer_column(ctx, column)
    elif strategy == "days":
        _check_day_column(ctx, column)
    if _downgrade(ctx, size, allow_downgrade):
        return None
    if strategy == "dense":
        return _plan_dense(ctx, column, size)
    if strategy == "days":
        return _plan_days(ctx, column)
    return _plan_range(ctx, strategy, column, size)


def describe_chunking(session: SourceSession, export: ExportConfig) -> ChunkShape:
    """The strategy, column and chunk size `plan_chunks` would use — without planning.

    For reports (`rivet check`, `rivet plan`) that must stay cheap on a billion-row table:
    it reads only the catalog and scan-free `describe` probes, never the table's rows (no
    NULL probe, no MIN/MAX, no COUNT(*), no keyset boundary scan), and it does not apply
    the small-table fallback or the column type checks that `plan_chunks` runs next.
    Raises the same `ConfigError`s as `plan_chunks` for an export that cannot be resolved
    (static rule broken, table not found, no safe shape). `session` must be open.
    """
    ctx = _Ctx(session, export, export.resolved_query, export.table_parts, None)
    strategy, column, size = _resolve(ctx)
    return ChunkShape(strategy=strategy, column=column, chunk_size=size,
                      warnings=tuple(ctx.warnings))


# --------------------------------------------------------------------------- resolution


def _resolve(ctx: _Ctx) -> tuple[str, str, int]:
    """(strategy, column, chunk size): steps 1–3 of the module docstring, shared by
    `plan_chunks` and `describe_chunking` so the two can never disagree. Fills `ctx.info`."""
    _static_checks(ctx)
    if ctx.table_parts is not None:
        ctx.info = table_info(ctx.session, ctx.table_parts)
        if not ctx.info.columns:
            table = ".".join(p for p in ctx.table_parts if p)
            raise ConfigError(
                f"{ctx.label}: table '{table}' was not found in the source (or has no visible "
                "columns) — check `table:` and the source user's privileges"
            )
    size = _chunk_size(ctx)
    strategy, column = _resolve_shape(ctx)
    return strategy, column, size


def _static_checks(ctx: _Ctx) -> None:
    exp, label = ctx.export, ctx.label
    if exp.mode != "chunked":
        raise ConfigError(f"{label}: chunk planning needs mode: chunked (mode is {exp.mode})")
    if exp.chunk_size < 1:
        raise ConfigError(f"{label}: mode: chunked requires chunk_size >= 1 (got {exp.chunk_size})")
    if exp.chunk_count is not None and exp.chunk_count < 1:
        raise ConfigError(f"{label}: chunk_count must be >= 1 (got {exp.chunk_count})")
    if exp.chunk_by_days is not None and exp.chunk_by_days < 1:
        raise ConfigError(f"{label}: chunk_by_days must be at least 1 (got {exp.chunk_by_days})")
    if exp.chunk_count is not None and (exp.chunk_dense or exp.chunk_by_days is not None):
        other = "chunk_dense" if exp.chunk_dense else "chunk_by_days"
        raise ConfigError(f"{label}: chunk_count and {other} are mutually exclusive — keep one")
    if exp.chunk_by_days is not None and exp.chunk_dense:
        raise ConfigError(f"{label}: chunk_by_days and chunk_dense cannot be combined — keep one")
    if exp.chunk_by_key is not None:
        others = [k for k, on in (("chunk_column", exp.chunk_column is not None),
                                  ("chunk_dense", exp.chunk_dense),
                                  ("chunk_by_days", exp.chunk_by_days is not None),
                                  ("chunk_count", exp.chunk_count is not None)) if on]
        if others:
            raise ConfigError(
                f"{label}: chunk_by_key and {', '.join(others)} are mutually exclusive — "
                "chunk_by_key pages by a unique key; keep it alone, or drop it for range windows"
            )
    if ctx.table_parts is None:
        for knob in ("chunk_by_key", "chunk_size_memory_mb"):
            if getattr(exp, knob) is not None:
                raise ConfigError(
                    f"{label}: {knob} needs the `table:` shortcut (the planner reads keys and "
                    "statistics from the catalog) — replace query: with table: <schema.name>, "
                    "or use chunk_column with chunk_size"
                )
    if exp.keyset_incremental and exp.chunk_by_key is None:
        raise ConfigError(f"{label}: keyset_incremental requires `chunk_by_key:`")


def _chunk_size(ctx: _Ctx) -> int:
    exp = ctx.export
    if exp.chunk_size_memory_mb is None:
        return exp.chunk_size
    if exp.chunk_size_memory_mb < 1:
        raise ConfigError(f"{ctx.label}: chunk_size_memory_mb must be >= 1 "
                          f"(got {exp.chunk_size_memory_mb})")
    assert ctx.info is not None  # _static_checks: memory sizing needs table:
    row_bytes = ctx.info.avg_row_bytes or FALLBACK_ROW_BYTES
    size = memory_chunk_size(exp.chunk_size_memory_mb, row_bytes)
    if size * row_bytes >= _BIG_CHUNK_BYTES:
        ctx.warn(
            f"{ctx.label}: chunk_size_memory_mb {exp.chunk_size_memory_mb} gives {size} rows "
            f"per chunk at ~{row_bytes:.0f} B/row (≥ 512 MB per chunk after clamping to "
            f"[{MEMORY_CHUNK_MIN:,}, {MEMORY_CHUNK_MAX:,}]) — lower chunk_size_memory_mb"
        )
    return size


def memory_chunk_size(memory_mb: int, avg_row_bytes: float) -> int:
    """`mb·2^20 / avg_row_bytes` clamped to [10,000, 5,000,000]."""
    row_bytes = avg_row_bytes if avg_row_bytes and avg_row_bytes > 0 else FALLBACK_ROW_BYTES
    return max(MEMORY_CHUNK_MIN, min(MEMORY_CHUNK_MAX, int(memory_mb * 2**20 // row_bytes)))


def _resolve_shape(ctx: _Ctx) -> tuple[str, str]:
    """(strategy, column) — see step 3 of the module docstring."""
    exp, info, label = ctx.export, ctx.info, ctx.label
    if exp.chunk_by_key is not None:
        return "keyset", exp.chunk_by_key
    strategy = ("dense" if exp.chunk_dense else "days" if exp.chunk_by_days is not None
                else "count" if exp.chunk_count is not None else "range")
    column = exp.chunk_column
    if column is not None:
        if info is not None:
            found = info.find(column)
            if found is None:
                raise ConfigError(
                    f"{label}: chunk_column '{column}' is not a column of table "
                    f"'{exp.table}' (columns: {', '.join(info.columns)}) — fix chunk_column"
                )
        return strategy, column
    if info is None:
        knob = {"dense": "chunk_dense", "days": "chunk_by_days", "count": "chunk_count"}.get(strategy)
        needs = (f"{knob} on a query: export also needs chunk_column" if knob else
                 "a query: export must name its chunk_column")
        raise ConfigError(
            f"{label}: chunked mode needs a chunking strategy. Pick one: {_STRATEGY_HINT} — "
            f"{needs} (only a table: export can auto-resolve its primary key)"
        )
    if strategy == "days":
        raise ConfigError(
            f"{label}: chunk_by_days needs chunk_column naming a date or timestamp column"
        )
    pk = _integer_primary_key(ctx)
    if pk is not None:
        ctx.warn(
            f"{label}: chunk_column not set — auto-resolved to '{pk}' (the table's "
            f"single-integer primary key); set chunk_column: {pk} to make it explicit"
        )
        return strategy, pk
    unique = [u for u in info.unique if u in info.not_null]
    if strategy == "dense" and unique:
        ctx.warn(f"{label}: chunk_column not set — chunk_dense orders by the unique key "
                 f"'{unique[0]}'; set chunk_column to make it explicit")
        return strategy, unique[0]
    if strategy == "range" and unique:
        for key in unique:
            if _keyset_key_problem(ctx, key) is None:
                ctx.warn(
                    f"{label}: chunk_column not set and the table has no single-integer "
                    f"primary key — auto-resolved to keyset pages on the unique key '{key}'; "
                    f"set chunk_by_key: {key} to make it explicit"
                )
                return "keyset", key
    raise ConfigError(
        f"{label}: found no safe shape for chunking table '{exp.table}' — it has no "
        "single-integer primary key and no usable single-column NOT NULL unique key. "
        f"chunked mode needs a chunking strategy. Pick one: {_STRATEGY_HINT}"
    )


def _integer_primary_key(ctx: _Ctx) -> str | None:
    info = ctx.info
    if info is None or len(info.primary_key) != 1:
        return None
    pk = info.primary_key[0]
    arrow_type, _ = column_type(ctx.session, ctx.base, pk, ctx.table_parts)
    return pk if arrow_type is not None and pa.types.is_integer(arrow_type) else None


def _downgrade(ctx: _Ctx, size: int, allowed: bool) -> bool:
    exp, info = ctx.export, ctx.info
    if not allowed or info is None or info.row_estimate is None:
        return False
    explicit = (exp.chunk_count is not None or exp.chunk_by_days is not None
                or exp.chunk_checkpoint or exp.chunk_by_key is not None or exp.chunk_dense)
    if explicit or info.row_estimate > size:
        return False
    log.info("%s: table '%s' has ~%d rows (≤ chunk_size %d) and no explicit chunk shape — "
             "running it as one full export", ctx.label, exp.table, info.row_estimate, size)
    return True


# --------------------------------------------------------------------------- type checks


def column_type(
    session: SourceSession, base: str, column: str,
    table_parts: tuple[str | None, str] | None,
) -> tuple[pa.DataType | None, str]:
    """(Arrow type or None when unmappable, native type) of one column of the base query.

    Scan-free (`describe`). A column the query does not have is a ConfigError.
    """
    sql = f"SELECT {_ALIAS}.{session.quote_ident(column)} FROM ({base}) AS {_ALIAS}"
    try:
        schema = session.describe(sql, (), None, table_parts)
    except UnsupportedTypeError as exc:
        return None, str(exc).splitlines()[-1].strip()
    except SourceError as exc:
        raise ConfigError(
            f"cannot read column '{column}' from the export's query ({exc}) — check that the "
            "column exists with exactly this spelling"
        ) from exc
    fld = schema.field(0)
    native = (fld.metadata or {}).get(NATIVE_TYPE_KEY, b"?").decode("utf-8", "replace")
    return fld.type, native


def _is_integer_family(arrow_type: pa.DataType) -> bool:
    if pa.types.is_integer(arrow_type):
        return True
    return pa.types.is_decimal(arrow_type) and arrow_type.scale == 0


def _check_integer_column(ctx: _Ctx, column: str) -> None:
    arrow_type, native = _column_type(ctx, column)
    if arrow_type is not None and _is_integer_family(arrow_type):
        return
    numeric = arrow_type is not None and (pa.types.is_floating(arrow_type)
                                          or pa.types.is_decimal(arrow_type))
    if ctx.info is None and (arrow_type is None or numeric):
        ctx.warn(
            f"{ctx.label}: cannot verify that chunk_column '{column}' of the query is an integer "
            f"(type {native}) — its MIN/MAX must be whole numbers or the plan is refused"
        )
        return
    raise ConfigError(
        f"{ctx.label}: chunk_column '{column}' (type {native}) is not an integer-family "
        "column — range windows need integer ids; use chunk_by_key for a unique key of another "
        "type, chunk_dense for row-number windows, or chunk_by_days for a date column"
    )


def _check_day_column(ctx: _Ctx, column: str) -> None:
    arrow_type, native = _column_type(ctx, column)
    if arrow_type is not None and (pa.types.is_date(arrow_type)
                                   or pa.types.is_timestamp(arrow_type)):
        return
    raise ConfigError(
        f"{ctx.label}: chunk_by_days needs a date or timestamp chunk_column, but "
        f"'{column}' is {native} — name a date/timestamp column or use range windows"
    )


def _column_type(ctx: _Ctx, column: str) -> tuple[pa.DataType | None, str]:
    try:
        return column_type(ctx.session, ctx.base, column, ctx.table_parts)
    except ConfigError as exc:
        raise ConfigError(f"{ctx.label}: {exc}") from exc


# --------------------------------------------------------------------------- probes


def _has_null(ctx: _Ctx, column: str) -> bool:
    sql = f"SELECT 1 FROM ({ctx.base}) AS {_ALIAS} WHERE {ctx.col(column)} IS NULL LIMIT 1"
    return ctx.session.scalar(sql) is not None


def _null_guard(ctx: _Ctx, column: str) -> None:
    if ctx.info is not None and ctx.info.find(column) in ctx.info.not_null:
        return  # the catalog says NOT NULL: no probe (it may be a full scan)
    if _has_null(ctx, column):
        raise ConfigError(
            f"{ctx.label}: found NULL in chunk_column '{column}' — rows with NULL would never "
            "be exported; use chunk_by_key or filter them in the query "
            f"(WHERE {column} IS NOT NULL), or pick a NOT NULL column"
        )


def _min_max(ctx: _Ctx, column: str) -> tuple[Any, Any]:
    low = ctx.session.scalar(f"SELECT MIN({ctx.col(column)}) FROM ({ctx.base}) AS {_ALIAS}")
    high = ctx.session.scalar(f"SELECT MAX({ctx.col(column)}) FROM ({ctx.base}) AS {_ALIAS}")
    return low, high


def whole_integer(value: Any) -> int | None:
    """`value` as an int when it is a whole number (`42`, `42.000`, Decimal('7')), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    try:
        number = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value).strip())
    except (decimal.InvalidOperation, ValueError):
        return None
    if not number.is_finite() or number != number.to_integral_value():
        return None
    return int(number)


def _integer_bounds(ctx: _Ctx, column: str) -> tuple[int, int] | None:
    low, high = _min_max(ctx, column)
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


def _as_date(value: Any) -> dt.date:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        return value.date()
    if isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value).strip()[:10])


# --------------------------------------------------------------------------- strategies


def _finish(ctx: _Ctx, strategy: str, column: str, size: int,
            windows: tuple[ChunkWindow, ...], **extra: Any) -> ChunkPlan:
    plan = ChunkPlan(
        export_name=ctx.export.name, strategy=strategy, column=column, size=size,
        windows=windows, plan_hash="", row_estimate=ctx.info.row_estimate if ctx.info else None,
        warnings=tuple(ctx.warnings), **extra,
    )
    return _with_hash(plan, ctx.base)


def _with_hash(plan: ChunkPlan, base: str) -> ChunkPlan:
    return replace(plan, plan_hash=plan_hash(base, plan.column, plan.kind))


def _guard_total(ctx: _Ctx, total: int, column: str, hint: str) -> None:
    if total > MAX_WINDOWS:
        raise ConfigError(
            f"{ctx.label}: chunk_column '{column}' would produce {total:,} windows, more than "
            f"the {MAX_WINDOWS:,} limit — {hint}"
        )


def _plan_range(ctx: _Ctx, strategy: str, column: str, size: int) -> ChunkPlan:
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


def _plan_days(ctx: _Ctx, column: str) -> ChunkPlan:
    days = ctx.export.chunk_by_days
    assert days is not None
    _null_guard(ctx, column)
    low, high = _min_max(ctx, column)
    if low is None or high is None:
        return _finish(ctx, "days", column, days, ())
    try:
        lo, hi = _as_date(low), _as_date(high)
    except ValueError:
        raise ConfigError(
            f"{ctx.label}: cannot read MIN/MAX of chunk_column '{column}' as dates "
            f"({low!r}, {high!r}) — chunk_by_days needs a date or timestamp column"
        ) from None
    _guard_total(ctx, day_window_count(lo, hi, days), column, "raise chunk_by_days")
    return _finish(ctx, "days", column, days, day_windows(lo, hi, days))


def _plan_dense(ctx: _Ctx, column: str, size: int) -> ChunkPlan:
    _column_type(ctx, column)  # the column must exist (clear error before the scan)
    order_by, as_text = _dense_order(ctx, column)
    rows = ctx.session.scalar(f"SELECT COUNT(*) FROM ({ctx.base}) AS {_ALIAS}")
    row_count = int(rows or 0)
    _guard_total(ctx, -(-row_count // size), column, "raise chunk_size")
    return _finish(ctx, "dense", column, size, dense_windows(row_count, size, column=column),
                   order_by=order_by, order_by_text=as_text)


def _dense_order(ctx: _Ctx, column: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
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


# --------------------------------------------------------------------------- keyset


def _keyset_key_problem(ctx: _Ctx, key: str) -> str | None:
    """Why `key` cannot page a keyset export (None when it can)."""
    info = ctx.info
    assert info is not None
    found = info.find(key)
    if found is None:
        return f"it is not a column of table '{ctx.export.table}' (columns: {', '.join(info.columns)})"
    if found not in info.unique:
        return ("it is not a single-column PRIMARY KEY or UNIQUE key (keyset pages need "
                "every key value to occur once)")
    if found not in info.not_null:
        return "it is nullable (rows with a NULL key would never be exported) — make it NOT NULL"
    arrow_type, native = column_type(ctx.session, ctx.base, key, ctx.table_parts)
    if arrow_type is None:
        return f"its type {native} has no Rivet mapping"
    usable = (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
              or pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
              or pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type)
              or (isinstance(arrow_type, pa.BaseExtensionType)
                  and arrow_type.extension_name == "arrow.uuid"))
    if not usable:
        return (f"its type {native} cannot be paged (usable: integer, float, text, timestamp, "
                "date, uuid; decimal is refused because its text form does not round-trip "
                "exactly)")
    return None


def _plan_keyset(ctx: _Ctx, key: str, size: int, after: str | None,
                 known: Sequence[str] | None = None) -> ChunkPlan:
    problem = _keyset_key_problem(ctx, key)
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


def sample_boundaries(session: SourceSession, base: str, key: str, size: int, *,
                      after: str | None = None) -> list[str]:
    """Every `size`-th key in key order, as the database renders it as text.

    One ordered scan: `ROW_NUMBER() OVER (ORDER BY k)`, keeping rows with rn MOD size = 0.
    The text is what `window_query` binds back, so it must parse as the key's type: PG
    `CAST(k AS TEXT)` (UTC session, ISO dates, shortest-exact floats), MySQL
    `CAST(k AS CHAR)`.
    """
    quote = session.quote_ident
    k = f"{_ALIAS}.{quote(key)}"
    params: list[Any] = []
    where = ""
    body = base
    if after is not None:
        where = f" WHERE {k.replace('%', '%%')} > %s"
        params = [after]
        body = base.replace("%", "%%")
        k = k.replace("%", "%%")
    sql = (
        f"SELECT _rivet_s.k FROM (SELECT {session.dialect.text_cast(k)} AS k, "
        f"ROW_NUMBER() OVER (ORDER BY {k}) AS rn FROM ({body}) AS {_ALIAS}{where}) AS _rivet_s "
        f"WHERE MOD(_rivet_s.rn, {int(size)}) = 0 ORDER BY _rivet_s.rn"
    )
    return [str(row[0]) for row in fetch_rows(session, sql, params)]


# --------------------------------------------------------------------------- small reads


def fetch_rows(session: SourceSession, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
    """All rows of a small query through the session (describe + stream)."""
    schema = session.describe(sql, params)
    rows: list[tuple] = []
    for batch in session.stream(sql, params, schema, 10_000):
        rows.extend(zip(*(column.to_pylist() for column in batch.columns), strict=True))
    return rows
