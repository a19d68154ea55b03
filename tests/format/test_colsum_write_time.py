"""Form B column checksums computed while writing (issue 16 item 2) equal the read-back ones.

The Parquet writer sums every row group as it encodes it (`ColumnSumAccumulator`), so a
commit no longer re-reads its part. That is only sound if the values are IDENTICAL to what
the read-back computed before and to what `rivet validate --depth full` recomputes from the
file (`parquet_sums` over the part's bytes, rivet_core/manifest/verify.py). Hypothesis draws
schemas over the types the sources produce (and rarer ones), NULL patterns, batch splits
and memory budgets (so rows land in different row groups), and compares:
- the writer's `column_sums` with `parquet_sums` of the written bytes (the validate path);
- the C hashing of strings/binaries with the pandas path it replaces, for the older
  `rivet-colsum-v1` render (the same numbers as every manifest written with it).
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rivet_core.format.base import WriterOptions
from rivet_core.format.parquet import ParquetFileWriter
from rivet_core.format.rotation import PartRotator
from rivet_core.manifest import column_checksums as cc
from rivet_core.pipeline.facade.commit import write_part_file

_ints = st.integers(-(2**63), 2**63 - 1)
_text = st.text(max_size=30)
_bytes = st.binary(max_size=30)

#: (Arrow type, value strategy). Values are what a source hands the writer.
TYPES: list[tuple[pa.DataType, st.SearchStrategy]] = [
    (pa.bool_(), st.booleans()),
    (pa.int8(), st.integers(-128, 127)),
    (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    (pa.int64(), _ints),
    (pa.uint32(), st.integers(0, 2**32 - 1)),
    (pa.uint64(), st.integers(0, 2**64 - 1)),
    (pa.float32(), st.floats(width=32, allow_nan=True)),
    (pa.float64(), st.floats(allow_nan=True)),
    (pa.date32(), st.dates()),
    (pa.time64("us"), st.times()),
    (pa.time32("ms"), st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))),
    (pa.timestamp("us"), st.datetimes()),
    (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(dt.UTC))),
    (pa.timestamp("s"), st.datetimes().map(lambda d: d.replace(microsecond=0))),
    (pa.timestamp("ns"), st.integers(-(2**62), 2**62)),
    (pa.duration("us"), st.integers(-(2**62), 2**62)),
    (pa.string(), _text),
    (pa.large_string(), _text),
    (pa.binary(), _bytes),
    (pa.large_binary(), _bytes),
    (pa.binary(16), st.binary(min_size=16, max_size=16)),
    (pa.uuid(), st.uuids().map(lambda u: u.bytes)),
    (pa.json_(), st.dictionaries(st.text(max_size=5), st.integers(), max_size=3).map(
        lambda d: "{" + ",".join(f'"{k!s}": {v}' for k, v in sorted(d.items()) if '"' not in k and "\\" not in k) + "}")),
    (pa.decimal128(12, 2), st.decimals(min_value=-(10**9), max_value=10**9, places=2,
                                       allow_nan=False, allow_infinity=False)),
    (pa.decimal256(40, 5), st.decimals(min_value=-(10**30), max_value=10**30, places=5,
                                       allow_nan=False, allow_infinity=False)),
    (pa.list_(pa.int32()), st.lists(st.integers(-5, 5), max_size=3)),
    (pa.dictionary(pa.int32(), pa.string()), st.sampled_from(["new", "paid", "", "ünï"])),
]


def _array(t: pa.DataType, values: list) -> pa.Array:
    if isinstance(t, pa.BaseExtensionType):
        return pa.ExtensionArray.from_storage(t, pa.array(values, t.storage_type))
    if pa.types.is_decimal(t):
        values = [None if v is None else decimal.Decimal(v) for v in values]
    return pa.array(values, t)


@st.composite
def tables(draw: st.DrawFn) -> tuple[pa.Table, list[int]]:
    """A table of 1–4 columns of drawn types with NULLs, and how it is cut into batches."""
    picks = draw(st.lists(st.sampled_from(range(len(TYPES))), min_size=1, max_size=4))
    rows = draw(st.integers(0, 60))
    cols, fields = [], []
    for n, k in enumerate(picks):
        t, values = TYPES[k]
        vals = draw(st.lists(st.one_of(st.none(), values), min_size=rows, max_size=rows))
        cols.append(_array(t, vals))
        fields.append(pa.field(f"c{n}", t))
    table = pa.Table.from_arrays(cols, schema=pa.schema(fields))
    cuts = sorted(draw(st.lists(st.integers(0, rows), max_size=5)))
    return table, cuts


def _batches(table: pa.Table, cuts: list[int]) -> list[pa.RecordBatch]:
    bounds = [0, *cuts, table.num_rows]
    return [b for lo, hi in zip(bounds, bounds[1:], strict=False) if hi > lo
            for b in table.slice(lo, hi - lo).to_batches()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=tables(), budget=st.sampled_from([None, 64, 2048, 2**20]), keyed=st.booleans())
def test_write_time_sums_equal_what_validate_recomputes_from_the_file(
        tmp_path: Path, data: tuple[pa.Table, list[int]], budget: int | None, keyed: bool) -> None:
    table, cuts = data
    path = tmp_path / "p.parquet"
    path.unlink(missing_ok=True)
    key = "c0" if keyed else None  # keyed by the first column, whatever its type (Rivet's rule)
    writer = ParquetFileWriter(path, table.schema, WriterOptions(format="parquet", buffer_budget_bytes=budget,
                                                                 checksum_key_column=key))
    for batch in _batches(table, cuts):
        writer.write_batch(batch)
    writer.finish()
    assert writer.column_sums is not None
    # exactly what `rivet validate --depth full` runs
    from_file = cc.parquet_sums(path.read_bytes(), key_column=key)
    assert writer.column_sums == from_file
    assert list(writer.column_sums) == table.schema.names


@settings(max_examples=60, deadline=None)
@given(data=tables())
def test_the_c_byte_hash_equals_the_pandas_path(data: tuple[pa.Table, list[int]],
                                                ) -> None:
    if cc._c_binary_sum is None:
        pytest.fail("the _colsum C extension is not built: run `python setup.py build_ext --inplace`")
    table, cuts = data
    for batch in _batches(table, cuts) or table.to_batches():
        fast = cc.table_sums(batch, render=cc.LEGACY_RENDER)
        c_fn, cc._c_binary_sum = cc._c_binary_sum, None
        try:
            slow = cc.table_sums(batch, render=cc.LEGACY_RENDER)
        finally:
            cc._c_binary_sum = c_fn
        assert fast == slow


def test_the_commit_uses_the_staged_sums_and_reads_nothing_back(tmp_path: Path, monkeypatch) -> None:
    """A staged Parquet part carries its checksums: the commit takes them as they are and
    never calls the read-back (which would raise here)."""
    from rivet_core.destination.local import LocalDestination

    table = pa.table({"id": pa.array(range(1000), pa.int64()),
                      "note": pa.array([None if i % 7 == 0 else f"n{i}" for i in range(1000)])})
    rotator = PartRotator(tmp_path / "stage", "s", table.schema, WriterOptions(format="parquet"), None)
    (tmp_path / "stage").mkdir()
    for batch in table.to_batches(max_chunksize=100):
        rotator.write_batch(batch)
    [part] = rotator.finish()
    want = cc.parquet_sums(part.path)
    assert part.column_sums == want

    def boom(*a, **k):
        raise AssertionError("the commit read the part back")

    monkeypatch.setattr("rivet_core.pipeline.facade.commit.parquet_sums", boom)
    record = write_part_file(LocalDestination(str(tmp_path / "out")), part, "data/p.parquet")
    assert {c.name: (int(c.checksum), c.nulls) for c in record.column_checksums} == {
        n: (s.checksum, s.nulls) for n, s in want.items()}
    assert dict(zip(("id", "note"), (want["id"].nulls, want["note"].nulls), strict=True)) == {"id": 0, "note": 143}


def test_a_column_whose_type_a_reread_changes_is_summed_from_the_file(tmp_path: Path) -> None:
    """date64 is stored as a Parquet DATE and read back as date32: the writer cannot hash
    the Arrow values it was given, so it sums that column from the file it wrote."""
    schema = pa.schema([("d", pa.date64()), ("i", pa.int64())])
    readback = cc.readback_types(schema, store_schema=True)
    table = pa.table({"d": pa.array([dt.date(2020, 1, n) for n in range(1, 29)], pa.date64()),
                      "i": pa.array(range(28), pa.int64())})
    writer = ParquetFileWriter(tmp_path / "d.parquet", schema, WriterOptions(format="parquet"))
    assert writer._sums.covered == ({"i"} if not cc.same_type(readback[0], pa.date64()) else {"d", "i"})
    writer.write_batch(table.to_batches()[0])
    writer.finish()
    assert writer.column_sums == cc.parquet_sums(tmp_path / "d.parquet")
