"""Per-window SQL (docs/rivet-compat.md "Chunk windows", "Keyset") and the reconcile COUNT of one window.

| strategy | SQL | params |
|---|---|---|
| range, count | `SELECT * FROM (<base>) AS _rivet WHERE _rivet.c BETWEEN lo AND hi` | none: lo/hi are `int()`-checked and inlined |
| dense | `SELECT * FROM (SELECT _rivet_i.*, ROW_NUMBER() OVER (ORDER BY _rivet_i.c, <tie-breakers>) AS _rivet_chunk_rn FROM (<base>) AS _rivet_i) AS _rivet_w WHERE _rivet_w._rivet_chunk_rn BETWEEN lo AND hi` | none (inlined ordinals); the runner strips `DENSE_RN_COLUMN` |
| days | `SELECT * FROM (<base>) AS _rivet WHERE _rivet.c >= %s AND _rivet.c < %s` | ISO dates |
| keyset | `SELECT * FROM (<base>) AS _rivet WHERE _rivet.k > %s AND _rivet.k <= %s` (each side only when bounded) | key texts |

The placeholder convention is the one of `rivet_core.source.query`: a statement executed
WITH parameters has every literal `%` of the base query (and of quoted identifiers) doubled;
a statement without parameters carries the base query verbatim. Bound key texts are sent
untyped (psycopg) or as quoted literals (PyMySQL), so the database parses them as the key
column's own type — the planner reads boundaries with the same rendering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rivet_core.chunks.model import ChunkLayout, ChunkWindow
from rivet_core.source.dialect import dialect_of
from rivet_core.source.query import (
    BASE_ALIAS,
    SupportsQuoteIdent,
    escaped_base,
    param_safe_quoter,
    resolve_dialect,
)

#: The synthetic ordinal column of dense windows; the runner drops it before writing.
DENSE_RN_COLUMN = "_rivet_chunk_rn"
_INNER = "_rivet_i"
_WRAP = "_rivet_w"


# The base-query wrapping rules are the single-unit builders' (one place for `%` escaping).
_resolve, _base, _quoter = resolve_dialect, escaped_base, param_safe_quoter


def _int_bound(value: str | None, what: str, window: ChunkWindow) -> int:
    if value is None:
        raise ValueError(f"window {window.key}: {what} bound is missing")
    return int(value)  # ValueError for anything that is not an integer: never spliced


def _order_term(dialect: SupportsQuoteIdent, quote: Callable[[str], str], column: str,
                as_text: bool) -> str:
    ref = f"{_INNER}.{quote(column)}"
    if as_text:
        return dialect_of(str(getattr(dialect, "name", getattr(dialect, "engine", "")))).text_cast(ref)
    return ref


def window_query(
    dialect: SupportsQuoteIdent | str, base_sql: str, plan: ChunkLayout, window: ChunkWindow
) -> tuple[str, list[Any]]:
    """The SQL (with `%s` placeholders) and params that read exactly `window`."""
    dialect = _resolve(dialect)
    strategy = plan.strategy
    if strategy in ("range", "count"):
        lo, hi = _int_bound(window.lo, "lower", window), _int_bound(window.hi, "upper", window)
        column = f"{BASE_ALIAS}.{dialect.quote_ident(plan.column)}"
        sql = (f"SELECT * FROM ({_base(base_sql, with_params=False)}) AS {BASE_ALIAS} "
               f"WHERE {column} BETWEEN {lo} AND {hi}")
        return sql, []
    if strategy == "dense":
        lo, hi = _int_bound(window.lo, "lower", window), _int_bound(window.hi, "upper", window)
        quote = _quoter(dialect, with_params=False)
        order_by = plan.order_by or (plan.column,)
        as_text = set(plan.order_by_text)
        order = ", ".join(_order_term(dialect, quote, c, c in as_text) for c in order_by)
        rn = quote(DENSE_RN_COLUMN)
        sql = (
            f"SELECT * FROM (SELECT {_INNER}.*, ROW_NUMBER() OVER (ORDER BY {order}) AS {rn} "
            f"FROM ({_base(base_sql, with_params=False)}) AS {_INNER}) AS {_WRAP} "
            f"WHERE {_WRAP}.{rn} BETWEEN {lo} AND {hi}"
        )
        return sql, []
    if strategy == "days":
        if window.lo is None or window.hi is None:
            raise ValueError(f"window {window.key}: day windows need both bounds")
        column = f"{BASE_ALIAS}.{_quoter(dialect, with_params=True)(plan.column)}"
        sql = (f"SELECT * FROM ({_base(base_sql, with_params=True)}) AS {BASE_ALIAS} "
               f"WHERE {column} >= %s AND {column} < %s")
        return sql, [window.lo, window.hi]
    if strategy == "keyset":
        params: list[Any] = []
        conditions: list[str] = []
        with_params = window.lo is not None or window.hi is not None
        column = f"{BASE_ALIAS}.{_quoter(dialect, with_params=with_params)(plan.column)}"
        if window.lo is not None:
            conditions.append(f"{column} > %s")
            params.append(window.lo)
        if window.hi is not None:
            conditions.append(f"{column} <= %s")
            params.append(window.hi)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        sql = f"SELECT * FROM ({_base(base_sql, with_params=with_params)}) AS {BASE_ALIAS}{where}"
        return sql, params
    raise ValueError(f"unknown chunk strategy '{strategy}'")


def window_count_query(
    dialect: SupportsQuoteIdent | str, base_sql: str, plan: ChunkLayout, window: ChunkWindow
) -> tuple[str, list[Any]]:
    """`SELECT COUNT(*) FROM (<window sql>) AS _rc` — the source side of reconcile."""
    sql, params = window_query(dialect, base_sql, plan, window)
    return f"SELECT COUNT(*) FROM ({sql}) AS _rc", params


def probe_window(plan: ChunkLayout) -> ChunkWindow:
    """A window whose SQL is valid for `plan` even when it has no windows (empty source).

    Use it to describe the output schema: the plan's first window if any, else a dummy
    with bounds of the right type (an integer "0" would not parse as a day bound).
    """
    if plan.windows:
        return plan.windows[0]
    if plan.strategy == "days":
        return ChunkWindow(index=0, lo="1970-01-01", hi="1970-01-02", key="probe")
    if plan.strategy == "keyset":
        return ChunkWindow(index=0, lo=None, hi=None, key="probe")
    return ChunkWindow(index=0, lo="0", hi="0", key="probe")
