"""The model-based walk: random sequences of source changes, runs, crashes, gc, foreign
commits and deleted folders, checked after every step against a model of the truth.

One example of the walk draws an export shape (`tests/walk/trail.py` `Shape`: mode ×
Parquet/CSV/Delta/Iceberg × local/S3 × partition_by × merge_on × retention, and sometimes
a second config's export nested under the first one's `data/`) and up to four source rows,
then runs up to `stateful_step_count` rules: insert / update (sometimes moving the row's date) / delete a
source row; `rivet run` (a run with nothing new is the empty poll); a run killed at a fault
point of `rivet_core/pipeline/faults.py` (`RIVET_TEST_PANIC_AT`: the process SIGKILLs
itself, as a crash leaves it — a forked copy of this process, or for a table export, whose
writers refuse to run in a fork, a `rivet` process of its own); `rivet gc` with the config's rules or with
`--keep-runs N --grace-hours 0`; a foreign commit (`deltalake.write_deltalake(...,
mode="append")`, a pyiceberg `append`); an `rm -rf` of `data/`, of the whole prefix or of a
`partition_by` bucket folder; and `rivet run --full-refresh` (the re-baseline of a
replacing export). `rivet` runs in-process (click's runner), so a step costs milliseconds.

What "true" means — what a reader must see, per mode (docs/modes.md, docs/manifest.md):

- full, chunked: exactly the source rows as of the last successful run;
- time_window: the source rows with `d >= today - DAYS_WINDOW` as of the last successful run;
- incremental (append): every row version a successful run fetched — a run fetches the
  rows whose `updated_at` is above the cursor (per bucket with partition_by), so deleted
  rows stay and an update adds a version. Compared as a set: a crash between the manifest
  and the cursor re-exports a run (at-least-once, docs/invariants.md I3). With `retention`
  (or `rivet gc --keep-runs N`) only the last N runs that delivered rows count; a run that
  starts from nothing (`--full-refresh`) is a new baseline: the runs before it leave the
  dataset (docs/adr/0007-readable-layout-and-retention.md, "What current is") — with
  merge_on it merges every current row over the table instead. A run of a
  `partition_by` export killed in some bucket may have published the buckets before it:
  its versions are "maybe" — the view holds every true version and nothing outside
  truth ∪ maybe;
- incremental with merge_on: for each key value (NULL is a key value like any other: a
  reader asking "the row of key K" gets one row), the fetched version with the highest
  `updated_at`, over the whole export (a row whose date moved bucket is still one row);
- partition_by: the same truth as without it; the reader's view is the union over every
  `d=<label>` folder at the root (what a Hive reader globs);
- a nested neighbour (its own config, a full export under the primary's `data/eb`): its
  own truth, untouched by the primary's retention.

The reader's view, never the project's readers: Parquet/CSV — the parts the current
`manifest.json` lists (incremental: every success run copy `manifest-<run_id>.json` still
at the prefix), read with pyarrow; Delta — `deltalake.DeltaTable(...).to_pyarrow_table()`;
Iceberg — a pyiceberg scan of the catalog's table. A view that cannot be read (a file the
table or manifest references is gone) is not true.

The checks, after every step, for every export:

1. unless the model knows the destination was damaged from outside (a foreign commit, a
   deleted folder: `broken`, until a `--full-refresh` run re-baselines Parquet/CSV; a
   table's explicit way back is not modelled yet, so it stays `broken` and only check 2
   applies) the view is true —
   a run, an empty poll, a killed run and gc never make it false;
2. `rivet validate` (default depth) exits 0 exactly when the view is true: a PASSED over a
   false view is the bug class of the issue, a FAILED over a true one is a bug too.
A run killed before anything was published must leave the view as it was (both checks
hold). After a kill that may have published part of its work (in some `partition_by`
bucket, after the table commit, or after the manifest but before retention) the model is
in doubt until the next successful run, and both checks wait for it.

Bounded in `.ci/run`: one pytest case per shape group (`GROUPS`: its examples by default)
× `RIVET_WALK_STEPS` steps (default 12), derandomized (no example database), so CI replays
the same walk; `RIVET_WALK_EXAMPLES` overrides every group's count. Knobs for a soak or a
targeted walk (docs/operations.md, "The model-based walk"):
`RIVET_WALK_EXAMPLES=200 RIVET_WALK_STEPS=40`; `RIVET_WALK_SHAPE=incremental-delta-local`
(labels of `trail.Shape`, comma-separated: a whole label is that shape, a prefix every
shape it starts); `RIVET_WALK_RULES=insert,fresh_run,gc` (the rules drawn: a targeted walk
leaves out those that reach another finding first); `RIVET_WALK_SHRINK=1` (shrink a failure
to a shorter sequence: minutes); `RIVET_WALK_VERBOSE=1` (print every step).

The issue's known findings are also replayed as fixed rule sequences (the tests after
the walk), so each is guarded deterministically whatever the walk's draw.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.helpers import rivet, rivet_in_process, rivet_quick, write_config
from tests.walk.trail import (
    DATES,
    DAYS_WINDOW,
    POINTS,
    TODAY,
    Area,
    Row,
    Shape,
    SourceModel,
    ViewBroken,
    bucket_folders,
    bucket_label,
    delta_rows,
    env_int,
    iceberg_catalog,
    iceberg_rows,
    manifest_rows,
    shapes_from_env,
)

#: One CI case per group of shapes, and how many examples it gets by default. A group stops
#: at its first failure, so the shapes a finding needs are spread over groups rather than
#: pooled: a table that appends or merges, a table that is replaced, partition_by, files.
#: Local shapes are cheap (a step costs milliseconds to a second), S3's seconds per step.
GROUPS: dict[str, tuple[Callable[[Shape], bool], int]] = {
    "incremental-tables-local": (lambda s: _local(s) and s.is_table and s.mode == "incremental", 20),
    "replacing-tables-local": (lambda s: _local(s) and s.is_table and s.mode != "incremental", 15),
    "partition_by-local": (lambda s: s.where == "local" and s.partition_by, 20),
    "files-replacing-local": (lambda s: _local(s) and not s.is_table and s.mode != "incremental", 20),
    "files-incremental-local": (lambda s: _local(s) and not s.is_table and s.mode == "incremental", 20),
    "s3": (lambda s: s.where == "s3", 2),
}


def _local(shape: Shape) -> bool:
    return shape.where == "local" and not shape.partition_by


EARLY_POINTS = POINTS[:3]


@dataclass
class Trail:
    """One export under test and the model of what its reader must see."""

    name: str
    shape: Shape
    config: Path
    sub: str
    iceberg_ns: str = "lake"
    snapshot: list[Row] | None = None                         # full-likes: rows at the last run
    runs: dict[str, list[list[Row]]] = field(default_factory=dict)  # incremental: per bucket, per run
    cursors: dict[str, int] = field(default_factory=dict)
    maybe: set[Row] = field(default_factory=set)  # appends: versions a killed run may have published
    broken: str = ""        # why the destination is known to be damaged from outside
    published: bool = False  # a run succeeded: the run ledger knows the prefix, so its trail must stay
    in_doubt: str = ""      # why the model cannot say what a crash left

    # ------------------------------------------------------------------ the model
    def bucket(self, row: Row) -> str:
        return bucket_label(row[4]) if self.shape.partition_by else ""

    def publish(self, source: dict[int, Row], *, move_cursor: bool = True, refresh: bool = False) -> None:
        """A successful run, as the model sees it."""
        self.published = True
        if self.shape.mode != "incremental":
            self.snapshot = sorted(source.values(), key=repr)
            return
        if refresh:  # a run from nothing: the dataset's new baseline (a table: an overwrite commit)
            self.runs, self.cursors, self.maybe = {}, {}, set()
        fetched: dict[str, list[Row]] = {}
        for row in source.values():
            b = self.bucket(row)
            if refresh or b not in self.cursors or row[3] > self.cursors[b]:
                fetched.setdefault(b, []).append(row)
        for b, rows in fetched.items():
            self.runs.setdefault(b, []).append(rows)
            if move_cursor:
                self.cursors[b] = max(r[3] for r in rows)

    def keep_runs(self, n: int) -> None:
        """Retention: the last n runs that delivered rows stay (docs/config-reference.md)."""
        for b, runs in self.runs.items():
            self.runs[b] = [r for r in runs if r][-n:]

    def truth(self) -> list[Row]:
        shape = self.shape
        if shape.mode != "incremental":
            rows = self.snapshot or []
            if shape.mode == "time_window":
                cutoff = (TODAY.toordinal() - DAYS_WINDOW)
                rows = [r for r in rows if r[4] is not None and _ordinal(r[4]) >= cutoff]
            return sorted(rows, key=repr)
        versions = {r for runs in self.runs.values() for run in runs for r in run}
        if not shape.merge_on:
            return sorted(versions, key=repr)
        latest: dict[Any, Row] = {}
        for r in sorted(versions, key=lambda r: r[3]):
            latest[r[1]] = r
        return sorted(latest.values(), key=repr)

    def fetchable(self, source: dict[int, Row]) -> set[Row]:
        """The versions a run would fetch now (what a killed run may have published)."""
        if self.shape.mode != "incremental":
            return set()
        return {r for r in source.values() if self.bucket(r) not in self.cursors
                or r[3] > self.cursors[self.bucket(r)]}

    def same(self, view: list[Row]) -> bool:
        if self.shape.appends:
            truth = set(self.truth())
            return truth <= set(view) <= truth | self.maybe
        return sorted(view, key=repr) == self.truth()


def _ordinal(iso: str) -> int:
    import datetime as dt

    return dt.date.fromisoformat(iso).toordinal()


def enabled(name: str, when: Callable[[Any], bool] | None = None) -> Any:
    """A rule's precondition: `when` holds, and `RIVET_WALK_RULES` (comma-separated rule
    names; unset = all) lets the rule be drawn — a targeted run can leave out the rules
    that reach another finding first."""
    def check(machine: Any) -> bool:
        allowed = os.environ.get("RIVET_WALK_RULES")
        if allowed and name not in {r.strip() for r in allowed.split(",")}:
            return False
        return when is None or when(machine)
    return precondition(check)


class TrailWalk(RuleBasedStateMachine):
    """The walk; `configure()` hands it the servers and the shapes to draw from."""

    shapes: list[Shape] = []
    s3: Any = None
    pg_catalog: str | None = None

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="rivet-walk-"))
        self.source = SourceModel(self.tmp / "src.db")
        self.source.create()
        self.trails: list[Trail] = []
        self.area: Area | None = None
        self.foreign = 0
        self.changed = False  # the source changed since the last run

    def teardown(self) -> None:
        if self.area is not None and self.area.s3 is not None:
            self.area.remove("")
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ set-up
    @initialize(data=st.data())
    def choose_shape(self, data: st.DataObject) -> None:
        """The export(s) and a few source rows to start from (so that even a walk of one
        repeated rule — hypothesis tries those first — has data to move)."""
        self.start(data.draw(st.sampled_from(self.shapes), label="shape"))
        for d in data.draw(st.lists(st.sampled_from([*DATES, None]), max_size=4), label="first rows' dates"):
            self.insert("own", d)

    def start(self, shape: Shape) -> None:
        """Configure the export(s) of `shape` over an empty source."""
        root = f"walk-{uuid.uuid4().hex[:8]}"
        self.area = Area(root, local=None if shape.where == "s3" else self.tmp,
                         s3=self.s3 if shape.where == "s3" else None)
        ns = f"w{uuid.uuid4().hex[:8]}"
        self.trails.append(self._trail("items", shape, "out/{partition}" if shape.partition_by else "out", ns))
        if shape.nested:
            self.trails.append(self._trail("eb", Shape("full"), "out/data/eb", ns, own_dir="b"))

    def _trail(self, name: str, shape: Shape, sub: str, ns: str, own_dir: str = "a") -> Trail:
        assert self.area is not None
        export: dict[str, Any] = {"name": name, "table": "items", "mode": shape.mode, "format": shape.fmt,
                                  "destination": self.area.destination(sub)}
        if shape.mode == "incremental":
            export["cursor_column"] = "updated_at"
        if shape.mode == "chunked":
            export.update(chunk_column="id", chunk_size=3)
        if shape.mode == "time_window":
            export.update(time_column="d", days_window=DAYS_WINDOW)
        if shape.partition_by:
            export["partition_by"] = "d"
        if shape.merge_on:
            export["merge_on"] = ["k"]
        if shape.retention:
            export["retention"] = {"keep_runs": 1, "grace_hours": 0}
        if shape.table_format:
            export["table_format"] = shape.table_format
        if shape.table_format == "iceberg":
            export["iceberg"] = {"catalog_url": self._catalog_url(shape), "namespace": ns}
        folder = self.tmp / own_dir
        folder.mkdir(exist_ok=True)
        config = write_config(folder, {"type": "sqlite", "url": f"sqlite:///{self.source.path}",
                                       "tuning": {"throttle_ms": 0, "max_retries": 0}}, [export])
        return Trail(name, shape, config, sub.replace("/{partition}", ""), ns)

    def _catalog_url(self, shape: Shape) -> str:
        if shape.where == "s3":
            assert self.pg_catalog, "an Iceberg table on S3 needs TEST_PG_DSN for its catalog"
            return self.pg_catalog
        return f"sqlite:///{self.tmp / 'catalog.db'}"

    @property
    def primary(self) -> Trail:
        return self.trails[0]

    # ------------------------------------------------------------------ the source
    @enabled("insert")
    @rule(k=st.sampled_from(["own", "own", "null", "dup"]), d=st.sampled_from([*DATES, None]))
    def insert(self, k: str, d: str | None) -> None:
        self.changed = True
        self.source.insert(k if self.primary.shape.merge_on else "own", d)

    @enabled("update", lambda self: bool(self.source.rows))
    @rule(pick=st.integers(0, 10_000), d=st.sampled_from([*DATES, None]), move=st.booleans())
    def update(self, pick: int, d: str | None, move: bool) -> None:
        ids = sorted(self.source.rows)
        self.changed = True
        self.source.update(ids[pick % len(ids)], d, move)

    @enabled("delete", lambda self: bool(self.source.rows))
    @rule(pick=st.integers(0, 10_000))
    def delete(self, pick: int) -> None:
        ids = sorted(self.source.rows)
        self.changed = True
        self.source.delete(ids[pick % len(ids)])

    # ------------------------------------------------------------------ runs
    @enabled("run")
    @rule(which=st.integers(0, 1))
    def run(self, which: int) -> None:
        """`rivet run`; with nothing new since the last one, this is the empty poll."""
        trail = self.trails[which % len(self.trails)]
        self.changed = False
        result = rivet_quick("run", "-c", str(trail.config), "-e", trail.name)
        if result.returncode == 0:
            self._published(trail)

    @enabled("fresh_run", lambda self: self.changed)
    @rule()
    def fresh_run(self) -> None:
        """`rivet run` of the primary export after a source change: never an empty poll, so a
        targeted walk (`RIVET_WALK_RULES=insert,fresh_run,gc`) gets past that finding."""
        self.run(0)

    @enabled("run_killed")
    @rule(point=st.sampled_from(POINTS))
    def run_killed(self, point: str) -> None:
        """A run SIGKILLed at a fault point: a forked copy of this process runs `rivet run`
        with RIVET_TEST_PANIC_AT, so no finally block or flush runs, as after a power loss."""
        trail = self.primary
        outcome = _killed_run(trail.config, trail.name, point, fork=not trail.shape.is_table)
        if outcome == 0:          # the point is not on this shape's path: a whole run
            self._published(trail)
            return
        if outcome != "killed":
            return
        if trail.shape.partition_by:
            # the buckets before the killed one are published, cursors moved; which ones is
            # the runner's business: the versions are "maybe", the view in doubt till a success
            trail.maybe |= trail.fetchable(self.source.rows)
            trail.in_doubt = f"killed at {point} in some bucket"
            return
        if point in EARLY_POINTS:
            return                # nothing was published: the view must not change
        if point == "after_table_commit":
            trail.in_doubt = f"killed at {point}"   # committed, not published: the next run decides
            return
        trail.publish(self.source.rows, move_cursor=point == "after_cursor_commit")
        trail.in_doubt = f"killed at {point}"   # retention runs after the cursor: not yet

    def _published(self, trail: Trail, *, refresh: bool = False) -> None:
        trail.publish(self.source.rows, refresh=refresh)
        trail.in_doubt = ""
        if trail.shape.retention:
            trail.keep_runs(1)

    @enabled("rebaseline")
    @rule()
    def rebaseline(self) -> None:
        """`rivet run --full-refresh`: every row again, a run that starts from nothing — for an
        incremental export the dataset's new baseline (docs/adr/0007-readable-layout-and-
        retention.md, "What current is"); the documented way back from outside damage for
        Parquet/CSV."""
        trail = self.primary
        self.changed = False
        result = rivet_quick("run", "-c", str(trail.config), "-e", trail.name, "--full-refresh")
        if result.returncode == 0:  # the documented way back, for files and tables alike
            self._published(trail, refresh=True)
            trail.broken = ""

    # ------------------------------------------------------------------ gc
    @enabled("gc", lambda self: not self.primary.shape.partition_by)
    @rule(keep=st.sampled_from([None, 1, 2]))
    def gc(self, keep: int | None) -> None:
        """`rivet gc` with the config's rules, or `--keep-runs N --grace-hours 0`."""
        trail = self.primary
        flags = [] if keep is None else ["--keep-runs", str(keep), "--grace-hours", "0"]
        result = rivet_quick("gc", "-c", str(trail.config), trail.name, *flags)
        if result.returncode != 0:
            return  # a refusal (no rules, a table): nothing may change
        kept = keep if keep is not None else (1 if trail.shape.retention else None)
        if kept and trail.shape.appends and not trail.shape.is_table:
            trail.keep_runs(kept)

    # ------------------------------------------------------------------ damage from outside
    @enabled("foreign_commit", lambda self: self.primary.shape.is_table)
    @rule()
    def foreign_commit(self) -> None:
        """Another writer appends a row to the table (its first bucket's, with partition_by)."""
        trail = self.primary
        sub = self._table_subs(trail)
        if not sub:
            return
        self.foreign += 1
        row = {"id": 90_000 + self.foreign, "k": 90_000 + self.foreign, "v": "foreign", "updated_at": 0,
               "d": DATES[0]}
        if _foreign_append(self, trail, sub[0], row):
            trail.broken = f"a foreign commit to {sub[0]}"

    @enabled("delete_folder")
    @rule(what=st.sampled_from(["data", "prefix", "bucket"]))
    def delete_folder(self, what: str) -> None:
        """`rm -rf` of the export's data/, its whole prefix, or one partition_by bucket."""
        assert self.area is not None
        trail = self.primary
        if what == "bucket" and not trail.shape.partition_by:
            return
        subs = self._bucket_subs(trail)
        if not subs:
            return
        target = {"data": f"{subs[0]}/data", "prefix": trail.sub, "bucket": subs[-1]}[what]
        if not self.area.keys(target):
            return
        self.area.remove(target)
        trail.broken = f"rm -rf {target}"

    # ------------------------------------------------------------------ the checks
    @invariant()
    def reader_sees_the_truth_exactly_when_validate_passes(self) -> None:
        for trail in self.trails:
            if trail.in_doubt:
                continue
            view, why = self._view(trail)
            true = why == "" and trail.same(view)
            detail = _diff(trail, view, why)
            if not trail.broken:
                assert true, f"[{trail.shape.label}] export {trail.name}: the reader's view is not the truth: {detail}"
            verdict = rivet_quick("validate", "-c", str(trail.config), "-e", trail.name)
            passed = verdict.returncode == 0
            assert passed == true, (
                f"[{trail.shape.label}] export {trail.name}: rivet validate "
                f"{'PASSED (exit 0)' if passed else f'FAILED (exit {verdict.returncode})'} but the view is "
                f"{'true' if true else 'false'}{' (' + trail.broken + ')' if trail.broken else ''}: {detail}\n"
                f"validate said: {(verdict.stdout + verdict.stderr).strip()[:600]}")

    def _bucket_subs(self, trail: Trail) -> list[str]:
        assert self.area is not None
        if not trail.shape.partition_by:
            return [trail.sub]
        return [f"{trail.sub}/{folder}" for folder in bucket_folders(self.area, trail.sub)]

    def _table_subs(self, trail: Trail) -> list[str]:
        return self._bucket_subs(trail)

    def _view(self, trail: Trail) -> tuple[list[Row], str]:
        assert self.area is not None
        rows: list[Row] = []
        root = self.area.keys(trail.sub)
        if trail.published and "manifest.json" not in root and "_partitions.json" not in root:
            # A reader told to read manifest.json finds none where runs were published: the
            # data is gone, whatever the source holds now (validate: manifest_gone).
            return [], f"{trail.sub}: no manifest.json where a run published"
        try:
            for sub in self._bucket_subs(trail):
                rows += self._read(trail, sub)
        except ViewBroken as exc:
            return [], str(exc)
        return rows, ""

    def _read(self, trail: Trail, sub: str) -> list[Row]:
        assert self.area is not None
        shape = trail.shape
        if shape.table_format:  # the table is read by its own reader, and its trail by the manifest
            manifest_rows(self.area, sub, shape.fmt, every_run=False, read=False)
        if shape.table_format == "delta":
            return delta_rows(self.area, sub)
        if shape.table_format == "iceberg":
            return iceberg_rows(self._catalog_url(shape), self.area, _iceberg_identifier(trail, sub))
        return manifest_rows(self.area, sub, shape.fmt, every_run=shape.appends)


