"""Property tests for the pure parts of init / plan: table selection by globs, the mode
heuristics over arbitrary table shapes, and the plan file's duration/staleness inputs."""

from __future__ import annotations

import json
from datetime import timedelta
from fnmatch import fnmatchcase

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from rivet_core.introspect.fidelity import ColumnReport
from rivet_core.introspect.heuristics import chunk_size_for, suggest
from rivet_core.introspect.select import select_tables
from rivet_core.introspect.table_report import IndexInfo, TableReport, cursor_candidates
from rivet_core.ops.plan import parse_duration

names = st.text(alphabet="abcxyz_01", min_size=1, max_size=6)
globs = st.text(alphabet="abcxyz_01*?", min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(st.lists(names, max_size=25), st.lists(globs, max_size=3), st.lists(globs, max_size=3))
def test_glob_selection_is_exactly_include_minus_exclude(tables, include, exclude) -> None:
    chosen = select_tables(tables, include, exclude)
    assert len(chosen) == len(set(chosen))  # no duplicates
    assert chosen == [t for t in dict.fromkeys(tables) if t in set(chosen)]  # input order kept
    for table in set(tables):
        wanted = (not include or any(fnmatchcase(table, g) for g in include)) and not any(
            fnmatchcase(table, g) for g in exclude)
        assert (table in chosen) == wanted, (table, include, exclude)


_TYPES = {"int": pa.int64(), "uuid": pa.uuid(), "text": pa.string(), "ts": pa.timestamp("us"),
          "dec": pa.decimal128(12, 2), "none": None}


@st.composite
def table_reports(draw):  # noqa: ANN001, ANN201
    cols = draw(st.lists(st.tuples(st.sampled_from(["id", "updated_at", "created_at", "v", "n", "amount"]),
                                   st.sampled_from(sorted(_TYPES))), min_size=1, max_size=6,
                         unique_by=lambda c: c[0]))
    columns = [ColumnReport(n, t, _TYPES[t], "unsupported" if _TYPES[t] is None else "exact",
                            note="no mapping" if _TYPES[t] is None else "") for n, t in cols]
    col_names = [n for n, _ in cols]
    pk = draw(st.lists(st.sampled_from(col_names), max_size=2, unique=True))
    indexed = draw(st.lists(st.sampled_from(col_names), max_size=3, unique=True))
    rows = draw(st.one_of(st.none(), st.integers(0, 10**9)))
    report = TableReport(None, "t", columns, tuple(pk), set(draw(st.lists(st.sampled_from(col_names)))) | set(pk),
                         [IndexInfo(f"ix_{c}", (c,), False) for c in indexed], rows, None)
    report.cursor_candidates = cursor_candidates(report)
    return report


@settings(max_examples=300, deadline=None)
@given(table_reports(), st.integers(0, 10**6))
def test_heuristics_are_total_and_consistent(report: TableReport, small: int) -> None:
    s = suggest(report, small_rows=small)
    assert s.mode in ("full", "chunked", "incremental")
    if report.row_estimate is not None and report.row_estimate <= small:
        assert s.mode == "full" and not s.fields
    if s.mode == "chunked":
        assert s.fields["chunk_checkpoint"] is True
        assert s.fields["chunk_size"] == chunk_size_for(report.row_estimate or 0)
        key = s.fields.get("chunk_column") or s.fields.get("chunk_by_key")
        col = report.column(key)
        assert col is not None and col.arrow_type is not None
        if "chunk_column" in s.fields:
            assert pa.types.is_integer(col.arrow_type)
        else:
            assert report.primary_key == (key,)
    if s.mode == "incremental":
        col = report.column(s.fields["cursor_column"])
        assert col is not None and pa.types.is_timestamp(col.arrow_type)
    # every unsupported column is either overridden (a decimal) or flagged for review
    for col in report.columns:
        if col.fidelity == "unsupported":
            assert col.name in s.overrides or any(col.name in r for r in s.review)


@given(st.integers(0, 10**6), st.sampled_from(["", "s", "m", "h", "d"]))
def test_duration_parsing_round_trips(number: int, unit: str) -> None:
    seconds = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    assert parse_duration(f"{number}{unit}") == timedelta(seconds=number * seconds)


@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                    max_leaves=12))
def test_plan_json_round_trip_preserves_windows_and_snapshot(value) -> None:  # noqa: ANN001
    """The plan is compared field-for-field after a JSON round trip (`windows != planned`
    is a staleness reason), so whatever a window or snapshot holds must survive it."""
    import tempfile
    from pathlib import Path

    from rivet_core.ops.plan import read_plan, write_plan

    doc = {"schema_version": 1, "kind": "rivet.plan", "created_at": "2026-01-01T00:00:00+00:00",
           "config_path": "/x/rivet.yaml", "config_hash": "sha256:0",
           "exports": [{"export_name": "e", "windows": [value], "cursor_snapshot": {"value": value}}]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.json"
        write_plan(doc, path)
        assert read_plan(path) == json.loads(json.dumps(doc))
