"""MySQL row-packet framing: the C extension `_mysqlframe.frame` against its pure-Python twin
`mysql_raw.frame_py`, over generated packet streams and arbitrary bytes; argument
validation; `PacketReader.read_batch` over a scripted socket with either framing (refills
at every offset, multi-packet rows, end and error packets, growth of the offset arrays);
and, against MariaDB, the raw and binary read paths with either framing.
"""

from __future__ import annotations

import logging
import random
import urllib.parse
from collections.abc import Callable
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pymysql
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivet_core.source.mysql import raw as mysql_raw

MAX = 0xFFFFFF
SENTINEL = -7


def _frame_c() -> Callable[..., tuple[int, int, int]]:
    try:
        from rivet_core.source.mysql import _mysqlframe
    except ImportError as exc:
        pytest.fail(
            "the C extension rivet_core.source.mysql._mysqlframe is not built, so MySQL reads use the "
            "slow pure-Python framing. Install a C compiler and the Python headers (Debian: "
            "apt-get install gcc python3-dev), then run `bash scripts/bootstrap.sh` (it rebuilds "
            f"the editable install). Import error: {exc}", pytrace=False)
    return _mysqlframe.frame


def test_the_c_extension_is_built_and_used() -> None:
    frame_c = _frame_c()
    assert mysql_raw.frame_c is frame_c
    assert mysql_raw.frame is frame_c, "read_batch must use the C framing when it is built"


# --- frame: C == Python ------------------------------------------------------------------

def _header(length: int, seq: int) -> bytes:
    return length.to_bytes(3, "little") + bytes([seq & 0xFF])


@st.composite
def packet_streams(draw: st.DrawFn) -> tuple[bytes, int, int]:
    """(buffer, start offset, expected first sequence number): mostly valid row packets,
    with every stop reason mixed in and the buffer maybe cut anywhere."""
    seq0 = draw(st.one_of(st.integers(240, 255), st.integers(0, 255)))
    prefix = draw(st.binary(max_size=6))
    out = bytearray(prefix)
    seq = seq0
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(
            ["row"] * 12 + ["empty", "huge", "near_huge", "bad_seq", "error", "eof", "fe_row"]))
        wrong = (seq + draw(st.integers(1, 255))) & 0xFF
        if kind == "row":
            length = draw(st.one_of(st.sampled_from([1, 2, 8, 9, 10, 251, 252]), st.integers(1, 300)))
            payload = draw(st.binary(min_size=length, max_size=length))
            out += _header(length, seq) + payload
        elif kind == "empty":
            out += _header(0, seq)
        elif kind == "huge":  # first part of a multi-packet row: stop (payload left out)
            out += _header(MAX, seq) + draw(st.binary(min_size=1, max_size=8))
        elif kind == "near_huge":  # 0xFFFFFE is a row, but never wholly in this buffer
            out += _header(MAX - 1, seq) + draw(st.binary(min_size=1, max_size=8))
        elif kind == "bad_seq":
            length = draw(st.integers(1, 20))
            out += _header(length, wrong) + b"\x01" * length
        elif kind == "error":
            length = draw(st.integers(1, 40))
            out += _header(length, seq) + b"\xff" + draw(st.binary(min_size=length - 1, max_size=length - 1))
        elif kind == "eof":
            length = draw(st.integers(1, 8))
            out += _header(length, seq) + b"\xfe" + draw(st.binary(min_size=length - 1, max_size=length - 1))
        else:  # 0xFE first byte but >= 9 bytes: an ordinary row (lenenc with an 8-byte length)
            length = draw(st.integers(9, 30))
            out += _header(length, seq) + b"\xfe" + draw(st.binary(min_size=length - 1, max_size=length - 1))
        seq = (seq + 1) & 0xFF
    cut = draw(st.one_of(st.just(len(out)), st.integers(0, len(out))))
    start = draw(st.one_of(st.just(len(prefix)), st.integers(0, cut)))
    return bytes(out[:cut]), min(start, cut), seq0


