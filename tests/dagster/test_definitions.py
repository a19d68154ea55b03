"""Definitions load: the demo code location, a config with every mode, and bad configs.

The first gate of the Dagster suite: if these fail, nothing else can load. Loading never
connects to the source, so the every-mode config names an unreachable PostgreSQL server.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from rivet_core import api
from rivet_dagster import build_definitions
from tests.dagster.e2e_demo import DEMO_CONFIG
from tests.dagster.support import check_evaluations, materialization, run_job
from tests.helpers import rivet_quick as rivet  # in-process: the error text is what is compared

PG = {"type": "postgres", "url": "postgresql://rivet@127.0.0.1:1/shopdb"}


def load_module_defs(monkeypatch: pytest.MonkeyPatch) -> dg.Definitions:
    """(Re-)import `rivet_dagster.definitions` under the current environment."""
    monkeypatch.delitem(sys.modules, "rivet_dagster.definitions", raising=False)
    module = importlib.import_module("rivet_dagster.definitions")
    return module.defs


def spec_of(defs: dg.Definitions, key: dg.AssetKey) -> dg.AssetSpec:
    return next(s for s in defs.resolve_assets_def(key).specs if s.key == key)


def check_names(defs: dg.Definitions, key: dg.AssetKey) -> set[str]:
    return {k.name for k in defs.resolve_asset_graph().asset_check_keys if k.asset_key == key}


# ------------------------------------------------------------------------------ the demo
def test_the_code_location_with_no_rivet_config_serves_the_shipped_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Path] = []
    monkeypatch.delenv("RIVET_CONFIG", raising=False)
    monkeypatch.setenv("RIVET_DEMO_ORDERS", "2000")
    # Record the call instead of building the 1 M-row database inside the repository.
    monkeypatch.setattr("rivet_core.ops.demo.ensure_demo_database", lambda *a, **k: made.append(Path("demo")))
    defs = load_module_defs(monkeypatch)

    assert made, "the demo database is not ensured when RIVET_CONFIG is unset"
    assert {k.to_user_string() for k in defs.resolve_all_asset_keys()} == {
        "customers", "orders", "events", "customers_chunked", "customers_chunked_manifest",
        # the source tables, upstream of the exports (lineage)
        "sqlite/shop/customers", "sqlite/shop/orders"}
    meta = spec_of(defs, dg.AssetKey("orders")).metadata
    assert Path(meta["rivet/config"]) == DEMO_CONFIG.resolve()
    dg.Definitions.validate_loadable(defs)


def test_the_demo_database_is_made_where_the_demo_config_reads_it() -> None:
    """`make demo` on a fresh checkout ensures the database at ops/demo.py's DEFAULT_PATH and
    then runs examples/demo/rivet.yaml, which reads `sqlite:///shop.db` beside itself: the two
    must be one file (the move of demo.py into rivet_core/ops/ once made them differ, so a
    clean checkout built rivet_core/examples/demo/shop.db and the demo read nothing)."""
    from rivet_core.ops.demo import DEFAULT_PATH

    url = api.load_config(DEMO_CONFIG).source.url
    assert url == "sqlite:///shop.db"
    assert DEFAULT_PATH == (DEMO_CONFIG.resolve().parent / "shop.db")


def test_the_demo_config_loads_and_every_demo_asset_materializes_from_a_temp_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, instance: dg.DagsterInstance) -> None:
    from rivet_core.ops.demo import ensure_demo_database

    shutil.copy(DEMO_CONFIG, tmp_path / "rivet.yaml")
    monkeypatch.setenv("RIVET_DEMO_ORDERS", "2000")
    ensure_demo_database(tmp_path / "shop.db")
    monkeypatch.setenv("RIVET_CONFIG", str(tmp_path / "rivet.yaml"))
    defs = load_module_defs(monkeypatch)
    dg.Definitions.validate_loadable(defs)

    spec = spec_of(defs, dg.AssetKey("events"))
    assert isinstance(spec.partitions_def, dg.TimeWindowPartitionsDefinition)
    assert {s.name for s in defs.schedules} == {"orders_schedule", "events_schedule"}

    yesterday = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
    for job, partition, prefix in (("customers_job", None, "customers"), ("orders_job", None, "orders"),
                                   ("events_job", yesterday, f"events/created_at={yesterday}")):
        result = run_job(defs, job, instance, partition_key=partition)
        assert result.success, f"{job} failed"
        assert check_evaluations(result)["manifest_verified"].passed
        mat = materialization(result)
        assert mat.metadata["rows"].value > 0, f"{job} exported nothing"
        # The temp copy's output, not the repository's demo output.
        assert mat.metadata["destination"].value == f"file://{tmp_path / 'output' / prefix}/"
        assert (tmp_path / "output" / prefix / "_SUCCESS").is_file()


def test_make_demo_materializes_the_chunked_demo_export_as_the_planner_asks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, instance: dg.DagsterInstance) -> None:
    """`make demo` (rivet_dagster/demo.py) drives the chunked export as the daemon would: the
    planner's requests — several windows as one ranged run, here with the manifest folded in
    (rivet_dagster/chunked.py `publish_job`). It once took only single-partition requests, ran
    no window, and the README's first command failed."""
    import pyarrow.parquet as pq

    from rivet_core.ops.demo import ensure_demo_database
    from rivet_dagster.demo import _materialize_chunked

    shutil.copy(DEMO_CONFIG, tmp_path / "rivet.yaml")
    monkeypatch.setenv("RIVET_DEMO_ORDERS", "2000")
    ensure_demo_database(tmp_path / "shop.db")
    monkeypatch.setenv("RIVET_CONFIG", str(tmp_path / "rivet.yaml"))
    defs = load_module_defs(monkeypatch)
    rows: list[tuple[str, str, str, str]] = []
    config = api.load_config(tmp_path / "rivet.yaml")
    assert _materialize_chunked(defs, instance, config, "customers_chunked", rows), rows
    assert [status for _, status, _, _ in rows] == ["SUCCESS"] * len(rows) and rows
    assert "manifest_verified=PASS" in rows[-1][3] and int(rows[0][2]) == 200  # one run; each window's rows once
    out = tmp_path / "output" / "customers_chunked"
    manifest = json.loads((out / "manifest.json").read_text())
    assert (out / "_SUCCESS").is_file()
    ids = sorted(i for p in manifest["parts"] for i in pq.read_table(out / p["path"], columns=["id"]).column("id").to_pylist())
    assert ids == list(range(1, 201))  # every demo customer exactly once


