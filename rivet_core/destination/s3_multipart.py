"""S3 multipart uploads read from a local file's descriptor: at rest, or while it is written.

`ChunkedUpload` is one multipart upload fed in order from a file descriptor: each chunk is
read once on the feeding thread (its MD5 for `Content-MD5`, the whole file's xxh3 for the
staged-bytes check) and then sent by a pool of `concurrency` threads with a *file range* as
the request body — botocore reads the range from the page cache as it sends (and rewinds it
on a retry), so an upload in flight holds no chunk in memory. The number of chunks in
flight is bounded (`concurrency`): the feeder waits for the oldest before it submits
another, which also checks every part's ETag in part order.

`EarlyUpload` runs a `ChunkedUpload` on its own thread *while a writer appends to the file*
(docs/benchmarks.md): the writer calls `advance(n)` whenever its first `n`
bytes are final (writers only append, rivet_core/format/base.py), `seal(size)` once the file
is finished; the upload is started only when the file has reached the multipart threshold,
so a small part is still one `PutObject`. Nothing becomes visible under the key until
`complete()` — which the destination's `write_file` calls from the per-part commit facade
(rivet_core/pipeline/facade/commit.py), so the commit order of docs/invariants.md I1/I2 is
the same as for an upload started after the extract. `abort()` (a failed extract, a failed
quality gate, a run that ends before its parts are published) aborts the multipart upload:
no object appears.

Memory: bounded by `concurrency` requests' socket buffers plus one 1 MiB read block, however
far the upload falls behind the writer — the bytes wait on disk, not in the process.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import io
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

import xxhash

from rivet_core.destination.base import WriteResult
from rivet_core.destination.checksums import CHUNK_SIZE, Fingerprint, StagedFileError, check_staged
from rivet_core.destination.errors import destination_error
from rivet_core.destination.file_follower import FileFollower


class S3Destination(Protocol):
    """What an upload needs of the S3 destination that owns it (rivet_core/destination/s3.py
    `S3Destination`; named structurally so this module does not import the one that imports
    it): its bucket and prefix, its size settings, its error-wrapping call, its part upload
    and ETag check, and the boto3 client for an abort."""

    bucket: str
    prefix: str
    multipart_threshold: int
    multipart_chunksize: int
    _client: Any

    def _call(self, action: str, key: str | None, method: str, **kwargs: Any) -> Any: ...

    def _upload_part(self, key: str, full_key: str, upload_id: str, number: int, body: Any,
                     digest: bytes) -> dict[str, Any]: ...

    def _check_multipart_etag(self, key: str, resp: dict[str, Any], part_md5s: list[bytes]) -> None: ...

MAX_PARTS = 10_000
#: Parts before the chunk size doubles, for a streamed file whose final size is unknown:
#: 16 MiB chunks reach 32 GiB in 2,000 parts, and each doubling keeps 10,000 parts enough
#: for any object S3 accepts.
PARTS_PER_DOUBLING = 2_000


class FileRange(io.RawIOBase):
    """A read-only, seekable window `[offset, offset + length)` of a file descriptor (the
    request body of one upload part; position 0 is the window's start)."""

    def __init__(self, fd: int, offset: int, length: int) -> None:
        super().__init__()
        self._fd, self._offset, self._length, self._pos = fd, offset, length, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def __len__(self) -> int:
        return self._length

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._length}[whence]
        self._pos = min(max(0, base + pos), self._length)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        left = self._length - self._pos
        n = left if size is None or size < 0 else min(size, left)
        if n <= 0:
            return b""
        data = os.pread(self._fd, n, self._offset + self._pos)
        if len(data) != n:
            raise StagedFileError(f"staged file ended {n - len(data)} bytes early while uploading")
        self._pos += n
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class ChunkedUpload:
    """One multipart upload of `key`, fed in order from `fd` (see the module docstring)."""

    def __init__(self, dest: S3Destination, key: str, fd: int, chunksize: int, concurrency: int,
                 *, grow: bool = False) -> None:
        self.dest, self.key, self._fd = dest, key, fd
        self.full_key = dest.prefix + key
        self._chunksize, self._grow = chunksize, grow
        self.upload_id: str = dest._call("start multipart upload of", key, "create_multipart_upload",
                                         Bucket=dest.bucket, Key=self.full_key)["UploadId"]
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="rivet-s3-part")
        self._concurrency = concurrency
        self._in_flight: collections.deque[Future[dict[str, Any]]] = collections.deque()
        self._parts: list[dict[str, Any]] = []
        self._md5s: list[bytes] = []
        self._xxh = xxhash.xxh3_64()
        self._md5: Any = None  # the whole file's MD5, only when asked (`whole_md5`)
        self.sent = 0  # bytes read and submitted

    def whole_md5(self) -> None:
        """Also compute the whole file's MD5 (an upload without a staged fingerprint)."""
        self._md5 = hashlib.md5(usedforsecurity=False)

    def next_chunk_len(self) -> int:
        n = len(self._md5s)
        return self._chunksize << (n // PARTS_PER_DOUBLING) if self._grow else self._chunksize

    def send(self, length: int) -> None:
        """Read `length` bytes at the current offset (hashing them) and submit them as the next
        part; waits for the oldest part first when `concurrency` are in flight."""
        if len(self._md5s) >= MAX_PARTS:
            raise destination_error(f"'{self.key}' needs more than {MAX_PARTS} parts (file grew while uploading)")
        offset, md5, done = self.sent, hashlib.md5(usedforsecurity=False), 0
        while done < length or length == 0:
            block = os.pread(self._fd, min(CHUNK_SIZE, length - done), offset + done)
            if len(block) == 0 and length:
                raise StagedFileError(f"file ended at {offset + done} bytes, {offset + length} were expected")
            md5.update(block)
            self._xxh.update(block)
            if self._md5 is not None:
                self._md5.update(block)
            done += len(block)
            if length == 0:
                break
        digest = md5.digest()
        self._md5s.append(digest)
        while len(self._in_flight) >= self._concurrency:
            self._parts.append(self._in_flight.popleft().result())  # in part order; raises its error
        self._in_flight.append(self._pool.submit(
            self.dest._upload_part, self.key, self.full_key, self.upload_id, len(self._md5s),
            FileRange(self._fd, offset, length), digest))
        self.sent += length

    def send_until(self, upto: int) -> None:
        """Submit every full chunk that lies within the first `upto` bytes."""
        while upto - self.sent >= self.next_chunk_len():
            self.send(self.next_chunk_len())

    def finish(self, size: int) -> Fingerprint:
        """Submit the tail up to `size`, wait for every part; the bytes' size and xxh3 (and MD5
        when asked) — nothing is visible yet."""
        self.send_until(size)
        if size > self.sent or not self._md5s:
            self.send(size - self.sent)
        while self._in_flight:
            self._parts.append(self._in_flight.popleft().result())
        md5 = self._md5.digest() if self._md5 is not None else b""
        return Fingerprint(size=self.sent, xxh3="xxh3:" + self._xxh.hexdigest(),
                           md5_b64=base64.b64encode(md5).decode("ascii"))

    def complete(self, measured: Fingerprint, staged: Fingerprint | None) -> WriteResult:
        """Check the bytes against the writer's fingerprint, then complete: the object appears."""
        check_staged(measured, staged, f"for '{self.key}'")  # raises before anything is visible
        md5_b64 = staged.md5_b64 if staged is not None else measured.md5_b64
        resp = self.dest._call(
            "complete multipart upload of", self.key, "complete_multipart_upload", Bucket=self.dest.bucket,
            Key=self.full_key, UploadId=self.upload_id, MultipartUpload={"Parts": self._parts})
        self._pool.shutdown(wait=True)
        self.dest._check_multipart_etag(self.key, resp, self._md5s)
        return WriteResult(key=self.key, size=measured.size, md5_b64=md5_b64, xxh3=measured.xxh3)

    def abort(self) -> None:
        """Stop sending and abort the upload (best effort: the caller's error is what matters;
        an orphaned upload is invisible to readers)."""
        from botocore.exceptions import BotoCoreError, ClientError

        self._pool.shutdown(wait=True, cancel_futures=True)  # no part may land after the abort
        try:
            self.dest._client.abort_multipart_upload(Bucket=self.dest.bucket, Key=self.full_key,
                                                     UploadId=self.upload_id)
        except (ClientError, BotoCoreError):
            pass


class EarlyUpload(FileFollower):
    """Upload a file to `key` while its writer appends to it (see the module docstring; the
    hand-off with the writer: rivet_core/destination/file_follower.py)."""

    thread_name = "rivet-s3-early"

    def __init__(self, dest: S3Destination, key: str, path: os.PathLike[str] | str, concurrency: int) -> None:
        super().__init__(path)
        self.dest, self.key = dest, key
        self._concurrency = concurrency
        self._size: int | None = None  # set by seal()
        self._upload: ChunkedUpload | None = None
        self._measured: Fingerprint | None = None
        self._start()

    # -- the writer's side (and `advance`) ---------------------------------------------------
    def seal(self, size: int) -> None:
        """The file is finished at `size` bytes: upload the rest (does not wait)."""
        with self._cond:
            self._target = max(self._target, size)
            self._size = size
            self._cond.notify()

    # -- the destination's side ----------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def complete(self, staged: Fingerprint | None) -> WriteResult | None:
        """Wait for the upload and complete it (the object appears); None when the file
        stayed below the multipart threshold and nothing was uploaded — the caller then
        writes it the ordinary way. Raises (after aborting the upload) on any error."""
        if self._size is None:
            self.abort()
            raise RuntimeError(f"early upload of '{self.key}' completed before its file was sealed")
        self._thread.join()
        try:
            if self._error is not None:
                raise self._error
            if self._upload is None:
                return None
            assert self._measured is not None
            measured = self._measured
            if staged is None:  # no writer fingerprint: the MD5 the manifest needs, from disk
                measured = _with_md5(self._fd, measured)
            return self._upload.complete(measured, staged)
        except BaseException:
            self._abort_upload()
            raise
        finally:
            self._close_fd()

    def abort(self) -> None:
        """Stop and abort the upload (the part is dropped); safe to call repeatedly."""
        if self._cancel():
            self._abort_upload()
            self._close_fd()

    def _abort_upload(self) -> None:
        upload, self._upload = self._upload, None
        if upload is not None:
            upload.abort()

    def _started(self, final: int, sealed: bool) -> bool:
        """Start the multipart upload once the file is certain to need one."""
        if self._upload is None:
            dest = self.dest
            if final < dest.multipart_threshold or (final < dest.multipart_chunksize and not sealed):
                return False
            self._upload = ChunkedUpload(dest, self.key, self._fd, dest.multipart_chunksize,
                                         self._concurrency, grow=True)
        return True

    def _chunk_ready(self) -> bool:
        upload = self._upload
        if upload is None:
            return self._target >= self.dest.multipart_chunksize
        return self._target - upload.sent >= upload.next_chunk_len()

    def _follow(self) -> None:
        while True:
            with self._cond:
                while not self._cancelled and self._size is None and not self._chunk_ready():
                    self._cond.wait()
                if self._cancelled:
                    return
                final, size = self._target, self._size
            if not self._started(final, size is not None):
                if size is not None:
                    return  # below the threshold: write_file will PUT it
                with self._cond:  # wait for more bytes
                    while not self._cancelled and self._size is None and self._target == final:
                        self._cond.wait()
                continue
            assert self._upload is not None
            if size is None:
                self._upload.send_until(final)
                continue
            self._measured = self._upload.finish(size)
            return


def _with_md5(fd: int, measured: Fingerprint) -> Fingerprint:
    md5, offset = hashlib.md5(usedforsecurity=False), 0
    while block := os.pread(fd, CHUNK_SIZE, offset):
        md5.update(block)
        offset += len(block)
    return Fingerprint(size=measured.size, xxh3=measured.xxh3,
                       md5_b64=base64.b64encode(md5.digest()).decode("ascii"))


__all__ = ["ChunkedUpload", "EarlyUpload", "FileRange", "MAX_PARTS"]
