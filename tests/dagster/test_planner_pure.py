"""The planner's decision as a pure function (rivet_dagster/planner.py): `plan_tick(view,
cursor)` over plain values — no Dagster instance, no database. The sensor around it is
tested end to end against PostgreSQL in test_chunked.py, test_chunk_freshness.py,
test_planner_*.py and test_operations*.py; here every branch of the decision and the cursor
it leaves, and properties over cursor states (hypothesis).
"""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from rivet_core import api
from rivet_dagster.planner import (
    PLANNER_INTERVAL_SECONDS,
    ExportCursor,
    RunCounts,
    TickView,
    deferral,
    dump_cursor,
    parse_cursor,
    plan_tick,
    request_stamp,
)

WINDOWS = [api.window_keys.range_key("id", lo, lo + 99) for lo in range(0, 600, 100)]
TAGS = {"rivet/export": "orders", "rivet/config": "/cfg/rivet.yaml"}
NOW = 1_800_000_000.0


def plan(**fields: object) -> api.ChunkTaskPlan:
    """The core's plan of chunk run `r1` holding WINDOWS (overridable)."""
    base: dict[str, object] = {"export_name": "orders", "run_id": "r1", "keys": list(WINDOWS), "max_attempts": 3}
    return api.ChunkTaskPlan(**{**base, **fields})  # type: ignore[arg-type]


def view(tick: api.ChunkTaskPlan, registered: list[str] | None = None, **fields: object) -> TickView:
    keys = WINDOWS if registered is None else registered
    return TickView(now=NOW, plan=tick, registered={k: k for k in keys}, base_tags=TAGS, **fields)  # type: ignore[arg-type]


def fresh() -> api.ChunkTaskPlan:
    return plan(fresh=True, added=list(WINDOWS), not_completed=6, unclaimed=list(WINDOWS))


def test_a_fresh_chunk_run_registers_every_window_and_one_run_exports_and_publishes_them() -> None:
    decision = plan_tick(view(fresh(), registered=[]), ExportCursor())
    assert decision.add == WINDOWS and decision.withdraw == []
    [run] = decision.runs
    assert (run.kind, run.windows) == ("publish", tuple(WINDOWS))  # one batch holds every window: it publishes
    assert run.run_key.startswith(f"r1:{WINDOWS[0]}..{WINDOWS[-1]}:") and run.run_key.endswith("+manifest")
    assert run.tags == {**TAGS, "rivet/chunk_run": "r1"}
    cursor = decision.cursor
    assert (cursor.run, cursor.in_progress, cursor.planned_at, cursor.backlog) == ("r1", True, NOW, ())
    assert set(cursor.requested) == {request_stamp(fresh(), k, None) for k in WINDOWS}


def test_a_window_already_requested_in_its_state_is_not_requested_again() -> None:
    first = plan_tick(view(fresh(), registered=[]), ExportCursor())
    again = plan_tick(view(fresh(), in_flight=1), first.cursor)
    assert again.runs == [] and again.add == []
    assert again.skip_reason == "chunk run r1: 6 window(s) still to materialize"


def test_every_window_completed_asks_for_the_manifest_once_the_runs_of_the_chunk_run_ended() -> None:
    done = plan(not_completed=0, stamp="s1")
    waiting = plan_tick(view(done, in_flight=1), ExportCursor(run="r1", in_progress=True))
    assert waiting.runs == [] and "the manifest waits for 1 run(s)" in (waiting.skip_reason or "")
    [manifest] = plan_tick(view(done), ExportCursor(run="r1", in_progress=True)).runs
    assert (manifest.kind, manifest.run_key, manifest.windows) == ("manifest", "r1:manifest:s1", ())


def test_a_window_taken_over_from_a_dead_run_is_requested_under_a_run_key_naming_its_attempts() -> None:
    first = plan_tick(view(fresh(), registered=[]), ExportCursor())
    taken = plan(orphaned={WINDOWS[3]: 2}, not_completed=1)
    [run] = plan_tick(view(taken), first.cursor).runs
    assert run.windows == (WINDOWS[3],) and run.run_key == f"r1:{WINDOWS[3]}:takeover-2+manifest"


