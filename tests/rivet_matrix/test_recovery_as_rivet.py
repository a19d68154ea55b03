"""Recovery as Rivet behaves (issue 35 item 4; docs/rivet-compat.md "Recovery: Rivet's
behaviour, or ours and why").

Each test drives the real `rivet` CLI against the real PostgreSQL server and checks what
the destination and the state store hold afterwards with independent readers (pyarrow, the
SQLite file beside the config). Where this project keeps its own behaviour on purpose (range
windows aligned to a grid), the test pins that behaviour and the page gives the reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import (
    data_files,
    db_exec,
    manifest_ids,
    rivet,
    rivet_quick,
    source_block,
    state_rows,
    write_config,
)

ROWS = 100


@pytest.fixture(autouse=True)
def _sqlite_state_beside_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The assertions read .rivet_state.db beside the config; no fault point is armed."""
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)
    for var in ("RIVET_TEST_PANIC_AT", "RIVET_TEST_ERROR_AT"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def items(pg_url: str) -> str:
    """items(id 1..100) in a fresh PostgreSQL database."""
    values = ", ".join(f"({i}, 'item {i}')" for i in range(1, ROWS + 1))
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(50) NOT NULL)",
            f"INSERT INTO items VALUES {values}")
    return pg_url


def _config(tmp: Path, url: str, **fields: object) -> Path:
    export = {"name": "items", "table": "items", "mode": "full", "format": "parquet",
              "destination": {"type": "local", "path": "out"}, **fields}
    return write_config(tmp, source_block(url), [export])


def _chunked(tmp: Path, url: str) -> Path:
    return _config(tmp, url, mode="chunked", chunk_column="id", chunk_size=25, chunk_checkpoint=True)


def _published(out: Path) -> tuple[bytes, bytes, list[str]]:
    """What a reader of the prefix sees: manifest.json, _SUCCESS and the data files."""
    return ((out / "manifest.json").read_bytes(), (out / "_SUCCESS").read_bytes(),
            sorted(p.name for p in data_files(out)))


@pytest.mark.postgres
def test_resume_on_a_full_export_warns_resume_no_checkpoint_and_is_refused_over_success(tmp_path, items):
    config = _config(tmp_path, items)
    out = tmp_path / "out"
    assert rivet_quick("run", "-c", str(config)).returncode == 0
    before = _published(out)

    refused = rivet("run", "-c", str(config), "--resume")

    assert refused.returncode == 1, refused.stderr
    assert "[resume-no-checkpoint]" in refused.stderr
    assert "--resume has no effect unless strategy is chunked with chunk_checkpoint: true" in refused.stderr
    assert "already has _SUCCESS" in refused.stderr and "--force" in refused.stderr
    assert _published(out) == before  # nothing published was touched
    assert manifest_ids(out) == list(range(1, ROWS + 1))


@pytest.mark.postgres
def test_resume_on_a_first_full_run_warns_and_exports_every_row(tmp_path, items):
    config = _config(tmp_path, items)
    result = rivet("run", "-c", str(config), "--resume")
    assert result.returncode == 0, result.stderr
    assert "--resume has no effect unless strategy is chunked" in result.stderr
    assert manifest_ids(tmp_path / "out") == list(range(1, ROWS + 1))


@pytest.mark.postgres
def test_resume_after_a_finished_chunked_run_is_refused_naming_success_and_force_only_passes_that_gate(
        tmp_path, items):
    config = _chunked(tmp_path, items)
    out = tmp_path / "out"
    assert rivet_quick("run", "-c", str(config)).returncode == 0
    before = _published(out)

    refused = rivet("run", "-c", str(config), "--resume")
    assert refused.returncode == 1, refused.stderr
    assert "already has _SUCCESS" in refused.stderr and "Pass --force" in refused.stderr
    assert "resume-no-checkpoint" not in refused.stderr  # a checkpointed export: the flag applies

    forced = rivet("run", "-c", str(config), "--resume", "--force")
    assert forced.returncode == 1, forced.stderr
    assert "already has _SUCCESS" not in forced.stderr  # past the gate …
    assert "no in-progress chunk checkpoint" in forced.stderr  # … to Rivet's next refusal
    assert _published(out) == before
    assert state_rows(config, "SELECT DISTINCT status FROM chunk_run") == [("completed",)]


@pytest.mark.postgres
def test_force_without_resume_warns_that_it_is_a_no_op(tmp_path, items):
    config = _config(tmp_path, items)
    result = rivet_quick("run", "-c", str(config), "--force")
    assert result.returncode == 0, result.stderr
    assert "--force without --resume is a no-op" in result.stderr
    assert manifest_ids(tmp_path / "out") == list(range(1, ROWS + 1))


@pytest.mark.postgres
def test_a_reconcile_mismatch_is_reported_on_stderr_with_the_report_on_stdout(tmp_path, items):
    config = _chunked(tmp_path, items)
    assert rivet_quick("run", "-c", str(config)).returncode == 0
    db_exec(items, "DELETE FROM items WHERE id BETWEEN 30 AND 34")

    found = rivet("reconcile", "-c", str(config), "-e", "items")

    assert found.returncode == 3, found.stderr
    assert "MISMATCH" in found.stdout  # the report
    assert "1 of 5 chunk(s) disagree with the source" in found.stderr  # the verdict
    assert f"rivet repair -c {config} -e items --execute" in found.stderr


@pytest.mark.postgres
@pytest.mark.parametrize("occupant", ["directory", "symlink"])
def test_a_manifest_json_that_is_not_a_file_is_unreadable_not_a_legacy_prefix(tmp_path, items, occupant):
    config = _config(tmp_path, items)
    out = tmp_path / "out"
    assert rivet_quick("run", "-c", str(config)).returncode == 0
    saved = tmp_path / "saved-manifest.json"
    (out / "manifest.json").rename(saved)
    if occupant == "directory":
        (out / "manifest.json").mkdir()
    else:
        os.symlink(saved, out / "manifest.json")
    for db in tmp_path.glob(".rivet_state.db*"):  # no run ledger: the prefix alone decides
        db.unlink()

    result = rivet("validate", "-c", str(config), "--format", "json")

    assert result.returncode == 1, result.stdout + result.stderr
    verdict = json.loads(result.stdout)["exports"][0]["verification"]
    assert verdict["legacy_run"] is False
    kinds = [f["kind"] for f in verdict["failures"]]
    assert kinds == ["manifest_read_error"], verdict
    assert "manifest.json" in verdict["failures"][0]["detail"]
    assert (out / "manifest.json").is_symlink() or (out / "manifest.json").is_dir()  # left as found


@pytest.mark.postgres
def test_range_windows_stay_on_the_chunk_size_grid_rather_than_starting_at_the_minimum(tmp_path, items):
    """Kept on purpose (docs/rivet-compat.md): ids 1..100 with chunk_size 25 give the grid
    windows 0-24 … 100-124, where Rivet starts at the minimum (1-25 … 76-100)."""
    config = _chunked(tmp_path, items)
    assert rivet_quick("run", "-c", str(config)).returncode == 0
    windows = state_rows(config, "SELECT start_key, end_key, rows_written FROM chunk_task ORDER BY chunk_index")
    assert [(int(lo), int(hi)) for lo, hi, _ in windows] == [(0, 24), (25, 49), (50, 74), (75, 99), (100, 124)]
    assert [n for _, _, n in windows] == [24, 25, 25, 25, 1]
    assert manifest_ids(tmp_path / "out") == list(range(1, ROWS + 1))
