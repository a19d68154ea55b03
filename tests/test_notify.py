"""Notifications (I8, last step, best-effort) against a real local HTTP server.

pytest-httpserver runs a real HTTP server on 127.0.0.1; `send_notifications` talks to it
over a socket exactly as it would to Slack or a customer's endpoint. No mocks.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from rivet_core.config.models import NotificationsConfig, SlackConfig, WebhookConfig
from rivet_core.reporting.notify import RunNotice, send_notifications

SECRET_DSN = "postgresql://u:secret@h/db"


def failed_notice(**overrides: object) -> RunNotice:
    fields: dict[str, object] = dict(
        run_id="20261129T120000Z-ab12",
        export_name="orders",
        status="failed",
        rows=1200,
        duration_ms=3456,
        error_message="source query failed: relation orders does not exist",
    )
    fields.update(overrides)
    return RunNotice(**fields)  # type: ignore[arg-type]


def success_notice(**overrides: object) -> RunNotice:
    fields: dict[str, object] = dict(
        run_id="20261129T120500Z-cd34",
        export_name="orders",
        status="success",
        rows=50_000,
        duration_ms=812,
        destination_uri="s3://exports/orders/",
        files=3,
        bytes_written=123_456,
        report_path="/srv/rivet/.rivet/runs/20261129T120500Z-cd34/report.json",
    )
    fields.update(overrides)
    return RunNotice(**fields)  # type: ignore[arg-type]


def bodies(httpserver: HTTPServer) -> list[bytes]:
    return [request.get_data() for request, _response in httpserver.log]


def refused_url() -> str:
    """A URL on 127.0.0.1 where nothing listens: bind a port, then release it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


def test_slack_receives_rivets_exact_attachment_for_a_failed_run(httpserver: HTTPServer) -> None:
    expected = {
        "attachments": [
            {
                "color": "#e74c3c",
                "title": "Rivet: 20261129T120000Z-ab12",
                "text": "*orders* | status: `failed` | rows: 1200 | duration: 3456ms"
                "\nerror: source query failed: relation orders does not exist",
                "footer": "rivet export notification",
            }
        ]
    }
    httpserver.expect_oneshot_request(
        "/services/T000/B000/XXXX",
        method="POST",
        json=expected,
        headers={"Content-Type": "application/json"},
    ).respond_with_data("ok")
    config = NotificationsConfig(
        slack=SlackConfig(webhook_url=httpserver.url_for("/services/T000/B000/XXXX"))
    )

    warnings = send_notifications(config, failed_notice())

    assert warnings == []
    httpserver.check_assertions()
    assert len(httpserver.log) == 1


def test_slack_schema_change_on_a_successful_run_is_orange_and_says_schema_changed(
    httpserver: HTTPServer,
) -> None:
    httpserver.expect_oneshot_request("/slack", method="POST").respond_with_data("ok")
    config = NotificationsConfig(
        slack=SlackConfig(webhook_url=httpserver.url_for("/slack"), on=["failure", "schema_change"])
    )

    warnings = send_notifications(config, success_notice(schema_changed=True))

    assert warnings == []
    assert json.loads(bodies(httpserver)[0]) == {
        "attachments": [
            {
                "color": "#f39c12",
                "title": "Rivet: 20261129T120500Z-cd34",
                "text": "*orders* | status: `success` | rows: 50000 | duration: 812ms\nschema changed",
                "footer": "rivet export notification",
            }
        ]
    }


