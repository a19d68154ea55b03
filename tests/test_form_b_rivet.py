"""Form B checksums exactly as Rivet computes them (`xxh3-64-sum-v2`, issue 35 item 2).

The oracle here is written from Rivet's value-checksum source alone (as docs/manifest.md
"Per-column checksums (Form B)" restates it) — its `with_cell_bytes` (the canonical bytes of
each covered Arrow type), `encode_list_cell`, the `check_rule` coverage set and the Sum / Xor
folds — one cell at a time with `struct`
and the `xxhash` package, from the Python values (`to_pylist`), never from Arrow buffers. Our
vectorised implementation (rivet_core/manifest/xxh3_sum.py and its C twin) must agree with it
on every covered type, keyed or not, and the inputs of Rivet's own unit tests give fixed
vectors. End to end: a PostgreSQL export's manifest records Rivet's render and key, its
numbers equal the oracle over a pyarrow re-read, and `rivet validate --depth full` verifies
it and still verifies our older `rivet-colsum-v1` manifests.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import struct
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from rivet_core.destination import DestinationSpec, open_destination
from rivet_core.manifest import parse_manifest, verify_at_destination
from rivet_core.manifest import xxh3_sum as x3
from rivet_core.manifest.artifacts import write_manifest_files
from rivet_core.manifest.column_checksums import LEGACY_RENDER, column_sum, parquet_sums
from rivet_core.manifest.model import ColumnChecksum
from tests.helpers import db_exec, source_block, write_config
from tests.helpers import rivet_quick as rivet

MASK = (1 << 64) - 1
EPOCH = dt.date(1970, 1, 1)


# ----------------------------------------------------------------- the oracle (Rivet's source)
def _ts_micros(v: dt.datetime) -> int:
    if v.tzinfo is None:
        v = v.replace(tzinfo=dt.UTC)
    delta = v - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _unscaled(v: decimal.Decimal, scale: int) -> int:
    with decimal.localcontext(decimal.Context(prec=100)):
        return int(v.scaleb(scale).to_integral_value())


_LIST = {"bool": (1, "<?"), "int16": (2, "<h"), "int32": (3, "<i"), "int64": (4, "<q"),
         "float": (5, "<f"), "double": (6, "<d"), "string": (7, None)}


def rivet_cell_bytes(t: pa.DataType, v: Any) -> bytes | None:
    """`with_cell_bytes` for a non-null cell of type `t`; None: the type is a declared skip."""
    if isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
        v = v.bytes if hasattr(v, "bytes") else v
    fmt = {pa.int16(): "<h", pa.int32(): "<i", pa.int64(): "<q", pa.uint64(): "<Q",
           pa.float32(): "<f", pa.float64(): "<d"}.get(t)
    if fmt:
        return struct.pack(fmt, v)
    if t == pa.date32():
        return struct.pack("<i", (v - EPOCH).days)
    if pa.types.is_timestamp(t):
        return struct.pack("<q", _ts_micros(v)) if t.unit == "us" else None
    if t == pa.time64("us"):
        return struct.pack("<q", ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond)
    if pa.types.is_decimal128(t):
        return _unscaled(v, t.scale).to_bytes(16, "little", signed=True)
    if pa.types.is_decimal256(t):
        return _unscaled(v, t.scale).to_bytes(32, "little", signed=True)
    if pa.types.is_boolean(t):
        return bytes([int(v)])
    if pa.types.is_string(t):
        return v.encode()
    if pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t):
        return v
    if pa.types.is_list(t) and str(t.value_type) in _LIST:
        tag, efmt = _LIST[str(t.value_type)]
        out = b""
        for e in v:
            body = b"" if e is None else (e.encode() if efmt is None else struct.pack(efmt, e))
            out += bytes([0 if e is None else tag]) + struct.pack("<I", len(body)) + body
        return out
    return None


def rivet_column(values: pa.Array, key: pa.Array | None = None, xor: bool = False) -> int:
    """Rivet's `column_xxh3_with`: fold of xxh3(key ‖ value) over the non-null cells."""
    acc = 0
    kt = None if key is None else key.type
    keys = [None] * len(values) if key is None else key.to_pylist()
    for v, k in zip(values.to_pylist(), keys, strict=True):
        if v is None:
            continue
        vb = rivet_cell_bytes(values.type, v)
        if vb is None:
            return 0  # CheckRule::Skipped: the whole column contributes 0
        kb = b"" if key is None or k is None else (rivet_cell_bytes(kt, k) or b"")
        h = xxhash.xxh3_64_intdigest(kb + vb)
        acc = acc ^ h if xor else (acc + h) & MASK
    return acc


