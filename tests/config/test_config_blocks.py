"""Integration config blocks (rivet_core/config/blocks.py) and the neutral orchestrator run id
(rivet_core/orchestrator.py): the core names no integration, yet the `dagster:` block is
validated as before, an unknown block is a clear error, and the old spellings still work.

The `dagster:` block comes from the `rivet.config_blocks` entry point (pyproject.toml), as it
does for a user who installed the package; the "not installed" case empties the registry.
"""

from __future__ import annotations

import json
import sqlite3
import warnings
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from rivet_core.config import blocks, load_config
from rivet_core.errors import ConfigError
from tests.helpers import write_config


def _config(tmp_path: Path, **export: object) -> Path:
    db = tmp_path / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT OR REPLACE INTO t VALUES (?, ?)", [(1, "a"), (2, "b"), (3, None)])
    return write_config(tmp_path, {"type": "sqlite", "url": f"sqlite:///{db}"},
                        [{"name": "t", "table": "t", "format": "parquet",
                          "destination": {"type": "local", "path": str(tmp_path / "out")}, **export}])


def test_the_dagster_block_is_registered_by_its_package_entry_point() -> None:
    point, = [p for p in entry_points(group=blocks.ENTRY_POINT_GROUP) if p.name == "dagster"]
    assert point.value == "rivet_dagster.config_block:BLOCK"
    from rivet_dagster.config_block import BLOCK, ExportDagsterConfig

    assert point.load() is BLOCK and blocks.config_blocks()["dagster"].export_model is ExportDagsterConfig


def test_a_dagster_block_parses_into_its_model_and_keeps_its_errors(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path, dagster={"schedule": "0 3 * * *", "timezone": "Europe/Berlin"}))
    block = cfg.export("t").integration("dagster")
    assert (type(block).__module__, block.schedule, block.timezone) == (
        "rivet_dagster.config_block", "0 3 * * *", "Europe/Berlin")
    assert cfg.export("t").dagster is block and cfg.integration("dagster") is None  # no top-level block
    with pytest.raises(ConfigError) as bad:
        load_config(_config(tmp_path, dagster={"schedule": "daily", "refresh": "@weekly"}))
    assert ("invalid `schedule` at exports[0].dagster: schedule 'daily' is not a cron expression"
            in bad.value.message)
    with pytest.raises(ConfigError) as cross:  # a check that needs the export (check_export)
        load_config(_config(tmp_path, dagster={"refresh": "@weekly"}))
    assert "export 't': dagster.refresh re-exports the windows of a chunked export (mode is full)" in cross.value.message


def test_an_unknown_block_names_the_blocks_that_exist_and_how_to_get_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as bad:
        load_config(_config(tmp_path, airflow={"dag_id": "x"}))
    message = bad.value.message
    assert "unknown field `airflow` at exports[0] — not a Rivet field, and no installed integration" in message
    assert "(integration blocks: `dagster`)" in message and "rivet.config_blocks" in message
    with pytest.raises(ConfigError, match="no integration block `airflow`"):
        load_config(_config(tmp_path)).export("t").integration("airflow")


def test_without_the_integration_installed_a_dagster_block_is_refused_with_the_install_hint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocks, "_from_entry_points", {})
    monkeypatch.setattr(blocks, "_explicit", {})
    with pytest.raises(ConfigError) as bad:
        load_config(_config(tmp_path, dagster={"schedule": "0 3 * * *"}))
    assert "no installed integration provides a `dagster:` block (integration blocks: none)" in bad.value.message
    assert "pip install rivet-dagster" in bad.value.message


def test_the_block_models_keep_their_old_import_paths_with_a_deprecation_warning() -> None:
    from rivet_dagster.config_block import DagsterDefaults, ExportDagsterConfig

    with pytest.warns(DeprecationWarning, match="import it from rivet_dagster.config_block"):
        from rivet_core.api import ExportDagsterConfig as old
    assert old is ExportDagsterConfig
    with pytest.warns(DeprecationWarning):
        from rivet_core.config import DagsterDefaults as old_defaults
    assert old_defaults is DagsterDefaults
    with pytest.raises(ImportError):
        from rivet_core.api import NoSuchModel  # noqa: F401


def test_rivet_init_writes_the_installed_integrations_blocks() -> None:
    from rivet_dagster.config_block import scaffold_defaults, scaffold_export

    assert scaffold_defaults("shop-eu") == [
        "dagster:", "  group: shop_eu   # schedules below stay STOPPED until schedule_status: RUNNING"]
    assert scaffold_export("'0 3 * * *'") == ["dagster:", "  schedule: '0 3 * * *'"]


def test_the_old_run_id_keyword_still_runs_an_export_and_lands_in_the_neutral_fields(tmp_path: Path) -> None:
    from rivet_core import api

    cfg = load_config(_config(tmp_path))
    with pytest.warns(DeprecationWarning, match=r"run_export\(\): `dagster_run_id=` is deprecated"):
        summary = api.run_export(cfg, "t", dagster_run_id="dg-42")
    assert summary.status == "success" and (summary.orchestrator, summary.orchestrator_run_id) == ("Dagster", "dg-42")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_bytes())
    assert (manifest["orchestrator"], manifest["orchestrator_run_id"]) == ("Dagster", "dg-42")
    # the old key too, for one release (docs/manifest.md "Deprecated keys"), with the same id
    assert manifest["dagster_run_id"] == "dg-42"
    with pytest.warns(DeprecationWarning, match="RunSummary.dagster_run_id is deprecated"):
        assert summary.dagster_run_id == "dg-42"  # the old attribute still reads
    with pytest.raises(AttributeError):
        summary.no_such_field  # noqa: B018
    with pytest.warns(DeprecationWarning):
        options = api.RunOptions(dagster_run_id="dg-43")
    assert (options.orchestrator, options.orchestrator_run_id) == ("Dagster", "dg-43")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names warn about nothing
        assert api.RunOptions(orchestrator_run_id="x", orchestrator="Airflow").orchestrator == "Airflow"
    with pytest.raises(TypeError, match="two run ids"):
        api.RunOptions(dagster_run_id="a", orchestrator_run_id="b")
