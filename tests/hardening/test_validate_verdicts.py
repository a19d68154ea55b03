"""`rivet validate` verdicts that must fail, and its read-only contract (issue 20 items 3, 4, 12).

- an export pointed at another export's folder: the manifest there names the other export,
  so the verdict fails (exit 3) instead of passing on someone else's data;
- a missing `_SUCCESS` next to a manifest (what a crash between the two leaves) fails (exit 3);
- an oversized manifest is data integrity (exit 3), not a generic error;
- `validate` creates nothing: not the destination folder, not the state store, not `.rivet/`.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq

from tests.hardening.support import cli
from tests.helpers import source_block, write_config


def _source(tmp: Path, rows: int = 20) -> str:
    db = tmp / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT)")
        conn.execute("CREATE TABLE others (id INTEGER PRIMARY KEY, w TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"v{i}") for i in range(1, rows + 1)])
        conn.executemany("INSERT INTO others VALUES (?, ?)", [(i, f"w{i}") for i in range(1, 6)])
    return f"sqlite:///{db}"


def _config(directory: Path, url: str, name: str, table: str, path: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return write_config(directory, source_block(url), [{
        "name": name, "table": table, "mode": "full", "format": "parquet",
        "destination": {"type": "local", "path": path}}])


def _canonical(prefix: Path) -> tuple[str, list[int]]:
    """The export `manifest.json` names and the ids of the parts it lists, re-read with pyarrow."""
    m = json.loads((prefix / "manifest.json").read_text())
    return m["export_name"], sorted(i for p in m["parts"] for i in pq.read_table(prefix / p["path"]).column("id").to_pylist())


def _verdict(result) -> dict:  # noqa: ANN001
    return json.loads(result.stdout)["exports"][0]["verification"]


def test_an_export_pointed_at_another_exports_folder_fails_validation(tmp_path):
    url = _source(tmp_path)
    shared = tmp_path / "lake" / "items"
    # Two configs (a single config refuses overlapping destinations at load): `items` owns
    # the folder, `others` is pointed at it by mistake.
    items = _config(tmp_path / "a", url, "items", "items", str(shared))
    others = _config(tmp_path / "b", url, "others", "others", str(shared))
    assert cli("run", "-c", str(items)).returncode == 0
    assert cli("validate", "-c", str(items)).returncode == 0

    wrong = cli("validate", "-c", str(others), "--format", "json")
    assert wrong.returncode == 3, wrong.stdout + wrong.stderr
    verdict = _verdict(wrong)
    assert not verdict["passed"]
    mismatch = [f for f in verdict["failures"] if f["kind"] == "manifest_export_mismatch"]
    assert mismatch == [{"kind": "manifest_export_mismatch", "expected": "others", "actual": "items",
                         "code": "RIVET_VERIFY_MANIFEST_OTHER_EXPORT"}]

    # The second export then runs into the same folder: its manifest replaces the first's,
    # and now `items` is the one whose verdict fails (it no longer describes its data).
    assert cli("run", "-c", str(others)).returncode == 0
    assert cli("validate", "-c", str(others)).returncode == 0
    now_wrong = cli("validate", "-c", str(items))
    assert now_wrong.returncode == 3, now_wrong.stdout
    assert "items: FAILED" in now_wrong.stdout and "manifest_export_mismatch" in now_wrong.stdout
    # The oracle: the canonical manifest now lists `others`' rows (re-read with pyarrow).
    assert _canonical(shared) == ("others", [1, 2, 3, 4, 5])


def test_a_missing_success_marker_fails_validation_with_exit_3(tmp_path):
    config = _config(tmp_path, _source(tmp_path), "items", "items", "out")
    assert cli("run", "-c", str(config)).returncode == 0
    (tmp_path / "out" / "_SUCCESS").unlink()  # a crash between manifest.json and _SUCCESS
    result = cli("validate", "-c", str(config), "--format", "json")
    assert result.returncode == 3, result.stdout + result.stderr
    verdict = _verdict(result)
    assert not verdict["passed"] and verdict["success_marker_consistent"] is False
    assert [f["kind"] for f in verdict["failures"]] == ["success_marker_missing"]
    # `run --validate` gives the same verdict; a re-run writes the marker and passes again.
    rerun = cli("run", "-c", str(config), "--validate")
    assert rerun.returncode == 0, rerun.stderr
    assert (tmp_path / "out" / "_SUCCESS").is_file()
    assert _canonical(tmp_path / "out") == ("items", list(range(1, 21)))


def test_an_oversized_manifest_is_data_integrity_exit_3(tmp_path):
    config = _config(tmp_path, _source(tmp_path), "items", "items", "out")
    assert cli("run", "-c", str(config)).returncode == 0
    os.truncate(tmp_path / "out" / "manifest.json", 64 * 1024 * 1024 + 1)  # sparse: no disk used
    result = cli("validate", "-c", str(config))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "manifest_oversized" in result.stdout


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_validate_creates_nothing_for_a_missing_destination(tmp_path):
    url = _source(tmp_path)
    config = write_config(tmp_path, source_block(url), [
        {"name": "items", "table": "items", "mode": "full", "format": "parquet",
         "destination": {"type": "local", "path": "never/written/items"}},
        {"name": "days", "table": "items", "mode": "time_window", "time_column": "v", "days_window": 7,
         "format": "parquet", "destination": {"type": "local", "path": "never/written/days"}}])
    before = _tree(tmp_path)
    result = cli("validate", "-c", str(config), "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    exports = json.loads(result.stdout)["exports"]
    assert [e["verification"]["legacy_run"] for e in exports] == [True, True]
    assert _tree(tmp_path) == before  # no folder, no state store, no .rivet/
    assert not (tmp_path / "never").exists()


# --- the run ledger and the destination cross-checked (issue 33, finding 8) -----------------
def _emptied_after_success(tmp_path: Path, destination: dict, env: dict[str, str] | None = None) -> Path:
    config = write_config(tmp_path, source_block(_source(tmp_path)), [{
        "name": "items", "table": "items", "mode": "full", "format": "parquet", "destination": destination}])
    for _ in range(2):
        assert cli("run", "-c", str(config), env=env).returncode == 0
    assert cli("validate", "-c", str(config), env=env).returncode == 0
    return config


def test_a_prefix_emptied_after_successful_runs_fails_validation_instead_of_reading_as_legacy(tmp_path):
    config = _emptied_after_success(tmp_path, {"type": "local", "path": "out"})
    import shutil

    shutil.rmtree(tmp_path / "out")  # the published data is gone; the state store remembers it
    result = cli("validate", "-c", str(config), "--format", "json")
    assert result.returncode == 3, result.stdout + result.stderr
    verdict = _verdict(result)
    assert not verdict["passed"] and not verdict["legacy_run"]
    [gone] = verdict["failures"]
    assert gone["kind"] == "manifest_gone" and gone["code"] == "RIVET_VERIFY_MANIFEST_GONE"
    assert "2 successful run(s)" in gone["evidence"]
    pretty = cli("validate", "-c", str(config))
    assert pretty.returncode == 3 and "items: FAILED" in pretty.stdout and "run the export again" in pretty.stdout
    # Publishing again makes the prefix true again (the documented fix).
    assert cli("run", "-c", str(config)).returncode == 0
    assert cli("validate", "-c", str(config)).returncode == 0
    assert _canonical(tmp_path / "out") == ("items", list(range(1, 21)))


def test_an_s3_prefix_emptied_after_success_fails_validation_with_a_postgresql_state_store(tmp_path, s3, pg_url):
    env = {"RIVET_STATE_URL": pg_url}
    destination = {"type": "s3", "bucket": s3.bucket, "prefix": "lake/items/", "endpoint": s3.endpoint,
                   "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}
    config = _emptied_after_success(tmp_path, destination, env)
    client = s3.client()
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=s3.bucket, Prefix="lake/items/")["Contents"]]
    client.delete_objects(Bucket=s3.bucket, Delete={"Objects": [{"Key": k} for k in keys]})
    result = cli("validate", "-c", str(config), "--format", "json", env=env)
    assert result.returncode == 3, result.stdout + result.stderr
    assert [f["kind"] for f in _verdict(result)["failures"]] == ["manifest_gone"]
    assert not (tmp_path / ".rivet_state.db").exists()  # the ledger read was the PostgreSQL store's


def test_a_prefix_the_ledger_never_published_stays_legacy_and_validate_writes_nothing(tmp_path):
    url = _source(tmp_path)
    config = write_config(tmp_path, source_block(url), [
        {"name": "items", "table": "items", "mode": "full", "format": "parquet",
         "destination": {"type": "local", "path": "out/items"}},
        {"name": "others", "table": "others", "mode": "full", "format": "parquet",
         "destination": {"type": "local", "path": "out/others"}}])
    assert cli("run", "-c", str(config), "-e", "items").returncode == 0
    state = (tmp_path / ".rivet_state.db").read_bytes()
    result = cli("validate", "-c", str(config), "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    verdicts = {e["export_name"]: e["verification"] for e in json.loads(result.stdout)["exports"]}
    assert verdicts["items"]["passed"] and verdicts["others"]["legacy_run"]
    assert (tmp_path / ".rivet_state.db").read_bytes() == state  # read, never written


# --- an incremental dataset is every run since its baseline (issue 33: the reader's view) ----
def _incremental(tmp_path: Path) -> tuple[Path, str]:
    url = _source(tmp_path, rows=6)
    config = write_config(tmp_path, source_block(url), [{
        "name": "items", "table": "items", "mode": "incremental", "cursor_column": "id", "format": "parquet",
        "destination": {"type": "local", "path": "out"}}])
    assert cli("run", "-c", str(config)).returncode == 0
    with sqlite3.connect(tmp_path / "src.db") as conn:
        conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"v{i}") for i in range(7, 10)])
    assert cli("run", "-c", str(config)).returncode == 0
    return config, url


def _dataset_ids(prefix: Path) -> list[int]:
    """What a reader of the incremental dataset sees: every success run copy's parts (pyarrow)."""
    ids = []
    for copy in sorted(prefix.glob("manifest-*.json")):
        for part in json.loads(copy.read_text())["parts"]:
            ids += pq.read_table(prefix / part["path"]).column("id").to_pylist()
    return sorted(ids)