# ----------------------------------------------------------------- fixed vectors
def test_rivet_test_batches_have_the_documented_checksums() -> None:
    # Rivet's unit-test batch `batch3` (a, b, c = [10,20,30], [1,2,3], [100,200,300]):
    # each column's v2 checksum is the wrapping sum of xxh3 over the little-endian i64s.
    def le(*vs: int) -> int:
        return sum(xxhash.xxh3_64_intdigest(struct.pack("<q", v)) for v in vs) & MASK

    for values in ([10, 20, 30], [1, 2, 3], [100, 200, 300], [1, 999, 3]):
        assert column_sum(pa.array(values, pa.int64())).checksum == le(*values)
    # the keyed swap test's inputs: id=[1,2], val=["alpha","beta"] keyed by id
    ids = pa.array([1, 2], pa.int64())
    want = (xxhash.xxh3_64_intdigest(struct.pack("<q", 1) + b"alpha")
            + xxhash.xxh3_64_intdigest(struct.pack("<q", 2) + b"beta")) & MASK
    assert column_sum(pa.array(["alpha", "beta"]), ids).checksum == want
    # the key column is keyed by itself (xxh3(id ‖ id)), as Rivet's re-read does
    assert column_sum(ids, ids).checksum == sum(
        xxhash.xxh3_64_intdigest(struct.pack("<q", i) * 2) for i in (1, 2)) & MASK
    # decimal128(18,2) [12.34, 50.00, -0.99] = unscaled [1234, 5000, -99] as 16-byte LE
    dec = pa.array([decimal.Decimal("12.34"), decimal.Decimal("50.00"), decimal.Decimal("-0.99")],
                   pa.decimal128(18, 2))
    assert column_sum(dec).checksum == sum(
        xxhash.xxh3_64_intdigest(u.to_bytes(16, "little", signed=True)) for u in (1234, 5000, -99)) & MASK
    # a list<string> cell ["alpha", null]: tag 7, len 5, "alpha"; tag 0, len 0
    cell = b"\x07" + struct.pack("<I", 5) + b"alpha" + b"\x00" + struct.pack("<I", 0)
    assert column_sum(pa.array([["alpha", None]], pa.list_(pa.string()))).checksum == xxhash.xxh3_64_intdigest(cell)


def test_duplicated_values_do_not_cancel_as_they_did_in_rivets_xor_v1() -> None:
    xx, yy = pa.array(["x", "x"]), pa.array(["y", "y"])
    assert x3.array_xor(xx) == 0 == x3.array_xor(yy)  # v1 annihilates: Rivet's measured flaw
    assert column_sum(xx).checksum not in (0, column_sum(yy).checksum)


def test_a_row_swap_moves_the_keyed_checksum_and_not_the_unkeyed_one() -> None:
    ids = pa.array([1, 2], pa.int64())
    a, b = pa.array(["alpha", "beta"]), pa.array(["beta", "alpha"])
    assert column_sum(a).checksum == column_sum(b).checksum
    assert column_sum(a, ids).checksum != column_sum(b, ids).checksum


def test_types_rivet_does_not_cover_sum_to_zero_and_nulls_are_skipped() -> None:
    for arr in (pa.array([1, 2], pa.int8()), pa.array([1, 2], pa.uint32()), pa.array(["a"], pa.large_string()),
                pa.array([1, 2], pa.timestamp("ns")), pa.array([1], pa.timestamp("ms")),
                pa.array([{"a": 1}]), pa.array([[1]], pa.large_list(pa.int64()))):
        assert column_sum(arr).checksum == 0, arr.type
    assert column_sum(pa.array([None, None], pa.int64())).checksum == 0
    assert column_sum(pa.array([5, None], pa.int64())).checksum == column_sum(pa.array([5], pa.int64())).checksum


