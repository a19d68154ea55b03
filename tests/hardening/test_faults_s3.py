"""S3 faults against real servers: the endpoint killed mid-run, answering 5xx, answering slowly.

Every scenario ends in either a clean failure (exit code, one message naming the problem and
the fix, no `_SUCCESS`, cursor not moved) or a successful retry, and a re-run afterwards
recovers everything: the oracle lists the bucket with boto3, re-reads every part a success
manifest lists with pyarrow and requires each source id exactly once.

The S3 server killed mid-run is a private SeaweedFS (support.PrivateS3), SIGKILLed while the
run is parked at the `after_file_write` fault point. Errors and slowness come from a real
HTTP proxy (support.FaultProxy) in front of the shared SeaweedFS.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.hardening.support import (
    FaultProxy,
    PauseBarrier,
    Rule,
    cli,
    finish,
    private_s3,
    rivet_popen,
    s3_keys,
    s3_success_ids,
)
from tests.helpers import cursor_of, db_exec, source_block, write_config
from tests.s3_area import fresh_prefix, s3_module_bucket  # noqa: F401 - fixtures

ROWS = 3000


@pytest.fixture
def s3(s3_module_bucket):  # noqa: ANN001, ANN201, F811
    return fresh_prefix(s3_module_bucket)


@pytest.fixture
def pg_items(pg_url: str) -> str:
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, payload TEXT, updated_at TIMESTAMP)",
            f"INSERT INTO items SELECT g, repeat(md5(g::text), 2), TIMESTAMP '2026-01-01' + g * INTERVAL '1 second' "
            f"FROM generate_series(1, {ROWS}) g")
    return pg_url


def _config(tmp: Path, url: str, destination: dict[str, Any]) -> Path:
    """Incremental CSV export rotated into several parts (small batches, small max_file_size)."""
    return write_config(tmp, {**source_block(url), "tuning": {"batch_size": 500, "throttle_ms": 0,
                                                              "max_retries": 0}}, [{
        "name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
        "format": "csv", "max_file_size": "40KB", "destination": destination}])


def _s3_dest(endpoint: str, bucket: str, prefix: str, **extra: Any) -> dict[str, Any]:
    return {"type": "s3", "bucket": bucket, "prefix": prefix, "endpoint": endpoint, "region": "us-east-1",
            "access_key_env": "RIVET_HARD_AK", "secret_key_env": "RIVET_HARD_SK", **extra}


def _assert_clean_failure(rc: int, err: str, config: Path, keys: dict[str, int], *needles: str) -> None:
    assert rc != 0, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    assert "_SUCCESS" not in keys and "manifest.json" not in keys, keys
    assert cursor_of(config, "items") is None


def test_s3_server_killed_mid_run_fails_cleanly_and_a_rerun_recovers_everything(tmp_path, pg_items):
    with private_s3() as server:
        bucket, prefix = f"hard-{uuid.uuid4().hex[:8]}", "items/"
        server.client().create_bucket(Bucket=bucket)
        env = {"RIVET_HARD_AK": server.access_key, "RIVET_HARD_SK": server.secret_key}
        config = _config(tmp_path, pg_items, _s3_dest(server.endpoint, bucket, prefix,
                                                      timeout_s=2, max_attempts=2))
        barrier = PauseBarrier(tmp_path / "barrier", "after_file_write")
        proc = rivet_popen("run", "-c", str(config), env={**env, **barrier.env})
        barrier.wait(proc)
        landed = s3_keys(server.client(), bucket, prefix)
        assert len([k for k in landed if k.endswith(".csv")]) == 1  # one part durable so far
        server.kill()  # the endpoint dies with the run parked between parts
        barrier.release()
        rc, _, err = finish(proc)

        server.start()  # same data dir and ports: what did the dead server keep?
        keys = s3_keys(server.client(), bucket, prefix)
        _assert_clean_failure(rc, err, config, keys, "cannot reach the S3 endpoint",
                              "destination.timeout_s")
        assert rc == 2  # transient: a scheduler may retry it as is

        # The re-run, with the default (patient) timeouts: a restarted server may be slow at first.
        config = _config(tmp_path, pg_items, _s3_dest(server.endpoint, bucket, prefix))
        rerun = cli("run", "-c", str(config), "--validate", env=env)
        assert rerun.returncode == 0, rerun.stderr
        assert s3_success_ids(server.client(), bucket, prefix) == list(range(1, ROWS + 1))
        assert cursor_of(config, "items") is not None


def test_s3_answering_5xx_fails_cleanly_then_transient_errors_are_retried(tmp_path, pg_items, s3):
    env = {"RIVET_HARD_AK": s3.access_key, "RIVET_HARD_SK": s3.secret_key}
    with FaultProxy(s3.endpoint) as proxy:
        config = _config(tmp_path, pg_items, _s3_dest(proxy.endpoint, s3.bucket, s3.prefix, max_attempts=3))
        proxy.rules = [Rule(methods=("PUT",), status=500)]  # every write refused
        failed = cli("run", "-c", str(config), "--json", env=env)
        keys = s3_keys(s3.client(), s3.bucket, s3.prefix)
        _assert_clean_failure(failed.returncode, failed.stderr, config, keys, "InternalError",
                              "retry the run")
        assert failed.returncode == 2
        assert json.loads(failed.stdout)["runs"][0]["status"] == "failed"
        assert [what for m, _, what in proxy.requests if m == "PUT"] == ["status 500"] * 3  # max_attempts

        proxy.rules = [Rule(methods=("PUT",), status=503, count=2)]  # a brief outage
        proxy.requests.clear()
        ok = cli("run", "-c", str(config), "--validate", env=env)
        assert ok.returncode == 0, ok.stderr
        assert [what for m, _, what in proxy.requests if m == "PUT"][:2] == ["status 503"] * 2
    assert s3_success_ids(s3.client(), s3.bucket, s3.prefix) == list(range(1, ROWS + 1))


def test_a_slow_s3_endpoint_times_out_cleanly_then_a_late_answer_is_retried(tmp_path, pg_items, s3):
    env = {"RIVET_HARD_AK": s3.access_key, "RIVET_HARD_SK": s3.secret_key}
    with FaultProxy(s3.endpoint) as proxy:
        config = _config(tmp_path, pg_items, _s3_dest(proxy.endpoint, s3.bucket, s3.prefix,
                                                      timeout_s=1, max_attempts=2))
        proxy.rules = [Rule(methods=("PUT",), delay_s=4)]  # every answer later than timeout_s
        slow = cli("run", "-c", str(config), env=env)
        keys = s3_keys(s3.client(), s3.bucket, s3.prefix)
        _assert_clean_failure(slow.returncode, slow.stderr, config, keys, "timeout",
                              "destination.timeout_s")

        proxy.rules = [Rule(methods=("PUT",), delay_s=4, count=1)]  # one late answer
        ok = cli("run", "-c", str(config), "--validate", env=env)
        assert ok.returncode == 0, ok.stderr
    assert s3_success_ids(s3.client(), s3.bucket, s3.prefix) == list(range(1, ROWS + 1))
