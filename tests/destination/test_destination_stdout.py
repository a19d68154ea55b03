"""Stdout destination: streams bytes, keeps no key space and no manifest."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from rivet_core.destination import DestinationSpec, fingerprint_file, open_destination
from rivet_core.destination.checksums import Fingerprint
from rivet_core.destination.stdout import StdoutDestination
from rivet_core.errors import DestinationError


def test_write_file_streams_the_bytes_to_stdout(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    src = tmp_path / "part.csv"
    src.write_bytes(os.urandom(2 * 1024 * 1024 + 3))
    dest = open_destination(DestinationSpec("stdout"))
    res = dest.write_file(src, "part.csv")
    assert capsysbinary.readouterr().out == src.read_bytes()
    assert (res.xxh3, res.md5_b64) == fingerprint_file(src) and res.size == src.stat().st_size
    assert dest.uri == "stdout" and dest.supports_manifest is False


@pytest.mark.parametrize("op", ["head", "list", "read_bytes", "move", "delete"])
def test_key_space_operations_raise_a_clear_error(op: str) -> None:
    dest = StdoutDestination(stream=io.BytesIO())
    args = {"head": ("k",), "list": (), "read_bytes": ("k",), "move": ("a", "b"), "delete": ("k",)}[op]
    with pytest.raises(DestinationError, match="stdout destination cannot"):
        getattr(dest, op)(*args)


def test_write_manifest_files_refuses_stdout() -> None:
    from rivet_core.manifest import Manifest
    from rivet_core.manifest.artifacts import write_manifest_files

    manifest = Manifest(
        run_id="r", export_name="e", started_at="t0", finished_at="t1", status="success",
        source={"engine": "postgres", "schema": "public", "table": "e"},
        destination={"kind": "stdout", "uri": "stdout"}, format="csv",
        schema_fingerprint="xxh3:0000000000000000", row_count=0, part_count=0,
    )
    stream = io.BytesIO()
    with pytest.raises(DestinationError, match="cannot hold a manifest"):
        write_manifest_files(StdoutDestination(stream=stream), manifest)
    assert stream.getvalue() == b""


def test_a_staged_file_that_changed_after_finalize_fails_the_write(
        tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    src = tmp_path / "part.csv"
    src.write_bytes(b"id\n1\n2\n")
    stale = Fingerprint(size=7, xxh3="xxh3:0000000000000000", md5_b64="AAAAAAAAAAAAAAAAAAAAAA==")
    dest = open_destination(DestinationSpec("stdout"))
    with pytest.raises(DestinationError, match="changed after it was written"):
        dest.write_file(src, "part.csv", stale)