def _iceberg_identifier(trail: Trail, sub: str) -> str:
    """The table an export registers: `<namespace>.<export name>`; a partition_by bucket is
    the sub-export `<export>__<label>` (docs/modes.md)."""
    name = trail.name
    if trail.shape.partition_by:
        label = sub.rsplit("/", 1)[-1].split("=", 1)[1]
        name = f"{name}__{'null' if label == '__HIVE_DEFAULT_PARTITION__' else label}"
    return f"{trail.iceberg_ns}.{name}"


def _diff(trail: Trail, view: list[Row], why: str) -> str:
    if why:
        return why
    truth = trail.truth()
    seen, want = (set(view), set(truth)) if trail.shape.appends else (view, truth)
    extra = [r for r in view if r not in want]
    missing = [r for r in truth if r not in seen]
    dups = len(view) - len(set(view))
    return (f"reader sees {len(view)} rows, the truth has {len(truth)}; extra {extra[:4]}, missing {missing[:4]}"
            f"{f', {dups} duplicate(s)' if dups and not trail.shape.appends else ''}")


def _killed_run(config: Path, name: str, point: str, *, fork: bool) -> int | str:
    """`rivet run` armed to SIGKILL itself at `point`: 'killed', or the exit code when the
    point is not on the run's path. A forked copy of this process costs milliseconds; the
    table writers (delta-rs' tokio runtime, pyiceberg's) refuse to run in a fork, so a table
    export's run gets a process of its own."""
    if not fork:
        proc = rivet("run", "-c", str(config), "-e", name, env={"RIVET_TEST_PANIC_AT": point})
        return "killed" if proc.returncode == -signal.SIGKILL else proc.returncode
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 70
        try:
            os.environ["RIVET_TEST_PANIC_AT"] = point
            code = rivet_in_process("run", "-c", str(config), "-e", name).exit_code
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return "killed"
    return os.waitstatus_to_exitcode(status)


