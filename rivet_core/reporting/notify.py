"""Run notifications: Slack incoming webhook and a generic JSON webhook.

Owns the last step of the finalize sequence (docs/invariants.md I8: manifest → cursor → validate →
metrics → report → **notification**). That step is best-effort: `send_notifications`
never raises, and nothing it meets — an unset env var, an HTTP error, a refused
connection, a timeout — changes a run's status or exit code. Each such problem is logged
as a WARN on the `rivet.notify` logger and returned as a warning string, so the caller can
show it in the run summary.

Contracts kept here:
- Slack payload exactly as Rivet's (docs/rivet-compat.md "Notifications"):
  one attachment, red for a failed run, orange otherwise; events `failure`,
  `schema_change`, `degraded`.
- The generic webhook (ours) POSTs one flat JSON object per run; it may also fire on
  `success`.
- No secret leaves through a notification: every text field passes through
  `redact_secrets` (the caller redacts too; redaction is idempotent, so doing it twice is
  free), and a webhook URL is only ever logged as `scheme://host[:port]`, because a Slack
  webhook's *path* is its credential.

Only the standard library is used (urllib), so notifications add no dependency.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from rivet_core import __version__
from rivet_core.errors import best_effort
from rivet_core.redact import redact_secrets

log = logging.getLogger("rivet.notify")

DEFAULT_TIMEOUT_S = 10.0
# Priority order: the generic webhook's `event` is the first of these that fires.
EVENT_ORDER = ("failure", "schema_change", "degraded", "success")
SLACK_EVENTS = frozenset({"failure", "schema_change", "degraded"})
DEFAULT_ON = ("failure",)  # the config models' default, for duck-typed configs without `on`
SLACK_COLOR_FAILED = "#e74c3c"
SLACK_COLOR_OTHER = "#f39c12"
SLACK_FOOTER = "rivet export notification"
_MAX_RESPONSE_BYTES = 64 * 1024


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: urllib would turn the POST into a body-less GET (reporting success
    for a notification nobody got) and carry our headers, tokens included, to the new host."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # noqa: ARG002
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


@dataclass(frozen=True)
class RunNotice:
    """What a notification says about one export run.

    The caller builds it from the run summary after the report is written, with text
    already redacted; `send_notifications` redacts again because an error message can
    quote a connection URL and a notification is a copy of it that leaves the machine.
    """

    run_id: str
    export_name: str
    status: str
    rows: int
    duration_ms: int
    error_message: str | None = None
    schema_changed: bool = False
    destination_uri: str | None = None
    files: int = 0
    bytes_written: int = 0
    report_path: str | None = None
    #: The destination's verification verdict when the run validated (None: not validated).
    validated: bool | None = None


class SlackLike(Protocol):
    """The attributes read from `notifications.slack` (rivet_core.config.models.SlackConfig)."""

    webhook_url: str | None
    webhook_url_env: str | None
    on: list[str]


class WebhookLike(Protocol):
    """The attributes read from `notifications.webhook` (config.models.WebhookConfig)."""

    url: str | None
    url_env: str | None
    on: list[str]
    headers: dict[str, str] | None
    timeout_s: float


class NotificationsLike(Protocol):
    """`notifications:`; either channel may be None."""

    slack: SlackLike | None
    webhook: WebhookLike | None


def notice_events(notice: RunNotice) -> list[str]:
    """Every event this run raises, in `EVENT_ORDER`.

    `degraded` is kept for config compatibility with Rivet, where no batch code path sets
    that status either; it fires only if a caller reports status "degraded".
    """
    raised = {
        "failure": notice.status == "failed",
        "schema_change": bool(notice.schema_changed),
        "degraded": notice.status == "degraded",
        "success": notice.status == "success",
    }
    return [event for event in EVENT_ORDER if raised[event]]


def slack_payload(notice: RunNotice) -> dict[str, Any]:
    """The Slack incoming-webhook body, byte-for-byte Rivet's shape (docs/rivet-compat.md "Notifications")."""
    text = (
        f"*{redact_secrets(notice.export_name)}* | status: `{redact_secrets(notice.status)}`"
        f" | rows: {int(notice.rows)} | duration: {int(notice.duration_ms)}ms"
    )
    if notice.error_message:
        text += f"\nerror: {redact_secrets(notice.error_message)}"
    if notice.schema_changed:
        text += "\nschema changed"
    return {
        "attachments": [
            {
                "color": SLACK_COLOR_FAILED if notice.status == "failed" else SLACK_COLOR_OTHER,
                "title": f"Rivet: {redact_secrets(notice.run_id)}",
                "text": text,
                "footer": SLACK_FOOTER,
            }
        ]
    }


