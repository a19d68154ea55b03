"""Key safety (docs/rivet-compat.md "Security"): unsafe keys are rejected by every destination method."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivet_core.destination import DestinationSpec, open_destination
from rivet_core.destination.keys import check_key, normalize_prefix
from rivet_core.errors import DestinationError

UNSAFE = ["", "../x", "/abs", "a/../../b", "a/..", "..", "a\x00b", "a\\b", "a//b", "a/", "./a",
          "a/\nb", "C:/x", "x\x7f"]


@pytest.mark.parametrize("key", UNSAFE)
def test_unsafe_keys_are_rejected_not_clamped(key: str) -> None:
    with pytest.raises(DestinationError) as ei:
        check_key(key)
    assert "unsafe destination key" in str(ei.value)
    assert ei.value.transient is False


@pytest.mark.parametrize("key", ["a.parquet", "dir/sub/a.csv", "col=2024-01-01T00:00/x", ".hidden", "a..b"])
def test_plain_relative_keys_are_accepted_unchanged(key: str) -> None:
    assert check_key(key) == key


@pytest.mark.parametrize("key", ["../x", "/abs", "a/../../b", "a\x00b", "a\\b"])
def test_every_local_method_rejects_traversal_keys(tmp_path: Path, key: str) -> None:
    dest = open_destination(DestinationSpec("local", path=str(tmp_path / "root")))
    src = tmp_path / "src.bin"
    src.write_bytes(b"data")
    calls = [
        lambda: dest.write_file(src, key), lambda: dest.write_bytes(b"x", key), lambda: dest.head(key),
        lambda: dest.read_bytes(key), lambda: dest.move(key, "ok"), lambda: dest.move("ok", key),
        lambda: dest.delete(key),
    ]
    dest.write_bytes(b"ok", "ok")
    for call in calls:
        with pytest.raises(DestinationError):
            call()
    # nothing escaped the root
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root", "src.bin"]


def test_s3_prefix_is_normalised_to_a_trailing_slash_and_checked() -> None:
    assert normalize_prefix("") == ""
    assert normalize_prefix("/exports/orders") == "exports/orders/"
    assert normalize_prefix("exports/orders/") == "exports/orders/"
    with pytest.raises(DestinationError):
        normalize_prefix("exports/../../etc")


@given(st.text(max_size=40))
def test_check_key_either_returns_the_key_or_raises_destination_error(key: str) -> None:
    try:
        assert check_key(key) == key
    except DestinationError:
        return
    parts = key.split("/")
    assert ".." not in parts and not key.startswith("/") and "\\" not in key and "\x00" not in key