def _foreign_append(walk: TrailWalk, trail: Trail, sub: str, row: dict[str, Any]) -> bool:
    """Append `row` with the table's own writer library, cast to the table's schema."""
    assert walk.area is not None
    if trail.shape.table_format == "delta":
        from deltalake import DeltaTable, write_deltalake
        from deltalake.exceptions import TableNotFoundError

        uri, options = walk.area.uri(sub), walk.area.storage_options()
        try:
            schema = pa.schema(DeltaTable(uri, storage_options=options).schema().to_arrow())
        except (TableNotFoundError, OSError):
            return False  # no table (yet), or one already broken: nothing to commit to
        write_deltalake(uri, _one_row(schema, row), mode="append", storage_options=options)
        return True
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    catalog = iceberg_catalog(walk._catalog_url(trail.shape), walk.area)
    try:
        table = catalog.load_table(_iceberg_identifier(trail, sub))
    except (NoSuchTableError, NoSuchNamespaceError, OSError):
        return False  # no table (yet), or its metadata was deleted: nothing to commit to
    try:
        table.append(_one_row(table.schema().as_arrow(), row))
        return True
    finally:
        catalog.engine.dispose()


def _one_row(schema: pa.Schema, row: dict[str, Any]) -> pa.Table:
    import datetime as dt

    values = {f.name: row.get(f.name) for f in schema}
    if pa.types.is_date(schema.field("d").type):
        values["d"] = dt.date.fromisoformat(row["d"])
    return pa.Table.from_pylist([values], schema=schema)


