"""Pure bucket math of `partition_by` (docs/modes.md, "partition_by"): no I/O, no SQL.

`bucket_containing` gives the day / month / year bucket one value falls in: a half-open
`[lo, hi)` range of dates and its Hive label (`2023-01-01`, `2023-01`, `2023`). The runner
(run.py) walks only the buckets that hold rows, asking the source for the first value
at or after the previous bucket's `hi`; `generate_buckets` yields the ordered, gap-free list
between two dates (the property tests compare both with `bucket_of`). Every non-NULL value
lies in exactly one bucket; NULLs have no bucket here and go to `HIVE_NULL_PARTITION`
(run.py adds that bucket when the column has NULLs).

The last bucket of the calendar (the year 9999, its December, its 31st — where "open end"
sentinels such as `9999-12-31` live) has no next date to end at: its `hi` is None, an
open end, and its query is `col >= lo` alone.

Values are read as dates in UTC: a zone-aware timestamp is converted to UTC first (the
source sessions compare in UTC too — PostgreSQL `TimeZone='UTC'`, MySQL `+00:00` — so the
bucket a value falls in by this math is the bucket its `col >= lo AND col < hi` predicate
selects). tests/pipeline/test_bucket_math.py holds the properties.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any, Literal

from rivet_core.pipeline.retention.bucket_layout import HIVE_NULL_PARTITION

Granularity = Literal["day", "month", "year"]

_DATE_PREFIX = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})")


@dataclass(frozen=True)
class Bucket:
    """One partition bucket: its label and `[lo, hi)` dates; `lo is None` for the NULL bucket."""

    label: str
    lo: dt.date | None
    hi: dt.date | None

    @property
    def is_null(self) -> bool:
        return self.lo is None

    @property
    def open_ended(self) -> bool:
        """A value bucket with no upper bound: the calendar's last day / month / year."""
        return self.lo is not None and self.hi is None

    def segment(self, column: str) -> str:
        """The Hive path segment `col=value` (what `{partition}` renders to)."""
        return f"{column}={self.label}"

    def name_suffix(self) -> str:
        """The suffix of the bucket's sub-export name (`<export>__<suffix>`): its label,
        `null` for the NULL bucket (as Rivet names them)."""
        return "null" if self.is_null else self.label


NULL_BUCKET = Bucket(HIVE_NULL_PARTITION, None, None)


def as_utc_date(value: Any) -> dt.date | None:
    """A partition value (date, datetime, or text `YYYY-MM-DD[ T]…`) as its UTC calendar
    date; None when it cannot be read as one. A zone-aware datetime is converted to UTC; a
    naive one is taken as UTC wall time (the sessions read in UTC). Text with an offset
    (`2024-01-01 01:00:00+05:00`) is parsed with it, so it lands on its UTC day."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        parsed = dt.datetime.fromisoformat(text.replace(" ", "T", 1) if len(text) > 10 else text)
    except ValueError:
        match = _DATE_PREFIX.match(text)
        if match is None:
            return None
        try:
            return dt.date(int(match[1]), int(match[2]), int(match[3]))
        except ValueError:
            return None
    return as_utc_date(parsed)


def _month_start(d: dt.date) -> dt.date:
    return d.replace(day=1)


def _next_month(d: dt.date) -> dt.date:
    return dt.date(d.year + 1, 1, 1) if d.month == 12 else dt.date(d.year, d.month + 1, 1)


def _next_start(start: dt.date, granularity: Granularity) -> dt.date | None:
    """The first date of the bucket after the one starting at `start`; None past the
    calendar's last date (the open-ended last bucket, module docstring)."""
    try:
        if granularity == "day":
            return start + dt.timedelta(days=1)
        if granularity == "month":
            return _next_month(start)
        return dt.date(start.year + 1, 1, 1)
    except (OverflowError, ValueError):
        return None


def bucket_containing(day: dt.date, granularity: Granularity) -> Bucket:
    """The bucket `day` falls in: `lo` ≤ day < `hi` (`hi` None for the calendar's last bucket)."""
    if granularity == "day":
        start, label = day, day.isoformat()
    elif granularity == "month":
        start, label = _month_start(day), f"{day.year:04d}-{day.month:02d}"
    elif granularity == "year":
        start, label = dt.date(day.year, 1, 1), f"{day.year:04d}"
    else:
        raise ValueError(f"partition_granularity '{granularity}' is not one of day, month, year")
    return Bucket(label, start, _next_start(start, granularity))


def generate_buckets(min_day: dt.date, max_day: dt.date, granularity: Granularity) -> list[Bucket]:
    """The contiguous buckets covering `[min_day, max_day]` ([] when max < min): each
    bucket's `hi` is the next one's `lo`, the first `lo` ≤ min_day, the last `hi` > max_day
    (or None: the open-ended last bucket of the calendar)."""
    out: list[Bucket] = []
    if max_day < min_day:
        return out
    bucket = bucket_containing(min_day, granularity)
    while True:
        out.append(bucket)
        if bucket.hi is None or bucket.hi > max_day:
            return out
        bucket = bucket_containing(bucket.hi, granularity)


def bucket_of(value: Any, granularity: Granularity) -> str:
    """The label of the bucket a single value belongs to (`HIVE_NULL_PARTITION` for None):
    the reference the properties compare `generate_buckets` with."""
    if value is None:
        return HIVE_NULL_PARTITION
    day = as_utc_date(value)
    if day is None:
        raise ValueError(f"cannot read {value!r} as a date")
    return {"day": day.isoformat(), "month": f"{day.year:04d}-{day.month:02d}",
            "year": f"{day.year:04d}"}[granularity]


def bucket_count(min_day: dt.date, max_day: dt.date, granularity: Granularity) -> int:
    """How many buckets `generate_buckets` would return, without building them (the
    runner refuses absurd spans before planning thousands of sub-exports)."""
    if max_day < min_day:
        return 0
    if granularity == "day":
        return (max_day - min_day).days + 1
    if granularity == "month":
        return (max_day.year - min_day.year) * 12 + max_day.month - min_day.month + 1
    return max_day.year - min_day.year + 1


__all__ = ["HIVE_NULL_PARTITION", "NULL_BUCKET", "Bucket", "Granularity", "as_utc_date", "bucket_containing",
           "bucket_count", "bucket_of", "generate_buckets"]
