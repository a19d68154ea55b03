"""The export's quality gate (docs/rivet-compat.md "Quality gates"): a streaming tracker fed every written batch,
its verdict, and the operator-facing failure error.

Checks and severities:
- `row_count_min` / `row_count_max` on the total rows — FAIL (evaluated even for 0 rows);
- `null_ratio_max: {col: f}` — FAIL when nulls/total > f (only when total > 0);
- `unique_columns` — FAIL "column 'c': N duplicate values out of M rows". A value's identity
  is xxh3-64 of its canonical typed bytes (`rivet_core.format.meta_columns`), NULLs are
  ignored (SQL UNIQUE semantics). Memory is one set of 64-bit ints per column;
- `unique_max_entries` — once a column's set holds that many distinct hashes and another
  value arrives, tracking of that column stops with a WARN; duplicates already found still
  FAIL, reported as "at least N";
- a rule naming a column the export does not produce — FAIL "quality check references
  unknown column 'c'" (a rule that can never fire must not read as a pass).

The gate runs after the data is written to temp files and before upload (single mode); any
FAIL means nothing is uploaded and the run exits 3 via `quality_error`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

import xxhash

from rivet_core.errors import DataIntegrityError
from rivet_core.format.meta_columns import canonical_payloads, type_tag
from rivet_core.lazy_modules import pa

Severity = Literal["FAIL", "WARN"]


class QualityConfigLike(Protocol):
    """What the tracker reads from `exports[].quality` (the config package's model)."""

    @property
    def row_count_min(self) -> int | None: ...
    @property
    def row_count_max(self) -> int | None: ...
    @property
    def null_ratio_max(self) -> dict[str, float] | None: ...
    @property
    def unique_columns(self) -> list[str] | None: ...
    @property
    def unique_max_entries(self) -> int | None: ...


@dataclass(frozen=True)
class QualityIssue:
    """One finding. `check` is the config key it comes from (`row_count_min`,
    `row_count_max`, `null_ratio_max`, `unique_columns`, `unique_max_entries`)."""

    severity: Severity
    check: str
    column: str | None
    message: str
    observed: float | int | None
    threshold: float | int | None


@dataclass
class _UniqueState:
    hashes: set[int] = field(default_factory=set)
    non_null: int = 0
    capped: bool = False


def _ratio_text(ratio: float, limit: float) -> tuple[str, str]:
    """Two decimals, or as many more (up to 6) as needed so `observed > max` reads true."""
    for digits in range(2, 7):
        a, b = f"{ratio:.{digits}f}", f"{limit:.{digits}f}"
        if a != b:
            return a, b
    return f"{ratio!r}", f"{limit!r}"


class QualityTracker:
    """Accumulates the measurements the quality rules need, one batch at a time."""

    def __init__(self, config: QualityConfigLike, schema: pa.Schema) -> None:
        self.config = config
        self.schema = schema
        self.rows = 0
        names = set(schema.names)
        self._null_rules: dict[str, float] = dict(config.null_ratio_max or {})
        self._unique_rules: list[str] = list(dict.fromkeys(config.unique_columns or []))
        self._unknown: list[tuple[str, str]] = []  # (check, column)
        for col in self._null_rules:
            if col not in names:
                self._unknown.append(("null_ratio_max", col))
        for col in self._unique_rules:
            if col not in names and col not in {c for _, c in self._unknown}:
                self._unknown.append(("unique_columns", col))
        self._null_counts: dict[str, int] = {c: 0 for c in self._null_rules if c in names}
        self._unique: dict[str, _UniqueState] = {}
        for col in self._unique_rules:
            if col in names:
                type_tag(schema.field(col).type, col)  # unhashable type → ConfigError now
                self._unique[col] = _UniqueState()
        self._cap = config.unique_max_entries

    def observe(self, batch: pa.RecordBatch) -> None:
        """Fold one batch (with the tracker's schema) into the measurements."""
        self.rows += batch.num_rows
        for col in self._null_counts:
            self._null_counts[col] += batch.column(col).null_count
        for col, state in self._unique.items():
            if not state.capped:
                self._track_unique(state, batch.column(col), col)

    def _track_unique(self, state: _UniqueState, arr: pa.Array, col: str) -> None:
        # to_pylist materialises the payload bytes in C; NULLs come back as None.
        values = canonical_payloads(arr, col).to_pylist()
        if arr.null_count:
            values = [v for v in values if v is not None]
        h = xxhash.xxh3_64_intdigest
        cap = self._cap
        if cap is None or len(state.hashes) + len(values) <= cap:
            # Fast path: the cap cannot be reached inside this batch.
            state.hashes.update(map(h, values))
            state.non_null += len(values)
            return
        for v in values:
            if len(state.hashes) >= cap:
                state.capped = True
                return
            state.hashes.add(h(v))
            state.non_null += 1

    def merge(self, other: QualityTracker) -> None:
        """Fold another sink's tracker (same rules) into this one — for multi-sink runners."""
        self.rows += other.rows
        for col, n in other._null_counts.items():
            self._null_counts[col] = self._null_counts.get(col, 0) + n
        for col, theirs in other._unique.items():
            mine = self._unique.setdefault(col, _UniqueState())
            own_dupes = theirs.non_null - len(theirs.hashes)
            mine.capped = mine.capped or theirs.capped
            folded = 0
            for value in theirs.hashes:
                if self._cap is not None and len(mine.hashes) >= self._cap:
                    mine.capped = True
                    break
                mine.hashes.add(value)
                folded += 1
            mine.non_null += own_dupes + folded

    def evaluate(self) -> list[QualityIssue]:
        """Every FAIL and WARN against the rules, in rule order."""
        cfg, total = self.config, self.rows
        issues: list[QualityIssue] = []
        for check, col in self._unknown:
            issues.append(QualityIssue(
                "FAIL", check, col, f"quality check references unknown column '{col}'", None, None,
            ))
        if cfg.row_count_min is not None and total < cfg.row_count_min:
            issues.append(QualityIssue(
                "FAIL", "row_count_min", None,
                f"row_count {total} below minimum {cfg.row_count_min}", total, cfg.row_count_min,
            ))
        if cfg.row_count_max is not None and total > cfg.row_count_max:
            issues.append(QualityIssue(
                "FAIL", "row_count_max", None,
                f"row_count {total} exceeds maximum {cfg.row_count_max}", total, cfg.row_count_max,
            ))
        if total == 0:
            return issues
        for col, nulls in self._null_counts.items():
            limit = self._null_rules[col]
            ratio = nulls / total
            if ratio > limit:
                shown, shown_max = _ratio_text(ratio, limit)
                issues.append(QualityIssue(
                    "FAIL", "null_ratio_max", col,
                    f"null ratio of column '{col}' is {shown} > max {shown_max} "
                    f"({nulls} of {total} rows)",
                    ratio, limit,
                ))
        for col, state in self._unique.items():
            if state.capped:
                issues.append(QualityIssue(
                    "WARN", "unique_max_entries", col,
                    f"column '{col}': uniqueness tracking stopped at unique_max_entries="
                    f"{self._cap} distinct values; later duplicates are not detected "
                    "(raise unique_max_entries to cover all rows)",
                    len(state.hashes), self._cap,
                ))
            dupes = state.non_null - len(state.hashes)
            if dupes > 0:
                at_least = "at least " if state.capped else ""
                issues.append(QualityIssue(
                    "FAIL", "unique_columns", col,
                    f"column '{col}': {at_least}{dupes} duplicate values out of {total} rows",
                    dupes, 0,
                ))
        return issues


def quality_error(export_name: str, issues: list[QualityIssue]) -> DataIntegrityError:
    """The gate's failure (exit 3): every FAIL as a bullet, plus the remediation hint.

    WARN issues are not part of it (they are only logged).
    """
    failing = [i.message for i in issues if i.severity == "FAIL"]
    body = "\n  - ".join(failing)
    return DataIntegrityError(
        f"export '{export_name}': {len(failing)} quality check(s) failed:\n  - {body}\n  "
        "Fix the source data, or adjust the thresholds under `quality:` in your config.",
        code="RIVET_QUALITY_FAILED",
    )
