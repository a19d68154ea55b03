"""Many exports of one config in one step: the config's subsettable multi-asset
(rivet_dagster/multi_asset.py), against real PostgreSQL, materialized with real Dagster
(`execute_in_process` on a throwaway instance, and a run worker process for the terminate).

The oracle re-reads what landed — the parts the current manifest.json lists, with pyarrow —
and compares it with the source rows queried with psycopg; steps are counted from the run's
own STEP_START events.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

from rivet_dagster import build_definitions
from rivet_dagster.executors import IN_PROCESS_FIRST
from rivet_dagster.multi_asset import MANIFEST_CHECK
from tests.dagster.support import (
    Target,
    check_evaluations,
    check_only_job,
    export_block,
    id_amounts,
    orders_config,
    run_job,
    source_rows,
    with_jobs,
)

NAMES = ("alpha", "beta", "gamma")


def three_exports(target: Target, url: str, **top: Any) -> Path:
    """Three full exports of `orders` (each to its own folder) in one rivet.yaml."""
    return orders_config(target.tmp, url, [export_block(n, "full", target.destination(n)) for n in NAMES], **top)


def steps_started(result: Any) -> list[str]:
    return [e.step_key for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_START]


def published_equals_source(target: Target, name: str, url: str) -> bool:
    view = target.view(name)
    manifest = view.current_manifest()
    return manifest is not None and id_amounts(view.parts_table([manifest])) == source_rows(url)


def nothing_published(target: Target, name: str) -> bool:
    view = target.view(name)
    return view.current_manifest() is None and view.data_keys() == []


def select(defs: dg.Definitions, name: str, *selection: Any) -> dg.Definitions:
    return with_jobs(defs, dg.define_asset_job(name, selection=dg.AssetSelection.assets(*selection)))


def test_a_selection_of_two_of_three_exports_runs_only_those_two_in_one_step(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    defs = select(build_definitions(three_exports(local, orders_pg)), "pick", "alpha", "gamma")
    result = run_job(defs, "pick", instance)

    assert result.success
    assert len(steps_started(result)) == 1  # the exports and their checks: one step, not four
    assert {e.asset_key.path[-1] for e in result.get_asset_materialization_events()} == {"alpha", "gamma"}
    assert published_equals_source(local, "alpha", orders_pg)
    assert published_equals_source(local, "gamma", orders_pg)
    assert nothing_published(local, "beta")


def test_each_export_of_the_step_gets_its_own_checks_and_manifest_verified_in_that_step(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    defs = build_definitions(three_exports(local, orders_pg))
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance, raise_on_error=False)

    assert result.success
    [step] = steps_started(result)
    evaluations = result.get_asset_check_evaluations()
    by_check = {(e.asset_key.path[-1], e.check_name): e for e in evaluations}
    for name in NAMES:
        assert published_equals_source(local, name, orders_pg)
        assert by_check[(name, "manifest_verified")].passed, name
        assert by_check[(name, "schema_drift")].passed, name
    check_steps = {e.step_key for e in result.all_events if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION}
    assert check_steps == {step}

    # Selected on its own, manifest_verified only verifies: a deleted part is named, nothing is re-exported.
    view = local.view("beta")
    before = view.current_manifest()
    assert before is not None
    view.delete(before["parts"][0]["path"])
    alone = run_job(with_jobs(defs, check_only_job("verify_beta", dg.AssetKey("beta"))), "verify_beta", instance)
    verdict = check_evaluations(alone)["manifest_verified"]
    assert not verdict.passed and verdict.asset_key == dg.AssetKey("beta")
    assert before["parts"][0]["path"] in (verdict.description or "")
    assert alone.get_asset_materialization_events() == []
    assert view.current_manifest() == before


def test_one_failing_export_leaves_the_others_published_and_fails_the_step_naming_it(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    exports = [export_block("alpha", "full", local.destination("alpha")),
               export_block("bad", "full", local.destination("bad"), quality={"row_count_min": 1_000_000}),
               export_block("gamma", "full", local.destination("gamma"))]
    defs = build_definitions(orders_config(local.tmp, orders_pg, exports))
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance, raise_on_error=False)

    assert not result.success
    assert len(steps_started(result)) == 1
    assert published_equals_source(local, "alpha", orders_pg)
    assert published_equals_source(local, "gamma", orders_pg)  # the export after the failed one still ran
    assert nothing_published(local, "bad")
    assert {e.asset_key.path[-1] for e in result.get_asset_materialization_events()} == {"alpha", "gamma"}
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = failure.event_specific_data.error.message
    assert "1 of 3 export(s) failed: 'bad'" in message and "row_count 600 below minimum 1000000" in message
    gate = {(e.asset_key.path[-1], e.check_name): e for e in result.get_asset_check_evaluations()}
    assert not gate[("bad", "quality_row_count_min")].passed
    # not retried: a quality gate fails the same way again
    assert dg.DagsterEventType.STEP_UP_FOR_RETRY not in {e.event_type for e in result.all_events}


DOWNSTREAM_READ: dict[str, pa.Table] = {}


@dg.asset(ins={"alpha": dg.AssetIn(key="alpha"), "gamma": dg.AssetIn(key="gamma")})
def both_exports(alpha: pa.Table, gamma: pa.Table) -> None:
    DOWNSTREAM_READ.update(alpha=alpha, gamma=gamma)


def test_a_downstream_asset_reads_each_export_the_step_published(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    DOWNSTREAM_READ.clear()
    defs = with_jobs(build_definitions(three_exports(local, orders_pg)),
                     dg.define_asset_job("with_downstream", selection=dg.AssetSelection.assets(
                         "alpha", "gamma", both_exports)), assets=[both_exports])
    result = run_job(defs, "with_downstream", instance)

    assert result.success
    assert len(steps_started(result)) == 2  # the exports' one step, then the downstream asset
    for name in ("alpha", "gamma"):
        assert id_amounts(DOWNSTREAM_READ[name]) == source_rows(orders_pg), name


def test_multi_asset_false_gives_each_export_its_own_asset_and_step(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    defs = select(build_definitions(three_exports(local, orders_pg, dagster={"multi_asset": False})),
                  "pick", "alpha", "gamma")
    result = run_job(defs, "pick", instance)

    assert result.success
    assert sorted(steps_started(result)) == ["alpha", "alpha_manifest_verified", "gamma", "gamma_manifest_verified"]
    assert published_equals_source(local, "alpha", orders_pg) and nothing_published(local, "beta")


def test_the_definitions_run_in_process_unless_told_otherwise(
        orders_pg: str, local: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    config = three_exports(local, orders_pg)
    assert build_definitions(config).resolve_implicit_global_asset_job_def().executor_def is IN_PROCESS_FIRST
    assert build_definitions(config).executor is IN_PROCESS_FIRST
    # the project's own executor instead: none of ours, so Dagster merges the two definitions
    mine = dg.Definitions.merge(build_definitions(config, executor=None),
                                dg.Definitions(executor=dg.multiprocess_executor))
    assert mine.resolve_implicit_global_asset_job_def().executor_def is dg.multiprocess_executor
    monkeypatch.setenv("RIVET_DAGSTER_EXECUTOR", "multiprocess")
    assert build_definitions(config).executor is dg.multiprocess_executor


#: A run worker: materializes every asset of the config in one run on the instance at
#: DAGSTER_HOME, in its own process, as Dagster's run launcher does.
ALL_ASSETS_WORKER = """
import sys
import dagster as dg
from rivet_dagster import build_definitions
defs = build_definitions(sys.argv[1])
with dg.DagsterInstance.get() as instance:
    defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance, raise_on_error=False)
