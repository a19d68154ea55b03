"""Properties of the partition_by bucket math (rivet_core/pipeline/buckets/ranges.py):
contiguous, non-overlapping buckets covering min..max; month/year edges, leap days and
zone-aware timestamps land in the bucket of their UTC date."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivet_core.pipeline.buckets.ranges import (
    HIVE_NULL_PARTITION,
    as_utc_date,
    bucket_containing,
    bucket_count,
    bucket_of,
    generate_buckets,
)

GRANULARITIES = st.sampled_from(["day", "month", "year"])
DATES = st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2200, 12, 31))


@given(DATES, DATES, GRANULARITIES)
def test_buckets_are_contiguous_and_cover_min_to_max(a, b, granularity):
    low, high = min(a, b), max(a, b)
    if granularity == "day" and (high - low).days > 3000:
        high = low + dt.timedelta(days=3000)
    buckets = generate_buckets(low, high, granularity)
    assert len(buckets) == bucket_count(low, high, granularity)
    assert buckets[0].lo <= low < buckets[0].hi and buckets[-1].lo <= high < buckets[-1].hi
    for left, right in zip(buckets, buckets[1:], strict=False):
        assert left.hi == right.lo  # no gap, no overlap
    assert len({b.label for b in buckets}) == len(buckets)
    for day in (low, high, low + (high - low) // 2):
        holding = [b for b in buckets if b.lo <= day < b.hi]
        assert [b.label for b in holding] == [bucket_of(day, granularity)]


@given(st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(2100, 1, 1),
                    timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=-11)),
                                               dt.timezone(dt.timedelta(hours=14)),
                                               dt.timezone(dt.timedelta(hours=5, minutes=30))])),
       GRANULARITIES)
def test_zone_aware_timestamps_land_in_their_utc_bucket(value, granularity):
    utc_day = value.astimezone(dt.UTC).date()
    assert as_utc_date(value) == utc_day
    assert as_utc_date(value.isoformat(sep=" ")) == utc_day  # text with an offset, as SQLite returns it
    buckets = generate_buckets(utc_day, utc_day, granularity)
    assert [b.label for b in buckets] == [bucket_of(value, granularity)]


@pytest.mark.parametrize(("low", "high", "granularity", "labels"), [
    (dt.date(2024, 2, 28), dt.date(2024, 3, 1), "day", ["2024-02-28", "2024-02-29", "2024-03-01"]),
    (dt.date(2023, 2, 28), dt.date(2023, 3, 1), "day", ["2023-02-28", "2023-03-01"]),
    (dt.date(2023, 12, 31), dt.date(2024, 1, 1), "month", ["2023-12", "2024-01"]),
    (dt.date(2024, 1, 31), dt.date(2024, 3, 1), "month", ["2024-01", "2024-02", "2024-03"]),
    (dt.date(2023, 12, 31), dt.date(2024, 1, 1), "year", ["2023", "2024"]),
    (dt.date(2024, 6, 1), dt.date(2024, 6, 1), "year", ["2024"]),
])
def test_edges(low, high, granularity, labels):
    buckets = generate_buckets(low, high, granularity)
    assert [b.label for b in buckets] == labels
    if granularity == "month":
        assert buckets[1].lo.day == 1 and buckets[0].hi == buckets[1].lo


def test_no_buckets_when_max_precedes_min_and_nulls_have_the_hive_label():
    assert generate_buckets(dt.date(2024, 1, 2), dt.date(2024, 1, 1), "day") == []
    assert bucket_of(None, "month") == HIVE_NULL_PARTITION


@pytest.mark.parametrize("raw", ["not a date", "12/31/2024", b"\xff", 42, object()])
def test_unreadable_values_are_none(raw):
    assert as_utc_date(raw) is None


@pytest.mark.parametrize(("granularity", "label", "lo"), [
    ("year", "9999", dt.date(9999, 1, 1)), ("month", "9999-12", dt.date(9999, 12, 1)),
    ("day", "9999-12-31", dt.date(9999, 12, 31)),
])
def test_the_open_end_sentinel_9999_12_31_lands_in_an_open_ended_last_bucket(granularity, label, lo):
    """`9999-12-31` is where "no end date" rows live: its bucket has no next date to end at,
    so it is open-ended (`hi` None) instead of failing the whole export."""
    last = bucket_containing(dt.date(9999, 12, 31), granularity)
    assert (last.label, last.lo, last.hi, last.open_ended) == (label, lo, None, True)
    buckets = generate_buckets(dt.date(9998, 12, 31), dt.date(9999, 12, 31), granularity)
    assert buckets[-1] == last and buckets[-2].hi == last.lo


@given(st.dates(), GRANULARITIES)
def test_the_bucket_containing_a_day_holds_it_and_has_its_label(day, granularity):
    bucket = bucket_containing(day, granularity)
    assert bucket.lo <= day and (bucket.hi is None or day < bucket.hi)
    assert bucket.label == bucket_of(day, granularity)