def _run(frame: Callable[..., tuple[int, int, int]], buf: bytes, pos: int, seq: int, count: int,
         base: int, out_at: int, spare: int) -> tuple[tuple[int, int, int], list[int], list[int]]:
    starts = np.full(out_at + count + spare, SENTINEL, dtype=np.int64)
    ends = np.full(out_at + count + spare, SENTINEL, dtype=np.int64)
    result = frame(buf, pos, seq, count, base, starts, ends, out_at)
    return result, starts.tolist(), ends.tolist()


def _python_reference(buf: bytes, pos: int, seq: int, count: int, base: int) -> tuple[int, int, list[int], list[int]]:
    """The framing rules written out plainly (not the optimized loop)."""
    starts: list[int] = []
    ends: list[int] = []
    while len(starts) < count and len(buf) - pos >= 5:
        length = int.from_bytes(buf[pos:pos + 3], "little")
        if length == 0 or length >= MAX or pos + 4 + length > len(buf) or buf[pos + 3] != seq:
            break
        if buf[pos + 4] == 0xFF or (buf[pos + 4] == 0xFE and length < 9):
            break
        starts.append(base + pos + 4)
        ends.append(base + pos + 4 + length)
        pos += 4 + length
        seq = (seq + 1) % 256
    return pos, seq, starts, ends


@given(packet_streams(), st.integers(0, 45), st.one_of(st.just(0), st.integers(0, 2**40)),
       st.integers(0, 4), st.integers(0, 3))
def test_c_and_python_framing_agree_on_packet_streams(
        stream: tuple[bytes, int, int], count: int, base: int, out_at: int, spare: int) -> None:
    buf, pos, seq = stream
    c = _run(_frame_c(), buf, pos, seq, count, base, out_at, spare)
    py = _run(mysql_raw.frame_py, buf, pos, seq, count, base, out_at, spare)
    assert c == py
    (new_pos, new_seq, taken), starts, ends = c
    ref_pos, ref_seq, ref_starts, ref_ends = _python_reference(buf, pos, seq, count, base)
    assert (new_pos, new_seq, taken) == (ref_pos, ref_seq, len(ref_starts))
    assert starts[out_at:out_at + taken] == ref_starts
    assert ends[out_at:out_at + taken] == ref_ends
    # nothing written outside [out_at, out_at + taken)
    assert starts[:out_at] + starts[out_at + taken:] == [SENTINEL] * (len(starts) - taken)
    assert ends[:out_at] + ends[out_at + taken:] == [SENTINEL] * (len(ends) - taken)


@given(st.binary(max_size=64), st.data())
def test_c_and_python_framing_agree_on_arbitrary_bytes(buf: bytes, data: st.DataObject) -> None:
    pos = data.draw(st.integers(0, len(buf)))
    seq = data.draw(st.integers(0, 255))
    count = data.draw(st.integers(0, 20))
    assert _run(_frame_c(), buf, pos, seq, count, 5, 1, 1) == _run(mysql_raw.frame_py, buf, pos, seq, count, 5, 1, 1)


@pytest.mark.parametrize("frame_name", ["c", "py"])
def test_framing_edge_cases(frame_name: str) -> None:
    frame = _frame_c() if frame_name == "c" else mysql_raw.frame_py

    def run(buf: bytes, seq: int, count: int = 10) -> tuple[tuple[int, int, int], list[int], list[int]]:
        result, starts, ends = _run(frame, buf, 0, seq, count, 100, 0, 0)
        return result, starts[:result[2]], ends[:result[2]]

    # sequence numbers wrap from 255 to 0
    buf = _header(1, 254) + b"a" + _header(2, 255) + b"bc" + _header(1, 0) + b"d"
    assert run(buf, 254) == ((16, 1, 3), [104, 109, 115], [105, 111, 116])
    # a wrong sequence number stops before the packet
    assert run(buf, 253)[0] == (0, 253, 0)
    # EOF is 0xFE and < 9 bytes; a 0xFE row of >= 9 bytes is a row
    eof8 = _header(8, 0) + b"\xfe" + b"\0" * 7
    row9 = _header(9, 0) + b"\xfe" + b"\0" * 8
    assert run(eof8, 0)[0] == (0, 0, 0)
    assert run(row9 + eof8, 0) == ((13, 1, 1), [104], [113])
    # error packet, empty packet, multi-packet header
    assert run(_header(3, 0) + b"\xff\x01\x02", 0)[0] == (0, 0, 0)
    assert run(_header(0, 0) + b"x", 0)[0] == (0, 0, 0)
    assert run(_header(MAX, 0) + b"x" * 10, 0)[0] == (0, 0, 0)
    # ... also when the whole 0xFFFFFF part is buffered; 0xFFFFFE bytes is an ordinary row
    assert run(_header(MAX, 0) + b"x" * MAX + _header(1, 1) + b"y", 0)[0] == (0, 0, 0)
    assert run(_header(MAX - 1, 0) + b"x" * (MAX - 1), 0) == ((MAX + 3, 1, 1), [104], [103 + MAX])
    # truncated payload, truncated header, header without payload byte: stop, never over-read
    row = _header(3, 7) + b"abc"
    assert run(row + _header(3, 8) + b"ab", 7)[0] == (7, 8, 1)
    for cut in range(1, 5):
        assert run(row + _header(3, 8)[:cut], 7)[0] == (7, 8, 1)
    # count limits
    assert run(row + _header(1, 8) + b"x", 7, count=1)[0] == (7, 8, 1)
    assert run(row, 7, count=0)[0] == (0, 7, 0)
    # empty buffer
    assert run(b"", 0)[0] == (0, 0, 0)


