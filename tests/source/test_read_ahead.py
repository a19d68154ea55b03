"""ReadAhead: order, error hand-over, the bound on items in flight, and clean shutdown."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from rivet_core.source.read_ahead import ReadAhead


def test_items_arrive_in_order_and_complete() -> None:
    with ReadAhead(iter(range(1000))) as ahead:
        assert list(ahead) == list(range(1000))


def test_the_sources_error_is_raised_where_it_happened() -> None:
    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("broken at 3")

    got: list[int] = []
    with ReadAhead(source()) as ahead, pytest.raises(ValueError, match="broken at 3"):
        for item in ahead:
            got.append(item)
    assert got == [1, 2]


def test_the_reader_stays_at_most_one_item_ahead() -> None:
    produced: list[int] = []
    lock = threading.Condition()

    def source() -> Iterator[int]:
        for i in range(50):
            with lock:
                produced.append(i)
                lock.notify_all()
            yield i

    with ReadAhead(source(), depth=1) as ahead:
        for consumed, item in enumerate(ahead):
            assert item == consumed
            # while item N is being consumed the source may have produced N+1, never N+2
            with lock:
                lock.wait_for(lambda c=consumed: len(produced) >= min(c + 2, 50), timeout=5)
                assert len(produced) <= consumed + 2


def test_close_stops_the_reader_and_closes_the_source_on_the_callers_thread() -> None:
    closed_on: list[str] = []

    def source() -> Iterator[int]:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed_on.append(threading.current_thread().name)

    ahead = ReadAhead(source(), name="reader-under-test")
    stream = iter(ahead)
    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    ahead.close()
    assert closed_on == [threading.current_thread().name]
    assert not any(t.name == "reader-under-test" for t in threading.enumerate())


def test_close_calls_cancel_for_a_read_in_flight() -> None:
    release = threading.Event()
    cancelled: list[bool] = []

    def source() -> Iterator[int]:
        yield 1
        release.wait(timeout=30)  # a blocking read that only cancel() ends
        yield 2

    def cancel() -> None:
        cancelled.append(True)
        release.set()

    ahead = ReadAhead(source(), cancel=cancel)
    assert next(iter(ahead)) == 1
    ahead.close()
    assert cancelled == [True]


def _counting(sizes: list[int], produced: list[int], lock: threading.Condition,
              gate: threading.Event | None = None) -> Iterator[bytes]:
    if gate is not None:
        gate.wait(5)
    for i, size in enumerate(sizes):
        with lock:
            produced.append(i)
            lock.notify_all()
        yield b"x" * size


@pytest.mark.parametrize(("sizes", "budget", "ahead_at_most"), [
    ([10] * 20, 25, 3),     # 10, 20 < 25 → a third; 30 ≥ 25 → stop
    ([100] * 5, 25, 1),     # one item is always allowed, however large
    ([1] * 20, 1000, 4),    # the budget is never reached: depth bounds it
])
def test_a_byte_budget_bounds_what_the_reader_holds_ahead(sizes: list[int], budget: int,
                                                          ahead_at_most: int) -> None:
    produced: list[int] = []
    lock = threading.Condition()
    with ReadAhead(_counting(sizes, produced, lock), depth=4, budget_bytes=budget, size_of=len) as ahead:
        with lock:
            assert lock.wait_for(lambda: len(produced) >= ahead_at_most, timeout=5)
            # the reader is now blocked: give it the chance to overrun the bound
            assert not lock.wait_for(lambda: len(produced) > ahead_at_most, timeout=0.3)
        got = list(ahead)
    assert [len(b) for b in got] == sizes


def test_depth_must_be_positive() -> None:
    with pytest.raises(ValueError, match="depth must be >= 1"):
        ReadAhead(iter([1]), depth=0)


def test_readers_running_at_the_same_time_share_one_budget() -> None:
    """Two streams (chunked parallel 2) together hold what one would alone."""
    first_produced: list[int] = []
    second_produced: list[int] = []
    lock = threading.Condition()
    gate = threading.Event()  # both readers exist before either produces
    with ReadAhead(_counting([10] * 20, first_produced, lock, gate), depth=8, budget_bytes=40, size_of=len) as first, \
            ReadAhead(_counting([10] * 20, second_produced, lock, gate), depth=8, budget_bytes=40,
                      size_of=len) as second:
        gate.set()
        with lock:
            # each may hold 40 // 2 = 20 bytes: 10, 20 → stop at two items
            assert lock.wait_for(lambda: len(first_produced) >= 2 and len(second_produced) >= 2, timeout=5)
            assert not lock.wait_for(lambda: len(first_produced) > 2 or len(second_produced) > 2, timeout=0.3)
        assert len(list(first)) == len(list(second)) == 20
    with ReadAhead(_counting([10] * 20, first_produced, lock), depth=8, budget_bytes=40, size_of=len) as alone:
        assert len(list(alone)) == 20  # the closed readers gave their share back
