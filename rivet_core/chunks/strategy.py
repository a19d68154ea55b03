"""Strategy resolution of a `mode: chunked` export: which shape (range, count, dense, days
or keyset), on which column, with how many rows per window — steps 1–5 of
rivet_core/chunks/layout.py's module docstring, from the configuration, the catalog
(`rivet_core/catalog/`) and scan-free `describe` probes only.

`describe_chunking` stops here (what `rivet check` and `rivet plan` report); `layout.py`
resolves through the same `resolve`, so a report and a run can never disagree.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from rivet_core.catalog import TableInfo, table_info
from rivet_core.chunks.probes import ALIAS, column_type
from rivet_core.config.models import ExportConfig
from rivet_core.errors import ConfigError
from rivet_core.lazy_modules import pa
from rivet_core.source.base import SourceSession

log = logging.getLogger("rivet.chunks")

MEMORY_CHUNK_MIN, MEMORY_CHUNK_MAX = 10_000, 5_000_000
FALLBACK_ROW_BYTES = 512
_BIG_CHUNK_BYTES = 512 * 2**20
_STRATEGY_HINT = "chunk_column, chunk_by_key, chunk_dense, chunk_by_days or chunk_count"


@dataclass(frozen=True)
class ChunkShape:
    """How a chunked export will be cut, as resolved from config + catalog alone.

    Produced by `describe_chunking`: steps 1–3 of the module docstring (static rules,
    catalog introspection, memory sizing, strategy/column resolution) and nothing after,
    so no NULL, MIN/MAX, COUNT or boundary probe runs. `lay_out_windows` resolves through
    the same code, so what `rivet check` reports is what a run will do.
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
class ChunkContext:
    """One export being resolved and laid out: its session, base query, catalog view and
    the warnings gathered on the way (logged as they are found)."""

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
        return f"{ALIAS}.{self.q(name)}"


def describe_chunking(session: SourceSession, export: ExportConfig) -> ChunkShape:
    """The strategy, column and chunk size `lay_out_windows` would use — without planning.

    For reports (`rivet check`, `rivet plan`) that must stay cheap on a billion-row table:
    it reads only the catalog and scan-free `describe` probes, never the table's rows (no
    NULL probe, no MIN/MAX, no COUNT(*), no keyset boundary scan), and it does not apply
    the small-table fallback or the column type checks that `lay_out_windows` runs next.
    Raises the same `ConfigError`s as `lay_out_windows` for an export that cannot be resolved
    (static rule broken, table not found, no safe shape). `session` must be open.
    """
    ctx = ChunkContext(session, export, export.resolved_query, export.table_parts, None)
    strategy, column, size = resolve(ctx)
    return ChunkShape(strategy=strategy, column=column, chunk_size=size,
                      warnings=tuple(ctx.warnings))


def resolve(ctx: ChunkContext) -> tuple[str, str, int]:
    """(strategy, column, chunk size): steps 1–3 of the module docstring, shared by
    `lay_out_windows` and `describe_chunking` so the two can never disagree. Fills `ctx.info`."""
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


def _static_checks(ctx: ChunkContext) -> None:
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


def _chunk_size(ctx: ChunkContext) -> int:
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


def _resolve_shape(ctx: ChunkContext) -> tuple[str, str]:
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
            f"single-integer primary key). Set `chunk_column:` explicitly (chunk_column: {pk}) to pin it"
        )
        return strategy, pk
    unique = [u for u in info.unique if u in info.not_null]
    if strategy == "dense" and unique:
        ctx.warn(f"{label}: chunk_column not set — chunk_dense orders by the unique key "
                 f"'{unique[0]}'; set chunk_column to make it explicit")
        return strategy, unique[0]
    if strategy == "range" and unique:
        for key in unique:
            if keyset_key_problem(ctx, key) is None:
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


def _integer_primary_key(ctx: ChunkContext) -> str | None:
    info = ctx.info
    if info is None or len(info.primary_key) != 1:
        return None
    pk = info.primary_key[0]
    arrow_type, _ = column_type(ctx.session, ctx.base, pk, ctx.table_parts)
    return pk if arrow_type is not None and pa.types.is_integer(arrow_type) else None


def small_table_fallback(ctx: ChunkContext, size: int, allowed: bool) -> bool:
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


def _is_integer_family(arrow_type: pa.DataType) -> bool:
    if pa.types.is_integer(arrow_type):
        return True
    return pa.types.is_decimal(arrow_type) and arrow_type.scale == 0


def check_integer_column(ctx: ChunkContext, column: str) -> None:
    arrow_type, native = checked_column_type(ctx, column)
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


def check_day_column(ctx: ChunkContext, column: str) -> None:
    arrow_type, native = checked_column_type(ctx, column)
    if arrow_type is not None and (pa.types.is_date(arrow_type)
                                   or pa.types.is_timestamp(arrow_type)):
        return
    raise ConfigError(
        f"{ctx.label}: chunk_by_days needs a date or timestamp chunk_column, but "
        f"'{column}' is {native} — name a date/timestamp column or use range windows"
    )


def checked_column_type(ctx: ChunkContext, column: str) -> tuple[pa.DataType | None, str]:
    try:
        return column_type(ctx.session, ctx.base, column, ctx.table_parts)
    except ConfigError as exc:
        raise ConfigError(f"{ctx.label}: {exc}") from exc


def keyset_key_problem(ctx: ChunkContext, key: str) -> str | None:
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
