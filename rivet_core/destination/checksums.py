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
import re
from pathlib import Path

import xxhash

CHUNK_SIZE = 1024 * 1024

_HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")


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
    when both sides parse, per reference §3.5 step 3.
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
