"""SQLite declared column type → Arrow type, decided by the declaration, never by values.

SQLite values are dynamically typed; the declared type of a result column (what
`CREATE TABLE` said, visible through a temp view's `PRAGMA table_info`) is the only stable
statement of intent. Typing from the returned values made the schema depend on the data:
a bare `NUMERIC` column came out `double` with rows and `string` with none, so every idle
incremental run reported schema drift. So the Arrow type is a pure function of the
declared text (`sqlite_mapping`), and each type admits a fixed set of SQLite storage
classes; a value of another class fails the run with a message naming table, column,
declared type, the value's storage class and the fix (`sqlite_mismatch_message`).

Rules, first match wins (they refine SQLite's own affinity rules, section 3.1 of
https://sqlite.org/datatype3.html, which the last five rows follow in SQLite's order):

| declared type contains / is            | Arrow            | fidelity |
|----------------------------------------|------------------|----------|
| BOOL                                   | bool             | exact    |
| DATETIME, TIMESTAMP                    | timestamp(us)    | exact    |
| starts with DATE                       | date32           | exact    |
| JSON                                   | json (string)    | exact    |
| DECIMAL(p,s) / NUMERIC(p,s), p 1..76   | decimal(p,s)     | exact    |
| INT (INTEGER affinity)                 | int64            | exact    |
| CHAR, CLOB, TEXT (TEXT affinity)       | string           | exact    |
| BLOB (BLOB affinity)                   | binary           | exact    |
| REAL, FLOA, DOUB (REAL affinity)       | float64          | exact    |
| starts with TIME                       | time64(us)       | exact    |
| bare NUMERIC/DECIMAL/DEC/NUMBER/MONEY  | float64          | lossy    |
| any other name (NUMERIC affinity)      | string           | lossy    |
| nothing declared (expressions)         | inferred         | lossy    |

Bare `NUMERIC` → float64 (lossy) rather than string: NUMERIC affinity stores every
numeric-looking value as an INTEGER or a REAL (an 8-byte double), so float64 holds every
REAL exactly and is what such columns always exported as when they had rows — existing
schema baselines keep matching. It is graded lossy because a decimal fraction written as
text (`'0.1'`) was already rounded to a double by SQLite, and an integer beyond ±2**53
has no exact double: those fail the run (never silently rounded) and
`columns: {c: "decimal(p,s)"}` or `int64` is the fix. Other unknown names (`UUID`,
`STRING`, `VARIANT`) also get NUMERIC affinity in SQLite but are usually text: they map
to string (numbers as their canonical text), lossy because SQLite already turned
`'007'` into 7 on insert.

Only columns with no declared type at all (expressions like `qty + 1`, or a column
declared without a type) are typed from the first rows (`infer_from_values`); with no
rows they are string — deterministic, and documented in docs/config-reference.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rivet_core.lazy_modules import pa
from rivet_core.source.postgres.types import decimal_type

_DECIMAL = re.compile(r"\b(?:DECIMAL|NUMERIC)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")
_NUMERIC_WORD = re.compile(r"^\s*(?:NUMERIC|DECIMAL|DEC|NUMBER|MONEY|SMALLMONEY)\b")

# SQLite storage classes as the stdlib driver returns them.
_KIND = {int: "INTEGER", float: "REAL", str: "TEXT", bytes: "BLOB"}
_NUMBERS = frozenset({int, float})
_NUMBERS_TEXT = frozenset({int, float, str})
_TEXT = frozenset({str})

# Integers a float64 holds exactly; beyond it only some do (checked per value).
FLOAT_EXACT_INT = 2**53


@dataclass(frozen=True)
class SQLiteMapping:
    """How one declared type maps. `arrow_type` None means "no declaration: infer".

    `accepts` is the set of Python value types (SQLite storage classes) the mapping takes;
    anything else is a mismatch. `note` is empty for exact mappings and explains the loss
    for lossy ones (shown by `rivet check`).
    """

    arrow_type: pa.DataType | None
    logical_type: str | None
    accepts: frozenset[type]
    exact: bool = True
    note: str = ""


_UNDECLARED = SQLiteMapping(None, None, frozenset({int, float, str, bytes}), False,
                            "no declared type: inferred from sampled values")


def sqlite_mapping(declared: str) -> SQLiteMapping:
    """The mapping of a declared type; total and deterministic (never raises)."""
    upper = declared.strip().upper()
    if not upper:
        return _UNDECLARED
    if "BOOL" in upper:
        return SQLiteMapping(pa.bool_(), None, _NUMBERS_TEXT)
    if "DATETIME" in upper or "TIMESTAMP" in upper:
        return SQLiteMapping(pa.timestamp("us"), None, _TEXT)
    if upper.startswith("DATE"):
        return SQLiteMapping(pa.date32(), None, _TEXT)
    if "JSON" in upper:
        return SQLiteMapping(pa.json_(pa.string()), "json", _NUMBERS_TEXT)
    match = _DECIMAL.search(upper)
    if match:
        precision = int(match.group(1))
        scale = int(match.group(2) or 0)
        if 1 <= precision <= 76 and scale <= precision:
            return SQLiteMapping(decimal_type(precision, scale), None, _NUMBERS_TEXT)
    if "INT" in upper:
        return SQLiteMapping(pa.int64(), None, _NUMBERS)
    if "CHAR" in upper or "CLOB" in upper or "TEXT" in upper:
        return SQLiteMapping(pa.string(), None, _NUMBERS_TEXT)
    if "BLOB" in upper:
        return SQLiteMapping(pa.binary(), None, frozenset({bytes, str}))
    if "REAL" in upper or "FLOA" in upper or "DOUB" in upper:
        return SQLiteMapping(pa.float64(), None, _NUMBERS)
    if upper.startswith("TIME"):
        return SQLiteMapping(pa.time64("us"), None, _TEXT)
    if _NUMERIC_WORD.match(upper):
        return SQLiteMapping(
            pa.float64(), None, _NUMBERS, exact=False,
            note=(f"{declared.strip()} without (p,s): SQLite stores integers and doubles, "
                  f"exported as float64; set columns: {{<col>: \"decimal(p,s)\"}} for exact "
                  f"decimals"),
        )
    return SQLiteMapping(
        pa.string(), None, _NUMBERS_TEXT, exact=False,
        note=(f"{declared.strip()} has SQLite NUMERIC affinity: numeric-looking text was "
              f"stored as a number and is exported as its canonical text"),
    )


def sqlite_declared_type(declared: str) -> tuple[pa.DataType | None, str | None]:
    """(Arrow type, logical type) for a declared type; (None, None) means "infer"."""
    mapping = sqlite_mapping(declared)
    return mapping.arrow_type, mapping.logical_type


def storage_class(value: Any) -> str:
    """SQLite storage class name of a driver value (`INTEGER`, `REAL`, `TEXT`, `BLOB`)."""
    return _KIND.get(type(value), type(value).__name__)


def sqlite_mismatch_message(where: str, column: str, declared: str, arrow_type: pa.DataType,
                            value: Any, why: str = "") -> str:
    """The error for a stored value that does not fit its column's declared type.

    SQLite lets any column hold any storage class (a TEXT value in an INTEGER column), so
    this is data, not a bug in the mapping; the message says which value and how to fix it.
    """
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    reason = f" ({why})" if why else ""
    return (
        f"SQLite {where}, column '{column}' declared {declared or 'without a type'} "
        f"(exported as {arrow_type}) holds a {storage_class(value)} value {shown}{reason} — "
        f"SQLite does not enforce declared types; set `columns: {{{column}: <type>}}` in "
        f"rivet.yaml (e.g. string) or export a query with CAST({column} AS …), or fix the row"
    )


def infer_from_values(values: Iterable[Any]) -> pa.DataType:
    """Arrow type for sampled values of an undeclared column (all NULL or no rows → string)."""
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