# --------------------------------------------------------------------------- pytest entry points
def walk(shapes: list[Shape], s3: Any, pg: str | None, *, examples: int, steps: int) -> None:
    """Run the machine over `shapes` (derandomized: CI replays the same sequences)."""
    TrailWalk.shapes, TrailWalk.s3, TrailWalk.pg_catalog = shapes, s3, pg
    phases = [Phase.explicit, Phase.reuse, Phase.generate]
    if os.environ.get("RIVET_WALK_SHRINK") == "1":
        phases.append(Phase.shrink)  # readable sequences, at minutes per finding
    run_state_machine_as_test(TrailWalk, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, derandomize=True, database=None,
        phases=phases, report_multiple_bugs=False,
        verbosity=Verbosity.debug if os.environ.get("RIVET_WALK_VERBOSE") else Verbosity.normal, suppress_health_check=list(HealthCheck), print_blob=False))


def _servers(request: pytest.FixtureRequest, shapes: list[Shape]) -> tuple[Any, str | None]:
    s3 = request.getfixturevalue("s3") if any(s.where == "s3" for s in shapes) else None
    pg = request.getfixturevalue("pg_url") if any(s.table_format == "iceberg" and s.where == "s3"
                                                   for s in shapes) else None
    return s3, pg


@pytest.mark.parametrize("group", GROUPS)
def test_every_step_leaves_the_reader_the_truth_and_validate_agrees(request: pytest.FixtureRequest,
                                                                  group: str) -> None:
    member, examples = GROUPS[group]
    restrict = os.environ.get("RIVET_WALK_SHAPE")
    shapes = shapes_from_env(restrict) if restrict else [s for s in shapes_from_env(None) if member(s)]
    s3, pg = _servers(request, shapes)
    walk(shapes, s3, pg, examples=env_int("RIVET_WALK_EXAMPLES", examples), steps=env_int("RIVET_WALK_STEPS", 12))


