"""Gates and failure semantics through the real `rivet` CLI (a subprocess per run).

Quality gate, schema-drift gate, notification failures and redaction, fault hooks against
ADR-0002, retries, config errors and `skip_empty`. Every check reads an independent
oracle — the files at the destination (bytes, listings), the SQLite state DB queried
directly, the HTTP bodies a real local server received — never the tool's own counters.
Engine-independent behaviour uses SQLite sources (fast); PostgreSQL is used where the
behaviour depends on a real server (auth errors, SQLSTATE classification).
"""

from __future__ import annotations

import json
import socket
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from tests.helpers import (
    cursor_of,
    data_files,
    db_exec,
    manifest_ids,
    rivet,
    rivet_in_process,
    rivet_quick,
    source_block,
    state_rows,
    write_config,
)


# ------------------------------------------------------------------------------- helpers
def sqlite_source(tmp: Path, rows: list[tuple], *, ddl: str | None = None, name: str = "src.db") -> str:
    """A SQLite database with table `items` holding `rows`; returns its URL."""
    db = tmp / name
    with sqlite3.connect(db) as conn:
        conn.execute(ddl or "CREATE TABLE items (id INTEGER PRIMARY KEY, email TEXT, score REAL, "
                            "updated_at DATETIME)")
        if rows:
            marks = ",".join("?" * len(rows[0]))
            conn.executemany(f"INSERT INTO items VALUES ({marks})", rows)
    return f"sqlite:///{db}"


def item_rows(first: int, last: int) -> list[tuple]:
    return [(i, f"u{i}@x", i * 1.5, f"2026-01-01 00:{i:02d}:00") for i in range(first, last + 1)]


def items_export(**extra: Any) -> dict[str, Any]:
    return {"name": "items", "table": "items", "format": "parquet",
            "destination": {"type": "local", "path": "out"}, **extra}


def run_json(config: Path, *args: str, env: dict[str, str] | None = None):  # noqa: ANN201
    """`rivet run --json`; returns (completed process, the single run summary or None)."""
    proc = rivet_quick("run", "-c", str(config), "--json", *args, env=env)
    try:
        summary = json.loads(proc.stdout)["runs"][0]
    except (json.JSONDecodeError, KeyError, IndexError):
        summary = None
    return proc, summary


def metrics_rows(config: Path, export: str = "items") -> list[dict[str, Any]]:
    db = config.parent / ".rivet_state.db"
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute(
            "SELECT * FROM export_metrics WHERE export_name=? ORDER BY id", [export])]


