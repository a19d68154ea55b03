"""A failing quality gate: the run fails, nothing new reaches the destination, and the
quality checks carry the observed numbers and the thresholds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from rivet_dagster import build_definitions
from tests.dagster.support import (
    ROWS,
    Target,
    check_evaluations,
    export_block,
    id_amounts,
    orders_config,
    run_job,
    source_rows,
)
from tests.helpers import cursor_of, db_exec


def config_with(target: Target, url: str, mode: str, quality: dict[str, Any]) -> Path:
    name = f"orders_{mode}"
    return orders_config(target.tmp, url, [export_block(name, mode, target.destination(name), quality=quality)])


@pytest.mark.parametrize("mode", ["full", "incremental"])
def test_a_failing_quality_gate_fails_the_run_publishes_nothing_and_reports_the_numbers(
        orders_pg: str, target: Target, instance: dg.DagsterInstance, mode: str) -> None:
    name = f"orders_{mode}"
    view = target.view(name)
    defs = build_definitions(config_with(target, orders_pg, mode, {"row_count_min": 1}))
    assert run_job(defs, f"{name}_job", instance).success
    before = view.keys()
    cursor_before = cursor_of(target.tmp / "rivet.yaml", name)
    db_exec(orders_pg, "INSERT INTO orders VALUES (9000, 'x', 1, NULL, '2026-05-01', '2026-05-01')")

    strict = {"row_count_min": 1_000_000, "null_ratio_max": {"note": 0.1}, "unique_columns": ["id"]}
    defs = build_definitions(config_with(target, orders_pg, mode, strict))
    result = run_job(defs, f"{name}_job", instance)

    assert not result.success
    assert not result.get_asset_materialization_events()
    assert view.keys() == before, "a failed quality gate changed the destination"
    assert cursor_of(target.tmp / "rivet.yaml", name) == cursor_before

    checks = check_evaluations(result)
    delivered = 1 if mode == "incremental" else ROWS + 1  # what this run extracted
    rows = checks["quality_row_count_min"]
    assert not rows.passed and rows.severity == dg.AssetCheckSeverity.ERROR
    assert rows.metadata["observed"].value == delivered
    assert rows.metadata["threshold"].value == 1_000_000
    nulls = checks["quality_null_ratio_note"]
    assert not nulls.passed and nulls.severity == dg.AssetCheckSeverity.ERROR
    with_null = db_exec(orders_pg, "SELECT count(*) FILTER (WHERE note IS NULL) FROM orders"
                        + (" WHERE id = 9000" if mode == "incremental" else ""))[0][0]
    assert nulls.metadata["observed"].value == pytest.approx(with_null / delivered, abs=1e-3)
    assert nulls.metadata["threshold"].value == pytest.approx(0.1)
    assert checks["quality_unique_id"].passed  # a gate that holds says so
    assert "manifest_verified" not in checks  # skipped: the asset step failed

    # Relaxed again, the next run delivers what the failed one held back.
    defs = build_definitions(config_with(target, orders_pg, mode, {"row_count_min": 1}))
    result = run_job(defs, f"{name}_job", instance)
    assert result.success
    current = id_amounts(view.parts_table([view.current_manifest()]))
    expected = source_rows(orders_pg, "id = 9000" if mode == "incremental" else "TRUE")
    assert current == expected