_Seq = list[tuple[str, dict[str, Any]]]


def replay(shape_label: str, sequence: _Seq, request: pytest.FixtureRequest) -> None:
    """Drive the machine through one fixed sequence of rules (a finding's shortest path),
    checking after every step as the walk does."""
    shapes = shapes_from_env(shape_label)
    TrailWalk.s3, TrailWalk.pg_catalog = _servers(request, shapes)
    machine = TrailWalk()
    try:
        machine.start(shapes[0])
        for rule_name, args in sequence:
            getattr(machine, rule_name)(**args)
            machine.reader_sees_the_truth_exactly_when_validate_passes()
    finally:
        machine.teardown()


# --------------------------------------------------------------------------- the findings, replayed
# Each is the shortest rule sequence the walk reaches the finding by (the module docstring's
# checks run after every step); a targeted walk finds them too, e.g.
# RIVET_WALK_SHAPE=incremental-delta-local RIVET_WALK_RULES=insert,run.
_INSERT = ("insert", {"k": "own", "d": DATES[2]})
_RUN = ("run", {"which": 0})


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_an_empty_poll_leaves_every_earlier_row_in_an_incremental_table(request, kind):
    replay(f"incremental-{kind}-local", [_INSERT, _RUN, _RUN, _INSERT, _RUN], request)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_gc_with_keep_runs_never_removes_a_file_the_table_still_reads(request, kind):
    replay(f"incremental-{kind}-local", [_INSERT, _RUN, _INSERT, _RUN, ("gc", {"keep": 1}), ("gc", {"keep": 1})],
           request)


