"""Shared fixtures: real services, never mocks (README.md "Development").

The test command (`make test` → scripts/test.sh) starts PostgreSQL, MariaDB and a
SeaweedFS S3 server and exports their URLs. Users who already run such servers can point
the tests at them with the same variables:

  TEST_PG_DSN        postgresql://user[:pw]@host:port/db   (a role that may CREATE DATABASE)
  TEST_MYSQL_DSN     mysql://user[:pw]@host:port/db        (a user that may CREATE DATABASE)
  TEST_S3_ENDPOINT   http://127.0.0.1:PORT  with TEST_S3_ACCESS_KEY / TEST_S3_SECRET_KEY
  TEST_GCS_ENDPOINT  http://127.0.0.1:PORT  (fake-gcs-server; no credentials)
  TEST_AZURE_ENDPOINT http://127.0.0.1:PORT/ACCOUNT with TEST_AZURE_ACCOUNT / TEST_AZURE_KEY

The `gcs` and `azure` fixtures (a fresh bucket / container per test, removed afterwards)
and `cloud` (both, one after the other) live in tests/cloud_areas.py.

A test that needs a server it cannot reach FAILS with a message saying which variable to
set; it is never skipped.
"""

from __future__ import annotations

import os
import signal
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings

from tests.cloud_areas import azure, cloud, gcs  # noqa: F401 - fixtures for every test module
from tests.schedule import slowest_files_first

os.environ.setdefault("RIVET_STRICT_INVARIANTS", "1")
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

# Hypothesis: no per-example deadline (the suite shares two cores with three database
# servers, so wall time per example says nothing about correctness) and, in CI, a fixed
# seed so a red run reproduces. Explicit @settings on a test still win.
settings.register_profile("rivet", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("rivet-ci", parent=settings.get_profile("rivet"), derandomize=True,
                          print_blob=True)
settings.load_profile("rivet-ci" if os.environ.get("CI") == "true" else "rivet")


def pytest_configure(config: pytest.Config) -> None:
    """SIGINT handled in every pytest process, so the children the tests start get it back.

    A shell starts a background job (`make test &`, `nohup`, a CI step without job control)
    with SIGINT *ignored*, and an ignored signal stays ignored across fork and exec. Dagster's
    CLI gives SIGTERM whatever handler SIGINT has, so a `dagster dev` started from such a run
    ignored the SIGTERM that stops it (tests/dagster/test_ui.py). A handler, unlike an ignored
    signal, is reset to the default at exec: with Python's own handler installed here (in
    the controller and in each xdist worker), every child starts with SIGINT, and so SIGTERM,
    at their default action."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slowest files first, for the xdist workers (tests/schedule.py says why)."""
    slowest_files_first(items)


def _require_env(name: str, what: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(
            f"{what} is required but {name} is not set. Run the suite with `make test` "
            f"(it starts the servers), or export {name} to point at a running server.",
            pytrace=False,
        )
    return value


def _with_db(url: str, db: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + db))


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for this test; dropped afterwards."""
    import psycopg

    admin = _require_env("TEST_PG_DSN", "PostgreSQL")
    db = f"rivet_t_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{db}"')
    except psycopg.OperationalError as exc:
        pytest.fail(f"cannot reach PostgreSQL at TEST_PG_DSN: {exc}", pytrace=False)
    yield _with_db(admin, db)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


@pytest.fixture
def mysql_url() -> Iterator[str]:
    """A fresh, empty MariaDB/MySQL database for this test; dropped afterwards."""
    import pymysql

    admin = _require_env("TEST_MYSQL_DSN", "MariaDB/MySQL")
    u = urllib.parse.urlsplit(admin)
    db = f"rivet_t_{uuid.uuid4().hex[:12]}"
    try:
        conn = pymysql.connect(
            host=u.hostname, port=u.port or 3306, user=urllib.parse.unquote(u.username or "root"),
            password=urllib.parse.unquote(u.password or ""), autocommit=True, connect_timeout=10,
            ssl_disabled=True,  # the test server has no TLS (tests/helpers.py mysql_connect says why)
        )
    except pymysql.err.OperationalError as exc:
        pytest.fail(f"cannot reach MariaDB at TEST_MYSQL_DSN: {exc}", pytrace=False)
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4")
    yield _with_db(admin, db)
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
    conn.close()


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    bucket: str

    def client(self):  # noqa: ANN201 - boto3 client type is dynamic
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key, region_name="us-east-1",
        )


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """A fresh bucket on the real S3-compatible server; credentials exported as env vars
    RIVET_TEST_AK / RIVET_TEST_SK so configs can name them with access_key_env/secret_key_env."""
    endpoint = _require_env("TEST_S3_ENDPOINT", "An S3-compatible server")
    server = S3Server(
        endpoint=endpoint,
        access_key=os.environ.get("TEST_S3_ACCESS_KEY", ""),
        secret_key=os.environ.get("TEST_S3_SECRET_KEY", ""),
        bucket=f"rivet-t-{uuid.uuid4().hex[:12]}",
    )
    try:
        server.client().create_bucket(Bucket=server.bucket)
    except Exception as exc:  # noqa: BLE001 - any failure here means the server is unusable
        pytest.fail(f"cannot use the S3 server at TEST_S3_ENDPOINT={endpoint}: {exc}", pytrace=False)
    monkeypatch.setenv("RIVET_TEST_AK", server.access_key)
    monkeypatch.setenv("RIVET_TEST_SK", server.secret_key)
    yield server
    # SeaweedFS reserves volumes per bucket: always remove what the test created.
    client = server.client()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=server.bucket):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=server.bucket, Delete={"Objects": keys})
    client.delete_bucket(Bucket=server.bucket)
