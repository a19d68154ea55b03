"""CSV writer: the exact cell renderings of docs/rivet-compat.md "CSV text", RFC-4180 quoting (property
tested), NULL vs empty string, unsupported types, and the I1 finish/abort contract."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import uuid
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rivet_core.errors import ConfigError
from rivet_core.format import WriterOptions, open_writer

CSV = WriterOptions(format="csv")
csv.field_size_limit(1 << 30)  # the 1 MB cells exceed the csv module's default 128 KiB
BIG = "ü" * (2**19) + ",\"end\""  # ~1 MB with characters that force quoting


def write_csv(path: Path, table: pa.Table, batch_rows: int | None = None) -> None:
    w = open_writer(path, table.schema, CSV)
    for batch in table.to_batches(max_chunksize=batch_rows):
        w.write_batch(batch)
    w.finish()


def read_rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def parse_with_quoting(text: str) -> list[list[tuple[str, bool]]]:
    """A strict RFC-4180 reader that also reports whether each field was quoted — Python
    3.11's csv module cannot tell `""` from an empty field, which is the NULL distinction."""
    rows: list[list[tuple[str, bool]]] = []
    row: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == '"':
            j, buf = i + 1, []
            while True:
                k = text.index('"', j)
                buf.append(text[j:k])
                if k + 1 < n and text[k + 1] == '"':
                    buf.append('"')
                    j = k + 2
                    continue
                i = k + 1
                break
            row.append(("".join(buf), True))
        else:
            j = i
            while j < n and text[j] not in ",\n":
                assert text[j] not in '"\r', f"unquoted special character at {j}"
                j += 1
            row.append((text[i:j], False))
            i = j
        assert i == n or text[i] in ",\n", f"garbage after field at {i}"
        if i < n and text[i] == "\n":
            rows.append(row)
            row = []
        elif i < n and text[i] == "," and (i + 1 == n or text[i + 1] == "\n"):
            row.append(("", False))
            i += 1
            rows.append(row)
            row = []
        i += 1
    assert not row, "last line is not LF-terminated"
    return rows


# --------------------------------------------------------------------------------------
# Renderings
# --------------------------------------------------------------------------------------

U1 = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")

RENDERINGS: list[tuple[str, pa.DataType, list[object], list[str]]] = [
    ("bool", pa.bool_(), [True, False, None], ["true", "false", ""]),
    ("i8", pa.int8(), [-128, 127, None], ["-128", "127", ""]),
    ("i16", pa.int16(), [-32768, 0, None], ["-32768", "0", ""]),
    ("i32", pa.int32(), [-(2**31), 2**31 - 1, None], ["-2147483648", "2147483647", ""]),
    ("i64", pa.int64(), [-(2**63), 2**63 - 1, None], ["-9223372036854775808", "9223372036854775807", ""]),
    ("u64", pa.uint64(), [0, 2**64 - 1, None], ["0", "18446744073709551615", ""]),
    ("f32", pa.float32(), [0.1, float("nan"), -0.0], ["0.1", "NaN", "-0"]),
    ("f64", pa.float64(), [0.1, float("inf"), float("-inf")], ["0.1", "inf", "-inf"]),
    ("f64b", pa.float64(), [1.5, 1e20, None], ["1.5", "1e+20", ""]),
    ("dec", pa.decimal128(38, 10),
     [decimal.Decimal("1.5"), decimal.Decimal("-0.0000000001"),
      decimal.Decimal("9999999999999999999999999999.9999999999")],
     ["1.5000000000", "-0.0000000001", "9999999999999999999999999999.9999999999"]),
    ("dec0", pa.decimal128(10, 0), [decimal.Decimal(0), decimal.Decimal(-42), None], ["0", "-42", ""]),
    ("dec2", pa.decimal128(5, 2), [decimal.Decimal("0.05"), decimal.Decimal("-123.40"), decimal.Decimal(0)],
     ["0.05", "-123.40", "0.00"]),
    ("s", pa.string(), ["plain", "ünïcødé ☃", None], ["plain", "ünïcødé ☃", ""]),
    ("bin", pa.binary(), [b"\x00\xde\xad\xbe\xef", b"\xff", None], ["00deadbeef", "ff", ""]),
    ("d", pa.date32(), [dt.date(2026, 1, 1), dt.date(1, 1, 1), dt.date(9999, 12, 31)],
     ["2026-01-01", "0001-01-01", "9999-12-31"]),
    ("t", pa.time64("us"), [dt.time(12, 0), dt.time(23, 59, 59, 999999), dt.time(0, 0, 0, 1)],
     ["12:00:00.000000", "23:59:59.999999", "00:00:00.000001"]),
    ("ts", pa.timestamp("us"), [dt.datetime(2026, 1, 1, 12), dt.datetime(1970, 1, 1, 0, 0, 0, 5), None],
     ["2026-01-01T12:00:00.000000", "1970-01-01T00:00:00.000005", ""]),
    ("ts_ms", pa.timestamp("ms"), [dt.datetime(2026, 1, 1, 12, 0, 0, 123000), None, None],
     ["2026-01-01T12:00:00.123000", "", ""]),
    ("tsz", pa.timestamp("us", "UTC"),
     [dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC), dt.datetime(2000, 2, 29, 0, 0, 0, 1, tzinfo=dt.UTC), None],
     ["2026-01-01T12:00:00.000000Z", "2000-02-29T00:00:00.000001Z", ""]),
    ("tsz_paris", pa.timestamp("us", "Europe/Paris"),
     [dt.datetime(2026, 7, 1, 12, tzinfo=dt.UTC), None, None],
     ["2026-07-01T12:00:00.000000Z", "", ""]),
]