def test_a_part_of_an_earlier_run_of_an_incremental_dataset_gone_fails_validation(tmp_path):
    config, _ = _incremental(tmp_path)
    out = tmp_path / "out"
    assert _dataset_ids(out) == list(range(1, 10))
    first = min(out.glob("manifest-*.json"), key=lambda p: json.loads(p.read_text())["sequence"])
    lost = json.loads(first.read_text())["parts"][0]["path"]
    (out / lost).unlink()  # the current manifest's own parts are intact
    result = cli("validate", "-c", str(config), "--format", "json")
    assert result.returncode == 3, result.stdout + result.stderr
    [missing] = [f for f in _verdict(result)["failures"] if f["kind"] == "part_missing"]
    assert missing["path"] == lost and missing["run_id"] == json.loads(first.read_text())["run_id"]


def test_an_incremental_run_refuses_to_continue_from_its_cursor_into_an_emptied_prefix(tmp_path):
    import shutil

    config, _ = _incremental(tmp_path)
    shutil.rmtree(tmp_path / "out")
    with sqlite3.connect(tmp_path / "src.db") as conn:
        conn.execute("INSERT INTO items VALUES (10, 'v10')")
    refused = cli("run", "-c", str(config))
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert "has no manifest.json" in refused.stderr and "--full-refresh" in refused.stderr
    assert not list((tmp_path / "out").rglob("*.*"))  # nothing was written
    assert cli("validate", "-c", str(config)).returncode == 3  # manifest_gone, until the way back
    assert cli("run", "-c", str(config), "--full-refresh").returncode == 0
    assert cli("validate", "-c", str(config)).returncode == 0
    assert _dataset_ids(tmp_path / "out") == list(range(1, 11))
