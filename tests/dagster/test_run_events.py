"""What a ranged chunk run writes to a dagster-postgres event log (issue 16 item 5).

Every event of a run is a write to the instance's event log; on dagster-postgres each stored
alone is an INSERT, a NOTIFY and an asset-index update. A chunk run of N windows must emit
one materialization per window (Dagster tracks partitions by them) and otherwise a fixed
number of events — no per-window log line, observation or check — and with the code
location's `enable_event_batching` (rivet_dagster/event_batching.py) its N materializations
reach the storage as one batch write. A recorder around the real PostgreSQL event storage
counts the writes; the events themselves are read back from the instance.
"""

from __future__ import annotations

import collections
import importlib
import os
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from rivet_dagster import build_definitions
from rivet_dagster.event_batching import EVENT_BATCH_SIZE_ENV, enable_event_batching
from tests.dagster.support import Target, create_orders, id_amounts, request_job
from tests.dagster.test_chunk_freshness import (
    KEYS,
    PUBLISH_JOB,
    Planner,
    amounts,
    orders_chunked,
    published,
    requested,
)

#: Events of a chunk run that do not grow with its windows: enqueue/start/success, engine and
#: resource events, the step's start/outputs/success, the schema-drift check, a few log lines
#: (progress lines come by time, not by window).
FIXED_EVENTS = 30
#: The manifest step a run of the last batch carries (rivet_dagster/chunked.py `publish_job`):
#: its step events, its one materialization (planned and stored), the `manifest_verified` and
#: `reconcile` evaluations (planned and stored), its output and log lines — fixed too.
MANIFEST_STEP_EVENTS = 25


def postgres_instance(tmp_path: Path, url: str) -> dg.DagsterInstance:
    """A Dagster instance whose runs and event log live in PostgreSQL (dagster-postgres)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    dsn = "postgresql+psycopg2://" + url.split("://", 1)[1]  # psycopg2, as docs/distributed.md says
    (home / "dagster.yaml").write_text(f'storage:\n  postgres:\n    postgres_url: "{dsn}"\n')
    return dg.DagsterInstance.from_config(str(home))


class WriteRecorder:
    """Records each call that stores events (how many, of which types) and passes it on to
    the instance's real event log storage."""

    def __init__(self, storage: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.writes: list[tuple[str, list[str]]] = []
        for method in ("store_event", "store_event_batch"):
            real = getattr(storage, method)

            def record(events: Any, _real: Any = real, _method: str = method) -> None:
                batch = list(events) if _method == "store_event_batch" else [events]
                self.writes.append((_method, [e.dagster_event_type.value for e in batch if e.dagster_event]))
                _real(events)

            monkeypatch.setattr(storage, method, record)

    def materialization_writes(self) -> list[int]:
        """The size of each write that stored materializations."""
        return [types.count("ASSET_MATERIALIZATION") for _, types in self.writes if "ASSET_MATERIALIZATION" in types]


def test_loading_the_code_location_turns_event_batching_on_and_opens_no_instance(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, pg_url: str) -> None:
    """Also: loading the code location never opens the Dagster instance, so it cannot race a
    fresh SQLite instance's first migration (alembic "more than one head"; docs/dagster-guide.md)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv(EVENT_BATCH_SIZE_ENV, "placeholder")  # restored after the test
    monkeypatch.delenv(EVENT_BATCH_SIZE_ENV)
    monkeypatch.setenv("RIVET_CONFIG", str(orders_chunked(Target("local", tmp_path), pg_url)))
    module = importlib.reload(importlib.import_module("rivet_dagster.definitions"))  # as a code server loads it
    assert module.defs is not None and int(os.environ[EVENT_BATCH_SIZE_ENV]) >= 1000
    module.defs.get_repository_def().get_all_jobs()  # resolved as the code server does
    assert list(home.iterdir()) == []  # no instance storage created
    assert enable_event_batching({EVENT_BATCH_SIZE_ENV: "0"}) == "0"  # a deployment's own value wins


def test_a_ranged_chunk_run_emits_one_materialization_per_window_in_one_write(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    create_orders(pg_url, rows=550)
    target = Target("local", tmp_path)
    instance = postgres_instance(tmp_path, pg_url)
    monkeypatch.setenv(EVENT_BATCH_SIZE_ENV, "placeholder")  # restored after the test
    monkeypatch.delenv(EVENT_BATCH_SIZE_ENV)
    enable_event_batching()
    planner = Planner(build_definitions(orders_chunked(target, pg_url)), instance)
    recorder = WriteRecorder(instance._event_storage_impl, monkeypatch)  # noqa: SLF001 - the instance's storage

    first = planner.tick()
    [request] = first.run_requests
    # every window in one ranged run, which also publishes the manifest (the last batch)
    assert request_job(request) == PUBLISH_JOB and requested(first) == KEYS
    [outcome] = planner.run(first)

    events = instance.all_logs(outcome.run_id)
    kinds = collections.Counter(e.dagster_event_type.value for e in events if e.dagster_event)
    windows = [e for e in events if e.dagster_event and e.dagster_event.partition is not None
               and e.dagster_event_type.value in ("ASSET_MATERIALIZATION", "ASSET_MATERIALIZATION_PLANNED")]
    per_kind = collections.Counter(e.dagster_event_type.value for e in windows)
    assert per_kind == {"ASSET_MATERIALIZATION": len(KEYS), "ASSET_MATERIALIZATION_PLANNED": len(KEYS)}, kinds
    # nothing else grows with the windows
    assert len(events) - len(windows) <= FIXED_EVENTS + MANIFEST_STEP_EVENTS, kinds
    # one write for all windows; then the manifest's own materialization
    assert recorder.materialization_writes() == [len(KEYS), 1]
    assert {e.dagster_event.partition for e in windows} == set(KEYS)

    # The folded run published exactly the source rows, and the next tick has nothing to do.
    _, table = published(target)
    assert id_amounts(table) == amounts(pg_url)
    assert not planner.tick().run_requests
    instance.dispose()