"""


def terminated_in_source_read(config: Path, tmp_path: Path) -> tuple[set[Any], list[Any]]:
    """Materialize every asset of `config` in a worker process of its own, park it in its
    first source read, terminate it as the UI does (tests/dagster/test_operations.py
    `terminate_at`: the run ends CANCELED without a retry) and return the run's event types
    and its Dagster events."""
    import os
    import subprocess
    import sys

    from tests.dagster.test_operations import terminate_at
    from tests.helpers import REPO

    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    pause = tmp_path / "pause"
    pause.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", ALL_ASSETS_WORKER, str(config)], cwd=REPO, text=True,
                            env={**os.environ, "DAGSTER_HOME": str(home), "RIVET_TEST_PAUSE_AT": "during_source_read",
                                 "RIVET_TEST_PAUSE_DIR": str(pause)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        kinds = terminate_at(instance, proc, pause / "during_source_read")
        run = instance.get_runs()[0]
        logs = [e.dagster_event for e in instance.all_logs(run.run_id) if e.dagster_event]
    return kinds, logs


def test_a_terminate_during_the_second_export_ends_the_run_canceled_without_a_retry(
        orders_pg: str, local: Target, tmp_path: Path) -> None:
    """The first export (no rows: it never reaches the paused read) is published; the terminate
    stops the second in its source read — nothing of it lands — and the third never starts.
    One step failure naming the second export, no STEP_UP_FOR_RETRY although the step has a
    RetryPolicy, the run CANCELED (tests/dagster/test_operations.py `terminate_at`)."""
    empty = export_block("alpha", "full", local.destination("alpha"), query="SELECT * FROM orders WHERE id < 0")
    del empty["table"]
    exports = [empty, *[export_block(n, "full", local.destination(n)) for n in ("beta", "gamma")]]
    config = orders_config(local.tmp, orders_pg, exports)
    kinds, logs = terminated_in_source_read(config, tmp_path)
    assert dg.DagsterEventType.STEP_FAILURE in kinds
    assert len([e for e in logs if e.event_type == dg.DagsterEventType.STEP_START]) == 1
    [failure] = [e for e in logs if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert "export 'beta': the export was interrupted" in failure.event_specific_data.error.message
    assert [e.asset_key.path[-1] for e in logs if e.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION] == ["alpha"]
    assert local.view("alpha").current_manifest() is not None
    assert nothing_published(local, "beta") and nothing_published(local, "gamma")


def test_a_transient_failure_retries_the_step_and_the_retry_skips_the_exports_already_published(
        orders_pg: str, local: Target, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    """`down` writes to an S3 endpoint nobody listens on (a transient failure, exit 2): the
    step fails after `alpha` published, Dagster retries it (the exports' `max_retries`), and
    the retry runs only `down` again — `alpha` is materialized once in the run."""
    monkeypatch.setenv("RIVET_TEST_AK", "x")
    monkeypatch.setenv("RIVET_TEST_SK", "y")
    tuning = {"max_retries": 1, "retry_backoff_ms": 0}
    down = {"type": "s3", "bucket": "nowhere", "prefix": "down/", "endpoint": "http://127.0.0.1:9",
            "region": "us-east-1", "access_key_env": "RIVET_TEST_AK", "secret_key_env": "RIVET_TEST_SK"}
    exports = [export_block("alpha", "full", local.destination("alpha"), tuning=tuning),
               export_block("down", "full", down, tuning=tuning)]
    defs = build_definitions(orders_config(local.tmp, orders_pg, exports))
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance, raise_on_error=False)

    assert not result.success
    kinds = [e.event_type for e in result.all_events]
    assert kinds.count(dg.DagsterEventType.STEP_UP_FOR_RETRY) == 1
    assert [e.asset_key.path[-1] for e in result.get_asset_materialization_events()] == ["alpha"]
    assert published_equals_source(local, "alpha", orders_pg)
    # Dagster words the last attempt's failure "Exceeded max_retries"; its metadata names the export
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failure.event_specific_data.user_failure_data.metadata["failed_exports"].value == ["down"]


def test_an_export_materialized_without_its_checks_records_no_check_result(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    defs = with_jobs(build_definitions(three_exports(local, orders_pg)), dg.define_asset_job(
        "no_checks", selection=dg.AssetSelection.assets("beta").without_checks()))
    result = run_job(defs, "no_checks", instance)

    assert result.success
    assert [e.asset_key.path[-1] for e in result.get_asset_materialization_events()] == ["beta"]
    assert result.get_asset_check_evaluations() == []
    assert published_equals_source(local, "beta", orders_pg)


def step_log_lines(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """The run's log records that are not Dagster events: what `context.log` wrote."""
    return [e.user_message for e in instance.all_logs(run_id) if e.dagster_event is None]


def test_quick_exports_of_the_step_write_no_progress_lines_to_the_event_log_and_their_metadata_names_the_run(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    """Each log line is an event-log write: exports quicker than the progress interval write
    none; each materialization still carries the rivet run id and the destination."""
    defs = build_definitions(three_exports(local, orders_pg))
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance)

    assert result.success
    lines = step_log_lines(instance, result.run_id)
    assert not [line for line in lines if any(f"'{n}'" in line or f"{n}:" in line for n in NAMES)], lines
    for event in result.get_asset_materialization_events():
        metadata = event.materialization.metadata
        assert metadata["rivet_run_id"].value.startswith(event.asset_key.path[-1])
        assert published_equals_source(local, event.asset_key.path[-1], orders_pg)


def test_with_a_zero_progress_interval_every_export_of_the_step_reports_its_progress(
        orders_pg: str, local: Target, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    """An export that runs longer than the interval reports as its own asset does (interval 0:
    every export is `longer`)."""
    monkeypatch.setenv("RIVET_PROGRESS_INTERVAL", "0")
    defs = build_definitions(three_exports(local, orders_pg))
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance)

    assert result.success
    lines = step_log_lines(instance, result.run_id)
    for name in NAMES:
        assert any(line.startswith(f"{name}: done, ") for line in lines), (name, lines)


def test_the_check_results_of_a_published_export_target_the_materialization_of_the_same_run(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    defs = build_definitions(three_exports(local, orders_pg))
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance)

    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert {(e.asset_key.path[-1], e.check_name) for e in evaluations} == {
        (n, c) for n in NAMES for c in ("schema_drift", MANIFEST_CHECK)}
    for evaluation in evaluations:
        target = evaluation.target_materialization_data
        assert target is not None and target.run_id == result.run_id, (evaluation.check_name, target)


def test_an_export_of_the_step_writes_no_io_manager_event_because_its_step_published_it(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    """Each event is an event-log write: the step publishes an export itself, so Dagster is not
    asked to call the IO manager (no HANDLED_OUTPUT); a downstream asset still reads it
    (test_a_downstream_asset_reads_each_export_the_step_published)."""
    defs = build_definitions(three_exports(local, orders_pg))
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance)

    assert result.success
    kinds = [e.event_type for e in result.all_events]
    assert kinds.count(dg.DagsterEventType.ASSET_MATERIALIZATION) == 3
    assert dg.DagsterEventType.HANDLED_OUTPUT not in kinds
    for name in NAMES:
        assert published_equals_source(local, name, orders_pg), name


def test_with_multi_asset_parallel_the_others_publish_while_one_export_is_still_reading(
        orders_pg: str, local: Target, instance: dg.DagsterInstance, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`dagster.multi_asset_parallel: 3`: the first export to read a batch parks in its source
    read (the fault barrier, rivet_core/pipeline/faults.py); the other two are published while
    it is parked — one after the other they could not be — then it is released and published too."""
    import threading

    from rivet_core.pipeline import faults

    pause = tmp_path / "pause"
    pause.mkdir()
    monkeypatch.setenv("RIVET_TEST_PAUSE_AT", "during_source_read")
    monkeypatch.setenv("RIVET_TEST_PAUSE_DIR", str(pause))
    monkeypatch.setenv("RIVET_TEST_PAUSE_TIMEOUT_S", "60")
    monkeypatch.setattr(faults, "_paused", set())
    defs = build_definitions(three_exports(local, orders_pg, dagster={"multi_asset_parallel": 3}))
    published_while_parked: list[str] = []
    run_ended = threading.Event()

    def release_once_the_others_published() -> None:
        # polls the destinations until the run ends (the barrier's own timeout bounds it)
        while not run_ended.wait(0.05):
            if (pause / "during_source_read.reached").exists():
                published_while_parked[:] = [n for n in NAMES if local.view(n).current_manifest() is not None]
                if len(published_while_parked) == 2:
                    break
        (pause / "during_source_read.release").touch()

    releaser = threading.Thread(target=release_once_the_others_published, daemon=True)
    releaser.start()
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance, raise_on_error=False)
    run_ended.set()
    releaser.join(timeout=5)

    assert result.success, [e.message for e in result.all_events if e.is_failure]
    assert len(published_while_parked) == 2, published_while_parked
    assert len(steps_started(result)) == 1
    assert {e.asset_key.path[-1] for e in result.get_asset_materialization_events()} == set(NAMES)
    for name in NAMES:
        assert published_equals_source(local, name, orders_pg), name


def test_with_multi_asset_parallel_one_failing_export_is_named_and_the_others_are_materialized(
        orders_pg: str, local: Target, instance: dg.DagsterInstance) -> None:
    exports = [export_block("alpha", "full", local.destination("alpha")),
               export_block("bad", "full", local.destination("bad"), quality={"row_count_min": 1_000_000}),
               export_block("gamma", "full", local.destination("gamma"))]
    defs = build_definitions(orders_config(local.tmp, orders_pg, exports, dagster={"multi_asset_parallel": 3}))
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=instance, raise_on_error=False)

    assert not result.success
    assert published_equals_source(local, "alpha", orders_pg)
    assert published_equals_source(local, "gamma", orders_pg)
    assert nothing_published(local, "bad")
    assert {e.asset_key.path[-1] for e in result.get_asset_materialization_events()} == {"alpha", "gamma"}
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    message = failure.event_specific_data.error.message
    assert "1 of 3 export(s) failed: 'bad'" in message and "row_count 600 below minimum 1000000" in message
    checks = {(e.asset_key.path[-1], e.check_name): e.passed for e in result.get_asset_check_evaluations()}
    assert checks[("bad", "quality_row_count_min")] is False
    assert checks[("alpha", MANIFEST_CHECK)] and checks[("gamma", MANIFEST_CHECK)]


def test_with_multi_asset_parallel_a_terminate_stops_the_running_export_before_its_publish(
        orders_pg: str, local: Target, tmp_path: Path) -> None:
    """Two exports side by side (`multi_asset_parallel: 2`); the first to read a batch parks in
    its source read, the run is terminated there (tests/dagster/test_operations.py
    `terminate_at`: CANCELED, no STEP_UP_FOR_RETRY). Nothing of the parked export lands
    although its read went on to the end after the release (it sees the run CANCELING before
    its publish); the step's failure, when the interrupt reached the step's own code, names it;
    an export that published and was materialized is intact."""
    names = ("beta", "gamma")
    config = orders_config(local.tmp, orders_pg, [export_block(n, "full", local.destination(n)) for n in names],
                           dagster={"multi_asset_parallel": 2})
    kinds, logs = terminated_in_source_read(config, tmp_path)
    assert dg.DagsterEventType.STEP_FAILURE in kinds
    [failure] = [e for e in logs if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    unpublished = [n for n in names if nothing_published(local, n)]
    assert unpublished, "the parked export was published after the terminate"
    named = [n for n in names if f"export '{n}': the export was interrupted" in failure.event_specific_data.error.message]
    assert set(named) <= set(unpublished), (named, unpublished)
    materialized = [e.asset_key.path[-1] for e in logs if e.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION]
    assert not set(materialized) & set(unpublished)
    for name in materialized:
        assert published_equals_source(local, name, orders_pg), name
