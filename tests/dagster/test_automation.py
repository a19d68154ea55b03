"""Schedules and the run-failure notifier.

- The daily export's schedule asks, on each tick, for the last `days_window` day partitions
  that are over at the tick (never a day before `dagster.start_date` or from `end_date`; the
  current day is not a partition until it ends); an unpartitioned
  export's schedule asks for one run of its job.
- `rivet_run_failure_notifier` posts the configured JSON webhook (a real local HTTP server)
  for a failed Dagster run the core did not report itself, and stays quiet for a run whose
  failure the core already notified.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pytest_httpserver import HTTPServer

from rivet_dagster import build_definitions
from tests.dagster.support import (
    START_DATE,
    Target,
    check_evaluations,
    check_only_job,
    export_block,
    orders_config,
    run_job,
    with_jobs,
)


def scheduled_defs(tmp: Path) -> dg.Definitions:
    pg = "postgresql://rivet@127.0.0.1:1/shopdb"  # schedules never touch the source
    daily = export_block("orders_daily", "time_window", {"type": "local", "path": "out/daily"})
    daily["dagster"].update(schedule="10 0 * * *", end_date="2026-06-01")
    inc = export_block("orders_inc", "incremental", {"type": "local", "path": "out/inc"},
                       dagster={"schedule": "*/15 * * * *"})
    return build_definitions(orders_config(tmp, pg, [daily, inc]))


def tick(defs: dg.Definitions, instance: dg.DagsterInstance, name: str, at: datetime) -> list[dg.RunRequest]:
    schedule = defs.resolve_schedule_def(name)
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=at,
                                        repository_def=defs.get_repository_def())
    return list(schedule.evaluate_tick(context).run_requests or [])


@pytest.mark.parametrize(("at", "days"), [
    (datetime(2026, 3, 10, 0, 10, tzinfo=UTC), ["2026-03-07", "2026-03-08", "2026-03-09"]),
    (datetime(2026, 4, 1, 0, 10, tzinfo=UTC), ["2026-03-29", "2026-03-30", "2026-03-31"]),
    (datetime(2026, 3, 3, 0, 10, tzinfo=UTC), [START_DATE, "2026-03-02"]),   # history starts 03-01
    (datetime(2026, 3, 1, 0, 10, tzinfo=UTC), []),                          # no day is over yet
    (datetime(2026, 6, 3, 0, 10, tzinfo=UTC), ["2026-05-29", "2026-05-30", "2026-05-31"]),  # end_date exclusive
])
def test_the_daily_schedule_requests_the_last_days_window_complete_partitions_before_the_tick(
        tmp_path: Path, instance: dg.DagsterInstance, at: datetime, days: list[str]) -> None:
    defs = scheduled_defs(tmp_path)
    requests = tick(defs, instance, "orders_daily_schedule", at)
    assert [r.partition_key for r in requests] == days
    assert all(r.tags["dagster/partition"] == r.partition_key for r in requests)
    assert len({r.run_key for r in requests}) == len(requests)  # distinct runs, not de-duplicated away
    # A later tick asks again for a day it shares with this one: its run keys differ.
    later = tick(defs, instance, "orders_daily_schedule", at.replace(hour=1))
    assert not {r.run_key for r in requests} & {r.run_key for r in later}


def test_an_unpartitioned_schedule_requests_one_run_of_its_asset(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    defs = scheduled_defs(tmp_path)
    requests = tick(defs, instance, "orders_inc_schedule", datetime(2026, 3, 10, 0, 15, tzinfo=UTC))
    assert len(requests) == 1
    assert requests[0].partition_key is None and requests[0].asset_selection == [dg.AssetKey("orders_inc")]
    assert defs.resolve_schedule_def("orders_inc_schedule").job_name == "__ASSET_JOB"


# ------------------------------------------------------------------------------ failure sensor
def notify_config(local: Target, url: str, hook: str, **quality: Any) -> Path:
    export = export_block("orders_full", "full", local.destination("orders_full"))
    if quality:
        export["quality"] = quality
    return orders_config(local.tmp, url, [export], notifications={"webhook": {"url": hook, "on": ["failure"]}})


def evaluate_notifier(defs: dg.Definitions, instance: dg.DagsterInstance, result: Any) -> None:
    failure = result.get_run_failure_event()
    assert failure is not None, "the run did not fail"
    context = dg.build_run_status_sensor_context(
        sensor_name="rivet_run_failure_notifier", dagster_event=failure, dagster_instance=instance,
        dagster_run=result.dagster_run, repository_def=defs.get_repository_def()).for_run_failure()
    defs.resolve_sensor_def("rivet_run_failure_notifier")(context)


def posted(httpserver: HTTPServer) -> list[dict[str, Any]]:
    bodies = []
    for request, _ in httpserver.log:
        assert request.headers["Content-Type"] == "application/json"
        bodies.append(json.loads(request.get_data()))
    return bodies


def test_the_failure_sensor_posts_a_webhook_for_a_run_that_failed_in_the_manifest_check(
        orders_pg: str, local: Target, instance: dg.DagsterInstance, httpserver: HTTPServer) -> None:
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    defs = build_definitions(notify_config(local, orders_pg, httpserver.url_for("/hook")), notify_run_failures=True)
    defs = with_jobs(defs, check_only_job("verify_only", dg.AssetKey("orders_full")))
    assert run_job(defs, "orders_full_job", instance).success
    assert posted(httpserver) == []  # success is not a configured event

    view = local.view("orders_full")
    view.delete(view.current_manifest()["parts"][0]["path"])
    result = run_job(defs, "verify_only", instance)
    assert not result.success and not check_evaluations(result)["manifest_verified"].passed
    assert posted(httpserver) == []  # the core ran no export in this run: nobody was told yet

    evaluate_notifier(defs, instance, result)
    bodies = posted(httpserver)
    assert len(bodies) == 1
    body = bodies[0]
    assert (body["event"], body["status"], body["export_name"], body["run_id"]) == \
        ("failure", "failed", "orders_full", result.run_id)
    assert result.run_id in body["error_message"] and "manifest_verified" in body["error_message"]


def test_the_failure_sensor_stays_quiet_for_a_failure_the_core_already_reported(
        orders_pg: str, local: Target, instance: dg.DagsterInstance, httpserver: HTTPServer) -> None:
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    defs = build_definitions(notify_config(local, orders_pg, httpserver.url_for("/hook"),
                                           row_count_min=1_000_000), notify_run_failures=True)
    result = run_job(defs, "orders_full_job", instance)
    assert not result.success
    bodies = posted(httpserver)
    assert len(bodies) == 1  # the core's own notification, from its finalize sequence
    assert (bodies[0]["status"], bodies[0]["export_name"]) == ("failed", "orders_full")
    assert bodies[0]["run_id"] != result.run_id  # a Rivet run id: the core, not the sensor, sent it

    evaluate_notifier(defs, instance, result)
    assert len(posted(httpserver)) == 1  # no second page for the same failure


def test_the_failure_sensor_ignores_a_failed_run_of_the_users_own_assets(
        orders_pg: str, local: Target, instance: dg.DagsterInstance, httpserver: HTTPServer) -> None:
    """A library must not page anyone for a job it does not own: the notifier watches only
    the runs that materialized or checked an export of its own config."""
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")

    @dg.asset
    def users_own_asset() -> None:
        raise RuntimeError("the user's own asset failed")

    rivet_defs = build_definitions(notify_config(local, orders_pg, httpserver.url_for("/hook")),
                                   notify_run_failures=True)
    defs = dg.Definitions.merge(rivet_defs, dg.Definitions(
        assets=[users_own_asset], jobs=[dg.define_asset_job("users_job", selection=[users_own_asset])]))
    result = run_job(defs, "users_job", instance)
    assert not result.success
    evaluate_notifier(defs, instance, result)
    assert posted(httpserver) == []
