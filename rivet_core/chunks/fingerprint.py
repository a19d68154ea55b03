"""Window fingerprints: what each chunk window of the source holds now, in ONE grouped query.

A fingerprint is `(rows, latest)`: the window's COUNT(*) and, when the export names a
`change_column` (a column that moves on every insert and update, e.g. `updated_at`), the
text of MAX(change_column). A window whose fingerprint differs from the one recorded when
it was last exported has changed at the source (rows inserted, deleted or updated) and
must be exported again. Without a change_column only the count is compared: inserts and
deletes are seen, in-place updates are not.

One query for many windows, grouped by the window each row falls in:

| strategy | bucket expression | params |
|---|---|---|
| range | the window's lower bound, `c - MOD(MOD(c, size) + size, size)` (grid origin 0, floor semantics for negative ids; SQLite: `%`) | none (integers inlined) |
| days, keyset | the window's position, a balanced nested CASE on the windows' upper bounds (log2(n) comparisons per row); a window that does not touch its left neighbour also tests its own lower bound | one bound per window (bound, never spliced) |

    SELECT <bucket> AS _rivet_w, COUNT(*) AS _rivet_n[, CAST(MAX(_rivet.chg) AS TEXT) AS _rivet_m]
    FROM (<base>) AS _rivet WHERE <first lo .. last hi> GROUP BY 1

Rows outside the given windows (a window not registered yet) are left out by the WHERE or
fall into no bucket. Days and keyset plans of more than `MAX_WINDOWS_PER_QUERY` windows run
one query per batch of windows. The comparisons are the window queries' own (sql.py), so a
row is counted in exactly the window whose export reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rivet_core.chunks.model import ChunkWindow
from rivet_core.source.dialect import dialect_of
from rivet_core.source.query import (
    BASE_ALIAS,
    SupportsQuoteIdent,
    escaped_base,
    param_safe_quoter,
    resolve_dialect,
)

#: Days/keyset windows per fingerprint query (each window binds about one parameter).
MAX_WINDOWS_PER_QUERY = 5_000
STRATEGIES = ("range", "days", "keyset")
_BUCKET, _ROWS, _LATEST = "_rivet_w", "_rivet_n", "_rivet_m"


@dataclass(frozen=True)
class WindowFingerprint:
    """What one window of the source holds: its row count and MAX(change_column) as text."""

    rows: int
    #: MAX(change_column) rendered by the database; None without a change column or when
    #: the window is empty.
    latest: str | None = None

    @property
    def text(self) -> str:
        """The comparable form: `<rows>`, or `<rows>@<latest>` with a change column."""
        return str(self.rows) if self.latest is None else f"{self.rows}@{self.latest}"


EMPTY = WindowFingerprint(0)


@dataclass(frozen=True)
class FingerprintQuery:
    sql: str
    params: list[Any]
    #: bucket value of a result row → the window key it counts (None: not one of ours).
    key_of: Callable[[Any], str | None]


def _dialect_name(dialect: SupportsQuoteIdent) -> str:
    return str(getattr(dialect, "name", getattr(dialect, "engine", "")))


def _as_text(dialect: SupportsQuoteIdent, expr: str) -> str:
    return dialect_of(_dialect_name(dialect)).text_cast(expr)


def fingerprint_queries(
    dialect: SupportsQuoteIdent | str, base_sql: str, strategy: str, column: str, size: int,
    windows: Sequence[ChunkWindow], change_column: str | None = None,
) -> list[FingerprintQuery]:
    """The grouped queries fingerprinting `windows` (one query unless days/keyset windows
    exceed `MAX_WINDOWS_PER_QUERY`); none for no windows."""
    resolved = resolve_dialect(dialect)
    if strategy not in STRATEGIES:
        raise ValueError(f"{strategy} windows cannot be fingerprinted (range, days or keyset only)")
    if not windows:
        return []
    if strategy == "range":
        return [_range_query(resolved, base_sql, column, size, windows, change_column)]
    ordered = sorted(windows, key=lambda w: w.key)  # keys sort in window order (keys.py)
    return [_bounded_query(resolved, base_sql, strategy, column, ordered[i:i + MAX_WINDOWS_PER_QUERY], change_column)
            for i in range(0, len(ordered), MAX_WINDOWS_PER_QUERY)]


def _select(dialect: SupportsQuoteIdent, quote: Callable[[str], str], bucket: str, base: str, where: str,
            change_column: str | None) -> str:
    latest = (f", {_as_text(dialect, f'MAX({BASE_ALIAS}.{quote(change_column)})')} AS {quote(_LATEST)}"
              if change_column else "")
    return (f"SELECT {bucket} AS {quote(_BUCKET)}, COUNT(*) AS {quote(_ROWS)}{latest} "
            f"FROM ({base}) AS {BASE_ALIAS}{where} GROUP BY 1")


def _range_query(dialect: SupportsQuoteIdent, base_sql: str, column: str, size: int,
                 windows: Sequence[ChunkWindow], change_column: str | None) -> FingerprintQuery:
    size = int(size)
    if size < 1:
        raise ValueError(f"chunk size must be >= 1, got {size}")
    quote = param_safe_quoter(dialect, with_params=False)
    c = f"{BASE_ALIAS}.{quote(column)}"
    bucket = dialect_of(_dialect_name(dialect)).bucket_floor(c, size)
    keys: dict[int, str] = {}
    for w in windows:
        if w.lo is None or w.hi is None:
            raise ValueError(f"window {w.key}: range windows need both bounds")
        keys[int(w.lo)] = w.key  # int(): never spliced unchecked
    lo, hi = min(keys), max(int(w.hi) for w in windows if w.hi is not None)
    where = f" WHERE {c} BETWEEN {lo} AND {hi}"
    sql = _select(dialect, quote, bucket, escaped_base(base_sql, with_params=False), where, change_column)

    def key_of(value: Any) -> str | None:
        if value is None:
            return None
        return keys.get(int(value))

    return FingerprintQuery(sql, [], key_of)


def _bounded_query(dialect: SupportsQuoteIdent, base_sql: str, strategy: str, column: str,
                   windows: Sequence[ChunkWindow], change_column: str | None) -> FingerprintQuery:
    """Days ([lo, hi)) and keyset ((lo, hi], None = unbounded) windows, in window order."""
    quote = param_safe_quoter(dialect, with_params=True)
    c = f"{BASE_ALIAS}.{quote(column)}"
    keyset = strategy == "keyset"
    below, above = (">", "<=") if keyset else (">=", "<")  # lower / upper comparison of a window
    if not keyset and any(w.lo is None or w.hi is None for w in windows):
        raise ValueError("day windows need both bounds")
    params: list[Any] = []

    def leaf(i: int) -> str:
        w, prev = windows[i], windows[i - 1] if i else None
        # The splits above already give c beyond the left neighbour's upper bound: a window
        # that starts there needs no test of its own lower bound.
        if i == 0 or w.lo is None or (prev is not None and prev.hi == w.lo):
            return str(i)
        params.append(w.lo)
        return f"CASE WHEN {c} {below} %s THEN {i} END"

    def tree(a: int, b: int) -> str:
        if a == b:
            return leaf(a)
        m = (a + b) // 2
        hi = windows[m].hi
        if hi is None:  # only the last window is unbounded above
            raise ValueError(f"window {windows[m].key} is unbounded above but is not the last window")
        params.append(hi)
        left = tree(a, m)
        return f"CASE WHEN {c} {above} %s THEN {left} ELSE {tree(m + 1, b)} END"

    bucket = tree(0, len(windows) - 1)
    conditions = []
    if windows[0].lo is not None:
        conditions.append(f"{c} {below} %s")
        params.append(windows[0].lo)
    if windows[-1].hi is not None:
        conditions.append(f"{c} {above} %s")
        params.append(windows[-1].hi)
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    sql = _select(dialect, quote, bucket, escaped_base(base_sql, with_params=bool(params)), where, change_column)
    if not params:  # one unbounded keyset window: no placeholder, so the base stays verbatim
        sql = _select(dialect, param_safe_quoter(dialect, with_params=False), bucket,
                      escaped_base(base_sql, with_params=False), where, change_column)
    keys = [w.key for w in windows]

    def key_of(value: Any) -> str | None:
        if value is None:
            return None
        index = int(value)
        return keys[index] if 0 <= index < len(keys) else None

    return FingerprintQuery(sql, params, key_of)


def read_fingerprints(rows: Sequence[Sequence[Any]], query: FingerprintQuery,
                      change_column: str | None) -> dict[str, WindowFingerprint]:
    """The result rows of one query as window key → fingerprint (windows with rows only)."""
    found: dict[str, WindowFingerprint] = {}
    for row in rows:
        key = query.key_of(row[0])
        if key is None:
            continue
        latest = None if not change_column or row[2] is None else str(row[2])
        found[key] = WindowFingerprint(int(row[1]), latest)
    return found


__all__ = ["EMPTY", "MAX_WINDOWS_PER_QUERY", "FingerprintQuery", "WindowFingerprint", "fingerprint_queries",
           "read_fingerprints"]