def webhook_payload(
    notice: RunNotice, events: list[str], *, sent_at: datetime | None = None
) -> dict[str, Any]:
    """The generic webhook body: one flat object, every text field redacted."""

    def text(value: str | None) -> str | None:
        return None if value is None else redact_secrets(value)

    when = sent_at or datetime.now(UTC)
    return {
        "event": events[0] if events else None,
        "events": list(events),
        "run_id": text(notice.run_id),
        "export_name": text(notice.export_name),
        "status": text(notice.status),
        "rows": int(notice.rows),
        "duration_ms": int(notice.duration_ms),
        "error_message": text(notice.error_message),
        "schema_changed": bool(notice.schema_changed),
        "destination_uri": text(notice.destination_uri),
        "files": int(notice.files),
        "bytes_written": int(notice.bytes_written),
        "report_path": text(notice.report_path),
        "validated": notice.validated,
        "sent_at": when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }


def safe_url(url: str) -> str:
    """`scheme://host[:port]` only: a URL fit for a log line.

    Userinfo and query can hold passwords and tokens, and a Slack webhook's path *is* its
    secret, so none of them is ever shown.
    """
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<unparseable url>"
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{parts.scheme or '?'}://{host}{port}"


def send_notifications(
    config: NotificationsLike | None, notice: RunNotice, *, timeout_s: float | None = None
) -> list[str]:
    """Send the notifications `config` asks for about `notice`; return the warnings.

    An empty list means every notification that was due went out (or none was due).
    `timeout_s` overrides the per-channel timeout (webhook `timeout_s`, else 10 s).
    Never raises: a notification must not turn a good run into a failed one, nor mask
    the real error of a failed one.
    """
    warnings: list[str] = []
    if config is None:
        return warnings
    try:
        events = notice_events(notice)
    except Exception as exc:  # error boundary: a malformed notice becomes a warning
        return [_warn(warnings, f"notification skipped: cannot read the run notice ({exc})")]

    for channel, send in (("slack", _send_slack), ("webhook", _send_webhook)):
        with best_effort(f"{channel} notification", warn=lambda text: _warn(warnings, text),  # I8
                         message=f"{channel} notification failed unexpectedly: {{kind}}: {{reason}}"):
            channel_config = getattr(config, channel, None)
            if channel_config is not None:
                send(channel_config, notice, events, timeout_s, warnings)
    return warnings


# ------------------------------------------------------------------------------ internals


def _warn(warnings: list[str], message: str) -> str:
    message = redact_secrets(message)
    log.warning("%s", message)
    warnings.append(message)
    return message


def _wanted(channel_config: object, events: list[str], allowed: Iterable[str]) -> list[str]:
    """The run's events that this channel's `on:` list subscribes to, in priority order."""
    on = getattr(channel_config, "on", None)
    subscribed = set(DEFAULT_ON if on is None else on) & set(allowed)
    return [event for event in events if event in subscribed]


