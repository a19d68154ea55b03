"""Quality gate tracker (docs/rivet-compat.md "Quality gates"): every check passing and failing, unknown columns,
the uniqueness cap, multi-sink merge, and the exit-3 failure error."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pytest

from rivet_core.errors import DataIntegrityError
from rivet_core.pipeline.quality import QualityIssue, QualityTracker, quality_error

SCHEMA = pa.schema([("id", pa.int64()), ("email", pa.string()), ("score", pa.float64())])


@dataclass
class Q:
    row_count_min: int | None = None
    row_count_max: int | None = None
    null_ratio_max: dict[str, float] | None = None
    unique_columns: list[str] | None = None
    unique_max_entries: int | None = None


def batch(ids: list[int | None], emails: list[str | None] | None = None) -> pa.RecordBatch:
    emails = emails if emails is not None else [f"u{i}@x" for i in range(len(ids))]
    return pa.record_batch(
        [pa.array(ids, pa.int64()), pa.array(emails, pa.string()), pa.array([1.0] * len(ids))],
        schema=SCHEMA,
    )


def evaluate(config: Q, *batches: pa.RecordBatch) -> list[QualityIssue]:
    tracker = QualityTracker(config, SCHEMA)
    for b in batches:
        tracker.observe(b)
    return tracker.evaluate()


def test_no_rules_means_no_issues() -> None:
    assert evaluate(Q(), batch([1, 1, None])) == []


def test_row_count_within_bounds_passes() -> None:
    assert evaluate(Q(row_count_min=3, row_count_max=3), batch([1, 2]), batch([3])) == []


def test_row_count_below_minimum_fails_even_with_zero_rows() -> None:
    [issue] = evaluate(Q(row_count_min=1))
    assert issue == QualityIssue("FAIL", "row_count_min", None, "row_count 0 below minimum 1", 0, 1)


def test_row_count_above_maximum_fails() -> None:
    [issue] = evaluate(Q(row_count_max=2), batch([1, 2, 3]))
    assert issue.severity == "FAIL"
    assert issue.message == "row_count 3 exceeds maximum 2"


def test_null_ratio_at_or_below_the_limit_passes() -> None:
    assert evaluate(Q(null_ratio_max={"email": 0.5}), batch([1, 2], ["a", None])) == []


def test_null_ratio_above_the_limit_fails_with_counts() -> None:
    emails = [None] * 42 + ["e"] * 58
    [issue] = evaluate(Q(null_ratio_max={"email": 0.1}), batch(list(range(100)), emails))
    assert issue.message == "null ratio of column 'email' is 0.42 > max 0.10 (42 of 100 rows)"
    assert (issue.check, issue.column, issue.observed, issue.threshold) == ("null_ratio_max", "email", 0.42, 0.1)


def test_null_ratio_shows_enough_digits_to_read_as_exceeding() -> None:
    emails = [None] * 101 + ["e"] * 899
    [issue] = evaluate(Q(null_ratio_max={"email": 0.1}), batch(list(range(1000)), emails))
    assert "is 0.101 > max 0.100 (101 of 1000 rows)" in issue.message


def test_null_ratio_is_not_checked_on_zero_rows() -> None:
    assert evaluate(Q(null_ratio_max={"email": 0.0})) == []


def test_unique_column_without_duplicates_passes_and_nulls_are_ignored() -> None:
    assert evaluate(Q(unique_columns=["id"]), batch([1, 2, None]), batch([3, None])) == []


def test_duplicates_across_batches_fail() -> None:
    [issue] = evaluate(Q(unique_columns=["email"]), batch([1, 2], ["a", "b"]), batch([3, 4], ["a", "a"]))
    assert issue == QualityIssue(
        "FAIL", "unique_columns", "email", "column 'email': 2 duplicate values out of 4 rows", 2, 0,
    )


def test_uniqueness_is_typed_so_empty_string_and_null_are_not_duplicates() -> None:
    assert evaluate(Q(unique_columns=["email"]), batch([1, 2, 3], ["", None, None])) == []


def test_unknown_columns_fail_naming_the_column() -> None:
    issues = evaluate(Q(null_ratio_max={"nope": 0.1}, unique_columns=["ghost", "nope"]), batch([1]))
    assert [(i.severity, i.message) for i in issues] == [
        ("FAIL", "quality check references unknown column 'nope'"),
        ("FAIL", "quality check references unknown column 'ghost'"),
    ]


def test_reaching_the_unique_cap_warns_and_stops_tracking() -> None:
    ids = list(range(10)) + [0]  # the duplicate arrives after the cap is hit
    [issue] = evaluate(Q(unique_columns=["id"], unique_max_entries=5), batch(ids))
    assert issue.severity == "WARN"
    assert issue.check == "unique_max_entries"
    assert "unique_max_entries=5" in issue.message


def test_duplicates_found_before_the_cap_still_fail_as_a_lower_bound() -> None:
    issues = evaluate(Q(unique_columns=["id"], unique_max_entries=3), batch([1, 1, 2, 3, 4, 5]))
    assert [i.severity for i in issues] == ["WARN", "FAIL"]
    assert issues[1].message == "column 'id': at least 1 duplicate values out of 6 rows"


def test_exactly_cap_distinct_values_do_not_warn() -> None:
    assert evaluate(Q(unique_columns=["id"], unique_max_entries=3), batch([1, 2, 3])) == []


def test_trackers_of_several_sinks_merge() -> None:
    cfg = Q(unique_columns=["id"], null_ratio_max={"email": 0.2}, row_count_max=3)
    a, b = QualityTracker(cfg, SCHEMA), QualityTracker(cfg, SCHEMA)
    a.observe(batch([1, 2], ["x", None]))
    b.observe(batch([2, 3], ["y", None]))
    a.merge(b)
    checks = {i.check: i for i in a.evaluate()}
    assert checks["row_count_max"].observed == 4
    assert checks["null_ratio_max"].message.endswith("(2 of 4 rows)")
    assert checks["unique_columns"].observed == 1


def test_quality_error_lists_every_failure_and_exits_3() -> None:
    issues = evaluate(Q(row_count_min=5, unique_columns=["id"], unique_max_entries=1), batch([1, 2]))
    err = quality_error("orders", issues)
    assert isinstance(err, DataIntegrityError)
    assert err.exit_code == 3
    assert err.message.startswith("export 'orders': 1 quality check(s) failed:\n  - row_count 2 below minimum 5")
    assert "unique_max_entries" not in err.message  # WARNs only log


@pytest.mark.parametrize("rows", [10_000])
def test_uniqueness_tracking_handles_a_large_batch(rows: int) -> None:
    ids = list(range(rows)) + [7]
    [issue] = evaluate(Q(unique_columns=["id"]), batch(ids))
    assert issue.observed == 1