def test_webhook_posts_the_flat_run_summary_with_the_configured_headers(
    httpserver: HTTPServer,
) -> None:
    httpserver.expect_oneshot_request(
        "/hooks/rivet",
        method="POST",
        headers={
            "Authorization": "Bearer t0ken-123",
            "X-Team": "data",
            "Content-Type": "application/json",
        },
    ).respond_with_data("", status=204)
    config = NotificationsConfig(
        webhook=WebhookConfig(
            url=httpserver.url_for("/hooks/rivet"),
            on=["success", "failure"],
            headers={"Authorization": "Bearer t0ken-123", "X-Team": "data"},
        )
    )
    before = datetime.now(UTC)

    warnings = send_notifications(config, success_notice())

    assert warnings == []
    httpserver.check_assertions()
    payload = json.loads(bodies(httpserver)[0])
    sent_at = datetime.fromisoformat(payload.pop("sent_at").replace("Z", "+00:00"))
    assert before - timedelta(seconds=1) <= sent_at <= datetime.now(UTC) + timedelta(seconds=1)
    assert payload == {
        "event": "success",
        "events": ["success"],
        "run_id": "20261129T120500Z-cd34",
        "export_name": "orders",
        "status": "success",
        "rows": 50_000,
        "duration_ms": 812,
        "error_message": None,
        "schema_changed": False,
        "destination_uri": "s3://exports/orders/",
        "files": 3,
        "bytes_written": 123_456,
        "report_path": "/srv/rivet/.rivet/runs/20261129T120500Z-cd34/report.json",
        "validated": None,
    }


def test_webhook_event_is_the_first_subscribed_event_and_events_lists_all_of_them(
    httpserver: HTTPServer,
) -> None:
    httpserver.expect_oneshot_request("/hook", method="POST").respond_with_data("ok")
    config = NotificationsConfig(
        webhook=WebhookConfig(
            url=httpserver.url_for("/hook"), on=["success", "schema_change", "degraded"]
        )
    )

    send_notifications(config, success_notice(schema_changed=True))

    payload = json.loads(bodies(httpserver)[0])
    assert (payload["event"], payload["events"]) == ("schema_change", ["schema_change", "success"])


def test_a_successful_run_sends_nothing_to_channels_subscribed_only_to_failure(
    httpserver: HTTPServer,
) -> None:
    config = NotificationsConfig(
        slack=SlackConfig(webhook_url=httpserver.url_for("/slack"), on=["failure"]),
        webhook=WebhookConfig(url=httpserver.url_for("/hook"), on=["failure"]),
    )

    warnings = send_notifications(config, success_notice(schema_changed=True))

    assert warnings == []
    assert httpserver.log == []


