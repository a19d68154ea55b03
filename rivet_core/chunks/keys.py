"""Partition keys of chunk windows: stable, sortable, `[A-Za-z0-9_.-]` only.

A window's key is its identity everywhere outside the planner — the checkpoint, an
orchestrator's partitions (one per window), logs. Two properties matter and are
property-tested (tests/chunks/test_chunk_windows.py):

* **stable**: the key is a pure function of the window's bounds, so a grid-aligned range
  window keeps its key when the table grows;
* **sortable**: within one plan, plain byte-wise string order of the keys equals window
  order, so an orchestrator lists (and registers) partitions in ascending window order.

Formats:

| strategy | key | example |
|---|---|---|
| range, count, dense | `<column>_<enc(lo)>-<enc(hi)>` | `id_000000000100000-000000000199999` |
| days | `<lo ISO>_<hi ISO>` (hi exclusive) | `2024-01-29_2024-02-05` |
| keyset | `p<index, 9 digits>` | `p000000042` |

`<column>` is the chunk column with every character outside `[A-Za-z0-9_]` replaced by
`_` (all keys of a plan share it, so collisions between columns do not matter).

`enc(v)` makes integer order equal string order over the whole 64-bit range (signed and
unsigned), using three prefix-free classes whose first characters sort in class order
(`.` < `0`–`9` < `x` in ASCII):

* `0 <= v < 10^15` → 15 zero-padded digits (the common, readable case);
* `v >= 10^15` → `x` + 20 zero-padded digits (up to 10^20 − 1, covers BIGINT UNSIGNED);
* `v < 0` → `.` + 20 zero-padded digits of `10^20 + v` (larger magnitude → smaller
  digits), down to −(10^20 − 1).

Each class has a fixed width, so no encoding is a prefix of another and comparing two keys
of the same plan compares `enc(lo)` first; windows never share a `lo`. A key never
contains `...` (orchestrators' partition key rules reject that substring).
"""

from __future__ import annotations

import datetime as dt
import re

_SMALL_DIGITS = 15
_WIDE_DIGITS = 20
_SMALL_LIMIT = 10**_SMALL_DIGITS
_WIDE_LIMIT = 10**_WIDE_DIGITS
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
KEY_ALPHABET = re.compile(r"^[A-Za-z0-9_.-]+$")


def encode_int(value: int) -> str:
    """Order-preserving text of an integer (see module docstring)."""
    if not -_WIDE_LIMIT < value < _WIDE_LIMIT:
        raise ValueError(f"chunk bound {value} is outside ±(10^20 − 1) and cannot be keyed")
    if 0 <= value < _SMALL_LIMIT:
        return f"{value:0{_SMALL_DIGITS}d}"
    if value >= _SMALL_LIMIT:
        return f"x{value:0{_WIDE_DIGITS}d}"
    return f".{_WIDE_LIMIT + value:0{_WIDE_DIGITS}d}"


def decode_int(text: str) -> int:
    """Inverse of `encode_int`."""
    if text.startswith("x"):
        return int(text[1:])
    if text.startswith("."):
        return int(text[1:]) - _WIDE_LIMIT
    return int(text)


def safe_column(column: str) -> str:
    """The column as a key prefix: `[A-Za-z0-9_]` only, never empty."""
    return _UNSAFE.sub("_", column) or "c"


def range_key(column: str, lo: int, hi: int) -> str:
    return f"{safe_column(column)}_{encode_int(lo)}-{encode_int(hi)}"


def day_key(lo: dt.date, hi: dt.date) -> str:
    return f"{lo.isoformat()}_{hi.isoformat()}"


def keyset_key(index: int) -> str:
    if not 0 <= index < 10**9:
        raise ValueError(f"keyset window index {index} is outside 0..999,999,999")
    return f"p{index:09d}"


def window_key(strategy: str, column: str, lo: str | None, hi: str | None, index: int) -> str:
    """The key of one window from its textual bounds (the `ChunkWindow.lo/hi` strings).

    range/count/dense: integer bounds (inclusive); days: ISO dates (hi exclusive);
    keyset: the bounds are not part of the key (key values can be any text), the index is.
    """
    if strategy in ("range", "count", "dense"):
        if lo is None or hi is None:
            raise ValueError(f"{strategy} windows need both bounds (got lo={lo!r}, hi={hi!r})")
        return range_key(column, int(lo), int(hi))
    if strategy == "days":
        if lo is None or hi is None:
            raise ValueError(f"day windows need both bounds (got lo={lo!r}, hi={hi!r})")
        return day_key(dt.date.fromisoformat(lo), dt.date.fromisoformat(hi))
    if strategy == "keyset":
        return keyset_key(index)
    raise ValueError(f"unknown chunk strategy '{strategy}'")
