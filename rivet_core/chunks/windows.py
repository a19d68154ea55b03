"""Pure window math: no I/O, property-tested (tests/chunks/test_chunk_windows.py).

* **range** — grid-aligned, origin 0: window k covers `[k·size, (k+1)·size − 1]` for every
  k from `floor(min/size)` to `floor(max/size)` (floor division, so negative ids work too).
  One window per k even when it holds no row (an empty middle window exports nothing), so
  a window computed for max M is identical, key included, to the one computed later for a
  larger max M' (docs/adr/0004-chunk-windows-keys-and-resume.md). The last window is not clipped to max.
* **count** — `size = ceil((max − min + 1) / N)`, windows start at min and the last one is
  clipped to max (docs/rivet-compat.md "Chunk windows"). NOT grid-aligned: when the table grows, size and every
  window (and key) change; fine for a one-shot run, wrong for long-lived partitions.
* **dense** — row ordinals `1..row_count` in `size` steps; ordinals shift whenever rows
  are inserted or deleted before a window, so keys are stable only for an unchanged table.
* **days** — windows of D days aligned to the epoch: day number `n = date − 1970-01-01`,
  window k = `[epoch + k·D, epoch + (k+1)·D)` (half-open, ISO dates) for k from
  `floor(n_min/D)` to `floor(n_max/D)`; grid-aligned like range windows.
* **keyset** — sampled boundaries b_1 < … < b_m give windows `(−∞, b_1], (b_1, b_2], …,
  (b_m, +∞)`: lo exclusive, hi inclusive, None = unbounded. The last window is open, so
  rows appended later land in it.

`plan_hash` fingerprints a plan so a resume can refuse a changed one.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Sequence

import xxhash

from rivet_core.chunks.keys import day_key, keyset_key, range_key
from rivet_core.chunks.model import ChunkWindow

#: More windows than this is refused outright (docs/rivet-compat.md "Chunk windows").
MAX_WINDOWS = 50_000_000
EPOCH = dt.date(1970, 1, 1)


def _require_size(size: int, what: str = "chunk_size") -> None:
    if size < 1:
        raise ValueError(f"{what} must be >= 1, got {size}")


def range_window_count(min_value: int, max_value: int, size: int) -> int:
    """How many grid windows `range_windows` would produce (0 when min > max)."""
    _require_size(size)
    if min_value > max_value:
        return 0
    return max_value // size - min_value // size + 1


def range_windows(
    min_value: int, max_value: int, size: int, *, column: str
) -> tuple[ChunkWindow, ...]:
    """Grid-aligned inclusive windows covering [min_value, max_value] (see module doc)."""
    count = range_window_count(min_value, max_value, size)
    first = min_value // size
    return tuple(
        ChunkWindow(
            index=i, lo=str(k * size), hi=str((k + 1) * size - 1),
            key=range_key(column, k * size, (k + 1) * size - 1),
        )
        for i, k in enumerate(range(first, first + count))
    )


def count_window_size(min_value: int, max_value: int, count: int) -> int:
    """`ceil((max − min + 1) / count)`, at least 1."""
    _require_size(count, "chunk_count")
    span = max_value - min_value + 1
    return max(1, -(-span // count))


def count_windows(
    min_value: int, max_value: int, count: int, *, column: str
) -> tuple[ChunkWindow, ...]:
    """At most `count` inclusive windows from min_value, the last clipped to max_value."""
    if min_value > max_value:
        return ()
    size = count_window_size(min_value, max_value, count)
    windows = []
    lo = min_value
    while lo <= max_value:
        hi = min(lo + size - 1, max_value)
        windows.append(ChunkWindow(index=len(windows), lo=str(lo), hi=str(hi),
                                   key=range_key(column, lo, hi)))
        lo = hi + 1
    return tuple(windows)


def dense_windows(row_count: int, size: int, *, column: str) -> tuple[ChunkWindow, ...]:
    """Ordinal windows [1, size], [size+1, 2·size], … up to row_count (last clipped)."""
    _require_size(size)
    windows = []
    lo = 1
    while lo <= row_count:
        hi = min(lo + size - 1, row_count)
        windows.append(ChunkWindow(index=len(windows), lo=str(lo), hi=str(hi),
                                   key=range_key(column, lo, hi)))
        lo = hi + 1
    return tuple(windows)


def day_window_count(min_day: dt.date, max_day: dt.date, days: int) -> int:
    _require_size(days, "chunk_by_days")
    if min_day > max_day:
        return 0
    return (max_day - EPOCH).days // days - (min_day - EPOCH).days // days + 1


def day_windows(min_day: dt.date, max_day: dt.date, days: int) -> tuple[ChunkWindow, ...]:
    """Epoch-aligned half-open windows of `days` days covering [min_day, max_day]."""
    count = day_window_count(min_day, max_day, days)
    first = (min_day - EPOCH).days // days
    windows = []
    for i, k in enumerate(range(first, first + count)):
        lo = EPOCH + dt.timedelta(days=k * days)
        hi = EPOCH + dt.timedelta(days=(k + 1) * days)
        windows.append(ChunkWindow(index=i, lo=lo.isoformat(), hi=hi.isoformat(),
                                   key=day_key(lo, hi)))
    return tuple(windows)


def keyset_windows(boundaries: Sequence[str]) -> tuple[ChunkWindow, ...]:
    """(−∞, b_1], (b_1, b_2], …, (b_m, +∞) — always at least one window.

    `boundaries` must be strictly increasing in the key's order (the planner samples them
    from one ordered scan of a unique key); equal neighbours are dropped defensively.
    """
    bounds: list[str] = []
    for value in boundaries:
        if not bounds or bounds[-1] != value:
            bounds.append(value)
    los: list[str | None] = [None, *bounds]
    his: list[str | None] = [*bounds, None]
    return tuple(
        ChunkWindow(index=i, lo=lo, hi=hi, key=keyset_key(i))
        for i, (lo, hi) in enumerate(zip(los, his, strict=True))
    )


def plan_hash(base_query: str, column: str, kind: str) -> str:
    """16-hex xxh3_64 over the length-prefixed fields (u64 LE length + UTF-8 bytes)."""
    hasher = xxhash.xxh3_64()
    for text in (base_query, column, kind):
        data = text.encode("utf-8")
        hasher.update(struct.pack("<Q", len(data)))
        hasher.update(data)
    return hasher.hexdigest()
