"""Stdout destination (streaming mode): bytes go to `sys.stdout.buffer`, nothing else.

There is no key space, so no manifest, no `_SUCCESS` and no verification
(`supports_manifest = False`, docs/rivet-compat.md "File names and run ids"); `head`/`list`/`read_bytes`/`move`/`delete`
raise `DestinationError("stdout destination cannot …")`. `write_file` streams the part in
bounded chunks and still returns its size and digests (for the run summary).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import BinaryIO, NoReturn

from rivet_core.destination.base import Destination, ObjectInfo, WriteResult, open_staged
from rivet_core.destination.checksums import CHUNK_SIZE, Fingerprint, Fingerprinter, check_staged
from rivet_core.destination.errors import destination_error
from rivet_core.destination.keys import check_key


class StdoutDestination(Destination):
    kind = "stdout"
    uri = "stdout"
    supports_manifest = False

    def __init__(self, stream: BinaryIO | None = None) -> None:
        self._stream = stream  # None = whatever sys.stdout.buffer is at write time

    def _out(self) -> BinaryIO:
        if self._stream is not None:
            return self._stream
        sys.stdout.flush()  # keep any text already printed ahead of our bytes
        return sys.stdout.buffer

    def _write(self, chunks, key: str) -> WriteResult:  # noqa: ANN001 - iterable of bytes
        out = self._out()
        fp = Fingerprinter()
        try:
            for chunk in chunks:
                fp.update(chunk)
                out.write(chunk)
            out.flush()
        except BrokenPipeError as exc:
            raise destination_error(f"stdout was closed while writing '{key}' (broken pipe)") from exc
        except OSError as exc:
            raise destination_error(f"writing '{key}' to stdout failed: {exc}") from exc
        return WriteResult(key=key, size=fp.size, md5_b64=fp.md5_b64, xxh3=fp.xxh3)

    def write_file(self, local_path: Path, key: str, staged: Fingerprint | None = None) -> WriteResult:
        check_key(key)
        fh = open_staged(local_path, key)  # closed in finally
        try:
            result = self._write(iter(lambda: fh.read(CHUNK_SIZE), b""), key)
        finally:
            fh.close()
        try:  # too late to hold the bytes back, but the run must not record them as good
            check_staged(Fingerprint(result.size, result.xxh3, result.md5_b64), staged, f"'{local_path}'")
        except OSError as exc:
            raise destination_error(f"writing '{key}' to stdout: {exc}") from exc
        return result

    def write_bytes(self, data: bytes, key: str) -> WriteResult:
        check_key(key)
        return self._write([bytes(data)], key)

    def _cannot(self, what: str) -> NoReturn:
        raise destination_error(
            f"stdout destination cannot {what} — it only streams bytes; use a local or s3 destination"
        )

    def head(self, key: str) -> ObjectInfo | None:
        self._cannot("look up objects")

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        self._cannot("list objects")

    def read_bytes(self, key: str, max_bytes: int | None = None) -> bytes:
        self._cannot("read objects back")

    def move(self, src_key: str, dst_key: str) -> None:
        self._cannot("move objects")

    def delete(self, key: str) -> None:
        self._cannot("delete objects")
