"""SQLite declared column type → Arrow type, and inference for undeclared expressions.

SQLite values are dynamically typed; the declared type of a result column (what
`CREATE TABLE` said, visible through a temp view's `PRAGMA table_info`) is our best
statement of intent. Rules, first match wins: BOOL* → bool; DATETIME/TIMESTAMP →
timestamp(us) naive (ISO text in the file); DATE → date32; JSON → JSON; DECIMAL(p,s) /
NUMERIC(p,s) → exact decimal (values parsed via `Decimal(str(v))`); *INT* → int64;
CHAR/CLOB/TEXT → string; BLOB → binary; REAL/FLOA/DOUB → float64; TIME → time64(us).
Anything else, and expressions with no declared type, are inferred from the first rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from rivet_core.source.types_pg import decimal_type

_DECIMAL = re.compile(r"\b(?:DECIMAL|NUMERIC)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")


def sqlite_declared_type(declared: str) -> tuple[pa.DataType | None, str | None]:
    """(Arrow type, logical type) for a declared type; (None, None) means "infer"."""
    upper = declared.strip().upper()
    if not upper:
        return None, None
    if "BOOL" in upper:
        return pa.bool_(), None
    if "DATETIME" in upper or "TIMESTAMP" in upper:
        return pa.timestamp("us"), None
    if upper.startswith("DATE"):
        return pa.date32(), None
    if "JSON" in upper:
        return pa.json_(pa.string()), "json"
    match = _DECIMAL.search(upper)
    if match:
        precision = int(match.group(1))
        scale = int(match.group(2) or 0)
        if 1 <= precision <= 76 and scale <= precision:
            return decimal_type(precision, scale), None
    if "INT" in upper:
        return pa.int64(), None
    if "CHAR" in upper or "CLOB" in upper or "TEXT" in upper:
        return pa.string(), None
    if "BLOB" in upper:
        return pa.binary(), None
    if "REAL" in upper or "FLOA" in upper or "DOUB" in upper:
        return pa.float64(), None
    if upper.startswith("TIME"):
        return pa.time64("us"), None
    return None, None


def infer_from_values(values: Iterable[Any]) -> pa.DataType:
    """Arrow type for sampled values of an undeclared column (all NULL → string)."""
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return pa.string()
    if kinds <= {int}:
        return pa.int64()
    if kinds <= {int, float}:
        return pa.float64()
    if kinds <= {bytes}:
        return pa.binary()
    return pa.string()
