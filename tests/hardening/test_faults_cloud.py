"""GCS and Azure faults against the real emulators: crashes, a dead endpoint, a wrong key.

- The real CLI is SIGKILLed at each fault point (RIVET_TEST_PANIC_AT, rivet_core/pipeline/
  faults.py) of an incremental export to each cloud; the re-run ends with every source id
  exactly once in the parts that success manifests list (re-read with pyarrow from the
  cloud's own SDK).
- A private emulator (tests/hardening/cloud_emulators.py) is SIGKILLed while the run is
  parked between two parts: the run exits 2 naming the endpoint and the timeout setting,
  publishes no manifest and no `_SUCCESS`, moves no cursor; the emulator restarts on the
  same data and a re-run recovers every row.
- `rivet doctor` with a wrong Azure key / an unusable GCS key file names the setting and
  the variable and never prints the secret.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from tests.cloud_areas import AZURE_KEY_ENV, CloudArea, success_ids
from tests.hardening.cloud_emulators import private_emulator
from tests.hardening.support import PauseBarrier, cli, finish, rivet_popen
from tests.helpers import cursor_of, db_exec, rivet, source_block, write_config

pytestmark = pytest.mark.postgres

ROWS = 1500


@pytest.fixture
def pg_items(pg_url: str) -> str:
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, payload TEXT, updated_at TIMESTAMP)",
            f"INSERT INTO items SELECT g, repeat(md5(g::text), 2), TIMESTAMP '2026-01-01' + g * INTERVAL '1 second' "
            f"FROM generate_series(1, {ROWS}) g")
    return pg_url


def _config(tmp: Path, url: str, destination: dict[str, Any]) -> Path:
    """Incremental CSV export rotated into several parts (small batches, small max_file_size)."""
    return write_config(tmp, {**source_block(url), "tuning": {"batch_size": 300, "throttle_ms": 0,
                                                              "max_retries": 0}}, [{
        "name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
        "format": "csv", "max_file_size": "30KB", "destination": destination}])


def _key_env(area: CloudArea) -> dict[str, str]:
    return {AZURE_KEY_ENV: area.key} if area.kind == "azure" else {}  # type: ignore[union-attr]


@pytest.mark.parametrize("point", ["after_source_read", "after_file_write", "after_manifest_update",
                                   "after_cursor_commit"])
def test_a_crash_at_each_fault_point_then_a_rerun_lists_every_id_once(tmp_path, pg_items, cloud, point):
    config = _config(tmp_path, pg_items, cloud.destination())
    crashed = rivet("run", "-c", str(config), env={"RIVET_TEST_PANIC_AT": point})
    assert crashed.returncode != 0, crashed.stderr
    published = {"manifest.json", "_SUCCESS"} & set(cloud.keys())
    assert published == ({"manifest.json", "_SUCCESS"} if point == "after_cursor_commit" else set())
    assert (cursor_of(config, "items") is not None) == (point == "after_cursor_commit")

    rerun = cli("run", "-c", str(config), "--validate")
    assert rerun.returncode == 0, rerun.stderr
    assert success_ids(cloud) == list(range(1, ROWS + 1))  # each id exactly once
    assert cursor_of(config, "items") == "2026-01-01T00:25:00.000000"


@pytest.mark.parametrize("kind", ["gcs", "azure"])
def test_the_emulator_killed_mid_run_fails_cleanly_and_a_rerun_recovers_everything(tmp_path, pg_items, kind):
    with private_emulator(kind) as server:
        area = server.area
        assert area is not None
        env = _key_env(area)
        config = _config(tmp_path, pg_items, area.destination(timeout_s=2, max_attempts=2))
        barrier = PauseBarrier(tmp_path / "barrier", "after_file_write")
        proc = rivet_popen("run", "-c", str(config), env={**env, **barrier.env})
        barrier.wait(proc)
        assert len([k for k in area.keys() if k.endswith(".csv")]) == 1  # one part durable so far
        server.kill()  # the endpoint dies with the run parked between parts
        barrier.release()
        rc, _, err = finish(proc)

        assert rc == 2, err  # transient: a scheduler may retry it as is
        assert "Traceback" not in err
        assert f"cannot reach the {'GCS' if kind == 'gcs' else 'Azure'} endpoint" in err, err
        assert "destination.timeout_s" in err
        server.start()  # same data dir and port: what did the dead emulator keep?
        keys = area.keys()
        assert "_SUCCESS" not in keys and "manifest.json" not in keys, keys
        assert cursor_of(config, "items") is None

        config = _config(tmp_path, pg_items, area.destination())  # default, patient timeouts
        rerun = cli("run", "-c", str(config), "--validate", env=env)
        assert rerun.returncode == 0, rerun.stderr
        assert success_ids(area) == list(range(1, ROWS + 1))
        assert cursor_of(config, "items") is not None


def test_doctor_with_a_wrong_azure_key_names_the_variable_and_never_prints_the_key(tmp_path, pg_items, azure):
    config = _config(tmp_path, pg_items, azure.destination())
    ok = cli("doctor", "-c", str(config))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"[OK] destination items: az://{azure.bucket}/{azure.prefix}" in ok.stdout
    assert azure.keys() == {}  # the probe object was deleted

    wrong = base64.b64encode(b"a-wrong-but-well-formed-account-key-" * 2).decode()
    bad = cli("doctor", "-c", str(config), env={AZURE_KEY_ENV: wrong})
    out = bad.stdout + bad.stderr
    assert bad.returncode != 0
    [line] = [ln for ln in bad.stdout.splitlines() if ln.startswith("[FAIL] destination items")]
    assert f"destination.account_key_env ({AZURE_KEY_ENV})" in line and "refused" in line, line
    assert wrong not in out and azure.key not in out


def test_doctor_with_an_unusable_gcs_key_file_names_it_and_never_prints_the_key(tmp_path, pg_items, gcs):
    key_file = tmp_path / "sa.json"
    key_file.write_text('{"type": "service_account", "client_email": "x@p.iam.gserviceaccount.com", '
                        '"private_key": "-----BEGIN PRIVATE KEY-----\\nSECRET-KEY-BODY\\n-----END PRIVATE KEY-----\\n", '
                        '"token_uri": "http://127.0.0.1:9/token"}')
    config = _config(tmp_path, pg_items, gcs.destination(credentials_file="sa.json"))
    bad = cli("doctor", "-c", str(config))
    out = bad.stdout + bad.stderr
    assert bad.returncode != 0
    [line] = [ln for ln in bad.stdout.splitlines() if ln.startswith("[FAIL] destination items")]
    assert "credentials_file" in line and "sa.json" in line and "not a usable service-account key" in line, line
    assert "SECRET-KEY-BODY" not in out

    config = _config(tmp_path, pg_items, gcs.destination())  # the emulator takes no credentials
    ok = cli("doctor", "-c", str(config))
    assert ok.returncode == 0 and f"[OK] destination items: gs://{gcs.bucket}/{gcs.prefix}" in ok.stdout, ok.stdout