# ------------------------------------------------------------------------------ every mode
def every_mode_config(tmp: Path, **dagster: Any) -> Path:
    exports = [
        {"name": "orders_full", "description": "All orders, every night.", "table": "public.orders",
         "mode": "full", "format": "parquet", "destination": {"type": "local", "path": "out/full"},
         "quality": {"row_count_min": 1, "row_count_max": 10_000_000, "null_ratio_max": {"note": 0.5},
                     "unique_columns": ["id"]},
         "tuning": {"max_retries": 4, "retry_backoff_ms": 1500},
         "dagster": {"schedule": "0 3 * * *", "schedule_status": "RUNNING"}},
        {"name": "orders_inc", "table": "public.orders", "mode": "incremental", "cursor_column": "updated_at",
         "format": "csv", "destination": {"type": "s3", "bucket": "lake", "prefix": "orders/",
                                           "endpoint": "http://127.0.0.1:1", "region": "us-east-1"},
         "dagster": {"key_prefix": ["sales", "raw"], "group": "sales", "pool": "pg_small",
                     "schedule": "*/15 * * * *"}},
        {"name": "orders_daily", "table": "public.orders", "mode": "time_window", "time_column": "created_at",
         "days_window": 3, "format": "parquet", "destination": {"type": "local", "path": "out/daily"},
         "dagster": {"start_date": "2026-03-01", "schedule": "10 0 * * *"}},
    ]
    path = tmp / "rivet.yaml"
    path.write_text(yaml.safe_dump({"source": PG, "exports": exports,
                                    "dagster": {"key_prefix": "rivet", "group": "exports", **dagster}},
                                   sort_keys=False))
    return path