def test_retention_leaves_another_configs_export_nested_under_data_alone(request):
    replay("full-parquet-local-retention-nested", [_INSERT, _RUN, ("run", {"which": 1}), _INSERT, _RUN], request)


def test_merge_on_keeps_one_row_per_key_with_a_null_key(request):
    replay("incremental-delta-local-merge_on", [("insert", {"k": "null", "d": DATES[2]}), _RUN,
                                                ("update", {"pick": 0, "d": None, "move": False}), _RUN], request)


def test_merge_on_keeps_one_row_per_key_when_a_batch_repeats_a_key(request):
    replay("incremental-delta-local-merge_on", [_INSERT, ("insert", {"k": "dup", "d": DATES[2]}), _RUN], request)


def test_partition_by_withdraws_rows_deleted_at_the_edge_and_in_the_null_bucket(request):
    replay("full-parquet-local-partition_by", [
        ("insert", {"k": "own", "d": DATES[0]}), ("insert", {"k": "own", "d": DATES[3]}),
        ("insert", {"k": "own", "d": None}), _RUN,
        ("delete", {"pick": 0}), ("delete", {"pick": 1}), _RUN], request)


def test_partition_by_validate_fails_when_a_bucket_folder_is_deleted(request):
    replay("full-parquet-local-partition_by", [
        ("insert", {"k": "own", "d": DATES[0]}), ("insert", {"k": "own", "d": DATES[3]}), _RUN,
        ("delete_folder", {"what": "bucket"})], request)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_foreign_commit_keeps_validate_failing_after_the_next_run(request, kind):
    replay(f"incremental-{kind}-local", [_INSERT, _RUN, ("foreign_commit", {}), _INSERT, _RUN], request)


