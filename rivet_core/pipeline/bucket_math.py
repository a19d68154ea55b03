"""Pure bucket math of `partition_by` (docs/modes.md, "partition_by"): no I/O, no SQL.

Given the smallest and largest value of the partition column (as the source returned
them), `generate_buckets` yields the ordered, gap-free list of day / month / year buckets
covering them: each a half-open `[lo, hi)` range of dates and its Hive label
(`2023-01-01`, `2023-01`, `2023`). Buckets are contiguous — a day with no rows still is a
bucket — so every non-NULL value lies in exactly one of them; NULLs have no bucket here
and go to `HIVE_NULL_PARTITION` (buckets.py adds that bucket when the column has NULLs).

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

Granularity = Literal["day", "month", "year"]

#: Hive's label for rows whose partition value is NULL (Spark, Hive, DuckDB and pyarrow
#: read it back as NULL), so those rows stay in the dataset instead of being dropped.
HIVE_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"

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


def generate_buckets(min_day: dt.date, max_day: dt.date, granularity: Granularity) -> list[Bucket]:
    """The contiguous buckets covering `[min_day, max_day]` ([] when max < min): each
    bucket's `hi` is the next one's `lo`, the first `lo` ≤ min_day, the last `hi` > max_day.
    The last possible year (9999) ends at `date.max` + nothing: its `hi` would not exist,
    so it is refused rather than silently dropping 31 December 9999."""
    if max_day < min_day:
        return []
    if max_day.year >= dt.MAXYEAR:
        raise ValueError(f"partition value {max_day.isoformat()} is in year {dt.MAXYEAR}: its bucket "
                         "would end past the last representable date")
    out: list[Bucket] = []
    if granularity == "day":
        cur = min_day
        while cur <= max_day:
            nxt = cur + dt.timedelta(days=1)
            out.append(Bucket(cur.isoformat(), cur, nxt))
            cur = nxt
    elif granularity == "month":
        cur = _month_start(min_day)
        while cur <= max_day:
            nxt = _next_month(cur)
            out.append(Bucket(f"{cur.year:04d}-{cur.month:02d}", cur, nxt))
            cur = nxt
    elif granularity == "year":
        cur = dt.date(min_day.year, 1, 1)
        while cur <= max_day:
            nxt = dt.date(cur.year + 1, 1, 1)
            out.append(Bucket(f"{cur.year:04d}", cur, nxt))
            cur = nxt
    else:
        raise ValueError(f"partition_granularity '{granularity}' is not one of day, month, year")
    return out


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


__all__ = ["HIVE_NULL_PARTITION", "NULL_BUCKET", "Bucket", "Granularity", "as_utc_date", "bucket_count",
           "bucket_of", "generate_buckets"]