def journal_events(config: Path, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    [(raw,)] = state_rows(config, "SELECT journal_json FROM run_journal WHERE run_id=?", [run_id])
    return [next(iter(e["event"].items())) for e in json.loads(raw)["entries"]]


def baseline_of(config: Path, export: str = "items") -> list[dict[str, str]] | None:
    rows = state_rows(config, "SELECT columns_json FROM export_schema WHERE export_name=?", [export])
    return json.loads(rows[0][0]) if rows else None


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def free_port() -> int:
    """A TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def report_md(config: Path, run_id: str) -> str:
    return (config.parent / ".rivet" / "runs" / run_id / "summary.md").read_text()


# --------------------------------------------------------------------- 1. quality gate
@pytest.mark.parametrize(("quality", "rows", "expected"), [
    ({"row_count_min": 100}, item_rows(1, 10), "row_count 10 below minimum 100"),
    ({"null_ratio_max": {"email": 0.1}},
     [(i, None if i <= 3 else f"u{i}@x", 1.0, f"2026-01-01 00:{i:02d}:00") for i in range(1, 11)],
     "null ratio of column 'email' is 0.30 > max 0.10 (3 of 10 rows)"),
    ({"unique_columns": ["email"]},
     [(i, "dup@x" if i in (4, 7) else f"u{i}@x", 1.0, f"2026-01-01 00:{i:02d}:00") for i in range(1, 11)],
     "column 'email': 1 duplicate values out of 10 rows"),
], ids=["row_count_min", "null_ratio_max", "unique_columns"])
def test_a_failed_quality_check_exits_3_and_publishes_nothing(tmp_path, quality, rows, expected):
    config = write_config(tmp_path, source_block(sqlite_source(tmp_path, rows)), [items_export(
        mode="incremental", cursor_column="updated_at", quality=quality)])
    proc, summary = run_json(config)

    assert proc.returncode == 3, proc.stderr
    assert expected in proc.stderr and "quality check(s) failed" in proc.stderr
    assert files_under(tmp_path / "out") == []  # no part, no manifest, no _SUCCESS
    assert not list(tmp_path.rglob("*.parquet"))  # staged files are gone too
    assert cursor_of(config, "items") is None
    assert state_rows(config, "SELECT COUNT(*) FROM file_log") == [(0,)]
    [metric] = metrics_rows(config)
    assert metric["status"] == "failed" and metric["run_id"] == summary["run_id"]
    assert expected in metric["error_message"] and metric["quality_passed"] == 0
    md = report_md(config, summary["run_id"])
    assert "**FAILED**" in md and expected in md


# --------------------------------------------------------------------- 2. schema drift
def _recreate_items(db: Path, ddl: str, copy_cols: str, new_rows: list[tuple]) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE items RENAME TO items_old")
        conn.execute(ddl)
        conn.execute(f"INSERT INTO items ({copy_cols}) SELECT {copy_cols} FROM items_old")
        conn.execute("DROP TABLE items_old")
        marks = ",".join("?" * len(new_rows[0]))
        conn.executemany(f"INSERT INTO items VALUES ({marks})", new_rows)


def test_schema_drift_fail_keeps_baseline_and_destination_then_warn_and_continue_accept_it(tmp_path):
    db_url = sqlite_source(tmp_path, item_rows(1, 5))
    db = tmp_path / "src.db"

    def configure(policy: str) -> Path:
        return write_config(tmp_path, source_block(db_url), [items_export(
            mode="incremental", cursor_column="updated_at", on_schema_drift=policy)])

    config = configure("fail")
    first, _ = run_json(config)
    assert first.returncode == 0, first.stderr
    out = tmp_path / "out"
    manifest, marker = (out / "manifest.json").read_bytes(), (out / "_SUCCESS").read_bytes()
    files_before = files_under(out)
    baseline = baseline_of(config)
    cursor = cursor_of(config, "items")
    assert {c["name"] for c in baseline} == {"id", "email", "score", "updated_at"} and cursor

    # add a column AND change a type (score REAL -> TEXT), plus new rows past the cursor
    _recreate_items(db, "CREATE TABLE items (id INTEGER PRIMARY KEY, email TEXT, score TEXT, "
                        "updated_at DATETIME, extra INTEGER)",
                    "id, email, score, updated_at",
                    [(i, f"u{i}@x", "high", f"2026-01-01 00:{i:02d}:00", i) for i in (6, 7)])
    for attempt in range(2):  # the baseline is kept, so the next run detects the drift again
        proc, summary = run_json(config)
        assert proc.returncode == 4, (attempt, proc.stderr)
        assert "schema drift detected for export 'items': 1 added, 0 removed, 1 retyped" in proc.stderr
        assert files_under(out) == files_before
        assert (out / "manifest.json").read_bytes() == manifest
        assert (out / "_SUCCESS").read_bytes() == marker
        assert baseline_of(config) == baseline
        assert cursor_of(config, "items") == cursor
        metric = metrics_rows(config)[-1]
        assert (metric["status"], metric["schema_changed"], metric["error_class"]) == ("failed", 1, "schema_drift")
        events = dict(journal_events(config, summary["run_id"]))
        assert events["SchemaChanged"]["added"] == ["extra (int64)"]
        assert events["SchemaChanged"]["type_changed"] == [["score", "double", "string"]]

    proc, summary = run_json(configure("warn"))
    assert proc.returncode == 0, proc.stderr
    assert "schema drift: 1 added, 0 removed, 1 retyped" in proc.stderr
    new_baseline = {c["name"]: c["type"] for c in baseline_of(config)}
    assert new_baseline["extra"] == "int64" and new_baseline["score"] == "string"
    metric = metrics_rows(config)[-1]
    assert (metric["status"], metric["schema_changed"]) == ("success", 1)
    assert cursor_of(config, "items") == "2026-01-01T00:07:00.000000"
    assert summary["schema_changed"] is True

    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE items ADD COLUMN note TEXT")
        conn.execute("INSERT INTO items VALUES (8, 'u8@x', 'low', '2026-01-01 00:08:00', 8, 'n')")
    proc, summary = run_json(configure("continue"))
    assert proc.returncode == 0, proc.stderr
    assert "schema drift" not in proc.stderr  # continue: silent
    assert "note" in {c["name"] for c in baseline_of(config)}
    assert metrics_rows(config)[-1]["schema_changed"] == 1
    ids = [i for p in data_files(out) for i in pq.read_table(p, columns=["id"]).column("id").to_pylist()]
    assert sorted(ids) == list(range(1, 9))  # each row exported exactly once across the drift


# --------------------------------------------------------------------- 3. notifications
def _notify_config(tmp_path: Path, *, fail_quality: bool, webhook: str | None, slack: str | None) -> Path:
    notifications: dict[str, Any] = {}
    if webhook:
        notifications["webhook"] = {"url": webhook, "on": ["failure", "success"], "timeout_s": 5}
    if slack:
        notifications["slack"] = {"webhook_url": slack, "on": ["failure"]}
    export = items_export(**({"quality": {"row_count_min": 1000}} if fail_quality else {}))
    return write_config(tmp_path, source_block(sqlite_source(tmp_path, item_rows(1, 5))), [export],
                        notifications=notifications)


@pytest.mark.parametrize(("outcome", "webhook", "slack"), [
    ("success", "500", None),
    ("quality_failure", "500", "refused"),
    ("quality_failure", "refused", "500"),
])
def test_a_failing_notification_endpoint_never_changes_the_exit_code(tmp_path, httpserver, outcome,
                                                                   webhook, slack):
    httpserver.expect_request("/hook", method="POST").respond_with_data("boom", status=500)
    httpserver.expect_request("/slack", method="POST").respond_with_data("boom", status=500)
    dead = f"http://127.0.0.1:{free_port()}"
    urls = {"500": httpserver.url_for("/hook"), "refused": f"{dead}/hook"}
    slack_urls = {"500": httpserver.url_for("/slack"), "refused": f"{dead}/slack"}
    config = _notify_config(tmp_path, fail_quality=outcome != "success", webhook=urls[webhook],
                            slack=slack_urls.get(slack))
    proc, summary = run_json(config)

    assert proc.returncode == (0 if outcome == "success" else 3), proc.stderr
    assert summary["status"] == ("success" if outcome == "success" else "failed")
    expected = {"500": "failed: HTTP 500", "refused": "failed: connection refused"}
    assert f"webhook notification to {urls[webhook].rsplit('/', 1)[0]} {expected[webhook]}" in proc.stderr
    if slack:
        assert f"slack notification to {slack_urls[slack].rsplit('/', 1)[0]} {expected[slack]}" in proc.stderr
    hit = {req.path for req, _ in httpserver.log}
    assert ("/hook" in hit) == (webhook == "500") and ("/slack" in hit) == (slack == "500")
    if outcome == "success":
        assert (tmp_path / "out" / "_SUCCESS").exists() and manifest_ids(tmp_path / "out") == [1, 2, 3, 4, 5]
    else:
        assert files_under(tmp_path / "out") == []


# The secrets test moved to tests/hardening/test_secrets.py (extended: success + failure,
# S3 secret key, Dagster event log, every artifact grepped).


# --------------------------------------------------------------------- 4. fault hooks
@pytest.mark.parametrize("point", ["after_file_write", "after_manifest_update"])
def test_a_failed_run_never_replaces_the_last_good_manifest(tmp_path, point):
    config = write_config(tmp_path, source_block(sqlite_source(tmp_path, item_rows(1, 8))), [items_export()])
    good, _ = run_json(config)
    assert good.returncode == 0, good.stderr
    out = tmp_path / "out"
    manifest, marker = (out / "manifest.json").read_bytes(), (out / "_SUCCESS").read_bytes()
    [good_part] = data_files(out)

    proc, summary = run_json(config, env={"RIVET_TEST_ERROR_AT": point})
    assert proc.returncode != 0 and f"injected fault at {point}" in proc.stderr
    assert (out / "manifest.json").read_bytes() == manifest
    assert (out / "_SUCCESS").read_bytes() == marker
    [new_part] = [p for p in data_files(out) if p != good_part]  # durable, not in manifest.json
    new_key = new_part.relative_to(out).as_posix()  # data/<name>
    assert metrics_rows(config)[-1]["status"] == "failed"

    run_copy = out / f"manifest-{summary['run_id']}.json"
    logged = state_rows(config, "SELECT file_name FROM file_log WHERE run_id=?", [summary["run_id"]])
    if point == "after_manifest_update":  # the part was recorded: its trail is a failed run copy
        trail = json.loads(run_copy.read_text())
        assert trail["status"] == "failed"
        assert [p["path"] for p in trail["parts"]] == [new_key]
        assert logged == [(new_key,)]
    else:  # the part is durable but was never recorded
        assert not run_copy.exists() and logged == []

    check = rivet_quick("validate", "-c", str(config), "--format", "json")
    assert check.returncode == 0, check.stdout + check.stderr
    failures = json.loads(check.stdout)["exports"][0]["verification"]["failures"]
    assert [(f["kind"], f["key"]) for f in failures] == [("untracked_object", new_key)]
    assert manifest_ids(out) == list(range(1, 9))


# --------------------------------------------------------------------- 5. retries
def test_a_refused_connection_is_retried_with_exponential_backoff_then_exits_2(tmp_path):
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nope"
    config = write_config(tmp_path, {"type": "postgres", "url": url,
                                     "tuning": {"max_retries": 2, "retry_backoff_ms": 10}},
                          [items_export()])
    proc, summary = run_json(config)

    assert proc.returncode == 2, proc.stderr
    events = journal_events(config, summary["run_id"])
    retries = [f for name, f in events if name == "RetryAttempted"]
    assert [(r["attempt"], r["backoff_ms"]) for r in retries] == [(1, 10), (2, 20)]
    assert "Connection refused" in retries[0]["reason"]
    assert (events[0][0], events[-1][0]) == ("PlanResolved", "RunCompleted")
    metric = metrics_rows(config)[-1]
    assert (metric["status"], metric["retries"]) == ("failed", 2)


def test_a_permanent_sql_error_is_not_retried_and_exits_1(tmp_path, pg_url):
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY)", "INSERT INTO items VALUES (1)")
    export = {k: v for k, v in items_export().items() if k != "table"}
    config = write_config(tmp_path, {**source_block(pg_url), "tuning": {"max_retries": 3, "retry_backoff_ms": 10}},
                          [{**export, "query": "SELEC id FROM items"}])
    proc, summary = run_json(config)

    assert proc.returncode == 1, proc.stderr
    assert "syntax error" in proc.stderr
    names = [name for name, _ in journal_events(config, summary["run_id"])]
    assert "RetryAttempted" not in names
    assert metrics_rows(config)[-1]["retries"] == 0
    assert files_under(tmp_path / "out") == []


def test_a_multi_export_run_continues_past_failures_and_exits_with_the_most_severe_class(tmp_path):
    url = sqlite_source(tmp_path, item_rows(1, 4))
    exports = [items_export(name="bad_sql", table=None, query="SELEC 1", destination={"type": "local", "path": "a"}),
               items_export(name="bad_quality", quality={"row_count_max": 1}, destination={"type": "local", "path": "b"}),
               items_export(name="good", destination={"type": "local", "path": "c"})]
    for e in exports:
        if e["table"] is None:
            del e["table"]
    config = write_config(tmp_path, source_block(url), exports)
    proc = rivet_quick("run", "-c", str(config), "--json")

    assert proc.returncode == 3, proc.stderr  # 3 (quality) outranks 1 (SQL error)
    runs = {r["export_name"]: r for r in json.loads(proc.stdout)["runs"]}
    assert {k: (r["status"], r["exit_code"]) for k, r in runs.items()} == \
        {"bad_sql": ("failed", 1), "bad_quality": ("failed", 3), "good": ("success", 0)}
    assert manifest_ids(tmp_path / "c") == [1, 2, 3, 4]
    assert files_under(tmp_path / "a") == [] and files_under(tmp_path / "b") == []


# --------------------------------------------------------------------- 6. config errors
_CONFIG_CASES: dict[str, tuple[Any, str]] = {
    # id: (mutation of a valid config, stable substring of the message)
    "unknown_key": (lambda c: c["exports"][0].update(skip_emtpy=True),
                    "unknown field `skip_emtpy`"),
    "bad_enum": (lambda c: c["exports"][0].update(mode="gibberish"), "unknown variant"),
    "missing_format": (lambda c: c["exports"][0].pop("format"), "missing field `format`"),
    "duplicate_export": (lambda c: c["exports"].append(dict(c["exports"][0])),
                         "duplicate export name 'items'"),
    "unresolved_var": (lambda c: c["exports"][0].update(table="${RIVET_NO_SUCH_VAR}"),
                       "'${RIVET_NO_SUCH_VAR}' in the config is unresolved"),
    "misplaced_tuning": (lambda c: c["source"].update(batch_size=10), "belong under 'source.tuning:'"),
    "csv_compression": (lambda c: c["exports"][0].update(format="csv", compression="zstd"),
                        "CSV output does not support compression: zstd"),
    "incremental_no_cursor": (lambda c: c["exports"][0].update(mode="incremental"),
                              "incremental mode requires cursor_column"),
    "chunked_zero_size": (lambda c: c["exports"][0].update(mode="chunked", chunk_column="id", chunk_size=0),
                          "requires chunk_size >= 1"),
    "non_loopback_s3": (lambda c: c["exports"][0].update(destination={
        "type": "s3", "bucket": "b", "endpoint": "http://10.1.2.3:9000"}), "points at a non-loopback host"),
}


def _config_case(tmp: Path, case: str) -> Path:
    cfg = {"source": {"type": "sqlite", "url": f"sqlite:///{tmp}/src.db"}, "exports": [items_export()]}
    _CONFIG_CASES[case][0](cfg)
    path = tmp / "rivet.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path




@pytest.mark.parametrize("case", list(_CONFIG_CASES))
def test_a_config_error_exits_1_with_one_error_line_family_and_no_traceback(tmp_path, case):
    substring = _CONFIG_CASES[case][1]
    config = _config_case(tmp_path, case)
    plain = rivet_in_process("run", "-c", str(config))
    assert plain.exit_code == 1, plain.stderr
    assert plain.stdout == ""
    assert plain.stderr.startswith("Error: ") and plain.stderr.count("Error:") == 1, plain.stderr
    assert substring in plain.stderr
    assert "Traceback" not in plain.stderr
    if case == "unknown_key":
        assert "Did you mean `skip_empty`?" in plain.stderr

    as_json = rivet_in_process("--json-errors", "run", "-c", str(config))
    assert as_json.exit_code == 1
    [line] = as_json.stderr.strip().splitlines()
    payload = json.loads(line)
    assert payload["exit_class"] == 1 and substring in payload["error"]
    assert not (tmp_path / ".rivet_state.db").exists()  # rejected before anything was opened


def test_the_rivet_binary_reports_config_errors_and_unknown_exports_the_same_way(tmp_path):
    bad = _config_case(tmp_path, "csv_compression")
    good_dir = tmp_path / "good"
    good_dir.mkdir()
    good = write_config(good_dir, {"type": "sqlite", "url": f"sqlite:///{good_dir}/src.db"},
                        [items_export(), items_export(name="orders", destination={"type": "local", "path": "orders"})])
    jobs = {"plain": ("run", "-c", str(bad)), "json": ("--json-errors", "run", "-c", str(bad)),
            "unknown": ("run", "-c", str(good), "-e", "nope")}
    with ThreadPoolExecutor(max_workers=3) as pool:
        done = {k: pool.submit(rivet, *a) for k, a in jobs.items()}
        plain, as_json, unknown = (done[k].result() for k in jobs)

    assert plain.returncode == 1 and plain.stdout == ""
    assert plain.stderr.count("Error:") == 1 and "Traceback" not in plain.stderr
    assert "CSV output does not support compression: zstd" in plain.stderr
    assert as_json.returncode == 1
    assert json.loads(as_json.stderr)["exit_class"] == 1
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "Error: unknown export 'nope'; known exports: items, orders"


# --------------------------------------------------------------------- 7. skip_empty
@pytest.mark.parametrize("skip_empty", [True, False])
def test_an_empty_table_is_skipped_only_with_skip_empty(tmp_path, skip_empty):
    config = write_config(tmp_path, source_block(sqlite_source(tmp_path, [])),
                          [items_export(skip_empty=skip_empty)])
    proc, summary = run_json(config)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    assert data_files(out) == []
    [metric] = metrics_rows(config)
    if skip_empty:
        assert summary["status"] == "skipped" and metric["status"] == "skipped"
        assert metric["skip_reason"] == "source returned 0 rows"
        assert not (out / "manifest.json").exists() and not (out / "_SUCCESS").exists()
    else:
        assert summary["status"] == "success" and metric["status"] == "success"
        manifest = json.loads((out / "manifest.json").read_text())
        assert (manifest["status"], manifest["part_count"], manifest["row_count"], manifest["parts"]) == \
            ("success", 0, 0, [])
        assert (out / "_SUCCESS").exists()