def test_every_mode_becomes_an_asset_with_the_configured_key_group_kinds_pool_and_partitions(tmp_path: Path) -> None:
    defs = build_definitions(every_mode_config(tmp_path))
    dg.Definitions.validate_loadable(defs)
    full, inc, daily = dg.AssetKey(["rivet", "orders_full"]), dg.AssetKey(["sales", "raw", "orders_inc"]), \
        dg.AssetKey(["rivet", "orders_daily"])
    source = dg.AssetKey(["postgres", "shopdb", "public", "orders"])
    assert set(defs.resolve_all_asset_keys()) == {full, inc, daily, source}
    # lineage: every export of a table depends on the table's asset (a query export has none)
    graph = defs.resolve_asset_graph()
    assert graph.get(full).parent_keys == graph.get(inc).parent_keys == {source}
    assert "postgres" in set(spec_of(defs, source).kinds)
    assert spec_of(defs, source).metadata["dagster/table_name"] == "shopdb.public.orders"

    expected: dict[dg.AssetKey, dict[str, Any]] = {
        full: {"group": "exports", "kinds": {"postgres", "parquet", "local"}, "pool": "source_shopdb"},
        inc: {"group": "sales", "kinds": {"postgres", "csv", "s3"}, "pool": "pg_small"},
        daily: {"group": "exports", "kinds": {"postgres", "parquet", "local"}, "pool": "source_shopdb"},
    }
    for key, want in expected.items():
        spec = spec_of(defs, key)
        assert spec.group_name == want["group"], key
        assert set(spec.kinds) == want["kinds"], key
        assert defs.resolve_assets_def(key).op.pool == want["pool"], key

    assert spec_of(defs, full).partitions_def is None
    assert spec_of(defs, inc).partitions_def is None
    days = spec_of(defs, daily).partitions_def
    assert isinstance(days, dg.TimeWindowPartitionsDefinition) and days.cron_schedule == "0 0 * * *"
    assert days.get_first_partition_key() == "2026-03-01"
    assert days.has_partition_key("2026-03-05") and not days.has_partition_key("2026-02-28")

    assert spec_of(defs, full).description.startswith("All orders, every night.")
    policy = defs.resolve_assets_def(full).op.retry_policy
    assert (policy.max_retries, policy.delay) == (4, 1.5)


def test_each_asset_description_states_mode_source_destination_and_schedule_with_credentials_redacted(
        tmp_path: Path) -> None:
    config = yaml.safe_load(every_mode_config(tmp_path).read_text())
    secret = "pw-Sup3r-s3cret"
    config["source"] = {"type": "postgres", "url": f"postgresql://rivet:{secret}@127.0.0.1:1/shopdb"}
    config["exports"][1]["destination"]["endpoint"] = f"http://ak:{secret}@127.0.0.1:1"
    config["exports"][2].pop("table")
    config["exports"][2]["query"] = f"SELECT * FROM orders WHERE note <> 'password={secret}'"
    path = tmp_path / "rivet.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    defs = build_definitions(path)

    def lines(key: dg.AssetKey) -> dict[str, str]:
        text = spec_of(defs, key).description
        assert secret not in text, text
        return dict(line[2:].split(": ", 1) for line in text.splitlines() if line.startswith("- "))

    full = lines(dg.AssetKey(["rivet", "orders_full"]))
    assert full["mode"] == "full snapshot"
    assert full["source"] == "postgres `postgresql://REDACTED@127.0.0.1:1/shopdb` · table `public.orders`"
    assert full["destination"] == f"local `{tmp_path / 'out/full'}` · parquet, zstd level 3"
    assert full["schedule"] == "`0 3 * * *` (RUNNING by default)"

    inc = lines(dg.AssetKey(["sales", "raw", "orders_inc"]))
    assert (inc["mode"], inc["cursor"]) == ("incremental", "`updated_at`")
    assert inc["destination"] == "s3 `s3://lake/orders/` at `http://REDACTED@127.0.0.1:1` · csv"
    assert inc["schedule"] == "`*/15 * * * *` (STOPPED by default)"

    daily = lines(dg.AssetKey(["rivet", "orders_daily"]))
    assert daily["mode"] == "daily time window (UTC)" and daily["time column"] == "`created_at`"
    assert daily["source"].startswith("postgres `postgresql://REDACTED@127.0.0.1:1/shopdb` · query `SELECT * FROM")
    assert "password=REDACTED" in daily["source"]
    assert daily["schedule"].startswith("`10 0 * * *` (STOPPED by default), re-exports the last 3 complete day")

    del config["exports"][0]["dagster"]
    config["source"] = {"type": "postgres", "url_env": "SHOP_DB_URL"}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    defs = build_definitions(path)
    full = lines(dg.AssetKey(["rivet", "orders_full"]))
    assert full["schedule"] == "none"
    assert full["source"] == "postgres URL from `$SHOP_DB_URL` · table `public.orders`"