def test_windows_beyond_the_runs_per_tick_wait_in_the_backlog_and_go_out_on_the_next_tick() -> None:
    tick = fresh()
    first = plan_tick(view(tick, registered=[], fixed_per_run=2, runs_per_tick=1), ExportCursor())
    assert [r.windows for r in first.runs] == [tuple(WINDOWS[:2])] and first.runs[0].kind == "chunks"
    assert first.cursor.backlog == tuple(WINDOWS[2:])
    assert first.notes == ["chunk run r1: 4 window(s) wait for the next tick (dagster.max_runs_per_tick: 1)"]
    second = plan_tick(view(replace(tick, fresh=False, added=[]), fixed_per_run=2, runs_per_tick=1), first.cursor)
    assert [r.windows for r in second.runs] == [tuple(WINDOWS[2:4])] and second.cursor.backlog == tuple(WINDOWS[4:])


def test_a_window_whose_runs_all_ended_unclaimed_is_requested_again_until_its_attempts_run_out() -> None:
    first = plan_tick(view(fresh(), registered=[]), ExportCursor())
    stuck = plan(not_completed=6, unclaimed=[WINDOWS[2]])
    [run] = plan_tick(view(stuck, asked={WINDOWS[2]: 1}), first.cursor).runs
    assert run.windows == (WINDOWS[2],) and run.run_key == f"r1:{WINDOWS[2]}:requeue-1"
    assert not plan_tick(view(stuck, asked={WINDOWS[2]: 3}), first.cursor).runs  # 3 of max 3 attempts
    assert not plan_tick(view(stuck, asked={WINDOWS[2]: 1}, in_flight=1), first.cursor).runs  # a run may claim it


def test_a_published_export_reruns_a_red_reconcile_once_per_manifest_and_otherwise_asks_nothing() -> None:
    published = plan(run_id=None)
    cursor = ExportCursor(run="r1", in_progress=True, requested=("abc",), backlog=(WINDOWS[0],))
    [recheck] = plan_tick(view(published, reconcile_recheck=42), cursor).runs
    assert (recheck.kind, recheck.run_key, recheck.tags) == ("reconcile", "reconcile:recheck:42", TAGS)
    quiet = plan_tick(view(published), cursor)
    assert quiet.runs == [] and quiet.skip_reason == "nothing changed: 6 window(s) published and true to the source"
    assert (quiet.cursor.run, quiet.cursor.in_progress, quiet.cursor.backlog, quiet.cursor.requested) == (
        "r1", False, (), ("abc",))  # the last chunk run and its stamps are kept


def test_drifted_windows_ask_for_the_reconcile_check_before_the_runs_that_refill_them() -> None:
    drifted = plan(refill={WINDOWS[1]: "97"}, drifted=[WINDOWS[1]], marks={WINDOWS[1]: "m"}, not_completed=0)
    decision = plan_tick(view(drifted), ExportCursor(run="r1", in_progress=True))
    assert [r.kind for r in decision.runs] == ["reconcile", "publish"]
    assert decision.runs[1].run_key == f"r1/m:{WINDOWS[1]}:97+manifest"


def test_windows_the_plan_no_longer_has_are_withdrawn_and_the_kept_ones_counted() -> None:
    regridded = plan(keys=WINDOWS[:4], not_completed=0, stamp="s")
    decision = plan_tick(view(regridded), ExportCursor(run="r1", in_progress=True))
    assert decision.withdraw == WINDOWS[4:] and decision.carried == 4