# --- argument validation -------------------------------------------------------------------

ROW = _header(1, 0) + b"x"


@pytest.mark.parametrize("frame_name", ["c", "py"])
@pytest.mark.parametrize("call", [
    pytest.param(lambda f, s, e: f(ROW, 0, 0, 5, 0, s(4), e(5), 0), id="starts too small"),
    pytest.param(lambda f, s, e: f(ROW, 0, 0, 5, 0, s(5), e(4), 0), id="ends too small"),
    pytest.param(lambda f, s, e: f(ROW, 0, 0, 3, 0, s(5), e(5), 3), id="out_at + count too big"),
    pytest.param(lambda f, s, e: f(ROW, 0, 0, 1, 0, s(0), e(0), 0), id="empty outputs"),
    pytest.param(lambda f, s, e: f(ROW, -1, 0, 1, 0, s(1), e(1), 0), id="negative pos"),
    pytest.param(lambda f, s, e: f(ROW, 6, 0, 1, 0, s(1), e(1), 0), id="pos past the end"),
    pytest.param(lambda f, s, e: f(ROW, 0, 256, 1, 0, s(1), e(1), 0), id="seq 256"),
    pytest.param(lambda f, s, e: f(ROW, 0, -1, 1, 0, s(1), e(1), 0), id="seq -1"),
    pytest.param(lambda f, s, e: f(ROW, 0, 0, -1, 0, s(1), e(1), 0), id="negative count"),
    pytest.param(lambda f, s, e: f(ROW, 0, 0, 1, 0, s(1), e(1), -1), id="negative out_at"),
    pytest.param(lambda f, s, e: f(ROW, 0, 0, 1, -1, s(1), e(1), 0), id="negative base"),
])
def test_bad_arguments_raise_value_error_and_write_nothing(frame_name: str, call: Callable[..., Any]) -> None:
    frame = _frame_c() if frame_name == "c" else mysql_raw.frame_py
    made: list[np.ndarray] = []

    def out(n: int) -> np.ndarray:
        made.append(np.full(n, SENTINEL, dtype=np.int64))
        return made[-1]

    with pytest.raises(ValueError):
        call(frame, out, out)
    assert all((a == SENTINEL).all() for a in made)


