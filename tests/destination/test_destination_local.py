"""Local destination: staged temp + fsync + same-dir rename, head/list/read/move."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from rivet_core.destination import DestinationSpec, fingerprint_file, open_destination
from rivet_core.destination.local import LocalDestination
from rivet_core.errors import DestinationError


@pytest.fixture
def dest(tmp_path: Path) -> LocalDestination:
    d = open_destination(DestinationSpec("local", path="out/exports"), base_dir=tmp_path)
    assert isinstance(d, LocalDestination)
    return d


def test_relative_path_is_resolved_against_base_dir_and_root_is_created(tmp_path: Path, dest: LocalDestination) -> None:
    assert dest.root == tmp_path / "out" / "exports"
    assert dest.root.is_dir()
    assert dest.uri == f"file://{tmp_path}/out/exports/"
    assert dest.supports_manifest and dest.kind == "local"


def test_write_file_copies_content_and_reports_one_pass_digests(tmp_path: Path, dest: LocalDestination) -> None:
    src = tmp_path / "staged.parquet"
    src.write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    res = dest.write_file(src, "sub/dir/part.parquet")
    assert (dest.root / "sub/dir/part.parquet").read_bytes() == src.read_bytes()
    assert (res.xxh3, res.md5_b64) == fingerprint_file(src)
    assert res.size == src.stat().st_size and res.key == "sub/dir/part.parquet"
    assert res.xxh3.startswith("xxh3:") and len(res.xxh3) == 21


def test_write_stages_a_dot_temp_in_the_same_directory_and_never_exposes_a_partial_file(
    tmp_path: Path, dest: LocalDestination, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While bytes are being written, the final name does not exist; the temp sits beside it."""
    seen: list[tuple[list[str], bool]] = []
    real_fsync = os.fsync
    final = dest.root / "d" / "part.csv"

    def spying_fsync(fd: int) -> None:
        if final.parent.exists() and not seen:
            seen.append((sorted(os.listdir(final.parent)), final.exists()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spying_fsync)
    dest.write_bytes(b"a,b\n1,2\n", "d/part.csv")
    (names, final_existed), = seen
    assert final_existed is False
    assert len(names) == 1 and names[0].startswith(".part.csv.") and names[0].endswith(".tmp")
    assert names[0].startswith(f".part.csv.{os.getpid()}.")
    assert sorted(os.listdir(final.parent)) == ["part.csv"]  # temp renamed away
    assert final.read_bytes() == b"a,b\n1,2\n"


def test_a_failed_write_leaves_the_previous_object_intact_and_no_temp(
    tmp_path: Path, dest: LocalDestination, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest.write_bytes(b"old", "m.json")

    def failing_replace(src: str, dst: str) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(DestinationError, match="writing 'm.json'"):
        dest.write_bytes(b"new", "m.json")
    monkeypatch.undo()
    assert (dest.root / "m.json").read_bytes() == b"old"
    assert os.listdir(dest.root) == ["m.json"]


def test_overwrite_replaces_the_whole_object(dest: LocalDestination) -> None:
    dest.write_bytes(b"x" * 100, "a")
    dest.write_bytes(b"y", "a")
    assert dest.read_bytes("a") == b"y"


def test_head_returns_size_and_none_for_missing_or_directory(dest: LocalDestination) -> None:
    dest.write_bytes(b"12345", "dir/a.bin")
    info = dest.head("dir/a.bin")
    assert info is not None and info.size == 5 and info.md5_b64 is None and info.key == "dir/a.bin"
    assert dest.head("dir/missing") is None
    assert dest.head("dir") is None
    assert dest.head("dir/a.bin/deeper") is None


def test_list_is_recursive_sorted_relative_and_filters_by_string_prefix(dest: LocalDestination) -> None:
    for key in ["b.parquet", "a/x.csv", "a/y/z.csv", "ab.csv", "_quarantine/r/q"]:
        dest.write_bytes(key.encode(), key)
    assert [o.key for o in dest.list()] == ["_quarantine/r/q", "a/x.csv", "a/y/z.csv", "ab.csv", "b.parquet"]
    assert [o.key for o in dest.list("a")] == ["a/x.csv", "a/y/z.csv", "ab.csv"]
    assert [o.key for o in dest.list("a/")] == ["a/x.csv", "a/y/z.csv"]
    assert [o.key for o in dest.list("a/y/")] == ["a/y/z.csv"]
    assert dest.list("nothing/") == []
    assert {o.key: o.size for o in dest.list("b")} == {"b.parquet": len("b.parquet")}


def test_list_does_not_follow_symlinks_out_of_the_root(tmp_path: Path, dest: LocalDestination) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"s")
    os.symlink(outside, dest.root / "link")
    os.symlink(outside / "secret", dest.root / "filelink")
    assert dest.list() == []


def test_writes_through_a_symlinked_directory_are_refused(tmp_path: Path, dest: LocalDestination) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, dest.root / "link")
    with pytest.raises(DestinationError, match="outside the destination root"):
        dest.write_bytes(b"x", "link/evil")
    assert list(outside.iterdir()) == []


def test_read_bytes_enforces_max_bytes_before_reading(dest: LocalDestination) -> None:
    dest.write_bytes(b"x" * 100, "big")
    assert dest.read_bytes("big", max_bytes=100) == b"x" * 100
    with pytest.raises(DestinationError, match="over the 99-byte limit"):
        dest.read_bytes("big", max_bytes=99)
    with pytest.raises(DestinationError, match="does not exist"):
        dest.read_bytes("nope")


def test_move_renames_into_new_directories_and_keeps_bytes(dest: LocalDestination) -> None:
    dest.write_bytes(b"part", "p.parquet")
    dest.move("p.parquet", "_quarantine/run-1/p.parquet")
    assert dest.head("p.parquet") is None
    assert dest.read_bytes("_quarantine/run-1/p.parquet") == b"part"
    with pytest.raises(DestinationError, match="does not exist"):
        dest.move("p.parquet", "elsewhere")


def test_delete_removes_one_file_and_tolerates_a_missing_one(dest: LocalDestination) -> None:
    dest.write_bytes(b"probe", ".rivet_doctor_probe")
    dest.write_bytes(b"keep", "keep")
    dest.delete(".rivet_doctor_probe")
    dest.delete(".rivet_doctor_probe")
    assert [o.key for o in dest.list()] == ["keep"]


def test_concurrent_writers_of_the_same_key_never_collide_on_temp_names(dest: LocalDestination) -> None:
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            for _ in range(20):
                dest.write_bytes(str(i).encode() * 1000, "same")
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    body = dest.read_bytes("same")
    assert len(body) == 1000 and len(set(body)) == 1  # one writer's complete bytes
    assert [o.key for o in dest.list()] == ["same"]


def test_missing_staged_file_is_a_destination_error(tmp_path: Path, dest: LocalDestination) -> None:
    with pytest.raises(DestinationError, match="cannot read staged file"):
        dest.write_file(tmp_path / "nope", "x")


def test_unknown_kinds_and_bucketless_clouds_are_rejected_with_a_hint() -> None:
    with pytest.raises(DestinationError, match="expected local, s3, gcs, azure or stdout"):
        open_destination(DestinationSpec("ftp"))
    for kind in ("s3", "gcs", "azure"):
        with pytest.raises(DestinationError, match="requires 'bucket'"):
            open_destination(DestinationSpec(kind, allow_anonymous=True))
