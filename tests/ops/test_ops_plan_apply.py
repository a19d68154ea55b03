"""`rivet plan` → `rivet apply`: the artifact, the round trip, stale-plan refusals, --force."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.helpers import cursor_of, db_exec, manifest_table, source_block, write_config
from tests.helpers import rivet_quick as rivet  # no run here crashes or pauses: in-process

PASSWORD = "pl4n-Secret-99"


def _pg_config(tmp_path: Path, url: str) -> Path:
    db_exec(url, "CREATE TABLE items (id int PRIMARY KEY, name text, updated_at timestamp NOT NULL)",
            "INSERT INTO items SELECT g, 'n' || g, TIMESTAMP '2026-01-01' + g * INTERVAL '1 minute' "
            "FROM generate_series(1, 900) g")
    # Inline URL with a password (trust auth accepts it): the plan must not contain it.
    inline = url.replace("postgres@", f"postgres:{PASSWORD}@", 1)
    assert PASSWORD in inline
    exports = [
        {"name": "items_chunked", "table": "items", "mode": "chunked", "chunk_column": "id",
         "chunk_size": 200, "chunk_checkpoint": True, "format": "parquet",
         "destination": {"type": "local", "path": "out/items_chunked"}},
        {"name": "items_inc", "table": "items", "mode": "incremental", "cursor_column": "updated_at",
         "format": "parquet", "destination": {"type": "local", "path": "out/items_inc"}},
    ]
    return write_config(tmp_path, {"type": "postgres", "url": inline}, exports)


def _plan(config: Path, *args: str) -> tuple[Path, dict]:
    out = config.parent / "plan.json"
    result = rivet("plan", "-c", str(config), "-o", str(out), *args)
    assert result.returncode == 0, result.stderr
    return out, json.loads(out.read_text())


def test_plan_apply_round_trip_postgres(tmp_path: Path, pg_url: str) -> None:
    config = _pg_config(tmp_path, pg_url)
    plan_path, doc = _plan(config)
    text = plan_path.read_text()
    assert PASSWORD not in text and "REDACTED" in text
    assert doc["schema_version"] == 1 and doc["config_path"] == str(config)
    assert doc["config_hash"].startswith("sha256:")
    by_name = {e["export_name"]: e for e in doc["exports"]}
    chunked, inc = by_name["items_chunked"], by_name["items_inc"]
    assert chunked["chunks"]["strategy"] == "range"
    assert [(w["lo"], w["hi"]) for w in chunked["windows"]][:2] == [("0", "199"), ("200", "399")]
    assert len(chunked["windows"]) == 5 and chunked["row_estimate"] == 900
    assert inc["cursor_snapshot"] == {"cursor_column": "updated_at", "value": None}
    assert inc["diagnostics"]["verdict"] in ("efficient", "acceptable", "degraded")
    assert not (tmp_path / "out").exists()  # planning writes no data
    result = rivet("apply", str(plan_path))
    assert result.returncode == 0, result.stderr
    for name in ("items_chunked", "items_inc"):
        table = manifest_table(tmp_path / "out" / name)
        assert sorted(table.column("id").to_pylist()) == list(range(1, 901)), name


def _sqlite_config(tmp_path: Path, url: str) -> Path:
    exports = [{"name": "events", "table": "events", "mode": "incremental", "cursor_column": "updated_at",
                "format": "parquet", "destination": {"type": "local", "path": "out/events"}}]
    return write_config(tmp_path, source_block(url), exports)


def _add_event(url: str) -> None:
    import sqlite3

    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        conn.execute("INSERT INTO events VALUES ('late', '2026-02-01 00:00:00')")


def test_apply_refuses_when_the_cursor_moved_and_force_runs_it(tmp_path: Path, sqlite_mix: str) -> None:
    config = _sqlite_config(tmp_path, sqlite_mix)
    assert rivet("run", "-c", str(config)).returncode == 0
    before = cursor_of(config, "events")
    plan_path, doc = _plan(config)
    assert doc["exports"][0]["cursor_snapshot"]["value"] == before
    _add_event(sqlite_mix)
    assert rivet("run", "-c", str(config)).returncode == 0  # another run moves the cursor
    assert cursor_of(config, "events") != before
    result = rivet("apply", str(plan_path))
    assert result.returncode == 1
    assert "stale" in result.stderr and "cursor moved" in result.stderr
    assert "re-run `rivet plan`" in result.stderr and "--force" in result.stderr
    result = rivet("apply", str(plan_path), "--force")
    assert result.returncode == 0, result.stderr
    assert "warning: applying a stale plan" in result.stderr


def test_apply_refuses_an_edited_config(tmp_path: Path, sqlite_mix: str) -> None:
    config = _sqlite_config(tmp_path, sqlite_mix)
    plan_path, _ = _plan(config)
    config.write_text(config.read_text().replace("format: parquet", "format: csv"))
    result = rivet("apply", str(plan_path))
    assert result.returncode == 1
    assert "changed since the plan" in result.stderr
    assert not (tmp_path / "out").exists()


def test_apply_refuses_an_old_plan(tmp_path: Path, sqlite_mix: str) -> None:
    config = _sqlite_config(tmp_path, sqlite_mix)
    plan_path, doc = _plan(config)
    result = rivet("apply", str(plan_path), "--max-age", "0")
    assert result.returncode == 1 and "old (max age 0s)" in result.stderr
    doc["created_at"] = (datetime.now(UTC) - timedelta(hours=30)).isoformat()
    plan_path.write_text(json.dumps(doc))
    result = rivet("apply", str(plan_path))
    assert result.returncode == 1 and "30h old (max age 24h)" in result.stderr
    assert not (tmp_path / "out").exists()
    result = rivet("apply", str(plan_path), "--force")
    assert result.returncode == 0, result.stderr
    assert manifest_table(tmp_path / "out" / "events").num_rows == 1_200


def test_apply_rejects_a_file_that_is_not_a_plan(tmp_path: Path) -> None:
    bogus = tmp_path / "p.json"
    bogus.write_text('{"hello": 1}')
    result = rivet("apply", str(bogus))
    assert result.returncode == 1 and "is not a rivet plan" in result.stderr


def test_apply_refuses_when_chunk_windows_changed(tmp_path: Path, sqlite_mix: str) -> None:
    import sqlite3

    exports = [{"name": "big", "table": "big_int", "mode": "chunked", "chunk_column": "id",
                "chunk_size": 1000, "chunk_checkpoint": True, "format": "parquet",
                "destination": {"type": "local", "path": "out/big"}}]
    config = write_config(tmp_path, source_block(sqlite_mix), exports)
    plan_path, doc = _plan(config)
    assert len(doc["exports"][0]["windows"]) == 3  # ids 1..2500 in windows of 1000
    with sqlite3.connect(sqlite_mix.removeprefix("sqlite:///")) as conn:
        conn.execute("INSERT INTO big_int VALUES (7000, 'far', '1.00')")
    result = rivet("apply", str(plan_path))
    assert result.returncode == 1
    assert "chunk windows changed" in result.stderr and "3 -> 8 window(s)" in result.stderr  # grid windows up to id 7000


def test_plan_redacts_webhook_credentials(tmp_path: Path, sqlite_mix: str) -> None:
    config = _sqlite_config(tmp_path, sqlite_mix)
    config.write_text(config.read_text() + (
        "notifications:\n"
        "  slack: {webhook_url: 'https://hooks.slack.example/services/T0/B0/hook-Secret-1'}\n"
        "  webhook: {url: 'https://ops.example/hook?x=1', headers: {Authorization: 'Bearer tok-Secret-2'}}\n"))
    plan_path, doc = _plan(config)
    text = plan_path.read_text()
    assert "hook-Secret-1" not in text and "tok-Secret-2" not in text
    assert doc["resolved_config"]["notifications"]["webhook"]["headers"] == {"Authorization": "REDACTED"}
