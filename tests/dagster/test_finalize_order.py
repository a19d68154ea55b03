"""The finalize order under Dagster (issue 15 item 7), against real PostgreSQL and a real local
HTTP server for the webhook:

- the destination's verdict is part of the finalize — before the run report and the
  notification — so both carry it;
- a transient failure that the step's RetryPolicy will retry is recorded but not notified;
  the last attempt's failure is (exactly one notification for the whole step).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pytest_httpserver import HTTPServer

from rivet_dagster import build_definitions
from tests.dagster.support import Target, export_block, materialization, orders_config, run_job


def posted(httpserver: HTTPServer) -> list[dict[str, Any]]:
    return [json.loads(request.get_data()) for request, _ in httpserver.log]


def test_the_verdict_is_in_the_run_report_and_the_notification(
        orders_pg: str, local: Target, instance: dg.DagsterInstance, httpserver: HTTPServer) -> None:
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    defs = build_definitions(orders_config(
        local.tmp, orders_pg, [export_block("orders_full", "full", local.destination("orders_full"))],
        notifications={"webhook": {"url": httpserver.url_for("/hook"), "on": ["success", "failure"]}}))
    result = run_job(defs, "orders_full_job", instance)
    assert result.success
    bodies = posted(httpserver)
    assert len(bodies) == 1 and bodies[0]["status"] == "success"
    assert bodies[0]["validated"] is True
    report = Path(str(materialization(result).metadata["run_report_path"].value))
    data = json.loads(report.with_name("report.json").read_text()) if report.with_name("report.json").exists() \
        else None
    text = report.read_text()
    assert data is None or data["validation"]["passed"] is True
    assert "valid" in text.lower(), "the markdown report does not mention the verification"


def test_a_transient_failure_dagster_retries_is_notified_once_by_the_last_attempt(
        orders_pg: str, local: Target, instance: dg.DagsterInstance, httpserver: HTTPServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    export = export_block("orders_full", "full", local.destination("orders_full"),
                          tuning={"max_retries": 2, "retry_backoff_ms": 10})
    defs = build_definitions(orders_config(
        local.tmp, orders_pg, [export],
        notifications={"webhook": {"url": httpserver.url_for("/hook"), "on": ["failure"]}}))
    monkeypatch.setenv("RIVET_TEST_TRANSIENT_AT", "during_source_read")
    result = run_job(defs, "orders_full_job", instance)
    assert not result.success
    retries = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert len(retries) == 2, "the step was not retried as its RetryPolicy says"
    bodies = posted(httpserver)
    assert len(bodies) == 1, f"expected one notification for three attempts, got {len(bodies)}"
    assert bodies[0]["status"] == "failed" and "transient" in bodies[0]["error_message"]
