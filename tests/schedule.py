"""The order in which test files are handed to the pytest-xdist workers: slowest first.

scripts/test.sh runs the suite with `-n 3 --dist loadfile --no-loadscope-reorder`: a whole
file goes to one worker, and the files are handed out in collection order. xdist's own
reordering (the default) sorts files by their NUMBER of tests, which schedules the slowest
files — a soak test, two Celery runs, the `dg` project, a file whose one test runs a whole
document — LAST, because they hold one to six tests each: the other workers then sit idle
while one worker finishes a minutes-long file. Longest first is the classic fix (a long
job started early overlaps with the many short ones).

SECONDS holds the files that took longest in CI's `--durations` (scripts/test.sh prints
the 25 slowest tests), rounded; it only orders, so a stale number costs some idle time at
the end of a run, never a test. Every other file follows, most tests first (xdist's own
heuristic). tests/test_infrastructure.py checks that every file named here exists, so a
renamed file cannot silently drop to the back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Approximate seconds one worker spends in the file (CI, 2 cores, 3 workers).
SECONDS: dict[str, int] = {
    "tests/docs/test_docs_commands.py": 330,
    "tests/dagster/test_dg_project.py": 220,
    "tests/dagster/test_chunked.py": 150,
    "tests/distributed/test_distributed_chunks.py": 125,
    "tests/hardening/test_faults_cloud.py": 120,
    "tests/hardening/test_secret_shapes.py": 95,
    "tests/pipeline/test_verify_depths.py": 90,
    "tests/dagster/test_ui.py": 75,
    "tests/pipeline/test_reconcile_repair.py": 70,
    "tests/hardening/test_soak.py": 65,
    "tests/dagster/test_secrets_in_dagster.py": 55,
    "tests/dagster/test_verify_depth.py": 50,
    "tests/dagster/test_time_partition_assets.py": 50,
    "tests/dagster/test_dagster_cli.py": 50,
    "tests/bench/test_harness.py": 40,
    "tests/dagster/test_integration.py": 40,
    "tests/dagster/test_s3_resource.py": 30,
    # Estimates, not yet CI numbers: scaled from -n 0 runs before and after their `rivet`
    # calls went in-process or their data shrank (150, 120 and 50 s in CI before).
    "tests/pipeline/test_chunked_cli.py": 50,
    "tests/source/test_mysql_read_paths.py": 30,
    "tests/pipeline/test_crash_recovery.py": 30,
}


def _file_of(item: pytest.Item) -> str:
    try:
        return Path(str(item.path)).resolve().relative_to(ROOT).as_posix()
    except ValueError:  # a test outside the repository (pytester): keep it where it is
        return str(item.path)


def slowest_files_first(items: list[pytest.Item]) -> None:
    """Reorder `items` in place: files by SECONDS (descending), then by number of tests
    (descending), then as collected. Tests of one file keep their relative order, so the
    module- and class-scoped fixtures are set up once, as before."""
    counts: dict[str, int] = {}
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        name = _file_of(item)
        counts[name] = counts.get(name, 0) + 1
        first_seen.setdefault(name, index)

    def key(pair: tuple[int, pytest.Item]) -> tuple[int, int, int, int]:
        index, item = pair
        name = _file_of(item)
        return (-SECONDS.get(name, 0), -counts[name], first_seen[name], index)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]
