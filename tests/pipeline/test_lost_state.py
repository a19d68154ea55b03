"""A lost state store under an incremental export (issue 20 item 13; rivet_core/pipeline/single/lost_cursor.py).

The reproduction: an incremental export ran, its state store is gone, the destination still
holds the data and a manifest recording `cursor_high`. The next run used to re-export every
row silently. Now it is refused (exit 3, nothing written) and names both ways out:
`--from-manifest` continues from the manifest's cursor_high, `--full-refresh` exports all.

Real PostgreSQL; the oracle re-reads every part the success manifests list with pyarrow.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.hardening.support import cli
from tests.helpers import cursor_of, data_files, db_exec, manifest_ids, source_block, write_config


def _insert(url: str, ids: range) -> None:
    rows = ", ".join(f"({i}, 'n{i}', TIMESTAMP '2026-01-01 00:00:00' + INTERVAL '{i} minutes')" for i in ids)
    db_exec(url, f"INSERT INTO items (id, name, updated_at) VALUES {rows}")


def _setup(tmp_path: Path, url: str) -> Path:
    db_exec(url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), updated_at TIMESTAMP NOT NULL)")
    _insert(url, range(1, 101))
    config = write_config(tmp_path, source_block(url), [{
        "name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
        "format": "parquet", "destination": {"type": "local", "path": "out"}}])
    first = cli("run", "-c", str(config))
    assert first.returncode == 0, first.stderr
    assert cursor_of(config, "items") == "2026-01-01T01:40:00.000000"
    return config


def _lose_state(config: Path) -> None:
    for p in config.parent.glob(".rivet_state.db*"):
        p.unlink()


def test_a_lost_state_store_refuses_the_incremental_run_and_names_both_options(tmp_path, pg_url):
    config = _setup(tmp_path, pg_url)
    _lose_state(config)
    _insert(pg_url, range(101, 121))
    before = sorted(p.name for p in data_files(tmp_path / "out"))

    refused = cli("run", "-c", str(config), "-e", "items")
    assert refused.returncode == 3, refused.stderr
    assert "the state store has no cursor" in refused.stderr and "already holds its data" in refused.stderr
    assert "--from-manifest" in refused.stderr and "--full-refresh" in refused.stderr
    assert "100 row(s)" in refused.stderr and "2026-01-01T01:40:00" in refused.stderr
    assert "Traceback" not in refused.stderr
    # Nothing was done: no part, no cursor, no run trail.
    assert sorted(p.name for p in data_files(tmp_path / "out")) == before
    assert cursor_of(config, "items") is None
    assert manifest_ids(tmp_path / "out") == list(range(1, 101))

    adopted = cli("run", "-c", str(config), "--from-manifest", "--json")
    assert adopted.returncode == 0, adopted.stderr
    run = json.loads(adopted.stdout)["runs"][0]
    assert run["cursor_low"] == "2026-01-01T01:40:00.000000"
    assert cursor_of(config, "items") == "2026-01-01T02:00:00.000000"
    # Each source row exactly once across the success manifests (pyarrow re-read).
    assert manifest_ids(tmp_path / "out") == list(range(1, 121))
    assert cli("validate", "-c", str(config)).returncode == 0

    # The store knows the export again: the next run needs no option.
    _insert(pg_url, range(121, 126))
    again = cli("run", "-c", str(config))
    assert again.returncode == 0, again.stderr
    assert manifest_ids(tmp_path / "out") == list(range(1, 126))


def test_full_refresh_exports_every_row_again(tmp_path, pg_url):
    config = _setup(tmp_path, pg_url)
    _lose_state(config)
    _insert(pg_url, range(101, 111))
    refreshed = cli("run", "-c", str(config), "--full-refresh", "--json")
    assert refreshed.returncode == 0, refreshed.stderr
    run = json.loads(refreshed.stdout)["runs"][0]
    assert run["cursor_low"] is None and run["rows"] == 110
    canonical = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert canonical["row_count"] == 110
    assert cursor_of(config, "items") == "2026-01-01T01:50:00.000000"


def test_a_deliberate_state_reset_still_re_exports_as_documented(tmp_path, pg_url):
    config = _setup(tmp_path, pg_url)
    assert cli("state", "reset", "-c", str(config), "-e", "items").returncode == 0
    rerun = cli("run", "-c", str(config), "--json")  # the file log remembers the export: not "lost"
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["runs"][0]["rows"] == 100


def test_from_manifest_and_full_refresh_together_are_refused(tmp_path, pg_url):
    config = _setup(tmp_path, pg_url)
    both = cli("run", "-c", str(config), "--from-manifest", "--full-refresh")
    assert both.returncode == 1
    assert "--from-manifest and --full-refresh contradict each other" in both.stderr


def test_from_manifest_without_a_manifest_is_refused(tmp_path, pg_url):
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50), updated_at TIMESTAMP NOT NULL)")
    _insert(pg_url, range(1, 4))
    config = write_config(tmp_path, source_block(pg_url), [{
        "name": "items", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
        "format": "parquet", "destination": {"type": "local", "path": "out"}}])
    result = cli("run", "-c", str(config), "--from-manifest")
    assert result.returncode == 1
    assert "--from-manifest found no manifest.json" in result.stderr
    first = cli("run", "-c", str(config))  # a genuinely first run needs no option
    assert first.returncode == 0, first.stderr
    assert manifest_ids(tmp_path / "out") == [1, 2, 3]


def test_a_refused_export_does_not_stop_the_other_exports_of_the_run(tmp_path, pg_url):
    config = _setup(tmp_path, pg_url)
    # A second export (full) beside the incremental one; the state store is then lost.
    import yaml

    doc = yaml.safe_load(config.read_text())
    doc["exports"].append({"name": "snapshot", "table": "items", "mode": "full", "format": "parquet",
                           "destination": {"type": "local", "path": "snap"}})
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    _lose_state(config)
    result = cli("run", "-c", str(config), "--json")
    assert result.returncode == 3, result.stderr  # the worst exit of the run: the refusal
    doc = json.loads(result.stdout)
    assert [r["export_name"] for r in doc["runs"]] == ["snapshot"] and doc["runs"][0]["status"] == "success"
    [refusal] = doc["refused"]
    assert (refusal["export_name"], refusal["status"], refusal["exit_code"]) == ("items", "cursor_lost", 3)
    assert "--from-manifest" in refusal["error"] and "--full-refresh" in refusal["error"]
    assert manifest_ids(tmp_path / "snap") == list(range(1, 101))
    assert manifest_ids(tmp_path / "out") == list(range(1, 101))  # nothing re-exported
