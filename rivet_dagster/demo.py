"""Materialize every demo asset through Dagster and say where everything is (`make demo`).

Uses the persistent instance in `dagster_home/` (so `make dev` shows these runs in the
UI), builds the demo SQLite database if needed, runs each export's job — the daily
`events` export for its last `days_window` days — with its checks, then prints the files,
manifests, run reports and check verdicts. Exit status 1 if any run or check failed.
"""

from __future__ import annotations

import os
import sys
import warnings
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: Keep Dagster's per-event console log out of the demo's output (the UI has it all).
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _summarize(result, label: str, rows_out: list) -> bool:  # noqa: ANN001
    events = [e for e in result.get_asset_materialization_events() if "rows" in e.materialization.metadata]
    # What the run wrote: its windows' rows when it exported windows (a run that also published
    # the manifest reports the whole dataset there too), else its one materialization's.
    windows = [e for e in events if e.partition is not None]
    rows = sum(int(e.materialization.metadata["rows"].value) for e in windows or events)
    checks = ", ".join(f"{e.check_name}={'PASS' if e.passed else 'FAIL'}"
                       for e in result.get_asset_check_evaluations())
    rows_out.append((label, "SUCCESS" if result.success else "FAILED", str(rows), checks))
    return bool(result.success)


RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


def _asset_job(defs, key):  # noqa: ANN001, ANN202
    """The run of one asset (and its checks) on Dagster's implicit asset job, as a schedule
    or `dg launch --assets` asks for it (the definitions have no job per export)."""
    return defs.resolve_implicit_global_asset_job_def().get_subset(asset_selection={key})


def _requested_job(defs, request):  # noqa: ANN001, ANN202
    """What a planner run request runs: its job (`dagster.jobs: per_export`), else its
    selection on the implicit asset job (the daemon launches it there)."""
    if request.job_name:
        return defs.resolve_job_def(request.job_name)
    return defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_selection=set(request.asset_selection or ()),
        asset_check_selection=set(request.asset_check_keys) if request.asset_check_keys is not None else None)


def _materialize_chunked(defs, instance, config, name: str, rows_out: list) -> bool:  # noqa: ANN001
    """What the daemon does for a chunked export: one planner tick (register the windows),
    a run per request, then `<export>_manifest` publishes the manifest — unless the planner
    folded it into its one batch's run (run kind `publish`, rivet_dagster/chunked.py
    `RunTargets`). The config's planner sensor plans every chunked export of it; only `name`'s
    requests run here."""
    import dagster as dg

    from rivet_dagster.chunked import planner_name
    from rivet_dagster.naming import manifest_asset_key

    sensor = defs.resolve_sensor_def(planner_name(config, []))
    tick = sensor(dg.build_sensor_context(instance=instance, definitions=defs))
    for request in tick.dynamic_partitions_requests or []:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    ok, published = True, False
    # The planner asks for one window per run, or for several as one ranged run (the
    # partition-range tags, rivet_dagster/chunked.py `ExportPlanner.request`): run each as asked.
    for request in tick.run_requests or []:
        kind = request.tags.get("rivet/request")
        if request.tags.get("rivet/export") != name or kind not in ("chunks", "publish"):
            continue  # the manifest (and its checks) run below, after every window
        job = _requested_job(defs, request)
        tags = dict(request.tags or {})
        start, end = tags.get(RANGE_START), tags.get(RANGE_END)
        label = request.partition_key or (f"{start}…{end}" if start != end else start)
        if not label:
            continue
        print(f"materializing {name} [{label}]{' and its manifest' if kind == 'publish' else ''} …", flush=True)
        result = (job.execute_in_process(instance=instance, partition_key=request.partition_key,
                                         raise_on_error=False, run_config=QUIET)
                  if request.partition_key else
                  job.execute_in_process(instance=instance, tags={RANGE_START: start, RANGE_END: end},
                                         raise_on_error=False, run_config=QUIET))
        ok &= _summarize(result, f"{name} [{label}]", rows_out)
        published |= kind == "publish"
    if not published:
        print(f"materializing {name}_manifest …", flush=True)
        manifest_job = _asset_job(defs, manifest_asset_key(config, config.export(name)))
        ok &= _summarize(manifest_job.execute_in_process(instance=instance, raise_on_error=False,
                                                         run_config=QUIET), f"{name}_manifest", rows_out)
    return ok


def main() -> int:
    os.environ.setdefault("DAGSTER_HOME", str(REPO / "dagster_home"))
    warnings.filterwarnings("ignore")
    import dagster as dg

    from rivet_core import api
    from rivet_dagster.definitions import DEMO_CONFIG
    from rivet_dagster.factory import build_definitions
    from rivet_dagster.naming import asset_key
    from rivet_dagster.partitions import recent_partition_keys

    print("building the demo database (examples/demo/shop.db) if needed …", flush=True)
    api.ensure_demo_database()
    defs = build_definitions(DEMO_CONFIG)
    config = api.load_config(DEMO_CONFIG)
    ok = True
    rows_out: list[tuple[str, str, str, str]] = []
    with dg.DagsterInstance.get() as instance:
        for export in config.exports:
            if export.mode == "chunked":
                ok &= _materialize_chunked(defs, instance, config, export.name, rows_out)
                continue
            job = _asset_job(defs, asset_key(config, export))
            keys = (recent_partition_keys(int(export.days_window or 1), datetime.now(UTC))
                    if export.mode == "time_window" else [None])
            for key in keys:
                label = export.name + (f" [{key}]" if key else "")
                print(f"materializing {label} …", flush=True)
                result = job.execute_in_process(instance=instance, partition_key=key, raise_on_error=False,
                                                run_config=QUIET)
                rows = sum(int(e.materialization.metadata["rows"].value)
                           for e in result.get_asset_materialization_events()
                           if "rows" in e.materialization.metadata)
                checks = ", ".join(f"{e.check_name}={'PASS' if e.passed else 'FAIL'}"
                                   for e in result.get_asset_check_evaluations())
                ok &= result.success
                rows_out.append((label, "SUCCESS" if result.success else "FAILED", str(rows), checks))
    print(f"\n== Dagster runs (instance: $DAGSTER_HOME = {os.environ['DAGSTER_HOME']})")
    width = max(len(r[0]) for r in rows_out)
    for label, status, rows, checks in rows_out:
        print(f"  {label:<{width}}  {status:<7}  rows={rows:<8} checks: {checks}")
    demo = DEMO_CONFIG.parent
    print("\n== Where things are")
    print(f"  files + manifest.json + _SUCCESS:  {demo / 'output'}/<export>/   (events: created_at=<day>/)")
    print(f"  run reports:                       {demo / '.rivet' / 'runs'}/<run_id>/summary.md")
    print(f"  state store:                       {demo / '.rivet_state.db'}")
    print("  verdicts again:                    .venv/bin/rivet validate -c examples/demo/rivet.yaml")
    print("  the UI on the same runs:           make dev   (then open http://127.0.0.1:3000)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
