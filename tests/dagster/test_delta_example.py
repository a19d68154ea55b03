"""examples/delta_downstream end to end: its definitions load, the Delta export and the two
DuckDB assets downstream of it materialize through `dagster.materialize`, and what they
report equals the SQLite source queried directly — after a second run that changed and
added orders too (the MERGE keeps each order once, so the figures still match).
"""

from __future__ import annotations

import importlib.util
import shutil
import sqlite3
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from deltalake import DeltaTable

from rivet_core.ops.demo import ensure_demo_database
from tests.helpers import REPO

EXAMPLE = REPO / "examples" / "delta_downstream"


def _load_defs(root: Path) -> dg.Definitions:
    spec = importlib.util.spec_from_file_location("delta_downstream_example", root / "definitions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.defs  # type: ignore[no-any-return]


def _materialized(result: dg.ExecuteInProcessResult) -> dict[str, dict[str, Any]]:
    return {e.asset_key.to_user_string(): {k: v.value for k, v in e.materialization.metadata.items()}
            for e in result.get_asset_materialization_events()}


def _money(value: Any) -> Decimal:
    return Decimal(str(value)).quantize(Decimal("0.01"))


def _source(db: Path) -> tuple[dict[str, dict[str, Any]], list[list[Any]]]:
    """By status and the top five customers, computed by SQLite from the source table."""
    with sqlite3.connect(db) as conn:
        by_status = {s: {"orders": n, "revenue": _money(r)} for s, n, r in conn.execute(
            "SELECT status, count(*), sum(CAST(amount AS TEXT)) FROM orders GROUP BY status")}
        amounts: dict[int, Decimal] = {}
        for customer, amount in conn.execute("SELECT customer_id, CAST(amount AS TEXT) FROM orders"):
            amounts[customer] = amounts.get(customer, Decimal(0)) + _money(amount)
    top = sorted(amounts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    return by_status, [[c, r] for c, r in top]


def _change_orders(db: Path) -> None:
    """Between the example's two runs: two orders change, three arrive."""
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE orders SET amount = 9999.99, status = 'refunded', "
                     "updated_at = '2099-01-01 00:00:00' WHERE id IN (1, 2)")
        conn.execute("INSERT INTO orders (id, customer_id, status, amount, created_at, updated_at) "
                     "SELECT id + 100000, customer_id, 'new', amount, created_at, '2099-01-02 00:00:00' "
                     "FROM orders WHERE id <= 3")


def _materialize_all(defs: dg.Definitions, instance: dg.DagsterInstance) -> dict[str, dict[str, Any]]:
    """Every asset of the example, in-process; each one's materialization metadata."""
    result = dg.materialize(list(defs.assets or []), resources=defs.resources, instance=instance,  # type: ignore[arg-type]
                            raise_on_error=False)
    assert result.success, [str(getattr(e.event_specific_data, "error", None) or e.message)
                            for e in result.all_events if e.is_failure]
    return _materialized(result)


def _two_runs(example: Path, instance: dg.DagsterInstance) -> Iterator[tuple[int, dict[str, dict[str, Any]]]]:
    """(0, metadata) of a first materialization of every asset, then (1, metadata) of a
    second one after `_change_orders`."""
    defs = _load_defs(example)
    yield 0, _materialize_all(defs, instance)
    _change_orders(example / "data" / "shop.db")
    yield 1, _materialize_all(defs, instance)


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "delta_downstream"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("data", ".rivet*", "__pycache__"))
    monkeypatch.setenv("RIVET_DEMO_ORDERS", "400")
    ensure_demo_database(root / "data" / "shop.db")
    return root


def test_the_example_exports_a_delta_table_and_its_duckdb_assets_match_the_source(
        example: Path, instance: dg.DagsterInstance) -> None:
    db = example / "data" / "shop.db"
    for version, got in _two_runs(example, instance):
        assert DeltaTable(str(example / "data" / "lake" / "orders")).version() == version
        assert got["orders"]["table_version"] == version
        by_status, top = _source(db)
        report = got["revenue_by_status"]
        assert report["delta_version"] == version
        assert {s: {"orders": v["orders"], "revenue": _money(v["revenue"])} for s, v in report["by_status"].items()} \
            == by_status
        assert [[c, _money(r)] for c, r in got["top_customers"]["top"]] == top
        with sqlite3.connect(db) as conn:
            assert got["top_customers"]["orders"] == conn.execute("SELECT count(*) FROM orders").fetchone()[0]
