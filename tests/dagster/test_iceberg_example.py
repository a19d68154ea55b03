"""examples/iceberg_downstream end to end: its definitions load, the Iceberg export and the
two assets downstream of it materialize through `dagster.materialize`, and what they
report equals the SQLite source queried directly — after a second run that changed and
added orders too (`merge_on: [id]` keeps each order once, so the figures still match).
Shaped like tests/dagster/test_delta_example.py.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from rivet_core.ops.demo import ensure_demo_database
from tests.dagster.test_delta_example import _money, _source, _two_runs
from tests.helpers import REPO

EXAMPLE = REPO / "examples" / "iceberg_downstream"


def _largest(db: Path) -> list[list[Any]]:
    """The five largest orders (ties: lowest id), computed by SQLite from the source table."""
    with sqlite3.connect(db) as conn:
        amounts = [(i, _money(a)) for i, a in conn.execute("SELECT id, CAST(amount AS TEXT) FROM orders")]
    return [[i, a] for i, a in sorted(amounts, key=lambda ia: (-ia[1], ia[0]))[:5]]


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "iceberg_downstream"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("data", ".rivet*", "__pycache__"))
    monkeypatch.setenv("RIVET_DEMO_ORDERS", "400")
    # the copy's own catalog: rivet.yaml's relative sqlite:///data/catalog.db hangs off the copy
    ensure_demo_database(root / "data" / "shop.db")
    return root


def _current(root: Path) -> tuple[int, int]:
    """(current snapshot id, number of snapshots) of the table, from the example's catalog."""
    catalog = SqlCatalog("rivet", uri=f"sqlite:///{root / 'data' / 'catalog.db'}")
    try:
        table = catalog.load_table("shop.orders")
        return table.current_snapshot().snapshot_id, len(table.snapshots())
    finally:
        catalog.engine.dispose()


def test_the_example_exports_an_iceberg_table_and_its_duckdb_assets_match_the_source(
        example: Path, instance: dg.DagsterInstance) -> None:
    db = example / "data" / "shop.db"
    for run, got in _two_runs(example, instance):
        current, count = _current(example)
        assert count == 1 if run == 0 else count > 1  # the second run committed (a merge: delete + append)
        assert got["orders"]["table_snapshot_id"] == str(current)
        by_status, _ = _source(db)
        report = got["revenue_by_status"]
        assert report["iceberg_snapshot_id"] == current
        assert {s: {"orders": v["orders"], "revenue": _money(v["revenue"])} for s, v in report["by_status"].items()} \
            == by_status
        assert [[i, _money(a)] for i, a in got["largest_orders"]["largest"]] == _largest(db)
        with sqlite3.connect(db) as conn:
            assert got["largest_orders"]["orders"] == conn.execute("SELECT count(*) FROM orders").fetchone()[0]
