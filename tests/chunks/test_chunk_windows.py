"""Pure window math and partition keys (rivet_core.chunks.windows / keys), property-tested.

No database: every property is checked against an independent brute-force oracle over
small ranges, or structurally over the full 64-bit range.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rivet_core.chunks.keys import (
    KEY_ALPHABET,
    decode_int,
    encode_int,
    keyset_key,
    safe_column,
    window_key,
)
from rivet_core.chunks.model import ChunkLayout, ChunkWindow
from rivet_core.chunks.windows import (
    EPOCH,
    count_window_size,
    count_windows,
    day_window_count,
    day_windows,
    dense_windows,
    keyset_windows,
    plan_hash,
    range_window_count,
    range_windows,
)

I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
SMALL = st.integers(min_value=-5_000, max_value=5_000)
SIZES = st.integers(min_value=1, max_value=700)
DATES = st.dates(min_value=dt.date(1950, 1, 1), max_value=dt.date(2050, 12, 31))


def _bounds(windows):
    return [(int(w.lo), int(w.hi)) for w in windows]


def _assert_common(windows):
    assert [w.index for w in windows] == list(range(len(windows)))
    keys = [w.key for w in windows]
    assert keys == sorted(keys) and len(set(keys)) == len(keys), "keys must strictly increase"
    assert all(KEY_ALPHABET.match(k) and "..." not in k for k in keys)


# --------------------------------------------------------------------------- range


@given(SMALL, SMALL, SIZES)
def test_range_windows_cover_min_to_max_exactly_once(a, b, size):
    lo, hi = min(a, b), max(a, b)
    windows = range_windows(lo, hi, size, column="id")
    covered = [v for w_lo, w_hi in _bounds(windows) for v in range(w_lo, w_hi + 1)]
    assert len(covered) == len(set(covered)), "windows overlap"
    assert set(range(lo, hi + 1)) <= set(covered)
    # nothing outside the first/last grid cell, and no gaps between windows
    assert covered == list(range(covered[0], covered[-1] + 1))
    assert covered[0] > lo - size and covered[-1] < hi + size
    assert len(windows) == range_window_count(lo, hi, size)
    _assert_common(windows)


@given(SMALL, SMALL, SIZES)
def test_range_windows_are_grid_aligned_with_origin_zero(a, b, size):
    windows = range_windows(min(a, b), max(a, b), size, column="id")
    for w_lo, w_hi in _bounds(windows):
        assert w_lo % size == 0 and w_hi - w_lo + 1 == size


@given(SMALL, st.integers(min_value=0, max_value=3_000), st.integers(min_value=0, max_value=3_000),
       SIZES)
def test_a_range_window_is_identical_when_the_table_grows(lo, span, growth, size):
    before = range_windows(lo, lo + span, size, column="id")
    after = range_windows(lo, lo + span + growth, size, column="id")
    assert after[: len(before)] == before


@given(I64, I64, st.integers(min_value=1, max_value=2**62))
def test_range_window_count_matches_generation_over_the_full_64_bit_range(a, b, size):
    lo, hi = min(a, b), max(a, b)
    count = range_window_count(lo, hi, size)
    if count <= 2_000:
        windows = range_windows(lo, hi, size, column="id")
        assert len(windows) == count
        assert int(windows[0].lo) <= lo and int(windows[-1].hi) >= hi
        _assert_common(windows)


def test_range_windows_for_an_empty_range_are_empty():
    assert range_windows(5, 4, 10, column="id") == ()


def test_range_windows_with_negative_ids_floor_towards_minus_infinity():
    assert _bounds(range_windows(-15, 5, 10, column="id")) == [(-20, -11), (-10, -1), (0, 9)]


# --------------------------------------------------------------------------- count


@given(SMALL, SMALL, st.integers(min_value=1, max_value=50))
def test_count_windows_cover_the_range_exactly_once_in_at_most_n_windows(a, b, n):
    lo, hi = min(a, b), max(a, b)
    windows = count_windows(lo, hi, n, column="id")
    bounds = _bounds(windows)
    assert bounds[0][0] == lo and bounds[-1][1] == hi
    assert all(prev[1] + 1 == nxt[0] for prev, nxt in zip(bounds, bounds[1:], strict=False))
    size = count_window_size(lo, hi, n)
    assert size == -(-(hi - lo + 1) // n)
    assert all(w_hi - w_lo + 1 == size for w_lo, w_hi in bounds[:-1])
    assert 1 <= len(windows) <= n
    _assert_common(windows)


# --------------------------------------------------------------------------- dense


@given(st.integers(min_value=0, max_value=5_000), SIZES)
def test_dense_windows_cover_every_ordinal_once(rows, size):
    windows = dense_windows(rows, size, column="v")
    covered = [v for w_lo, w_hi in _bounds(windows) for v in range(w_lo, w_hi + 1)]
    assert covered == list(range(1, rows + 1))
    assert len(windows) == -(-rows // size)
    _assert_common(windows)


# --------------------------------------------------------------------------- days


@settings(deadline=None)
@given(DATES, DATES, st.integers(min_value=1, max_value=60))
def test_day_windows_are_half_open_epoch_aligned_and_cover_every_day(a, b, days):
    lo, hi = min(a, b), max(a, b)
    windows = day_windows(lo, hi, days)
    spans = [(dt.date.fromisoformat(w.lo), dt.date.fromisoformat(w.hi)) for w in windows]
    assert spans[0][0] <= lo < spans[0][1] and spans[-1][0] <= hi < spans[-1][1]
    for (s_lo, s_hi), nxt in zip(spans, spans[1:] + [None], strict=True):
        assert (s_hi - s_lo).days == days and (s_lo - EPOCH).days % days == 0
        if nxt is not None:
            assert s_hi == nxt[0], "half-open windows must touch"
    assert len(windows) == day_window_count(lo, hi, days)
    assert [w.key for w in windows] == [f"{w.lo}_{w.hi}" for w in windows]
    _assert_common(windows)


def test_day_windows_cross_month_and_year_boundaries():
    windows = day_windows(dt.date(2023, 12, 30), dt.date(2024, 3, 1), 7)
    assert windows[0].lo == "2023-12-28" and windows[0].hi == "2024-01-04"  # epoch-aligned week
    assert ("2024-01-25", "2024-02-01") in [(w.lo, w.hi) for w in windows]
    assert windows[-1].lo <= "2024-03-01" < windows[-1].hi
    one_day = day_windows(dt.date(2024, 1, 31), dt.date(2024, 2, 1), 1)
    assert [(w.lo, w.hi) for w in one_day] == [("2024-01-31", "2024-02-01"),
                                               ("2024-02-01", "2024-02-02")]


@given(DATES, st.integers(min_value=0, max_value=400), st.integers(min_value=0, max_value=400),
       st.integers(min_value=1, max_value=30))
def test_a_day_window_is_identical_when_the_table_grows(lo, span, growth, days):
    before = day_windows(lo, lo + dt.timedelta(days=span), days)
    after = day_windows(lo, lo + dt.timedelta(days=span + growth), days)
    assert after[: len(before)] == before


# --------------------------------------------------------------------------- keyset


@given(st.lists(st.integers(min_value=-1000, max_value=1000), unique=True, max_size=40))
def test_keyset_windows_partition_the_key_space_with_an_open_last_window(keys):
    bounds = [str(k) for k in sorted(keys)]
    windows = keyset_windows(bounds)
    assert len(windows) == len(bounds) + 1
    assert windows[0].lo is None and windows[-1].hi is None
    for prev, nxt in zip(windows, windows[1:], strict=False):
        assert prev.hi == nxt.lo and prev.hi is not None
    # every integer lands in exactly one (lo, hi] window
    for value in range(-1002, 1003):
        hits = [w for w in windows
                if (w.lo is None or value > int(w.lo)) and (w.hi is None or value <= int(w.hi))]
        assert len(hits) == 1
    _assert_common(windows)


def test_keyset_windows_of_an_empty_table_are_one_open_window():
    (only,) = keyset_windows([])
    assert (only.lo, only.hi, only.key) == (None, None, "p000000000")


# --------------------------------------------------------------------------- keys


@given(st.integers(min_value=-(10**20) + 1, max_value=10**20 - 1),
       st.integers(min_value=-(10**20) + 1, max_value=10**20 - 1))
def test_encoded_integers_sort_like_the_integers_and_round_trip(a, b):
    ea, eb = encode_int(a), encode_int(b)
    assert decode_int(ea) == a and decode_int(eb) == b
    assert (ea < eb) == (a < b) and (ea == eb) == (a == b)
    assert KEY_ALPHABET.match(ea)


@given(st.lists(st.integers(min_value=-(2**63), max_value=2**64 - 1), unique=True,
                min_size=2, max_size=30), st.text(min_size=0, max_size=12))
def test_range_keys_sort_in_window_order_for_any_column_name(starts, column):
    ordered = sorted(starts)
    keys = [window_key("range", column, str(lo), str(lo + 1), i) for i, lo in enumerate(ordered)]
    assert keys == sorted(keys)
    assert all(KEY_ALPHABET.match(k) and "..." not in k for k in keys)


def test_key_formats_are_readable_for_the_common_case():
    assert window_key("range", "id", "100000", "199999", 1) == "id_000000000100000-000000000199999"
    assert window_key("days", "at", "2024-01-29", "2024-02-05", 0) == "2024-01-29_2024-02-05"
    assert window_key("keyset", "k", "a", "b", 42) == keyset_key(42) == "p000000042"
    assert safe_column("order id/ü") == "order_id__" and safe_column("") == "c"
    assert encode_int(-1) == ".99999999999999999999" and encode_int(10**15) == "x00001000000000000000"


def test_out_of_range_bounds_cannot_be_keyed():
    with pytest.raises(ValueError):
        encode_int(10**20)


# --------------------------------------------------------------------------- plan hash

TEXT = st.text(max_size=30)


@given(TEXT, TEXT, TEXT)
def test_plan_hash_is_stable_and_16_hex(base, column, kind):
    first = plan_hash(base, column, kind)
    assert first == plan_hash(base, column, kind)
    assert len(first) == 16 and int(first, 16) >= 0


@settings(max_examples=200)
@given(TEXT, TEXT, TEXT, st.integers(min_value=0, max_value=2), TEXT)
def test_plan_hash_changes_when_any_field_changes(base, column, kind, which, other):
    fields = [base, column, kind]
    if fields[which] == other:
        return
    changed = list(fields)
    changed[which] = other
    assert plan_hash(*fields) != plan_hash(*changed)


def test_plan_hash_length_prefixes_fields_so_boundaries_matter():
    assert plan_hash("ab", "c", "range_1") != plan_hash("a", "bc", "range_1")


def test_plan_hash_matches_the_documented_byte_layout():
    import struct

    import xxhash

    data = b"".join(struct.pack("<Q", len(t)) + t for t in (b"SELECT 1", b"id", b"range_10"))
    assert plan_hash("SELECT 1", "id", "range_10") == xxhash.xxh3_64_hexdigest(data)


def test_plan_kind_labels_follow_the_reference():
    window = ChunkWindow(index=0, lo="1", hi="2", key="k")

    def plan(strategy, size, n=1):
        return ChunkLayout("e", strategy, "c", size, (window,) * n, "0" * 16)

    assert plan("range", 500).kind == "range_500"
    assert plan("count", 9, 4).kind == "count_4"
    assert plan("dense", 10).kind == "dense_rn"
    assert plan("days", 7).kind == "date_7d"
    assert plan("keyset", 100).kind == "keyset_100"
