"""Content fingerprints of parts: xxh3-64 (M3 part identity) and MD5 (transport check).

Both digests are computed in ONE streaming pass (the file is read once, in bounded
chunks), because parts can be many GiB and reading them twice doubles the I/O of a run.
The xxh3 string is `xxh3:<16 lowercase hex>` (manifest `content_fingerprint`); the MD5 is
base64 (manifest `content_md5`, the GCS encoding). S3 reports MD5s as hex ETags, so
`md5_bytes` accepts both encodings and is what every comparison goes through.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import xxhash

from rivet_core.destination.file_follower import FileFollower
from rivet_core.destination.writeback import start_writeback

CHUNK_SIZE = 1024 * 1024

_HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")


@dataclass(frozen=True)
class Fingerprint:
    """Size and both digests of one file's bytes (what the manifest records for a part)."""

    size: int
    xxh3: str  # "xxh3:<16 hex>"
    md5_b64: str


class Fingerprinter:
    """Incremental xxh3-64 + MD5 over a byte stream fed with `update`."""

    def __init__(self) -> None:
        self._xxh = xxhash.xxh3_64()
        self._md5 = hashlib.md5(usedforsecurity=False)
        self.size = 0

    def update(self, chunk: bytes | memoryview) -> None:
        self._xxh.update(chunk)
        self._md5.update(chunk)
        self.size += len(chunk)

    @property
    def xxh3(self) -> str:
        return "xxh3:" + self._xxh.hexdigest()

    @property
    def md5_b64(self) -> str:
        return base64.b64encode(self._md5.digest()).decode("ascii")

    @property
    def md5_hex(self) -> str:
        return self._md5.hexdigest()

    def result(self) -> Fingerprint:
        return Fingerprint(size=self.size, xxh3=self.xxh3, md5_b64=self.md5_b64)


class StagedFileError(OSError):
    """The staged file's bytes are not the ones fingerprinted while it was written."""


def check_staged(measured: Fingerprint, staged: Fingerprint | None, what: str) -> None:
    """Refuse to publish a staged part whose bytes changed after its writer finished.

    `staged` is the writer's own fingerprint (None: nothing to compare). A mismatch means
    the staging file was modified or corrupted between finalize and publish — never
    publish such a part under its final name.
    """
    if staged is not None and (measured.size, measured.xxh3) != (staged.size, staged.xxh3):
        raise StagedFileError(
            f"staged file {what} changed after it was written ({staged.size} bytes {staged.xxh3} "
            f"when finalized, {measured.size} bytes {measured.xxh3} now) — something else writes "
            f"into the staging directory; re-run the export"
        )


class AppendHasher(FileFollower):
    """Fingerprints a file *while* a writer appends to it, on a background thread.

    Why: publishing a finished part used to read it back and hash it (MD5 + xxh3 ≈ 0.7 s
    for a 350 MB part) after the last row was encoded — pure serial tail. The writer calls
    `advance(n)` whenever its first `n` bytes are flushed and final (Parquet and CSV
    writers only append), and the thread hashes up to there with `os.pread` on its own
    descriptor (page-cache reads, 1 MiB at a time; MD5 releases the GIL), overlapping with
    encoding (the hand-off: rivet_core/destination/file_follower.py). `finish(size)` hashes
    the tail and returns the fingerprint. Each range it has hashed it also hands to the
    kernel to start writing back (writeback.py), so the writer's closing fsync waits for
    the last range only.
    """

    thread_name = "rivet-part-hash"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._fp = Fingerprinter()
        self._closing = False
        self._start()

    def finish(self, size: int) -> Fingerprint:
        """Hash up to `size` (the finished file's length), stop the thread, return the result."""
        with self._cond:
            self._target = max(self._target, size)
            self._closing = True
            self._cond.notify()
        self._thread.join()
        self._close_fd()
        if self._error is not None:
            raise self._error
        result = self._fp.result()
        if result.size != size:
            raise StagedFileError(f"fingerprinted {result.size} bytes of a {size}-byte file")
        return result

    def abort(self) -> None:
        """Stop without a result (the file is being deleted); safe to call repeatedly."""
        if self._cancel():
            self._close_fd()

    def _follow(self) -> None:
        done = 0
        while True:
            with self._cond:
                while done >= self._target and not self._closing and not self._cancelled:
                    self._cond.wait()
                if self._cancelled or done >= self._target:
                    return
                upto = self._target
            start = done
            while done < upto:
                chunk = os.pread(self._fd, min(CHUNK_SIZE, upto - done), done)
                if not chunk:
                    raise StagedFileError(f"file ended at {done} bytes, {upto} were flushed")
                self._fp.update(chunk)
                done += len(chunk)
            start_writeback(self._fd, start, done - start)  # the final fsync then waits less


def fingerprint_file(path: Path) -> tuple[str, str]:
    """Return `("xxh3:<16hex>", md5_base64)` of a file, read once in 1 MiB chunks."""
    fp = Fingerprinter()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_SIZE):
            fp.update(chunk)
    return fp.xxh3, fp.md5_b64


def fingerprint_bytes(data: bytes) -> tuple[str, str]:
    """Same as `fingerprint_file` for an in-memory buffer."""
    fp = Fingerprinter()
    fp.update(data)
    return fp.xxh3, fp.md5_b64


def xxh3_fingerprint(data: bytes) -> str:
    """`xxh3:<16 lowercase hex>` of `data` (the `_SUCCESS` body minus its newline)."""
    return "xxh3:" + xxhash.xxh3_64_hexdigest(data)


def md5_bytes(value: str | None) -> bytes | None:
    """Parse an MD5 given as 32 hex chars (S3 ETag, quotes allowed) or base64 → 16 bytes.

    Returns None for anything else — notably multipart ETags (`<hex>-N`), which are not
    MD5s of the object, and empty strings (size-only parts). Callers compare MD5s only
    when both sides parse, per docs/rivet-compat.md "Manifest, verification and verdicts".
    """
    if not value or not isinstance(value, str):
        return None
    v = value.strip().strip('"')
    if _HEX32.match(v):
        return bytes.fromhex(v)
    try:
        raw = base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 16 else None


def md5_hex_to_b64(hex_digest: str | None) -> str | None:
    """Convert a hex MD5 (e.g. a plain ETag) to base64; None if it is not an MD5."""
    raw = md5_bytes(hex_digest) if hex_digest and _HEX32.match(hex_digest.strip().strip('"')) else None
    return base64.b64encode(raw).decode("ascii") if raw else None
