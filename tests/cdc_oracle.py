"""What the CDC suites share (tests/pipeline/test_cdc_postgres.py, test_cdc_mysql.py): the
change script each test's oracle is made of, the published changes read back with pyarrow in
(`__pos`, `__seq`) order, and running `rivet`. The `__pos` text is parsed here, not with the
tool's own parser, so the order the tests check is independent of the code under test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers import manifest_table, rivet_quick

Change = tuple[str, int, str | None]


def position_order(pos: str) -> tuple[int, ...]:
    """A `__pos` as a sort key: PostgreSQL's `{"lsn": "X/Y"}` as the LSN's integer, the
    binlog's `{"file": "<base>.<n>", "pos": p}` as (n, p)."""
    fields = json.loads(pos)
    if "lsn" in fields:
        high, _, low = fields["lsn"].partition("/")
        return ((int(high, 16) << 32) | int(low, 16),)
    return int(fields["file"].rsplit(".", 1)[1]), int(fields["pos"])


def published_changes(prefix: Path) -> list[Change]:
    """(op, id, name) of every published change, in (`__pos`, `__seq`) order."""
    table = manifest_table(prefix)
    if not table.num_columns:
        return []
    rows = sorted(table.to_pylist(), key=lambda r: (position_order(r["__pos"]), r["__seq"]))
    return [(r["__op"], r["id"], r["name"]) for r in rows]


def make_changes(execute: Callable[[str], None], start: int, count: int, now: str) -> list[Change]:
    """Insert `count` rows into `items`, update every other one, delete every third — one
    transaction per statement — and return the changes in commit order (the oracle). `now`
    is the engine's current-time expression."""
    expected: list[Change] = []
    ids = range(start, start + count)
    for i in ids:
        execute(f"INSERT INTO items VALUES ({i}, 'n{i}', {i}.25, {now})")
        expected.append(("insert", i, f"n{i}"))
    for i in ids[::2]:
        execute(f"UPDATE items SET name = 'u{i}' WHERE id = {i}")
        expected.append(("update", i, f"u{i}"))
    for i in ids[::3]:
        execute(f"DELETE FROM items WHERE id = {i}")
        expected.append(("delete", i, None))
    return expected


def run_ok(config: Path, **env: str) -> Any:
    """`rivet run -c config` that must succeed (its output in the assertion otherwise)."""
    result = rivet_quick("run", "-c", str(config), env=env or None)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def refusal(config: Path) -> str:
    """The output of a `rivet run -c config` that must fail."""
    result = rivet_quick("run", "-c", str(config))
    assert result.returncode != 0
    return result.stdout + result.stderr


def files(prefix: Path) -> list[Path]:
    """Every file under `prefix`, sorted."""
    return sorted(p for p in prefix.rglob("*") if p.is_file())


def check_each_run_publishes_exactly_once(config: Path, out: Path, changes: Callable[[int, int], list[Change]]) -> None:
    """The first run anchors the stream; each later run publishes exactly the changes made
    since the one before (`changes(start, count)` makes them and returns the oracle), and a
    run with nothing new publishes nothing twice — the same on every engine."""
    run_ok(config)
    first = changes(1, 10)
    run_ok(config)
    assert published_changes(out) == first
    run_ok(config)  # nothing new: nothing published twice
    assert published_changes(out) == first
    second = changes(100, 5)
    run_ok(config)
    assert published_changes(out) == first + second