# ----------------------------------------------------------------- every covered type, hypothesis
_ints64 = st.integers(-(2**63), 2**63 - 1)
COVERED: list[tuple[pa.DataType, st.SearchStrategy]] = [
    (pa.bool_(), st.booleans()),
    (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    (pa.int64(), _ints64),
    (pa.uint64(), st.integers(0, 2**64 - 1)),
    (pa.float32(), st.floats(width=32, allow_nan=False)),
    (pa.float64(), st.floats(allow_nan=False)),
    (pa.date32(), st.dates()),
    (pa.time64("us"), st.times()),
    (pa.timestamp("us"), st.datetimes()),
    (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(dt.UTC))),
    (pa.string(), st.text(max_size=40)),
    (pa.binary(), st.binary(max_size=300)),  # past XXH3's 240-byte short-input paths
    (pa.binary(16), st.binary(min_size=16, max_size=16)),
    (pa.uuid(), st.uuids()),
    (pa.decimal128(18, 2), st.decimals(min_value=-(10**15), max_value=10**15, places=2)),
    (pa.decimal256(50, 10), st.decimals(min_value=-(10**39), max_value=10**39, places=10)),
    (pa.list_(pa.int64()), st.lists(st.one_of(st.none(), _ints64), max_size=4)),
    (pa.list_(pa.string()), st.lists(st.one_of(st.none(), st.text(max_size=8)), max_size=4)),
    (pa.list_(pa.float64()), st.lists(st.floats(allow_nan=False), max_size=3)),
]
KEYS: list[tuple[pa.DataType, st.SearchStrategy]] = [
    (pa.int64(), _ints64), (pa.string(), st.text(max_size=20)), (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    (pa.timestamp("us"), st.datetimes()), (pa.binary(16), st.binary(min_size=16, max_size=16)),
]


@st.composite
def columns(draw: st.DrawFn) -> tuple[pa.Array, pa.Array | None]:
    t, values = draw(st.sampled_from(COVERED))
    n = draw(st.integers(0, 40))
    cells = draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n))
    arr = pa.array(cells, type=t.storage_type if isinstance(t, pa.BaseExtensionType) else t)
    if isinstance(t, pa.BaseExtensionType):
        arr = pa.ExtensionArray.from_storage(t, pa.array([None if c is None else c.bytes for c in cells],
                                                         t.storage_type))
    key = None
    if draw(st.booleans()):
        kt, kv = draw(st.sampled_from(KEYS))
        key = pa.array(draw(st.lists(kv, min_size=n, max_size=n)), kt)
    lo = draw(st.integers(0, n))  # a slice: arrays with a non-zero offset
    return arr.slice(lo), None if key is None else key.slice(lo)


@settings(max_examples=300, deadline=None)
@given(col=columns())
def test_every_covered_type_sums_as_rivets_with_cell_bytes(col: tuple[pa.Array, pa.Array | None]) -> None:
    arr, key = col
    assert column_sum(arr, key).checksum == rivet_column(arr, key)
    assert x3.array_xor(arr, key) == rivet_column(arr, key, xor=True)


@settings(max_examples=60, deadline=None)
@given(col=columns())
def test_the_c_path_equals_the_pure_python_path(col: tuple[pa.Array, pa.Array | None]) -> None:
    if x3._c_xxh3_sum is None:
        pytest.fail("the _colsum C extension is not built: run `python setup.py build_ext --inplace`")
    arr, key = col
    fast = x3.array_sum(arr, key)
    c_fn, x3._c_xxh3_sum = x3._c_xxh3_sum, None
    try:
        slow = x3.array_sum(arr, key)
    finally:
        x3._c_xxh3_sum = c_fn
    assert fast == slow


# ----------------------------------------------------------------- end to end on PostgreSQL
def _seed(url: str) -> None:
    db_exec(url,
            "CREATE TABLE items (id BIGINT PRIMARY KEY, name TEXT, price NUMERIC(10,2), qty INT, "
            "flag BOOLEAN, updated_at TIMESTAMP, payload BYTEA)",
            "INSERT INTO items SELECT g, CASE WHEN g % 9 = 0 THEN 'dup' ELSE 'n' || g END, g * 1.25, "
            "CASE WHEN g % 7 = 0 THEN NULL ELSE g % 13 END, g % 2 = 0, "
            "TIMESTAMP '2026-01-01' + g * INTERVAL '1 hour', decode(md5(g::text), 'hex') "
            "FROM generate_series(1, 1500) AS g")


