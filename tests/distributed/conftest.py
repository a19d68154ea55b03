"""Fixtures for the distributed-deployment tests (docs/distributed.md), real services only.

- `redis_url`: TEST_REDIS_URL when exported (your own broker), else a private
  `redis-server` on a free 127.0.0.1 port in a temp dir, stopped by PID at the end of the
  session. A missing redis-server FAILS the tests (never skips): install it with
  `apt-get install redis-server` (scripts/test.sh does that as root).
- `extra_pg_db`: a factory of extra throwaway PostgreSQL databases (the Dagster instance
  storage and the Rivet state store each get their own, as in a real deployment).
- `dagster_home`: a DAGSTER_HOME whose dagster.yaml puts the instance storage on PostgreSQL.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.dagster.support import DAGSTER_NOISE

_HERE = Path(__file__).resolve().parent


#: dagster-celery re-creates its `execute_plan` task for every step it submits (executor.py).
CELERY_NOISE = ["ignore:Task name 'execute_plan' is already registered:Warning"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            for spec in (*DAGSTER_NOISE, *CELERY_NOISE):
                item.add_marker(pytest.mark.filterwarnings(spec))


def _require_env(name: str, what: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{what} is required but {name} is not set. Run the suite with `make test` (it starts "
                    f"the servers), or export {name} to point at a running server.", pytrace=False)
    return value


def _with_db(url: str, db: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + db))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(what: str, probe: Callable[[], bool], *, timeout: float = 60,
               alive: Callable[[], str | None] | None = None) -> None:
    """Poll `probe` with a deadline; fail at once when `alive()` reports a dead process."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if probe():
                return
        except Exception:  # noqa: BLE001 - not ready yet
            pass
        if alive is not None:
            dead = alive()
            if dead:
                pytest.fail(f"{what}: {dead}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not ready after {timeout:g} s", pytrace=False)
        time.sleep(0.1)  # polling a server's readiness with a deadline


def stop_process(proc: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM by PID, then SIGKILL if it does not exit in time."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The Celery broker / result backend (module docstring)."""
    configured = os.environ.get("TEST_REDIS_URL")
    if configured:
        yield configured
        return
    binary = shutil.which("redis-server") or ("/usr/bin/redis-server" if os.path.exists("/usr/bin/redis-server")
                                              else None)
    if binary is None:
        pytest.fail("the Celery tests need Redis but redis-server is not installed and TEST_REDIS_URL is not "
                    "set — install it (`apt-get install --no-install-recommends redis-server`; scripts/test.sh "
                    "does this as root) or export TEST_REDIS_URL=redis://host:port/0", pytrace=False)
    folder = Path(tempfile.mkdtemp(prefix="rivet-redis-"))
    port = free_port()
    log = open(folder / "redis.log", "w")  # noqa: SIM115 - closed in teardown
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
                             "--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        import redis

        def ping() -> bool:
            return bool(redis.Redis.from_url(url, socket_timeout=1).ping())

        def dead() -> str | None:
            if proc.poll() is None:
                return None
            return f"redis-server exited ({proc.returncode}): {(folder / 'redis.log').read_text()[-1500:]}"

        wait_until("redis-server", ping, timeout=30, alive=dead)
        yield url
    finally:
        stop_process(proc)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def extra_pg_db() -> Iterator[Callable[[str], str]]:
    """`make(tag)` → URL of a fresh, empty PostgreSQL database; all dropped afterwards."""
    import psycopg

    admin = _require_env("TEST_PG_DSN", "PostgreSQL")
    made: list[str] = []

    def make(tag: str) -> str:
        db = f"rivet_{tag}_{uuid.uuid4().hex[:10]}"
        try:
            with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
                conn.execute(f'CREATE DATABASE "{db}"')
        except psycopg.OperationalError as exc:
            pytest.fail(f"cannot reach PostgreSQL at TEST_PG_DSN: {exc}", pytrace=False)
        made.append(db)
        return _with_db(admin, db)

    yield make
    with psycopg.connect(admin, autocommit=True) as conn:
        for db in made:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


#: The documented deployment files (docs/distributed.md); the tests use them as shipped.
EXAMPLES = _HERE.parent.parent / "examples" / "distributed"


def psycopg2_url(url: str) -> str:
    """dagster-postgres needs psycopg2 (SQLAlchemy 2.1 defaults to psycopg 3, whose
    server-side binding breaks its `NOTIFY run_events, %s`)."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(scheme="postgresql+psycopg2"))


@pytest.fixture
def dagster_home(tmp_path: Path, extra_pg_db: Callable[[str], str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A DAGSTER_HOME holding examples/distributed/dagster.yaml: the instance storage (runs,
    events, partitions) on its own PostgreSQL database, named by DAGSTER_PG_URL."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(EXAMPLES / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_PG_URL", psycopg2_url(extra_pg_db("dagster")))
    return home