def _resolve_url(
    channel: str, channel_config: object, url_attr: str, warnings: list[str]
) -> str | None:
    """The literal URL, else the one named by `<url_attr>_env`; WARN and None when unset.

    Resolved here rather than by the config model so the warning reaches the caller's
    list, not only the log.
    """
    url = getattr(channel_config, url_attr, None)
    if url:
        return str(url)
    env_attr = f"{url_attr}_env"
    var = getattr(channel_config, env_attr, None)
    if var:
        value = os.environ.get(str(var))
        if value:
            return value
        _warn(
            warnings,
            f"{channel} notification skipped: env var '{var}' ({channel}.{env_attr}) is not set",
        )
        return None
    _warn(
        warnings, f"{channel} notification skipped: neither {url_attr} nor {env_attr} is configured"
    )
    return None


def _send_slack(
    slack: object,
    notice: RunNotice,
    events: list[str],
    timeout_s: float | None,
    warnings: list[str],
) -> None:
    wanted = _wanted(slack, events, SLACK_EVENTS)
    if not wanted:
        return
    url = _resolve_url("slack", slack, "webhook_url", warnings)
    if url is None:
        return
    _post_json(
        "slack", url, slack_payload(notice), {}, timeout_s or DEFAULT_TIMEOUT_S, wanted, warnings
    )


def _send_webhook(
    webhook: object,
    notice: RunNotice,
    events: list[str],
    timeout_s: float | None,
    warnings: list[str],
) -> None:
    wanted = _wanted(webhook, events, EVENT_ORDER)
    if not wanted:
        return
    url = _resolve_url("webhook", webhook, "url", warnings)
    if url is None:
        return
    headers = getattr(webhook, "headers", None) or {}
    timeout = timeout_s or getattr(webhook, "timeout_s", None) or DEFAULT_TIMEOUT_S
    _post_json(
        "webhook", url, webhook_payload(notice, wanted), headers, float(timeout), wanted, warnings
    )


def _post_json(
    channel: str,
    url: str,
    payload: Mapping[str, Any],
    headers: Mapping[str, str],
    timeout_s: float,
    events: list[str],
    warnings: list[str],
) -> None:
    """POST `payload` as JSON; any failure becomes one warning naming only `safe_url(url)`."""
    where = safe_url(url)
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        # urllib would also open file:// and ftp:// URLs; a notification has no business there.
        _warn(warnings, f"{channel} notification skipped: URL scheme '{scheme}' is not http(s)")
        return
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    try:
        request = urllib.request.Request(url, data=body, method="POST")
        for name, value in headers.items():
            request.add_header(str(name), str(value))
        request.add_header("Content-Type", "application/json")
        request.add_header("User-Agent", f"rivet-notify/{__version__}")
        with _OPENER.open(request, timeout=timeout_s) as response:
            response.read(_MAX_RESPONSE_BYTES)
            status = response.status
    except urllib.error.HTTPError as exc:  # >= 400, and 3xx since redirects are refused
        reason = f"HTTP {exc.code} {exc.reason}"
    except urllib.error.URLError as exc:
        reason = _describe(exc.reason, timeout_s)
    except Exception as exc:  # error boundary: TimeoutError, OSError, http.client errors… → the warning's reason
        reason = _describe(exc, timeout_s)
    else:
        if 200 <= status < 300:
            log.info("%s notification sent to %s (events: %s)", channel, where, ", ".join(events))
            return
        reason = f"unexpected HTTP {status}"
    # Exception texts may quote the URL; show only its safe form.
    _warn(warnings, f"{channel} notification to {where} failed: {reason.replace(url, where)}")


def _describe(reason: object, timeout_s: float) -> str:
    """A short reason: the common network failures in plain words, others by type."""
    if isinstance(reason, TimeoutError):
        return f"timed out after {timeout_s:g} s"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    return (
        f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else str(reason)
    )


__all__ = [
    "RunNotice",
    "NotificationsLike",
    "SlackLike",
    "WebhookLike",
    "send_notifications",
    "slack_payload",
    "webhook_payload",
    "notice_events",
    "safe_url",
    "DEFAULT_TIMEOUT_S",
]
