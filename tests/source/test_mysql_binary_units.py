"""Pure pieces of the MySQL binary-protocol decoder, over their whole input space."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivet_core.source.mysql import binary as mysql_binary
from rivet_core.source.mysql.binary import _days_from_civil, _Temporal

EPOCH = dt.date(1970, 1, 1).toordinal()


@given(st.lists(st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(9999, 12, 31)),
                min_size=1, max_size=50))
def test_days_from_civil_matches_the_proleptic_gregorian_calendar(dates: list[dt.date]) -> None:
    y = np.array([d.year for d in dates], dtype=np.int64)
    m = np.array([d.month for d in dates], dtype=np.int64)
    d_ = np.array([d.day for d in dates], dtype=np.int64)
    assert _days_from_civil(y, m, d_).tolist() == [d.toordinal() - EPOCH for d in dates]


def _structs(values: list[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pack (y, mo, d, h, mi, s, us) tuples as binary-protocol DATETIME structs."""
    blob = bytearray()
    starts, lengths = [], []
    for y, mo, d, h, mi, s, us in values:
        body = y.to_bytes(2, "little") + bytes([mo, d, h, mi, s]) + us.to_bytes(4, "little")
        length = 11 if us else (7 if (h or mi or s) else (4 if (y or mo or d) else 0))
        starts.append(len(blob))
        lengths.append(length)
        blob += body[:length]
    blob += b"\0" * 16
    return (np.frombuffer(bytes(blob), dtype=np.uint8), np.array(starts, dtype=np.int64),
            np.array(lengths, dtype=np.int64), np.zeros(len(values), dtype=bool))


@given(st.lists(st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59, 59)),
                min_size=1, max_size=30))
def test_datetime_structs_decode_to_their_microseconds_and_text(values: list[dt.datetime]) -> None:
    data, start, length, null = _structs(
        [(v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond) for v in values])
    temporal = _Temporal(data, start, length, null)
    assert temporal.valid()
    epoch = dt.datetime(1970, 1, 1)
    assert temporal.micros().tolist() == [(v - epoch) // dt.timedelta(microseconds=1) for v in values]
    assert temporal.text(True, 6) == [v.isoformat(sep=" ", timespec="microseconds").encode() for v in values]


@given(st.tuples(st.integers(0, 9999), st.integers(0, 15), st.integers(0, 31)))
def test_invalid_or_zero_dates_are_refused_by_the_vectorized_rule(ymd: tuple[int, int, int]) -> None:
    y, mo, d = ymd
    data, start, length, null = _structs([(y, mo, d, 0, 0, 0, 0)])
    try:
        real = y >= 1 and dt.date(y, mo, d) is not None
    except ValueError:
        real = False
    assert _Temporal(data, start, length, null).valid() == real


@pytest.mark.parametrize("width,dtype", [(1, "<i1"), (2, "<u2"), (4, "<i4"), (8, "<i8")])
def test_fixed_width_values_are_the_same_with_the_c_and_the_numpy_gather(
        width: int, dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(width)
    data = rng.integers(0, 256, size=4096, dtype=np.uint8)
    start = rng.integers(0, 4096 - width, size=300).astype(np.int64)
    null = rng.random(300) < 0.2
    with_c = mysql_binary._fixed(data, start, null, width, dtype)
    monkeypatch.setattr(mysql_binary, "gather_c", None)
    with_numpy = mysql_binary._fixed(data, start, null, width, dtype)
    expected = np.array([data[0 if n else s:(0 if n else s) + width].view(dtype)[0]
                         for s, n in zip(start.tolist(), null.tolist(), strict=True)])
    assert with_c.tolist() == with_numpy.tolist() == expected.tolist()
