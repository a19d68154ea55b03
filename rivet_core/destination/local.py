"""Local-directory destination: staged temp + fsync + same-dir rename (M7, I2).

Write protocol for every object (docs/rivet-compat.md "Security"; docs/invariants.md M7):
  1. create `.<name>.<pid>.<seq>.tmp` in the SAME directory as the final key with
     O_CREAT|O_EXCL|O_NOFOLLOW (never follows or reuses a planted file/symlink);
  2. copy the bytes in, hashing them in the same pass; fsync the file;
  3. `os.replace` onto the final name (atomic on POSIX within one filesystem);
  4. fsync the directory so the rename itself survives a power cut.
A crash leaves at most a stray dot-temp, which verification reports as an untracked
object (advisory) and never as a part.

Publishing a staged part (`write_file` with the writer's fingerprint) skips the copy when
the staging directory is on the destination's filesystem: steps 1–2 become a hard link of
the staged file (already fsynced by its writer, I1) to the dot-temp name, and the result is
the fingerprint the writer measured while writing — no second write, no re-read. That is
safe because nothing ever writes into an existing file: writers create a new inode for
every staged file, and every destination write is a temp + rename. A link that fails
(another filesystem, no hard links, link limit, permissions) falls back to the copy, which
re-hashes and refuses bytes that differ from the writer's fingerprint.

Keys are checked by `keys.check_key`; additionally the resolved parent directory must
stay inside the root, so a symlinked sub-directory cannot redirect writes elsewhere.
The root directory is created on open.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from rivet_core.destination.base import Destination, ObjectInfo, WriteResult
from rivet_core.destination.checksums import CHUNK_SIZE, Fingerprint, Fingerprinter, check_staged
from rivet_core.destination.errors import destination_error
from rivet_core.destination.keys import check_key, check_list_prefix

_seq = itertools.count()
_seq_lock = threading.Lock()


def _next_seq() -> int:
    with _seq_lock:
        return next(_seq)


def _fsync_dir(path: Path) -> None:
    """fsync a directory so a rename/creation inside it is durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalDestination(Destination):
    """Objects are files under `root`; keys map to `root/<key>`."""

    kind = "local"
    supports_manifest = True

    def __init__(self, root: Path, *, create: bool = True) -> None:
        """`create=False` (read-only inspection: `rivet validate`, an adapter's checks) never creates
        the directory: a missing one reads as an empty prefix."""
        self.root = Path(os.path.abspath(root))
        try:
            if create:
                self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise destination_error(
                f"cannot create local destination directory '{self.root}': {exc.strerror or exc} "
                f"— fix destination.path or the directory permissions"
            ) from exc
        self._real_root = os.path.realpath(self.root)
        # Raw path, not percent-encoded: Rivet writes `file://<path>` (docs/rivet-compat.md "Manifest, verification and verdicts").
        self.uri = "file://" + str(self.root).rstrip("/") + "/"

    # -- helpers ---------------------------------------------------------------------
    def _path(self, key: str) -> Path:
        return self.root.joinpath(*check_key(key).split("/"))

    def _ensure_parent(self, path: Path, key: str) -> None:
        """Create the parent directories and refuse a parent that resolves outside root."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise destination_error(
                f"cannot create directory for '{key}' under '{self.root}': {exc.strerror or exc}"
            ) from exc
        real_parent = os.path.realpath(path.parent)
        if real_parent != self._real_root and not real_parent.startswith(self._real_root + os.sep):
            raise destination_error(
                f"unsafe destination key {key!r}: its directory resolves outside the destination "
                f"root '{self.root}' (symlink) — remove the symlink"
            )

    @staticmethod
    def _new_temp(final: Path, create: Callable[[Path], int | None]) -> tuple[int | None, Path]:
        """Run `create(tmp)` on fresh dot-temp names next to `final` until one is free."""
        for _ in range(100):
            tmp = final.with_name(f".{final.name}.{os.getpid()}.{_next_seq()}.tmp")
            try:
                return create(tmp), tmp
            except FileExistsError:
                continue
        raise destination_error(f"cannot create a staging file next to '{final}' (name collisions)")

    def _open_temp(self, final: Path) -> tuple[int, Path]:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        flags |= getattr(os, "O_CLOEXEC", 0)
        try:
            try:
                fd, tmp = self._new_temp(final, lambda tmp: os.open(tmp, flags, 0o644))
            except FileNotFoundError:  # a move or delete pruned the emptied directory meanwhile
                self._ensure_parent(final, final.name)
                fd, tmp = self._new_temp(final, lambda tmp: os.open(tmp, flags, 0o644))
        except OSError as exc:
            raise destination_error(
                f"cannot create a staging file next to '{final}': {exc.strerror or exc}"
            ) from exc
        assert fd is not None
        return fd, tmp

    def _link_temp(self, source: Path, final: Path) -> Path | None:
        """Hard-link `source` to a fresh dot-temp next to `final`; None when that fails
        for any reason — the caller copies instead, and a copy that cannot work either
        (read-only or full filesystem, permissions) reports the problem with its fix."""
        try:
            return self._new_temp(final, lambda tmp: os.link(source, tmp, follow_symlinks=False))[1]
        except OSError:
            return None

    def _atomic_write(self, key: str, fill: Callable[[int, Fingerprinter], None],
                      linked_from: tuple[Path, Fingerprint] | None = None) -> WriteResult:
        """Steps 1–4 of the module docstring; `linked_from` = (staged file, its writer's
        fingerprint) tries the hard-link publish first."""
        final = self._path(key)
        self._ensure_parent(final, key)
        fp = Fingerprinter()
        tmp: Path | None = None
        try:
            if linked_from is not None:
                tmp = self._link_temp(linked_from[0], final)
            if tmp is not None:
                assert linked_from is not None
                result = linked_from[1]
                st = os.stat(tmp, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode) or st.st_size != result.size:
                    raise OSError(errno.EIO, f"staged file '{linked_from[0]}' is no longer the "
                                             f"{result.size}-byte file its writer finished; re-run the export")
            else:
                fd, tmp = self._open_temp(final)
                try:
                    fill(fd, fp)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                result = fp.result()
                if linked_from is not None:
                    check_staged(result, linked_from[1], f"'{linked_from[0]}'")
            os.replace(tmp, final)
            _fsync_dir(final.parent)
        except BaseException as exc:
            # Never leave our own temp behind (a crash can; then it shows up as untracked),
            # nor a directory created for it that nothing else uses.
            if tmp is not None:
                with contextlib.suppress(OSError):
                    tmp.unlink()
            self._prune_empty(final.parent)
            if isinstance(exc, OSError):
                transient = exc.errno in (errno.EINTR, errno.EAGAIN)
                hint = (" — free space on that filesystem (or raise its quota) or point "
                        "destination.path at a larger one, then re-run: nothing was recorded for "
                        "this part") if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
                raise destination_error(
                    f"writing '{key}' to '{self.root}' failed: {exc.strerror or exc}{hint}",
                    transient=transient,
                ) from exc
            raise
        return WriteResult(key=key, size=result.size, md5_b64=result.md5_b64, xxh3=result.xxh3)

    # -- Destination API -------------------------------------------------------------
    def write_file(self, local_path: Path, key: str, staged: Fingerprint | None = None) -> WriteResult:
        check_key(key)
        try:
            src = open(local_path, "rb")  # noqa: SIM115 - closed in finally below
        except OSError as exc:
            raise destination_error(f"cannot read staged file '{local_path}' for '{key}': {exc}") from exc

        def fill(fd: int, fp: Fingerprinter) -> None:
            while chunk := src.read(CHUNK_SIZE):
                fp.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]

        try:
            return self._atomic_write(key, fill, (local_path, staged) if staged is not None else None)
        finally:
            src.close()

    def write_bytes(self, data: bytes, key: str) -> WriteResult:
        def fill(fd: int, fp: Fingerprinter) -> None:
            fp.update(data)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]

        return self._atomic_write(key, fill)

    def head(self, key: str) -> ObjectInfo | None:
        path = self._path(key)
        try:
            st = os.stat(path, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise destination_error(f"cannot stat '{key}' under '{self.root}': {exc.strerror or exc}") from exc
        if not stat.S_ISREG(st.st_mode):
            return None
        return ObjectInfo(key=key, size=st.st_size)

    def not_an_object(self, key: str) -> str | None:
        try:
            st = os.stat(self._path(key), follow_symlinks=False)
        except OSError:
            return None
        if stat.S_ISREG(st.st_mode):
            return None
        return ("a directory" if stat.S_ISDIR(st.st_mode) else
                "a symbolic link (never followed)" if stat.S_ISLNK(st.st_mode) else "not a regular file")

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        check_list_prefix(prefix)
        # Start the walk at the deepest directory the prefix names; filter by string prefix
        # like S3 does (prefix "a/b" matches "a/b.parquet" and "a/bc/x").
        dir_part = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = self.root.joinpath(*dir_part.split("/")) if dir_part else self.root
        out: list[ObjectInfo] = []
        stack = [(start, dir_part)]
        while stack:
            directory, rel = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                raise destination_error(f"cannot list '{directory}': {exc.strerror or exc}") from exc
            for entry in entries:
                key = f"{rel}/{entry.name}" if rel else entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if key.startswith(prefix) or prefix.startswith(key + "/"):
                            stack.append((Path(entry.path), key))
                    elif entry.is_file(follow_symlinks=False) and key.startswith(prefix):
                        out.append(ObjectInfo(key=key, size=entry.stat(follow_symlinks=False).st_size))
                except FileNotFoundError:
                    continue  # removed while listing
        out.sort(key=lambda o: o.key)
        return out

    def read_bytes(self, key: str, max_bytes: int | None = None) -> bytes:
        info = self.head(key)
        if info is None:
            raise destination_error(f"'{key}' does not exist under '{self.root}'")
        if max_bytes is not None and info.size > max_bytes:
            raise destination_error(
                f"'{key}' is {info.size} bytes, over the {max_bytes}-byte limit for this file — refusing to read it"
            )
        try:
            with open(self._path(key), "rb") as fh:
                data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
        except OSError as exc:
            raise destination_error(f"cannot read '{key}' under '{self.root}': {exc.strerror or exc}") from exc
        if max_bytes is not None and len(data) > max_bytes:
            raise destination_error(f"'{key}' grew past the {max_bytes}-byte limit while being read")
        return data

    def move(self, src_key: str, dst_key: str) -> None:
        src, dst = self._path(src_key), self._path(dst_key)
        if self.head(src_key) is None:
            raise destination_error(f"cannot move '{src_key}': it does not exist under '{self.root}'")
        self._ensure_parent(dst, dst_key)
        try:
            os.replace(src, dst)
            _fsync_dir(dst.parent)
            if dst.parent != src.parent:
                _fsync_dir(src.parent)
        except OSError as exc:
            raise destination_error(f"cannot move '{src_key}' to '{dst_key}': {exc.strerror or exc}") from exc
        self._prune_empty(src.parent)

    def _prune_empty(self, directory: Path) -> None:
        """Remove `directory` and its parents below the root while they are empty: a key space
        has no folders of its own, so `data/` or `_quarantine/gc/<stamp>/` go with their last
        object, as they do on S3."""
        while directory != self.root and self.root in directory.parents:
            try:
                directory.rmdir()
            except OSError:
                return  # not empty (or not ours to remove): stop climbing
            directory = directory.parent

    def delete(self, key: str) -> None:
        """Delete one file (see `Destination.delete`). Missing is fine. Directories left empty
        below the root go too (`_prune_empty`)."""
        path = self._path(key)
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise destination_error(f"cannot delete '{key}' under '{self.root}': {exc.strerror or exc}") from exc
        self._prune_empty(path.parent)