@pytest.mark.postgres
def test_an_incremental_export_records_rivets_render_keyed_by_its_cursor(tmp_path: Path, pg_url: str) -> None:
    _seed(pg_url)
    export = {"name": "items", "table": "items", "mode": "incremental", "cursor_column": "id",
              "format": "parquet", "max_file_size": "20KB", "destination": {"type": "local", "path": "out"}}
    config = write_config(tmp_path, source_block(pg_url), [export])
    result = rivet("run", "-c", str(config))
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["checksum_render"] == "xxh3-64-sum-v2" and manifest["checksum_key_column"] == "id"
    parts = [out / p["path"] for p in manifest["parts"]]
    assert len(parts) > 1
    table = pa.concat_tables(pq.read_table(p) for p in parts)  # the independent re-read
    want = {name: str(rivet_column(table.column(name).combine_chunks(), table.column("id").combine_chunks()))
            for name in table.schema.names}
    assert {c["name"]: c["checksum"] for c in manifest["column_checksums"]} == want
    assert all(want[c] != "0" for c in ("id", "name", "price", "qty", "flag", "updated_at", "payload"))
    validated = rivet("validate", "-c", str(config), "--format", "json", "--depth", "full")
    verification = json.loads(validated.stdout)["exports"][0]["verification"]
    assert validated.returncode == 0 and verification["column_checksums"] == "verified", validated.stdout


@pytest.mark.postgres
def test_manifests_of_the_older_renders_still_verify_in_full(tmp_path: Path, pg_url: str) -> None:
    _seed(pg_url)
    export = {"name": "items", "table": "items", "mode": "full", "format": "parquet", "max_file_size": "20KB",
              "destination": {"type": "local", "path": "out"}}
    config = write_config(tmp_path, source_block(pg_url), [export])
    assert rivet("run", "-c", str(config)).returncode == 0
    out = tmp_path / "out"
    dest = open_destination(DestinationSpec(kind="local", path=str(out)))
    m = parse_manifest((out / "manifest.json").read_bytes())
    for render in (LEGACY_RENDER, None):  # ours before Rivet's; Rivet's XOR v1 (no render)
        parts = tuple(replace(p, column_checksums=tuple(
            ColumnChecksum(n, str(s.checksum), s.nulls)
            for n, s in parquet_sums(out / p.path, render=render).items())) for p in m.parts)
        run = {}
        for p in parts:
            for c in p.column_checksums:
                prev = run.get(c.name, 0)
                run[c.name] = prev ^ int(c.checksum) if render is None else (prev + int(c.checksum)) & MASK
        old = replace(m, checksum_render=render, checksum_key_column=None, parts=parts,
                      column_checksums=tuple(ColumnChecksum(n, str(v)) for n, v in run.items()))
        write_manifest_files(dest, old)
        v = verify_at_destination(dest, depth="full", export_name="items")
        assert v.passed and v.column_checksums == "verified", (render, v.failures)
        # a changed value is still caught under the old render
        bad = replace(old, column_checksums=tuple(
            replace(c, checksum=str((int(c.checksum) + 1) & MASK)) if c.name == "name" else c
            for c in old.column_checksums), parts=tuple(replace(p, column_checksums=None) for p in parts))
        write_manifest_files(dest, bad)
        v = verify_at_destination(dest, depth="full", export_name="items")
        assert not v.passed and v.column_checksums == "failed", render


@pytest.mark.postgres
def test_a_keyset_export_is_keyed_by_its_key_and_a_range_chunked_one_is_not(tmp_path: Path, pg_url: str) -> None:
    _seed(pg_url)
    exports = [{"name": "keyset", "table": "items", "mode": "chunked", "chunk_by_key": "id", "chunk_size": 400,
                "parallel": 2, "format": "parquet", "destination": {"type": "local", "path": "out/{export}"}},
               {"name": "ranged", "table": "items", "mode": "chunked", "chunk_column": "id", "chunk_size": 400,
                "format": "parquet", "destination": {"type": "local", "path": "out/{export}"}}]
    config = write_config(tmp_path, source_block(pg_url), exports)
    result = rivet("run", "-c", str(config))
    assert result.returncode == 0, result.stderr
    for name, key in (("keyset", "id"), ("ranged", None)):
        out = tmp_path / "out" / name
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["checksum_render"] == "xxh3-64-sum-v2" and manifest.get("checksum_key_column") == key
        table = pa.concat_tables(pq.read_table(out / p["path"]) for p in manifest["parts"])
        keycol = None if key is None else table.column(key).combine_chunks()
        assert {c["name"]: c["checksum"] for c in manifest["column_checksums"]} == {
            n: str(rivet_column(table.column(n).combine_chunks(), keycol)) for n in table.schema.names}
    validated = rivet("validate", "-c", str(config), "--depth", "full")
    assert validated.returncode == 0, validated.stdout + validated.stderr