def test_webhook_url_can_come_from_an_env_var(
    httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    httpserver.expect_oneshot_request("/from-env", method="POST").respond_with_data("ok")
    monkeypatch.setenv("RIVET_TEST_SLACK_URL", httpserver.url_for("/from-env"))
    config = NotificationsConfig(slack=SlackConfig(webhook_url_env="RIVET_TEST_SLACK_URL"))

    assert send_notifications(config, failed_notice()) == []
    assert len(httpserver.log) == 1


def test_an_unset_webhook_env_var_is_a_warning_and_nothing_is_sent(
    httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("RIVET_TEST_UNSET_URL", raising=False)
    config = NotificationsConfig(slack=SlackConfig(webhook_url_env="RIVET_TEST_UNSET_URL"))

    with caplog.at_level(logging.WARNING, logger="rivet.notify"):
        warnings = send_notifications(config, failed_notice())

    assert len(warnings) == 1 and "RIVET_TEST_UNSET_URL" in warnings[0]
    assert [r.levelname for r in caplog.records if r.name == "rivet.notify"] == ["WARNING"]
    assert httpserver.log == []


def test_an_http_500_is_a_warning_that_hides_the_webhook_path_and_query(
    httpserver: HTTPServer, caplog: pytest.LogCaptureFixture
) -> None:
    httpserver.expect_request("/services/T1/B1/slack-secret-path").respond_with_data(
        "boom", status=500
    )
    url = httpserver.url_for("/services/T1/B1/slack-secret-path") + "?token=query-secret"
    config = NotificationsConfig(
        slack=SlackConfig(webhook_url=url),
        webhook=WebhookConfig(url=url, on=["failure"]),
    )

    with caplog.at_level(logging.WARNING, logger="rivet.notify"):
        warnings = send_notifications(config, failed_notice())

    assert len(warnings) == 2
    assert all("HTTP 500" in w and f"{httpserver.host}:{httpserver.port}" in w for w in warnings)
    shown = "\n".join(warnings) + caplog.text
    assert "slack-secret-path" not in shown and "query-secret" not in shown


def test_a_refused_connection_is_a_warning_not_an_exception() -> None:
    config = NotificationsConfig(
        slack=SlackConfig(webhook_url=refused_url()),
        webhook=WebhookConfig(url=refused_url(), on=["failure"]),
    )

    warnings = send_notifications(config, failed_notice())

    assert len(warnings) == 2
    assert all("connection refused" in w for w in warnings)


def test_a_slow_endpoint_times_out_with_a_warning(httpserver: HTTPServer) -> None:
    def slow(_request: Request) -> Response:
        time.sleep(1.0)
        return Response("late")

    httpserver.expect_oneshot_request("/slow").respond_with_handler(slow)
    config = NotificationsConfig(
        webhook=WebhookConfig(url=httpserver.url_for("/slow"), on=["failure"])
    )

    started = time.monotonic()
    warnings = send_notifications(config, failed_notice(), timeout_s=0.3)

    assert time.monotonic() - started < 0.9
    assert len(warnings) == 1 and "timed out after 0.3 s" in warnings[0]
    # Let the server finish the slow reply, so it is not logged during the next test.
    deadline = time.monotonic() + 5
    while not httpserver.log and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_redirect_is_not_followed_so_headers_never_reach_another_host(
    httpserver: HTTPServer,
) -> None:
    httpserver.expect_oneshot_request("/moved").respond_with_data(
        "", status=302, headers={"Location": httpserver.url_for("/elsewhere")}
    )
    config = NotificationsConfig(
        webhook=WebhookConfig(
            url=httpserver.url_for("/moved"), on=["failure"], headers={"Authorization": "Bearer x"}
        )
    )

    warnings = send_notifications(config, failed_notice())

    assert len(warnings) == 1 and "HTTP 302" in warnings[0]
    assert [request.path for request, _ in httpserver.log] == ["/moved"]


def test_a_credential_in_the_error_message_never_reaches_the_request_body(
    httpserver: HTTPServer,
) -> None:
    httpserver.expect_request("/slack", method="POST").respond_with_data("ok")
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    config = NotificationsConfig(
        slack=SlackConfig(webhook_url=httpserver.url_for("/slack")),
        webhook=WebhookConfig(url=httpserver.url_for("/hook"), on=["failure"]),
    )
    notice = failed_notice(
        error_message=f"cannot connect to {SECRET_DSN}: password authentication failed",
        destination_uri="s3://exports/orders/",
    )

    warnings = send_notifications(config, notice)

    assert warnings == []
    sent = bodies(httpserver)
    assert len(sent) == 2
    for body in sent:
        assert b"secret" not in body
        assert b"postgresql://REDACTED@h/db" in body


def test_no_config_or_a_config_without_channels_sends_nothing(httpserver: HTTPServer) -> None:
    assert send_notifications(None, failed_notice()) == []
    assert send_notifications(NotificationsConfig(), failed_notice()) == []
    assert httpserver.log == []


def test_any_object_with_the_config_attributes_works_and_a_non_http_url_is_refused(
    httpserver: HTTPServer,
) -> None:
    httpserver.expect_oneshot_request("/duck", method="POST").respond_with_data("ok")
    duck = SimpleNamespace(
        slack=SimpleNamespace(
            webhook_url="file:///etc/passwd", webhook_url_env=None, on=["failure"]
        ),
        webhook=SimpleNamespace(
            url=httpserver.url_for("/duck"), url_env=None, on=["failure"], headers=None, timeout_s=5
        ),
    )

    warnings = send_notifications(duck, failed_notice())  # type: ignore[arg-type]

    assert len(warnings) == 1 and "not http(s)" in warnings[0]
    assert len(httpserver.log) == 1