@pytest.mark.parametrize("bad", [
    pytest.param(lambda: np.zeros(4, dtype=np.int32), id="int32"),
    pytest.param(lambda: np.zeros(4, dtype=np.uint64), id="uint64"),
    pytest.param(lambda: np.zeros(4, dtype=np.float64), id="float64"),
    pytest.param(lambda: np.zeros(32, dtype=np.uint8), id="bytes as uint8"),
    pytest.param(lambda: np.zeros(8, dtype=np.int64)[::2], id="strided"),
    pytest.param(lambda: np.zeros(4, dtype=">i8"), id="big-endian int64"),
    pytest.param(lambda: bytes(32), id="read-only bytes"),
    pytest.param(lambda: bytearray(32), id="bytearray"),
    pytest.param(lambda: [0, 0, 0, 0], id="list"),
])
def test_c_framing_wants_writable_contiguous_int64_outputs(bad: Callable[[], Any]) -> None:
    frame = _frame_c()
    good = np.zeros(4, dtype=np.int64)
    with pytest.raises(ValueError):
        frame(ROW, 0, 0, 1, 0, bad(), good, 0)
    with pytest.raises(ValueError):
        frame(ROW, 0, 0, 1, 0, good, bad(), 0)
    readonly = np.zeros(4, dtype=np.int64)
    readonly.flags.writeable = False
    with pytest.raises(ValueError):
        frame(ROW, 0, 0, 1, 0, readonly, good, 0)
    with pytest.raises(ValueError, match="overlap"):
        frame(ROW, 0, 0, 1, 0, good, good, 0)
    with pytest.raises(TypeError):
        frame("not bytes", 0, 0, 1, 0, good, np.zeros(4, dtype=np.int64), 0)
    assert frame(ROW, 0, 0, 1, 0, good, np.zeros(4, dtype=np.int64), 0) == (5, 1, 1)


# --- read_batch over a scripted socket ------------------------------------------------------

class _Socket:
    def settimeout(self, timeout: float | None) -> None:
        pass