def _renderings_table() -> tuple[pa.Table, dict[str, list[str]]]:
    arrays = [pa.array(values, t) for _, t, values, _ in RENDERINGS]
    names = [name for name, *_ in RENDERINGS]
    expected = {name: want for name, _, _, want in RENDERINGS}
    arrays.append(pa.ExtensionArray.from_storage(pa.uuid(), pa.array([U1.bytes, None, bytes(16)], pa.binary(16))))
    names.append("u")
    expected["u"] = [str(U1), "", "00000000-0000-0000-0000-000000000000"]
    arrays.append(pa.ExtensionArray.from_storage(pa.json_(), pa.array(['{"a": [1, "x"]}', None, "3"])))
    names.append("j")
    expected["j"] = ['{"a": [1, "x"]}', "", "3"]
    return pa.table(arrays, names=names), expected


def test_every_supported_type_renders_exactly_as_the_reference_specifies(tmp_path: Path) -> None:
    table, expected = _renderings_table()
    path = tmp_path / "r.csv"
    write_csv(path, table, batch_rows=2)
    rows = read_rows(path)
    assert rows[0] == table.column_names
    for col_idx, name in enumerate(table.column_names):
        got = [row[col_idx] for row in rows[1:]]
        assert got == expected[name], name


def test_float_cells_parse_back_to_the_exact_value(tmp_path: Path) -> None:
    values = [0.1, 1 / 3, 5e-324, 1.7976931348623157e308, -2.5e-10, 123456789.125]
    path = tmp_path / "f.csv"
    write_csv(path, pa.table({"f": pa.array(values, pa.float64())}))
    assert [float(r[0]) for r in read_rows(path)[1:]] == values


def test_null_is_an_empty_unquoted_cell_and_empty_string_is_quoted(tmp_path: Path) -> None:
    table = pa.table({"s": pa.array(["", None, "x"]), "b": pa.array([b"", None, b"\x01"])})
    path = tmp_path / "n.csv"
    write_csv(path, table)
    assert path.read_bytes() == b's,b\n"",""\n,\nx,01\n'
    got = duckdb.sql(
        f"SELECT s, b FROM read_csv('{path}', header=true, all_varchar=true, allow_quoted_nulls=false)"
    ).fetchall()
    assert got == [("", ""), (None, None), ("x", "01")]


def test_strings_are_quoted_only_when_they_contain_comma_quote_cr_or_lf(tmp_path: Path) -> None:
    values = ["a,b", 'say "hi"', "l1\nl2", "cr\rhere", "plain", "semi;colon 'single'"]
    path = tmp_path / "q.csv"
    write_csv(path, pa.table({"s": values}))
    lines = path.read_bytes().decode()
    assert lines == ('s\n"a,b"\n"say ""hi"""\n"l1\nl2"\n"cr\rhere"\nplain\nsemi;colon \'single\'\n')
    assert [r[0] for r in read_rows(path)[1:]] == values