def test_every_export_has_the_manifest_and_drift_checks_and_one_check_per_quality_gate(tmp_path: Path) -> None:
    defs = build_definitions(every_mode_config(tmp_path))
    assert check_names(defs, dg.AssetKey(["rivet", "orders_full"])) == {
        "manifest_verified", "schema_drift", "quality_row_count_min", "quality_row_count_max",
        "quality_null_ratio_note", "quality_unique_id"}
    for key in (dg.AssetKey(["sales", "raw", "orders_inc"]), dg.AssetKey(["rivet", "orders_daily"])):
        assert check_names(defs, key) == {"manifest_verified", "schema_drift"}


def test_by_default_no_export_gets_a_job_and_each_schedule_selects_its_export_on_the_implicit_asset_job(
        tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """A job per export makes Dagster resolve and snapshot one job per export (issue 34): by
    default the code location has only Dagster's implicit asset job, and a schedule's run
    selects its export's asset there (with the asset's checks: Dagster adds them)."""
    defs = build_definitions(every_mode_config(tmp_path))
    assert {j.name for j in defs.resolve_all_job_defs()} == {"__ASSET_JOB"}
    crons = {s.name: (s.cron_schedule, s.job_name, s.default_status) for s in defs.schedules}
    assert crons == {
        "rivet__orders_full_schedule": ("0 3 * * *", "__ASSET_JOB", dg.DefaultScheduleStatus.RUNNING),
        "sales__raw__orders_inc_schedule": ("*/15 * * * *", "__ASSET_JOB", dg.DefaultScheduleStatus.STOPPED),
        "rivet__orders_daily_schedule": ("10 0 * * *", "__ASSET_JOB", dg.DefaultScheduleStatus.STOPPED),
    }
    at = datetime(2026, 3, 10, 3, 0, tzinfo=UTC)
    for name, key in (("rivet__orders_full_schedule", dg.AssetKey(["rivet", "orders_full"])),
                      ("sales__raw__orders_inc_schedule", dg.AssetKey(["sales", "raw", "orders_inc"])),
                      ("rivet__orders_daily_schedule", dg.AssetKey(["rivet", "orders_daily"]))):
        context = dg.build_schedule_context(instance=instance, scheduled_execution_time=at,
                                            repository_def=defs.get_repository_def())
        requests = list(defs.resolve_schedule_def(name).evaluate_tick(context).run_requests or [])
        assert requests and all(r.asset_selection == [key] for r in requests), name


def test_with_jobs_per_export_each_export_gets_a_job_with_its_checks_and_its_schedule_runs_it(
        tmp_path: Path) -> None:
    defs = build_definitions(every_mode_config(tmp_path, jobs="per_export"))
    for job_name, key in (("rivet__orders_full_job", dg.AssetKey(["rivet", "orders_full"])),
                          ("sales__raw__orders_inc_job", dg.AssetKey(["sales", "raw", "orders_inc"])),
                          ("rivet__orders_daily_job", dg.AssetKey(["rivet", "orders_daily"]))):
        job = defs.resolve_job_def(job_name)
        assert job.asset_layer.executable_asset_keys == {key}, job_name
        checks = {k.name for k in job.asset_layer.asset_graph.asset_check_keys if k.asset_key == key}
        assert "manifest_verified" in checks, job_name
    assert defs.resolve_job_def("rivet__orders_daily_job").partitions_def is not None

    schedules = {s.name: s for s in defs.schedules}
    crons = {name: (s.cron_schedule, s.job_name, s.default_status) for name, s in schedules.items()}
    assert crons == {
        "rivet__orders_full_schedule": ("0 3 * * *", "rivet__orders_full_job", dg.DefaultScheduleStatus.RUNNING),
        "sales__raw__orders_inc_schedule": ("*/15 * * * *", "sales__raw__orders_inc_job",
                                            dg.DefaultScheduleStatus.STOPPED),
        "rivet__orders_daily_schedule": ("10 0 * * *", "rivet__orders_daily_job", dg.DefaultScheduleStatus.STOPPED),
    }


def test_the_run_failure_notifier_is_opt_in(tmp_path: Path) -> None:
    defs = build_definitions(every_mode_config(tmp_path))
    # the run-failure notifier is opt-in (a library must not watch a user's other jobs)
    assert not [s for s in defs.sensors if "notifier" in s.name]
    notifying = build_definitions(every_mode_config(tmp_path), notify_run_failures=True)
    assert notifying.resolve_sensor_def("rivet_run_failure_notifier") is not None


# ------------------------------------------------------------------------------ bad configs
def cli_error(config: Path) -> str:
    result = rivet("run", "-c", str(config))
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Error: "))
    return "\n".join(lines[start:])[len("Error: "):]


@pytest.mark.parametrize("where", ["export", "dagster block"])
def test_an_unknown_key_fails_loading_with_the_message_the_cli_prints(tmp_path: Path, where: str) -> None:
    config = yaml.safe_load(every_mode_config(tmp_path).read_text())
    if where == "export":
        config["exports"][0]["formt"] = "parquet"
    else:
        config["exports"][1]["dagster"]["shedule"] = "0 1 * * *"
    path = tmp_path / "rivet.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))

    with pytest.raises(api.ConfigError) as raised:
        build_definitions(path)
    message = str(raised.value)
    assert message == cli_error(path)
    assert ("formt" if where == "export" else "shedule") in message
    assert ("Did you mean `format`?" if where == "export" else "schedule") in message


def test_a_time_window_export_without_a_start_date_fails_loading_and_says_what_to_add(tmp_path: Path) -> None:
    config = yaml.safe_load(every_mode_config(tmp_path).read_text())
    del config["exports"][2]["dagster"]["start_date"]
    path = tmp_path / "rivet.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))

    with pytest.raises(api.ConfigError) as raised:
        build_definitions(path)
    message = str(raised.value)
    assert "orders_daily" in message and "dagster.start_date" in message
    assert "start_date:" in message  # shows the YAML to add


def test_loading_the_definitions_prints_no_dagster_beta_warning_for_rivets_own_api_choices() -> None:
    """Code references, a chunked export's backfill policy and `map_asset_specs` for owners and
    tags are rivet's choices: every code server and run worker would print their beta and
    preview notices to a user who cannot act on them.
    The user's own beta warnings after the build still show."""
    import subprocess

    script = ("import warnings, dagster as dg\n"
              "from rivet_dagster import build_definitions\n"
              f"build_definitions({str(DEMO_CONFIG)!r}, owners=['team:data'], tags={{'domain': 'sales'}})\n"
              "warnings.warn('the user own notice', dg.BetaWarning)\n")
    proc = subprocess.run([sys.executable, "-W", "always", "-c", script], capture_output=True, text=True,
                          check=True)
    warned = [line for line in proc.stderr.splitlines() if "Warning:" in line]
    assert len(warned) == 1 and "the user own notice" in warned[0], proc.stderr


def test_a_url_env_source_is_named_by_the_config_whether_or_not_its_variable_is_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Source asset keys, the default group and the pool never depend on the environment
    (issue 34): `source.database` beside `url_env` names the database; without it the
    engine's name stands in, set or unset, and one warning (not one per key) names the
    `database:` line to add — without the URL's password."""
    import logging

    config = tmp_path / "rivet.yaml"

    def loaded(source: dict) -> tuple[set[str], set[str]]:
        config.write_text(yaml.safe_dump({
            "source": source,
            "exports": [{"name": name, "table": f"public.{name}", "mode": "full", "format": "parquet",
                         "destination": {"type": "local", "path": f"out/{name}"}}
                        for name in ("orders", "customers")]}))
        defs = build_definitions(config)
        keys = {k.to_user_string() for k in defs.resolve_all_asset_keys()}
        pools = {p for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)
                 for p in (a.op.pool,) if p}
        return keys, pools

    named = {"type": "postgres", "url_env": "SHOP_DB_URL", "database": "shopdb"}
    monkeypatch.setenv("SHOP_DB_URL", "postgresql://app:s3/cr@t@db.internal:5432/otherdb?sslmode=require")
    assert loaded(named) == loaded(named)
    keys, pools = loaded(named)
    assert "postgres/shopdb/public/orders" in keys and pools == {"source_shopdb"}
    monkeypatch.delenv("SHOP_DB_URL")
    assert loaded(named) == (keys, pools)

    unnamed = {"type": "postgres", "url_env": "SHOP_DB_URL"}
    keys, pools = loaded(unnamed)
    assert "postgres/postgres/public/orders" in keys and pools == {"source_postgres"}
    monkeypatch.setenv("SHOP_DB_URL", "postgresql://app:s3/cr@t@db.internal:5432/shopdb?sslmode=require")
    with caplog.at_level(logging.WARNING, logger="rivet_dagster"):
        assert loaded(unnamed) == (keys, pools)
        loaded(unnamed)
    said = [r.getMessage() for r in caplog.records if "database: shopdb" in r.getMessage()]
    assert len(said) == 1 and str(config) in said[0], said
    assert not any("s3/cr@t" in r.getMessage() for r in caplog.records)
