"""The planner's default run size: as few runs as may export at once (issue 16 item 5).

A run exports its windows one by one, and each run's start-up costs seconds. With
`dagster.max_partitions_per_run` unset, the planner splits an export's windows into
`parallel` ranged runs (1 by default: the whole export in one run, which then publishes the
manifest too), never more than the source pool lets run at once; an explicit
`max_partitions_per_run` still wins. A ranged run whose step fails after committing some
windows is retried (its RetryPolicy) without exporting those windows again. The oracle
re-reads the published parts with pyarrow and compares them with the source table.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from hypothesis import given
from hypothesis import strategies as st

from rivet_core.config import load_config
from rivet_dagster import build_definitions
from rivet_dagster.chunked import pool_limit, windows_per_run
from rivet_dagster.naming import pool_name
from rivet_dagster.partition_keys import chunk_window_key
from tests.dagster.support import (
    Target,
    create_orders,
    export_block,
    id_amounts,
    orders_config,
    request_job,
    run_job,
)
from tests.dagster.test_chunk_freshness import (
    EXPORT,
    KEYS,
    PUBLISH_JOB,
    Planner,
    amounts,
    assert_quiet,
    chunk_run,
    jobs,
    orders_chunked,
    published,
    requested,
)
from tests.helpers import db_exec

#: Twelve rows 100,000 ids apart: twelve id windows of `chunk_size: 100000`. The rule before
#: (10 windows a run, or 1 M rows' worth of id windows) made two runs of them.
SPARSE = 12


def sparse_config(tmp_path: Path, pg_url: str, **extra: object) -> tuple[Target, Path]:
    create_orders(pg_url, rows=SPARSE)
    db_exec(pg_url, "UPDATE orders SET id = id * 100000")
    target = Target("local", tmp_path)
    block = export_block(EXPORT, "chunked", target.destination(EXPORT), chunk_column="id", chunk_size=100_000,
                         **extra)
    return target, orders_config(tmp_path, pg_url, [block])


@given(st.integers(min_value=1, max_value=500), st.integers(min_value=1, max_value=8),
       st.one_of(st.none(), st.integers(min_value=1, max_value=8)))
def test_unset_the_windows_go_in_as_many_runs_as_may_export_at_once(windows: int, parallel: int,
                                                                   limit: int | None) -> None:
    export = load_config_dict({"parallel": parallel})
    size = windows_per_run(export, windows, limit)
    runs = -(-windows // size)
    allowed = min(parallel, limit) if limit else parallel
    assert runs <= allowed  # never more runs than may export at once
    assert size == -(-windows // allowed)  # and no smaller: each run exports its windows one by one
    pinned = load_config_dict({"parallel": parallel, "dagster": {"max_partitions_per_run": 3}})
    assert windows_per_run(pinned, windows, limit) == 3  # set: obeyed


def load_config_dict(extra: dict[str, object]):  # noqa: ANN201 - an ExportConfig
    import json
    import tempfile

    block = {"name": EXPORT, "table": "orders", "mode": "chunked", "format": "parquet", "chunk_column": "id",
             "chunk_size": 100, "destination": {"type": "local", "path": "out"}, **extra}
    folder = Path(tempfile.mkdtemp(prefix="rivet-sizing-"))
    (folder / "rivet.yaml").write_text(json.dumps({"source": {"type": "postgres", "url": "postgresql://h/db"},
                                                   "exports": [block]}))
    return load_config(folder / "rivet.yaml").export(EXPORT)


def test_twelve_large_windows_are_one_run_that_publishes(pg_url: str, tmp_path: Path,
                                                          instance: dg.DagsterInstance) -> None:
    target, config = sparse_config(tmp_path, pg_url)
    planner = Planner(build_definitions(config), instance)
    first = planner.tick()
    [request] = first.run_requests  # before: 10 windows, then 2, then the manifest: three runs
    assert request_job(request) == PUBLISH_JOB and len(requested(first)) == SPARSE
    planner.run(first)
    manifest, table = published(target)
    assert id_amounts(table) == amounts(pg_url) and manifest["row_count"] == SPARSE
    assert_quiet(planner.tick())


def test_parallel_splits_the_windows_but_never_beyond_the_source_pool(pg_url: str, tmp_path: Path,
                                                                       instance: dg.DagsterInstance) -> None:
    target, config = sparse_config(tmp_path, pg_url, parallel=4)
    defs = build_definitions(config)
    pool = pool_name(load_config(config), load_config(config).export(EXPORT))
    instance.event_log_storage.set_concurrency_slots(pool, 2)
    assert pool_limit(instance, pool) == 2
    planner = Planner(defs, instance)
    first = planner.tick()
    # parallel 4, pool limit 2: two runs of six consecutive windows (the manifest comes after both)
    assert [len(r.tags["rivet/windows"].split(",")) for r in first.run_requests] == [6, 6]
    assert requested(first) == sorted(requested(first), key=chunk_window_key) and len(set(requested(first))) == SPARSE
    planner.run(first)
    last = planner.tick()
    assert jobs(last) == [f"{EXPORT}_manifest_job"]
    planner.run(last)
    manifest, table = published(target)
    assert id_amounts(table) == amounts(pg_url) and manifest["row_count"] == SPARSE


def test_an_explicit_max_partitions_per_run_still_wins(pg_url: str, tmp_path: Path,
                                                       instance: dg.DagsterInstance) -> None:
    create_orders(pg_url, rows=550)
    config = orders_chunked(Target("local", tmp_path), pg_url, dagster={"max_partitions_per_run": 4})
    first = Planner(build_definitions(config), instance).tick()
    assert [r.tags["rivet/windows"].split(",") for r in first.run_requests] == [KEYS[:4], KEYS[4:]]


def test_a_retried_ranged_run_does_not_export_its_committed_windows_again(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance, monkeypatch) -> None:  # noqa: ANN001
    """A transient failure right after window 2 of 6 was committed: the step's retry exports
    windows 3–5 only (before: all six again, meeting the same failure at window 2 each time)."""
    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)
    config = orders_chunked(target, pg_url, tuning={"max_retries": 1, "retry_backoff_ms": 0})
    planner = Planner(build_definitions(config), instance)
    first = planner.tick()
    [request] = first.run_requests
    assert request_job(request) == PUBLISH_JOB and requested(first) == KEYS
    monkeypatch.setenv("RIVET_TEST_TRANSIENT_AT", "after_chunk_complete:2")
    result = run_job(planner.defs, request_job(request), instance, tags=dict(request.tags))
    assert result.success
    retries = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]
    assert [e.step_key for e in retries] == [EXPORT]  # the chunk step failed once and was retried
    _, tasks = chunk_run(config)
    assert [tasks[k].attempts for k in KEYS] == [1, 1, 1, 2, 2, 2]  # 3–5: claimed, released, exported
    assert {t.worker for t in tasks.values()} == {result.run_id}
    # One part per window at the destination: nothing exported twice, nothing quarantined.
    view = target.view(EXPORT)
    assert len(view.data_keys()) == len(KEYS)
    assert not [k for k in view.keys() if k.startswith("_quarantine/")]
    manifest, table = published(target)
    assert id_amounts(table) == amounts(pg_url) and manifest["row_count"] == 550


def test_the_folded_run_publishes_without_reading_back_the_parts_it_wrote(
        pg_url: str, tmp_path: Path, instance: dg.DagsterInstance, monkeypatch) -> None:  # noqa: ANN001
    """The manifest step of a folded run takes the parts' fingerprints from the records its
    chunk step wrote (rivet_dagster/part_records.py) instead of reading every part back; the
    manifest's fingerprints are still those of the bytes at the destination."""
    import base64
    import hashlib

    import xxhash

    from rivet_core.destination.local import LocalDestination

    reads: list[str] = []
    original = LocalDestination.read_bytes

    def counted(self, key: str, max_bytes: int | None = None) -> bytes:  # noqa: ANN001 - a spy, not a stub
        reads.append(key)
        return original(self, key, max_bytes)

    monkeypatch.setattr(LocalDestination, "read_bytes", counted)
    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)
    planner = Planner(build_definitions(orders_chunked(target, pg_url)), instance)
    first = planner.tick()
    assert jobs(first) == [PUBLISH_JOB]
    planner.run(first)
    assert not [k for k in reads if k.startswith("data/")]  # before: each of the 6 parts read once
    manifest, table = published(target)
    assert id_amounts(table) == amounts(pg_url) and len(manifest["parts"]) == len(KEYS)
    root = target.view(EXPORT).root
    for part in manifest["parts"]:
        data = (root / part["path"]).read_bytes()
        assert part["content_fingerprint"] == f"xxh3:{xxhash.xxh3_64_hexdigest(data)}"
        assert part["content_md5"] == base64.b64encode(hashlib.md5(data).digest()).decode()
        assert part["column_checksums"]  # Form B, from the encoder
