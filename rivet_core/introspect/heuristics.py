"""The mode heuristics of `rivet init` (docs/rivet-compat.md "CLI output and exit codes"), as a pure function of a
`TableReport` so every rule is testable without a database.

First match wins:

1. row estimate ≤ `small_rows` (default 100,000) → `full`: one snapshot is cheap, and a
   full export has no state to go wrong.
2. single-column integer primary key → `chunked` range on it (`chunk_column`), `parallel`
   1 / 2 / 4 below 500K / 5M / above rows. Ids are dense-ish and indexed, so each window is
   an index range scan.
3. other single-column NOT NULL primary key of a keyset-usable type (uuid, text, timestamp,
   date, float) → `chunked` keyset (`chunk_by_key`): uuids are not ranges, but ordered
   pages on the primary key are.
4. a NOT NULL, indexed integer column → `chunked` range on it.
5. an updated_at-like (then created_at-like) timestamp → `incremental` on it.
6. otherwise `full`, flagged `# REVIEW` (a large table with no key or cursor).

Chunked suggestions always set `chunk_checkpoint: true` (a crash resumes instead of
restarting) and `chunk_size` 100K / 250K / 1M / 2.5M below 1M / 10M / 100M / above rows.
Unbounded numerics get a `decimal(38,18)` override flagged `# REVIEW` (the engine refuses
to guess a precision; the reviewer must confirm one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

# `rivet init` registers its options (SMALL_TABLE_ROWS) when the CLI loads: pyarrow and the
# catalog/fidelity modules are imported by the functions that use them, not at import time.
if TYPE_CHECKING:
    import pyarrow as pa

    from rivet_core.introspect.table_report import TableReport

SMALL_TABLE_ROWS = 100_000
UNBOUNDED_DECIMAL = "decimal(38,18)"


@dataclass
class Suggestion:
    """What init writes for one table: export fields plus the comments that explain them."""

    mode: str
    fields: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    overrides: dict[str, str] = field(default_factory=dict)
    review: list[str] = field(default_factory=list)


def chunk_size_for(rows: int) -> int:
    if rows < 1_000_000:
        return 100_000
    if rows < 10_000_000:
        return 250_000
    if rows < 100_000_000:
        return 1_000_000
    return 2_500_000


def parallel_for(rows: int) -> int:
    return 1 if rows < 500_000 else 2 if rows < 5_000_000 else 4


def _keyset_usable(arrow_type: pa.DataType | None) -> bool:
    import pyarrow as pa

    if arrow_type is None:
        return False
    return (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type)
            or pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
            or pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type)
            or (isinstance(arrow_type, pa.BaseExtensionType)
                and arrow_type.extension_name == "arrow.uuid"))


def suggest(report: TableReport, *, small_rows: int = SMALL_TABLE_ROWS,
            chunk_size: int | None = None) -> Suggestion:
    """The mode and fields for one table (module doc lists the rules)."""
    overrides, review = _overrides(report)
    rows = report.row_estimate
    shown = "unknown" if rows is None else f"~{rows:,}"
    s = _mode(report, rows, shown, small_rows, chunk_size)
    s.overrides, s.review = overrides, review + s.review
    return s


def _mode(report: TableReport, rows: int | None, shown: str, small_rows: int,
          chunk_size: int | None) -> Suggestion:
    import pyarrow as pa

    if rows is not None and rows <= small_rows:
        return Suggestion("full", reason=f"{shown} rows (≤ {small_rows:,}): a full snapshot each run")
    size = chunk_size or chunk_size_for(rows or 0)
    chunked = {"chunk_size": size, "chunk_checkpoint": True}
    pk = report.integer_pk
    if pk:
        return Suggestion("chunked", {"chunk_column": pk, **chunked,
                                      "parallel": parallel_for(rows or 0)},
                          reason=f"{shown} rows, integer primary key '{pk}': id-range windows")
    if len(report.primary_key) == 1:
        col = report.column(report.primary_key[0])
        if col is not None and _keyset_usable(col.arrow_type):
            return Suggestion("chunked", {"chunk_by_key": col.name, **chunked},
                              reason=(f"{shown} rows, primary key '{col.name}' ({col.source_type}) "
                                      "is not an integer range: keyset pages ordered by it"))
    for col in report.columns:
        if (col.arrow_type is not None and pa.types.is_integer(col.arrow_type)
                and col.name in report.not_null and report.is_indexed(col.name)):
            return Suggestion("chunked", {"chunk_column": col.name, **chunked,
                                          "parallel": parallel_for(rows or 0)},
                              reason=f"{shown} rows, indexed NOT NULL integer '{col.name}': range windows",
                              review=[f"'{col.name}' is not the primary key — check that its values "
                                      "are spread evenly (sparse ranges make empty windows)"])
    temporal = [c for c in report.cursor_candidates
                if (col := report.column(c)) is not None and col.arrow_type is not None
                and (pa.types.is_timestamp(col.arrow_type) or pa.types.is_date(col.arrow_type))]
    if temporal:
        cursor = temporal[0]
        review = []
        if not report.is_indexed(cursor):
            review.append(f"'{cursor}' has no index: every run scans the table to find new rows "
                          f"— consider CREATE INDEX on it")
        return Suggestion("incremental", {"cursor_column": cursor},
                          reason=f"{shown} rows, no usable key, change-tracking column '{cursor}'",
                          review=review)
    return Suggestion("full", reason=f"{shown} rows and no key or cursor column",
                      review=["large table exported in full every run — add a primary key or an "
                              "updated_at column to make it chunked or incremental"])


def _overrides(report: TableReport) -> tuple[dict[str, str], list[str]]:
    from rivet_core.introspect.fidelity import UNSUPPORTED

    overrides: dict[str, str] = {}
    review: list[str] = []
    for col in report.columns:
        if col.fidelity != UNSUPPORTED:
            continue
        native = col.source_type.lower()
        if native.startswith("numeric") or native.startswith("decimal"):
            overrides[col.name] = UNBOUNDED_DECIMAL
        else:
            review.append(f"column '{col.name}' ({col.source_type}) has no Arrow mapping: "
                          f"{col.note} — the export fails until you change its query")
    return overrides, review
