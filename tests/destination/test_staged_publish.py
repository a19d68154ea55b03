"""Publishing a staged part: the writer's own fingerprint, hard-link publish, and refusal of
staged bytes that changed after finalize (local copy path, S3 single PUT and multipart).

The writer fingerprints its file while writing (`AppendHasher`), so a local destination on
the staging directory's filesystem publishes by hard link with no second write or read.
Every assertion re-reads the bytes independently (`fingerprint_file`) instead of trusting
the fingerprint the code under test reports.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rivet_core.destination import fingerprint_file
from rivet_core.destination.checksums import AppendHasher, Fingerprint
from rivet_core.destination.local import LocalDestination
from rivet_core.errors import DestinationError
from rivet_core.format import PartRotator, WriterOptions
from rivet_core.pipeline.facade.commit import write_part_file

SHM = Path("/dev/shm")


def staged_part(staging: Path, fmt: str = "parquet", rows: int = 5000) -> Any:
    """One finished part written by the real rotator/writer."""
    staging.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    rotator = PartRotator(staging, "orders", schema, WriterOptions(format=fmt), None)
    for start in range(0, rows, 1000):
        ids = list(range(start, min(start + 1000, rows)))
        rotator.write_batch(pa.record_batch([pa.array(ids), pa.array([f"n{i}" for i in ids])], schema=schema))
    (part,) = rotator.finish()
    return part


def as_fingerprint(path: Path) -> Fingerprint:
    xxh3, md5 = fingerprint_file(path)
    return Fingerprint(size=path.stat().st_size, xxh3=xxh3, md5_b64=md5)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_writers_fingerprint_exactly_the_bytes_they_wrote(tmp_path: Path, fmt: str) -> None:
    part = staged_part(tmp_path / "staging", fmt)
    assert part.fingerprint == as_fingerprint(part.path)
    assert part.size_bytes == part.fingerprint.size


def test_same_filesystem_publish_is_a_hard_link_of_the_staged_file(tmp_path: Path) -> None:
    part = staged_part(tmp_path / "staging")
    dest = LocalDestination(tmp_path / "out")
    record = write_part_file(dest, part, "orders.parquet")
    published = tmp_path / "out" / "orders.parquet"
    assert os.stat(published).st_ino == os.stat(part.path).st_ino  # no second copy
    assert os.stat(published).st_nlink == 2
    assert (record.content_fingerprint, record.content_md5) == fingerprint_file(published)
    assert record.size_bytes == published.stat().st_size
    assert oct(published.stat().st_mode & 0o777) == oct(0o644 & ~_umask())
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["orders.parquet"]  # no temp left


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_rewritten_staged_file_never_changes_the_published_part(tmp_path: Path) -> None:
    """A retried window stages the same name again: the writer must create a new inode,
    never truncate the one that is now also the published part."""
    staging = tmp_path / "staging"
    first = staged_part(staging, rows=5000)
    dest = LocalDestination(tmp_path / "out")
    write_part_file(dest, first, "orders.parquet")
    before = fingerprint_file(tmp_path / "out" / "orders.parquet")
    second = staged_part(staging, rows=300)  # same stem, same staged names
    assert second.path == first.path
    assert fingerprint_file(tmp_path / "out" / "orders.parquet") == before
    assert os.stat(second.path).st_ino != os.stat(tmp_path / "out" / "orders.parquet").st_ino


def test_another_filesystem_falls_back_to_a_checked_copy(tmp_path: Path) -> None:
    assert os.stat(SHM).st_dev != os.stat(tmp_path).st_dev, "test needs /dev/shm on another filesystem"
    staging = SHM / f"rivet-test-{os.getpid()}-{tmp_path.name}"
    try:
        part = staged_part(staging)
        dest = LocalDestination(tmp_path / "out")
        record = write_part_file(dest, part, "orders.parquet")
        published = tmp_path / "out" / "orders.parquet"
        assert os.stat(published).st_ino != os.stat(part.path).st_ino
        assert published.read_bytes() == part.path.read_bytes()
        assert (record.content_fingerprint, record.content_md5) == fingerprint_file(published)
    finally:
        for child in staging.glob("*"):
            child.unlink()
        staging.rmdir()


def test_a_staged_file_changed_after_finalize_is_refused_by_the_copy(tmp_path: Path) -> None:
    staging = SHM / f"rivet-test-{os.getpid()}-{tmp_path.name}"
    try:
        part = staged_part(staging)
        with open(part.path, "r+b") as fh:  # same size, one byte flipped
            fh.seek(100)
            byte = fh.read(1)
            fh.seek(100)
            fh.write(bytes([byte[0] ^ 0xFF]))
        dest = LocalDestination(tmp_path / "out")
        with pytest.raises(DestinationError, match="changed after it was written"):
            write_part_file(dest, part, "orders.parquet")
        assert list((tmp_path / "out").iterdir()) == []  # nothing published, no temp
    finally:
        for child in staging.glob("*"):
            child.unlink()
        staging.rmdir()


def test_a_truncated_staged_file_is_refused_by_the_link_publish(tmp_path: Path) -> None:
    part = staged_part(tmp_path / "staging")
    os.truncate(part.path, part.size_bytes - 10)
    dest = LocalDestination(tmp_path / "out")
    with pytest.raises(DestinationError, match="no longer the"):
        write_part_file(dest, part, "orders.parquet")
    assert list((tmp_path / "out").iterdir()) == []


def test_without_a_fingerprint_the_file_is_copied_and_hashed(tmp_path: Path) -> None:
    src = tmp_path / "given.bin"
    src.write_bytes(os.urandom(3 * 1024 * 1024 + 7))
    dest = LocalDestination(tmp_path / "out")
    result = dest.write_file(src, "given.bin")
    assert os.stat(tmp_path / "out" / "given.bin").st_ino != os.stat(src).st_ino
    assert (result.xxh3, result.md5_b64) == fingerprint_file(src)


@settings(max_examples=40, deadline=None)
@given(writes=st.lists(st.binary(min_size=0, max_size=300_000), max_size=12), data=st.data())
def test_append_hasher_matches_a_read_back_for_any_flush_pattern(tmp_path_factory: Any, writes: list[bytes],
                                                                 data: st.DataObject) -> None:
    path = tmp_path_factory.mktemp("hash") / "f.bin"
    with open(path, "wb") as fh:
        hasher = AppendHasher(path)
        for chunk in writes:
            fh.write(chunk)
            if data.draw(st.booleans()):
                fh.flush()
                hasher.advance(fh.tell())
        fh.flush()
        size = fh.tell()
    assert hasher.finish(size) == as_fingerprint(path)


def test_append_hasher_reports_a_file_shorter_than_promised(tmp_path: Path) -> None:
    path = tmp_path / "short.bin"
    path.write_bytes(b"x" * 100)
    hasher = AppendHasher(path)
    with pytest.raises(OSError, match="ended at 100 bytes"):
        hasher.finish(200)


def test_abort_stops_the_hasher_thread(tmp_path: Path) -> None:
    path = tmp_path / "a.bin"
    path.write_bytes(b"y" * 10)
    hasher = AppendHasher(path)
    hasher.advance(10)
    hasher.abort()
    hasher.abort()  # idempotent
    assert not hasher._thread.is_alive()


def test_every_hashed_range_is_handed_to_the_kernel_for_writeback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hasher starts the disk write of each range it has hashed (writeback.py), so the
    writer's closing fsync waits for the last range only: the ranges it hands over are
    contiguous, cover the whole file, and the kernel accepts each (this runs on Linux)."""
    import rivet_core.destination.checksums as checksums
    from rivet_core.destination.writeback import start_writeback

    handed: list[tuple[int, int, bool]] = []

    def recording(fd: int, offset: int, length: int) -> bool:
        accepted = start_writeback(fd, offset, length)
        handed.append((offset, length, accepted))
        return accepted

    monkeypatch.setattr(checksums, "start_writeback", recording)
    path = tmp_path / "part.bin"
    with open(path, "wb") as fh:
        hasher = AppendHasher(path)
        for _ in range(3):
            fh.write(os.urandom(3 << 20))
            fh.flush()
            hasher.advance(fh.tell())
        size = fh.tell()
    assert hasher.finish(size) == as_fingerprint(path)
    assert handed, "no range was handed over for writeback"
    assert handed[0][0] == 0
    assert all(a + n == b for (a, n, _), (b, _, _) in zip(handed, handed[1:], strict=False))
    assert handed[-1][0] + handed[-1][1] == size
    assert all(accepted for *_, accepted in handed)