class _RFile:
    """PyMySQL's buffered socket reader, replaying `data` in chunks of random sizes."""

    def __init__(self, data: bytes, rng: random.Random, max_chunk: int) -> None:
        self.data, self.pos, self.rng, self.max_chunk = data, 0, rng, max_chunk

    def read1(self, n: int) -> bytes:
        take = min(n, self.rng.randint(1, self.max_chunk))
        out = self.data[self.pos:self.pos + take]
        self.pos += len(out)
        return out

    def read(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += len(out)
        return out


class _Conn:
    def __init__(self, data: bytes, seq: int, rng: random.Random, max_chunk: int) -> None:
        self._rfile = _RFile(data, rng, max_chunk)
        self._sock = _Socket()
        self._next_seq_id = seq
        self._read_timeout = None
        self._current_timeout = None
        self.closed = False

    def _force_close(self) -> None:
        self.closed = True


class _Result:
    unbuffered_active = True
    warning_count = -1
    has_next = None
    connection: Any = "conn"
    rows: Any = ()


def _result_stream(rows: list[bytes], seq: int, end: str) -> tuple[bytes, int]:
    """Row packets (split into 0xFFFFFF parts where needed) then an EOF or error packet."""
    out = bytearray()
    for payload in rows:
        rest = payload
        while True:
            part, rest = rest[:MAX], rest[MAX:]
            out += _header(len(part), seq) + part
            seq = (seq + 1) & 0xFF
            if len(part) < MAX:
                break
    if end == "eof":
        out += _header(5, seq) + b"\xfe\x03\x00\x08\x00"  # 3 warnings, more results
    else:
        error = b"\xff" + (1064).to_bytes(2, "little") + b"#42000" + b"syntax"  # ER_PARSE_ERROR
        out += _header(len(error), seq) + error
    return bytes(out), (seq + 1) & 0xFF


def _read_all(rows: list[bytes], seq: int, max_rows: int, max_chunk: int, framing: Any,
              chunk_rows: int, seed: int, end: str = "eof") -> tuple[list[bytes], _Conn, _Result]:
    data, seq_after = _result_stream(rows, seq, end)
    conn = _Conn(data, seq, random.Random(seed), max_chunk)
    result = _Result()
    reader = mysql_raw.PacketReader(conn, result)
    got: list[bytes] = []
    with mock.patch.object(mysql_raw, "frame", framing), mock.patch.object(mysql_raw, "_ROWS_CHUNK", chunk_rows):
        while True:
            batch = reader.read_batch(max_rows)
            if batch is None:
                break
            payload, starts, ends = batch
            assert starts.dtype == ends.dtype == np.int64
            assert 1 <= len(starts) == len(ends) <= max_rows
            got += [payload[s:e].tobytes() for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]
    assert reader.done
    assert conn._next_seq_id == seq_after
    assert conn._rfile.pos == len(data)  # everything consumed, nothing read past the end
    return got, conn, result


@given(st.lists(st.one_of(st.binary(min_size=1, max_size=40), st.binary(min_size=250, max_size=700),
                          st.just(b"\xfe" + b"\x00" * 8)), max_size=60),
       st.integers(0, 255), st.integers(1, 70), st.integers(1, 300), st.integers(1, 5),
       st.integers(0, 2**32))
def test_read_batch_gives_every_row_with_either_framing(
        rows: list[bytes], seq: int, max_rows: int, max_chunk: int, chunk_rows: int, seed: int) -> None:
    # row payloads never start with 0xFF (an error packet), nor 0xFE with < 9 bytes (EOF)
    rows = [r if r[0] not in (0xFE, 0xFF) or (r[0] == 0xFE and len(r) >= 9) else b"\x00" + r
            for r in rows]
    for framing in (_frame_c(), mysql_raw.frame_py):
        got, _, result = _read_all(rows, seq, max_rows, max_chunk, framing, chunk_rows, seed)
        assert got == rows
        assert (result.warning_count, result.has_next, result.unbuffered_active) == (3, True, False)


@pytest.mark.parametrize("framing_name", ["c", "python"])
def test_a_batch_ends_once_its_rows_hold_max_bytes(framing_name: str) -> None:
    """Small batches reach the writer early; the bound is checked per socket read."""
    rows = [bytes([1 + i % 200]) * 1000 for i in range(5000)]  # ~5 MB of rows
    data, _ = _result_stream(rows, 0, "eof")
    conn = _Conn(data, 0, random.Random(7), 64 * 1024)
    reader = mysql_raw.PacketReader(conn, _Result())
    framing = _frame_c() if framing_name == "c" else mysql_raw.frame_py
    got: list[bytes] = []
    spans: list[int] = []
    with mock.patch.object(mysql_raw, "frame", framing):
        while (batch := reader.read_batch(10**6, max_bytes=1 << 20)) is not None:
            payload, starts, ends = batch
            spans.append(int(ends[-1] - starts[0]))
            got += [payload[a:b].tobytes() for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    assert got == rows
    assert len(spans) >= 4
    for span in spans[:-1]:  # every batch but the last stops within one socket read of the bound
        assert (1 << 20) <= span < (1 << 20) + 64 * 1024 + 1004


def test_read_batch_joins_multi_packet_rows_and_grows_past_64ki_rows() -> None:
    big = bytes(range(256)) * (MAX // 256 + 5)  # > 0xFFFFFF: two packets
    exact = b"\x01" * MAX  # exactly 0xFFFFFF: a full packet, then an empty one
    small = [b"r" + i.to_bytes(4, "little") for i in range(70_000)]
    rows = small[:10] + [big] + small[10:20] + [exact] + small[20:]
    for framing in (_frame_c(), mysql_raw.frame_py):
        got, _, _ = _read_all(rows, 250, 100_000, 1 << 20, framing, 1 << 16, 1)
        assert got == rows


def test_an_error_packet_mid_result_raises_after_the_rows_before_it() -> None:
    rows = [b"row %d" % i for i in range(50)]
    for framing in (_frame_c(), mysql_raw.frame_py):
        with pytest.raises(pymysql.err.ProgrammingError):
            _read_all(rows, 3, 1000, 64, framing, 4, 2, end="error")


def test_the_framing_in_use_is_logged_once_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="rivet.source")
    with mock.patch.object(mysql_raw, "_framing_logged", False):
        for _ in range(2):
            _read_all([b"a", b"b"], 0, 10, 100, mysql_raw.frame, 4, 0)
    assert caplog.text.count("MySQL packet framing: C extension (rivet_core.source.mysql._mysqlframe)") == 1


# --- MariaDB: the raw and binary paths with either framing ------------------------------------

@pytest.mark.mysql
@pytest.mark.parametrize("path", ["raw", "binary"])
def test_read_paths_give_the_same_table_with_either_framing(
        mysql_url: str, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    from rivet_core.config.tuning import ResolvedTuning
    from rivet_core.source import open_source

    u = urllib.parse.urlsplit(mysql_url)
    conn = pymysql.connect(host=u.hostname, port=u.port or 3306, user=urllib.parse.unquote(u.username or ""),
                           password=urllib.parse.unquote(u.password or ""), database=u.path.lstrip("/"),
                           autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE f (id BIGINT PRIMARY KEY, v VARCHAR(600), d DECIMAL(12,3), "
                        "ts DATETIME(6) NULL)")
            # > 64 Ki rows (the offset arrays grow), sequence numbers wrap many times, rows of
            # mixed sizes so packets straddle the 1 MiB socket reads at many offsets
            cur.execute("INSERT INTO f SELECT seq, IF(seq % 11 = 0, NULL, REPEAT('v', seq % 600)), "
                        "seq / 1000, '2021-01-01' + INTERVAL seq SECOND FROM seq_1_to_70000")
    finally:
        conn.close()
    monkeypatch.setenv("RIVET_MYSQL_READ_PATH", path)
    tuning = ResolvedTuning(statement_timeout_s=60, lock_timeout_s=5, throttle_ms=0)
    sql = "SELECT * FROM f ORDER BY id"
    tables = []
    for framing in (_frame_c(), mysql_raw.frame_py):
        monkeypatch.setattr(mysql_raw, "frame", framing)
        with open_source(mysql_url, tuning) as src:
            schema = src.describe(sql)
            batches = list(src.stream(sql, (), schema, 100_000))
            assert src.scalar("SELECT 1") == 1
        tables.append(pa.Table.from_batches(batches, schema=schema))
    assert tables[0].num_rows == 70_000
    assert tables[0].equals(tables[1])
    assert tables[0].column("id").to_pylist() == list(range(1, 70_001))


# --- gather: C == numpy ------------------------------------------------------------------

def _gather_c() -> Callable[..., int]:
    _frame_c()  # fails with the build hint when the extension is missing
    from rivet_core.source.mysql import _mysqlframe
    return _mysqlframe.gather


@given(data=st.binary(min_size=0, max_size=3000), picks=st.lists(st.tuples(st.integers(0, 3000),
                                                                          st.integers(0, 300)), max_size=60))
def test_gather_copies_the_same_bytes_in_c_and_numpy(data: bytes, picks: list[tuple[int, int]]) -> None:
    arr = np.frombuffer(data, dtype=np.uint8)
    ranges = [(a, min(k, len(data) - a)) for a, k in picks if a <= len(data)]
    start = np.array([a for a, _ in ranges], dtype=np.int64)
    length = np.array([k for _, k in ranges], dtype=np.int64)
    expected = b"".join(data[a:a + k] for a, k in ranges)
    for gather in (_gather_c(), mysql_raw.gather_py):
        out = np.full(len(expected) + 3, 0xAA, dtype=np.uint8)
        assert gather(arr, start, length, out) == len(expected)
        assert bytes(out[:len(expected)]) == expected
        assert bytes(out[len(expected):]) == b"\xaa" * 3  # nothing written past the values


@pytest.mark.parametrize(("start", "length", "room", "match"), [
    ([0, 8], [4, 4], 8, "outside the data"),          # 8 + 4 > 10 bytes of data
    ([-1], [2], 8, "outside the data"),
    ([0], [-1], 8, "outside the data"),
    ([0, 2], [4, 4], 6, "overflow"),                   # 8 bytes into 6
])
def test_gather_refuses_ranges_outside_the_data_or_the_output(start: list[int], length: list[int],
                                                             room: int, match: str) -> None:
    data = np.frombuffer(b"0123456789", dtype=np.uint8)
    for gather in (_gather_c(), mysql_raw.gather_py):
        with pytest.raises(ValueError, match=match):
            gather(data, np.array(start, dtype=np.int64), np.array(length, dtype=np.int64),
                   np.zeros(room, dtype=np.uint8))


def test_gather_refuses_mismatched_or_non_int64_index_arrays() -> None:
    data = np.frombuffer(b"0123456789", dtype=np.uint8)
    gather = _gather_c()
    with pytest.raises(ValueError, match="differ"):
        gather(data, np.zeros(2, dtype=np.int64), np.zeros(3, dtype=np.int64), np.zeros(4, dtype=np.uint8))
    with pytest.raises(ValueError, match="int64"):
        gather(data, np.zeros(2, dtype=np.int32), np.zeros(2, dtype=np.int64), np.zeros(4, dtype=np.uint8))