def test_the_planner_waits_within_its_interval_unless_a_run_of_its_chunk_run_just_ended() -> None:
    assert deferral(ExportCursor(), NOW, None) is None  # never planned
    idle = ExportCursor(run="r1", planned_at=NOW - 10)
    assert deferral(idle, NOW, None) == f"next plan against the source in {PLANNER_INTERVAL_SECONDS - 10} s"
    busy = replace(idle, in_progress=True)
    assert "1 run(s) queued or running" in (deferral(busy, NOW, RunCounts(1, 0)) or "")
    assert deferral(busy, NOW, RunCounts(0, 1)) is None  # a run ended: plan now
    assert deferral(busy, NOW, RunCounts(0, 0)) is not None
    assert deferral(busy, NOW - 20, RunCounts(0, 0)) is None  # the clock went back: plan
    assert deferral(busy, NOW + PLANNER_INTERVAL_SECONDS, RunCounts(1, 0)) is None


# ------------------------------------------------------------------------------ properties
stamps = st.lists(st.text("0123456789abcdef", min_size=12, max_size=12), max_size=6, unique=True)
cursors = st.builds(ExportCursor, run=st.sampled_from([None, "r0", "r1"]),
                    planned_at=st.one_of(st.none(), st.floats(0, NOW)),
                    refresh=st.one_of(st.none(), st.floats(0, NOW)),
                    requested=stamps.map(tuple), backlog=st.lists(st.sampled_from(WINDOWS), unique=True).map(tuple),
                    in_progress=st.booleans())
windows_subset = st.lists(st.sampled_from(WINDOWS), unique=True).map(lambda ks: sorted(ks))


@st.composite
def plans(draw: st.DrawFn) -> api.ChunkTaskPlan:
    pending = draw(windows_subset)
    refill = draw(st.lists(st.sampled_from([k for k in WINDOWS if k not in pending] or ["x"]), unique=True))
    refill = [k for k in refill if k in WINDOWS]
    return plan(fresh=draw(st.booleans()), added=draw(windows_subset), not_completed=len(pending),
                unclaimed=pending, refill={k: "5" for k in refill}, orphaned={k: 1 for k in draw(windows_subset)},
                stamp="s")


@given(cursors, plans(), st.integers(1, 6), st.integers(1, 4), st.integers(0, 2), windows_subset)
def test_a_tick_repeated_with_its_own_cursor_never_asks_for_a_window_twice(
        cursor: ExportCursor, tick: api.ChunkTaskPlan, per_run: int, per_tick: int, in_flight: int,
        registered: list[str]) -> None:
    order = registered + [k for k in WINDOWS if k not in registered]
    shared = {"fixed_per_run": per_run, "runs_per_tick": per_tick, "in_flight": in_flight}
    first = plan_tick(view(tick, registered=registered, **shared), cursor)
    asked = [k for run in first.runs for k in run.windows]
    assert len(asked) == len(set(asked))  # once per tick
    for run in first.runs:  # a range of consecutive partitions, at most max_partitions_per_run
        positions = [order.index(k) for k in run.windows]
        assert positions == list(range(positions[0], positions[0] + len(positions))) if positions else True
        assert len(run.windows) <= per_run
    assert not set(asked) & set(first.cursor.backlog)
    assert len([r for r in first.runs if r.windows]) <= per_tick
    second = plan_tick(view(tick, **shared), first.cursor)  # everything registered now
    again = {k for run in second.runs for k in run.windows}
    assert not again & set(asked), "a window requested in its current state was requested again"
    assert parse_cursor(dump_cursor({"orders": second.cursor})) == {"orders": second.cursor}


@given(cursors)
def test_the_cursor_reads_back_what_it_wrote_and_an_old_or_broken_one_reads_as_no_state(cursor: ExportCursor) -> None:
    assert parse_cursor(dump_cursor({"a": cursor, "b": ExportCursor()})) == {"a": cursor, "b": ExportCursor()}
    assert parse_cursor("not json") == {} and parse_cursor(json.dumps([1])) == {}
    assert parse_cursor(json.dumps({"exports": {"a": {"run": 7, "backlog": "x", "planned_at": True}}})) == {
        "a": ExportCursor()}
