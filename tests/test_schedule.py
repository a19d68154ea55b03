"""tests/schedule.py: the slowest test files are handed to the xdist workers first."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.schedule import ROOT, SECONDS, slowest_files_first


@dataclass
class _Item:  # what slowest_files_first reads of a pytest.Item
    path: Path
    name: str


def test_every_file_named_in_the_timing_table_exists() -> None:
    missing = [name for name in SECONDS if not (ROOT / name).is_file()]
    assert missing == [], f"tests/schedule.py names files that do not exist (renamed?): {missing}"


def test_known_slow_files_come_first_then_files_with_more_tests_and_each_file_stays_together() -> None:
    slow, slower = sorted(SECONDS, key=SECONDS.__getitem__)[-2:]
    items = [_Item(ROOT / "tests/a_test.py", "a1"), _Item(ROOT / slow, "s1"), _Item(ROOT / "tests/b_test.py", "b1"),
             _Item(ROOT / "tests/b_test.py", "b2"), _Item(ROOT / slower, "x1"), _Item(ROOT / slow, "s2"),
             _Item(ROOT / slower, "x2")]
    slowest_files_first(items)  # type: ignore[arg-type]
    assert [i.name for i in items] == ["x1", "x2", "s1", "s2", "b1", "b2", "a1"]


def test_the_test_command_keeps_this_order() -> None:
    """xdist's default --loadscope-reorder would sort the files by test count again."""
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert "--dist loadfile --no-loadscope-reorder" in script
