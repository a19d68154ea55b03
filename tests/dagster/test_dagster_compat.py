"""Dagster's privates behind rivet_dagster/dagster_compat.py, checked against the pinned Dagster.

Each name rivet takes from `dagster._…` is imported from the module the compatibility module
says it lives in, and the behaviour rivet relies on is exercised with real Dagster (an
ephemeral instance, a real run). A failure names the installed Dagster version and the
symbol, so a Dagster upgrade that moved one says which line of dagster_compat.py to revisit.
"""

from __future__ import annotations

import ast
import importlib
import re
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from rivet_dagster import dagster_compat as compat
from rivet_dagster.executors import IN_PROCESS_FIRST
from tests.helpers import REPO

DAGSTER = f"Dagster {dg.__version__}"


def moved(symbol: str, what: str) -> str:
    """The failure message: the installed Dagster, the symbol, and where to fix it."""
    return (f"{DAGSTER}: {symbol} {what} — rivet relies on it (rivet_dagster/dagster_compat.py); "
            "find its new home or the public alternative named there and update that module")


def private_imports(path: Path) -> list[str]:
    """The `dagster._…` modules `path` imports (any form of import statement)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dagster._"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("dagster._")]
    return found


def test_only_the_compatibility_module_imports_dagster_privates() -> None:
    offenders = {str(p.relative_to(REPO)): mods for p in sorted((REPO / "rivet_dagster").rglob("*.py"))
                 if p.name != "dagster_compat.py" and (mods := private_imports(p))}
    assert offenders == {}, ("import these through rivet_dagster/dagster_compat.py (one commented line "
                             f"each): {offenders}")


def test_the_compatibility_module_was_checked_with_the_dagster_the_lock_pins() -> None:
    lock = (REPO / "requirements.lock").read_text()
    pinned = re.search(r"^dagster==(\S+)$", lock, re.MULTILINE)
    assert pinned is not None, "requirements.lock pins no dagster==…"
    assert pinned[1] == dg.__version__, f"{DAGSTER} installed, requirements.lock pins {pinned[1]}: bootstrap again"
    assert compat.CHECKED_WITH_DAGSTER == pinned[1], (
        f"requirements.lock pins Dagster {pinned[1]}, rivet_dagster/dagster_compat.py was checked with "
        f"{compat.CHECKED_WITH_DAGSTER}: run this test file, fix what it names, then set CHECKED_WITH_DAGSTER")


@pytest.mark.parametrize("symbol", sorted(compat.PRIVATE_HOMES))
def test_each_private_name_is_where_the_pinned_dagster_keeps_it(symbol: str) -> None:
    home = compat.PRIVATE_HOMES[symbol]
    try:
        module = importlib.import_module(home)
    except ImportError as exc:
        pytest.fail(moved(f"{home}.{symbol}", f"cannot be imported: the module is gone ({exc})"))
    assert hasattr(module, symbol), moved(f"{home}.{symbol}", "is no longer defined in that module")
    assert getattr(module, symbol) is getattr(compat, symbol), moved(symbol, f"differs from {home}'s")


def test_in_process_first_takes_the_run_config_of_dagsters_default_executor_and_defaults_to_in_process() -> None:
    @dg.op
    def noop() -> None:
        return None

    def graph() -> None:
        noop()

    ours = dg.job(executor_def=IN_PROCESS_FIRST, name="ours")(graph)
    theirs = dg.job(executor_def=dg.multi_or_in_process_executor, name="theirs")(graph)
    for mode in ({"in_process": {"retries": {"disabled": {}}}},
                 {"multiprocess": {"max_concurrent": 2, "retries": {"enabled": {}}}}):
        for job in (ours, theirs):
            resolved = dg.validate_run_config(job, {"execution": {"config": mode}})["execution"]
            assert resolved == {dg.multi_or_in_process_executor.name: mode}, moved("IN_PROC_CONFIG/MULTI_PROC_CONFIG",
                                                                  f"no longer match {mode} on {job.name}")
    default = dg.validate_run_config(ours, {})["execution"]
    assert list(default[dg.multi_or_in_process_executor.name]) == ["in_process"], \
        moved("IN_PROC_CONFIG", f"is not the default mode: {default}")


def test_the_implicit_asset_job_name_is_the_job_a_code_location_with_assets_gets() -> None:
    @dg.asset
    def one() -> None:
        return None

    job = dg.Definitions(assets=[one]).resolve_implicit_global_asset_job_def()
    assert job.name == compat.IMPLICIT_ASSET_JOB_NAME, moved("IMPLICIT_ASSET_JOB_NAME", f"is not {job.name!r}")


def test_a_failed_check_execution_has_the_failed_record_status() -> None:
    @dg.asset(check_specs=[dg.AssetCheckSpec("reconcile", asset="counted")])
    def counted():  # Dagster reads the return annotation; a generator of results
        yield dg.Output(None)
        yield dg.AssetCheckResult(check_name="reconcile", passed=False)

    key = dg.AssetCheckKey(dg.AssetKey("counted"), "reconcile")
    with dg.DagsterInstance.ephemeral() as instance:
        assert dg.materialize([counted], instance=instance).success
        record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key]).get(key)
    assert record is not None, moved("get_latest_asset_check_execution_by_key", "returned no record")
    assert record.status == compat.AssetCheckExecutionRecordStatus.FAILED, \
        moved("AssetCheckExecutionRecordStatus.FAILED", f"is not the status of a failed check ({record.status})")


def test_the_cron_helpers_read_a_cron_string_and_its_last_tick_in_a_time_zone() -> None:
    assert compat.is_valid_cron_string("0 2 * * 0"), moved("is_valid_cron_string", "refuses '0 2 * * 0'")
    assert not compat.is_valid_cron_string("61 * * * *"), moved("is_valid_cron_string", "accepts '61 * * * *'")
    now = datetime(2026, 12, 7, 3, 30, tzinfo=UTC)
    assert compat.get_latest_completed_cron_tick("0 2 * * *", now, "UTC") == datetime(2026, 12, 7, 2, tzinfo=UTC), \
        moved("get_latest_completed_cron_tick", "gives another tick in UTC")
    berlin = compat.get_latest_completed_cron_tick("0 2 * * *", now, "Europe/Berlin")
    assert berlin.timestamp() == datetime(2026, 12, 7, 1, tzinfo=UTC).timestamp(), \
        moved("get_latest_completed_cron_tick", f"ignores the time zone ({berlin})")


def test_an_interrupt_is_not_an_exception_so_an_export_boundary_does_not_swallow_a_terminate() -> None:
    """multi_asset.py's per-export boundary catches `Exception`: a terminate must pass through it
    to `stops_on_terminate` (termination.py)."""
    interrupt = compat.DagsterExecutionInterruptedError
    assert interrupt is importlib.import_module("dagster._core.errors").DagsterExecutionInterruptedError, \
        moved("DagsterExecutionInterruptedError", "is no longer the class dagster._core.errors raises")
    assert not issubclass(interrupt, Exception), moved("DagsterExecutionInterruptedError", "became an Exception")
