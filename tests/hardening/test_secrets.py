"""Credentials never leave: every artifact of a successful AND a failing run is grepped.

Replaces (and extends) the secrets test that lived in tests/pipeline/test_gates.py: that one
covered a failed connection on the CLI path only. Here the source URL carries a known
password (with URL-special characters, so both its raw and percent-encoded forms are
searched), the S3 destination a known secret key, and the same export runs:

1. `rivet -vv run --validate` (DEBUG logging: the widest log surface) — succeeds;
2. the same run against a source that refuses the connection — fails, quoting the URL;
3. the Dagster job, in-process on an on-disk instance — a success and a failure.

Then every byte is searched: stdout/stderr of each CLI run, every file under the test
directory (state DB and its WAL, run reports, journal, staging leftovers, the config), every
object at the S3 prefix (manifests, parts, _SUCCESS), every webhook and Slack body a real
HTTP server (pytest-httpserver) received, and every file of the Dagster instance (its
SQLite event log and run storage) plus the event records read back through its API. Each
place is also checked to be non-empty, so the test cannot pass by producing nothing.
"""

from __future__ import annotations

import json
import sqlite3
import urllib.parse
from pathlib import Path

import pytest
from werkzeug import Request, Response

from tests.hardening.support import free_port, s3_keys
from tests.helpers import db_exec, rivet, write_config
from tests.s3_area import fresh_prefix, s3_module_bucket  # noqa: F401 - fixtures

PASSWORD = "Pw#9x/q:Zr@k!v"  # trust auth on the test server accepts any password
ENCODED = urllib.parse.quote(PASSWORD, safe="")


@pytest.fixture
def s3(s3_module_bucket):  # noqa: ANN001, ANN201, F811
    return fresh_prefix(s3_module_bucket)


def _leaks(data: bytes, secrets: list[str]) -> list[str]:
    return [s for s in secrets if s.encode() in data]


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
def test_credentials_never_appear_in_any_artifact_of_a_successful_and_a_failing_run(
        tmp_path, pg_url, s3, httpserver, monkeypatch):
    import dagster as dg
    from dagster._serdes import serialize_value

    from rivet_dagster import build_definitions
    from tests.dagster.support import job_def

    secrets = [PASSWORD, ENCODED, s3.secret_key]
    bodies: list[tuple[str, bytes]] = []

    def capture(request: Request) -> Response:
        bodies.append((request.path, request.get_data()))
        return Response("ok", status=200)

    httpserver.expect_request("/hook", method="POST").respond_with_handler(capture)
    httpserver.expect_request("/slack", method="POST").respond_with_handler(capture)

    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, email TEXT, updated_at TIMESTAMP)",
            "INSERT INTO items SELECT g, 'u' || g || '@x', TIMESTAMP '2026-01-01' + g * INTERVAL '1 minute' "
            "FROM generate_series(1, 50) g")
    u = urllib.parse.urlsplit(pg_url)
    good_url = f"postgresql://postgres:{ENCODED}@{u.hostname}:{u.port}{u.path}"
    bad_url = f"postgresql://postgres:{ENCODED}@127.0.0.1:{free_port()}{u.path}"
    config = write_config(tmp_path, {"type": "postgres", "url_env": "RIVET_SECRET_URL",
                                     "tuning": {"max_retries": 0}}, [{
        "name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
        "format": "parquet", "destination": {
            "type": "s3", "bucket": s3.bucket, "prefix": s3.prefix, "endpoint": s3.endpoint,
            "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}}],
        notifications={"webhook": {"url": httpserver.url_for("/hook"), "on": ["failure", "success"]},
                       "slack": {"webhook_url": httpserver.url_for("/slack"), "on": ["failure"]}})
    env = {"RIVET_TEST_AK": s3.access_key, "RIVET_TEST_SK": s3.secret_key}

    # 1 + 2: the CLI, success then failure, at DEBUG level.
    ok = rivet("-vv", "run", "-c", str(config), "--validate", "--json", env={**env, "RIVET_SECRET_URL": good_url})
    assert ok.returncode == 0, ok.stderr
    assert "DEBUG" in ok.stderr  # the verbose surface really was produced
    failed = rivet("-vv", "run", "-c", str(config), "--json", env={**env, "RIVET_SECRET_URL": bad_url})
    assert failed.returncode == 2, failed.stderr
    assert "REDACTED@" in failed.stderr  # the error quoted the URL, redacted
    for proc in (ok, failed):
        assert _leaks(proc.stdout.encode() + proc.stderr.encode(), secrets) == []

    # 3: the Dagster job on an on-disk instance (its event log is a file we can grep).
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    home = tmp_path / "dagster_home"
    home.mkdir()
    instance = dg.DagsterInstance.local_temp(tempdir=str(home))
    try:
        job = job_def(build_definitions(config), "items_job")  # the export's selection on the asset job
        db_exec(pg_url, "INSERT INTO items VALUES (51, 'u51@x', TIMESTAMP '2026-02-01')")
        monkeypatch.setenv("RIVET_SECRET_URL", good_url)
        good_run = job.execute_in_process(instance=instance, raise_on_error=False)
        assert good_run.success
        monkeypatch.setenv("RIVET_SECRET_URL", bad_url)
        bad_run = job.execute_in_process(instance=instance, raise_on_error=False)
        assert not bad_run.success
        records = [r.event_log_entry for run in (good_run, bad_run)
                   for r in instance.get_records_for_run(run.run_id, limit=10_000).records]
        dumped = "\n".join(serialize_value(entry) for entry in records)
        assert "ASSET_MATERIALIZATION" in dumped and "STEP_FAILURE" in dumped
        assert "REDACTED@" in dumped  # the failure's message reached the event log, redacted
        assert _leaks(dumped.encode(), secrets) == []
    finally:
        instance.dispose()

    # Every file the runs left: config, state DB (+WAL), reports, journal, staging, Dagster home.
    files = _files(tmp_path)
    assert any(p.name == ".rivet_state.db" for p in files)
    reports = [p.read_text() for p in files if p.name == "summary.md"]
    assert any("FAILED" in r for r in reports) and any(p.suffix == ".db" for p in _files(home))
    leaked = {str(p): _leaks(p.read_bytes(), secrets) for p in files}
    assert {k: v for k, v in leaked.items() if v} == {}
    with sqlite3.connect(tmp_path / ".rivet_state.db") as conn:
        errors = [r[0] for r in conn.execute("SELECT error_message FROM export_metrics WHERE status='failed'")]
        journals = [r[0] for r in conn.execute("SELECT journal_json FROM run_journal")]
    assert errors and all("REDACTED@" in e for e in errors)
    assert len(journals) >= 4 and any("REDACTED@" in j for j in journals)

    # Every object at the S3 prefix (manifests name the destination, never its credentials).
    client = s3.client()
    keys = s3_keys(client, s3.bucket, s3.prefix)
    assert "_SUCCESS" in keys and "manifest.json" in keys
    for key in keys:
        body = client.get_object(Bucket=s3.bucket, Key=s3.prefix + key)["Body"].read()
        assert _leaks(body, secrets) == [], key

    # Every notification body the real HTTP server received (success + failure, both paths).
    paths = [p for p, _ in bodies]
    assert paths.count("/hook") >= 4 and paths.count("/slack") >= 2
    failures = [json.loads(b) for p, b in bodies if p == "/hook" and json.loads(b)["status"] == "failed"]
    assert failures and all("REDACTED@" in f["error_message"] for f in failures)
    assert [p for p, b in bodies if _leaks(b, secrets)] == []