def test_header_names_are_quoted_like_cells(tmp_path: Path) -> None:
    table = pa.table({"a,b": [1], 'q"': [2], "plain": [3]})
    path = tmp_path / "h.csv"
    write_csv(path, table)
    assert path.read_text().splitlines()[0] == '"a,b","q""",plain'
    assert read_rows(path)[0] == ["a,b", 'q"', "plain"]


def test_a_one_megabyte_value_and_a_many_slice_batch_are_written_whole(tmp_path: Path) -> None:
    n = 40_000  # more than one internal render slice
    table = pa.table({
        "i": pa.array(range(n), pa.int64()),
        "s": pa.array([BIG if i == 3 else f"r{i}" for i in range(n)]),
    })
    path = tmp_path / "big.csv"
    write_csv(path, table)
    rows = read_rows(path)
    assert len(rows) == n + 1
    assert rows[4] == ["3", BIG]
    assert rows[-1] == [str(n - 1), f"r{n - 1}"]


def test_bytes_written_is_the_file_size_after_each_batch(tmp_path: Path) -> None:
    table = pa.table({"a": list(range(100))})
    path = tmp_path / "bw.csv"
    w = open_writer(path, table.schema, CSV)
    assert w.bytes_written == len(b"a\n")
    for batch in table.to_batches(max_chunksize=30):
        w.write_batch(batch)
        assert w.bytes_written == path.stat().st_size
    w.finish()
    assert w.bytes_written == path.stat().st_size
    assert w.rows_written == 100


@pytest.mark.parametrize(
    ("t", "what"),
    [
        (pa.list_(pa.int32()), "list"),
        (pa.list_(pa.string()), "list"),
        (pa.decimal256(50, 10), "decimal256"),
        (pa.binary(8), "fixed-size binary"),
    ],
)
def test_unrepresentable_columns_fail_at_writer_creation_naming_the_column(
    tmp_path: Path, t: pa.DataType, what: str
) -> None:
    path = tmp_path / "bad.csv"
    schema = pa.schema([("ok", pa.int64()), ("bad_col", t)])
    with pytest.raises(ConfigError, match=what) as info:
        open_writer(path, schema, CSV)
    assert "column 'bad_col'" in info.value.message
    assert "parquet" in info.value.message
    assert "'ok'" not in info.value.message
    assert not path.exists()


def test_csv_options_never_compress() -> None:
    opts = WriterOptions(format="csv", compression="zstd", compression_level=5)
    assert opts.compression == "none"
    assert opts.compression_level is None


def test_finish_produces_a_complete_file_and_abort_leaves_none(tmp_path: Path) -> None:
    table = pa.table({"a": [1, 2]})
    done = tmp_path / "done.csv"
    write_csv(done, table)
    assert done.read_bytes() == b"a\n1\n2\n"
    partial = tmp_path / "partial.csv"
    w = open_writer(partial, table.schema, CSV)
    w.write_batch(table.to_batches()[0])
    w.abort()
    assert not partial.exists()


# --------------------------------------------------------------------------------------
# Property: quoting round-trips arbitrary text
# --------------------------------------------------------------------------------------

_cell = st.one_of(
    st.none(),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
    st.text(alphabet=st.sampled_from([",", '"', "\r", "\n", "a", " ", "é"]), max_size=8),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(_cell, _cell), min_size=1, max_size=15))
def test_arbitrary_text_and_nulls_round_trip_through_csv(tmp_path: Path, rows: list[tuple[str | None, str | None]]) -> None:
    table = pa.table({"x": pa.array([r[0] for r in rows], pa.string()),
                      "y": pa.array([r[1] for r in rows], pa.string())})
    path = tmp_path / "prop.csv"
    write_csv(path, table, batch_rows=4)
    # The csv module gives the text back (NULL and "" both read as "").
    assert read_rows(path)[1:] == [[a or "", b or ""] for a, b in rows]
    # Quoting tells them apart: NULL ↔ empty unquoted, "" ↔ quoted empty.
    parsed = parse_with_quoting(path.read_bytes().decode("utf-8"))[1:]
    decoded = [[None if (v == "" and not quoted) else v for v, quoted in row] for row in parsed]
    assert decoded == [list(r) for r in rows]