# --------------------------------------------------------------------------- found by the walk itself
def test_validate_fails_when_a_published_prefix_is_emptied(request):
    """Data gone after successful runs must not read as a legacy prefix with exit 0."""
    replay("incremental-parquet-local", [_INSERT, _RUN, ("delete_folder", {"what": "prefix"})], request)


def test_time_window_on_a_sqlite_date_column_keeps_the_cutoff_day(request):
    """docs/modes.md: `time_column >= today − days_window`; SQLite keeps a DATE as text, and
    the day of the cutoff itself must not be compared away."""
    replay("time_window-parquet-local", [("insert", {"k": "own", "d": DATES[-1 - DAYS_WINDOW]}), _RUN], request)


def test_a_table_bucket_emptied_after_a_crash_stays_readable(request):
    """partition_by + Delta, full: a run killed after its first bucket's cursor commit, the
    bucket's only row moves to another date, the next run republishes the bucket empty — the
    bucket's table must stay readable (it referenced a part that run moved away)."""
    replay("full-delta-local-partition_by", [
        ("insert", {"k": "own", "d": DATES[4]}), ("insert", {"k": "own", "d": DATES[2]}),
        ("run_killed", {"point": "after_cursor_commit"}), ("update", {"pick": 1, "d": DATES[0], "move": True}),
        _RUN], request)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_run_killed_after_its_file_write_leaves_every_earlier_row_in_an_incremental_table(request, kind):
    """Nothing of the killed run was published; the next run must append to the table as
    it was, not start it over with its own rows."""
    replay(f"incremental-{kind}-local", [_INSERT, _RUN, ("run_killed", {"point": "after_file_write"}), _INSERT, _RUN],
           request)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_replacing_table_export_of_an_emptied_source_empties_the_table(request, kind):
    """A full run that reads 0 rows replaces the table with nothing, as it replaces a
    Parquet export's manifest."""
    replay(f"full-{kind}-local", [_INSERT, _RUN, ("delete", {"pick": 0}), _RUN], request)
