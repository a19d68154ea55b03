"""A code location's load cost grows linearly with its exports (issue 34).

Dagster resolves and snapshots every job of a code location, and an asset job's resolution
walks the whole asset graph: with a job per export (and four per chunked export) the load
time grew with the square of the exports — 1,000 took 43 s over `import dagster`. These
tests count deterministic work instead of timing it: the jobs, sensors and schedules of the
definitions, the serialized repository snapshot (what the code server sends the webserver
and the daemon), and the Python function calls of building, resolving and snapshotting
(cProfile's count, which does not depend on the machine's speed or load). The configs are
benchmarks/dagster_load.py's: a quarter each full, incremental, daily and chunked exports.
Wall-clock numbers: `python -m benchmarks.dagster_load` (docs/benchmarks.md).
"""

from __future__ import annotations

import cProfile
import pstats
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster._serdes import serialize_value

from benchmarks.dagster_load import write_config
from rivet_dagster import build_definitions
from tests.dagster.support import DAGSTER_NOISE

pytestmark = [pytest.mark.filterwarnings(w) for w in DAGSTER_NOISE]


def load(config: Path) -> tuple[dg.RepositoryDefinition, int, int]:
    """(the resolved repository, its snapshot's serialized bytes, the function calls it took
    to build, resolve and snapshot it)."""
    profile = cProfile.Profile()
    profile.enable()
    repo = build_definitions(config).get_repository_def()
    repo.load_all_definitions()
    size = len(serialize_value(RepositorySnap.from_def(repo)))
    profile.disable()
    return repo, size, pstats.Stats(profile).total_calls  # type: ignore[attr-defined]


def scheduled(config: Path) -> Path:
    """The config with a cron schedule on every full and incremental export."""
    data = yaml.safe_load(config.read_text())
    for block in data["exports"]:
        if block["mode"] in ("full", "incremental"):
            block["dagster"] = {**block.get("dagster", {}), "schedule": "0 3 * * *"}
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    return config


def test_a_config_adds_no_job_and_one_planner_sensor_whatever_its_number_of_exports(tmp_path: Path) -> None:
    for exports in (8, 40):
        folder = tmp_path / str(exports)
        folder.mkdir()
        repo = build_definitions(scheduled(write_config(folder, exports))).get_repository_def()
        assert [job.name for job in repo.get_all_jobs()] == ["__ASSET_JOB"], exports
        assert [sensor.name for sensor in repo.sensor_defs] == ["rivet_chunk_planner"], exports
        assert len(repo.schedule_defs) == exports // 2  # one per scheduled export, on the implicit asset job
        assert {schedule.job_name for schedule in repo.schedule_defs} == {"__ASSET_JOB"}


def test_four_times_the_exports_cost_at_most_four_times_the_work_and_15_kb_of_snapshot_each(tmp_path: Path) -> None:
    (tmp_path / "small").mkdir()
    (tmp_path / "large").mkdir()
    _, small_bytes, small_calls = load(write_config(tmp_path / "small", 25))
    _, large_bytes, large_calls = load(write_config(tmp_path / "large", 100))
    # Linear growth with a fixed part stays under 4x; a job per export made it 5.2x here.
    assert large_calls <= 4.4 * small_calls, f"function calls grew {large_calls / small_calls:.2f}x for 4x the exports"
    assert large_bytes <= 4.4 * small_bytes, f"the snapshot grew {large_bytes / small_bytes:.2f}x for 4x the exports"
    assert large_bytes <= 15_000 * 100, f"{large_bytes / 100:,.0f} snapshot bytes per export"
