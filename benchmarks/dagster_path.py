"""The Dagster path, driven as users drive it (issue 16 items 5 and 7): the sections between
the `dagster-full` and `dagster-chunked` markers of docs/benchmarks.md.

    python -m benchmarks --scenario dagster-full    --rows 500000 [--repeat 1]
    python -m benchmarks --scenario dagster-chunked --rows 500000 --windows 32 [--instance sqlite,postgres]

Needs TEST_PG_DSN (or --pg-url; `bash scripts/services.sh start DIR pg`). The source is the
wide `orders` fixture (benchmarks/fixture_pg.sql) in its own database
(`rivet_bench_dagster`, rebuilt only when the row count changed). Every export uses
`tuning.profile: fast`, like benchmarks/harness.py, and its own destination.

`dagster-full` times, each in a fresh process: `rivet run` of a full Parquet export,
`dagster asset materialize -m rivet_dagster.definitions` of the same export (DAGSTER_HOME a
fresh copy of the project's dagster_home/dagster.yaml), and `dg launch --assets` in a `dg`
project laid out as examples/dg_project (the component reading the same rivet.yaml).

`dagster-chunked` times a chunked export of `--windows` id windows (`chunk_size` = the id
span / windows) the way a deployment runs it: a fresh DAGSTER_HOME (the project's
dagster.yaml, or `--dagster-yaml`; with `postgres`, its storage through dagster-postgres on a
second PostgreSQL server the benchmark starts and stops around the round — scripts/services.sh
`pg`, a cluster of its own on a free port — so the instance's event-log writes do not share
the source's server; `--instance-server shared` puts it on a fresh database of the source's
server instead, as rounds before 2026-12-02 09:00 did), the instance migrated once before anything starts,
then a real `dagster-daemon run` (default run launcher, the queued run coordinator that
`concurrency.runs` implies, the planner sensor RUNNING). Clock: from the planner's first
tick to the `manifest_verified` evaluation, both read from the instance. Per run: queue +
launch (created → RUN_START), the step (STEP_START → STEP_SUCCESS: rivet's own work plus
Dagster's step bookkeeping) and the overhead (the run's wall minus its step). Then `rivet
run` of the same chunked export, and the published data of each re-read and compared with
the source (benchmarks/checksum.py).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.checksum import compare, file_checksums, source_checksums
from benchmarks.harness import ensure_fixture

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BIN = REPO / ".venv" / "bin"
DOC = REPO / "docs" / "benchmarks.md"
DATABASE = "rivet_bench_dagster"
INSTANCE_DB = "rivet_bench_dagster_instance"
TABLE = "orders"


# --------------------------------------------------------------------------- setup

def _with_db(url: str, db: str) -> str:
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path="/" + db))


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def id_span(url: str) -> tuple[int, int]:
    with psycopg.connect(url) as conn:
        lo, hi = conn.execute(f"SELECT min(id), max(id) FROM {TABLE}").fetchone()
    return int(lo), int(hi)


def write_config(folder: Path, url_env: str, exports: list[dict[str, Any]]) -> Path:
    """A rivet.yaml (JSON is YAML) of `exports` against the bench source, profile `fast`."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"source": {"type": "postgres", "url_env": url_env, "tuning": {"profile": "fast"}},
              "exports": exports}
    path = folder / "rivet.yaml"
    path.write_text(json.dumps(config, indent=2))
    return path


def full_export(out: Path) -> dict[str, Any]:
    return {"name": "orders_full", "table": TABLE, "mode": "full", "format": "parquet",
            "destination": {"type": "local", "path": str(out)}}


def chunked_export(out: Path, chunk_size: int, per_run: int | None) -> dict[str, Any]:
    dagster: dict[str, Any] = {"schedule_status": "RUNNING"}
    if per_run is not None:
        dagster["max_partitions_per_run"] = per_run
    return {"name": "orders_chunked", "table": TABLE, "mode": "chunked", "format": "parquet",
            "chunk_column": "id", "chunk_size": chunk_size, "dagster": dagster,
            "destination": {"type": "local", "path": str(out)}}


def dagster_home(folder: Path, base_yaml: Path, postgres_url: str | None) -> Path:
    """A fresh DAGSTER_HOME: `base_yaml`, plus dagster-postgres storage when asked."""
    folder.mkdir(parents=True, exist_ok=True)
    text = base_yaml.read_text()
    if postgres_url:
        # psycopg2's scheme: SQLAlchemy 2.1 maps a bare postgresql:// to psycopg 3, whose
        # server-side parameters break dagster-postgres's `NOTIFY run_events, %(id)s`
        # (docs/distributed.md).
        url = "postgresql+psycopg2://" + postgres_url.split("://", 1)[1]
        text += ("\n# benchmarks/dagster_path.py: the instance on PostgreSQL (dagster-postgres)\n"
                 f"storage:\n  postgres:\n    postgres_url: {json.dumps(url)}\n")
    (folder / "dagster.yaml").write_text(text)
    return folder


def fresh_database(admin_url: str, name: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return _with_db(admin_url, name)


@contextmanager
def instance_server(args: argparse.Namespace, run_dir: Path) -> Iterator[str]:
    """The admin URL of the server the dagster-postgres instance lives on: with
    `--instance-server own` (the default) a PostgreSQL cluster of its own, started here by
    scripts/services.sh and stopped (and removed) when the round ends; `shared`: the source's."""
    if args.instance_server == "shared":
        yield args.pg_url
        return
    services = str(REPO / "scripts" / "services.sh")
    subprocess.run(["bash", services, "start", str(run_dir), "pg"], check=True, stdout=subprocess.DEVNULL)
    try:
        env = (run_dir / "env.sh").read_text()
        yield env.split("TEST_PG_DSN=", 1)[1].split()[0]
    finally:
        subprocess.run(["bash", services, "stop", str(run_dir)], check=False, stdout=subprocess.DEVNULL)


def migrate_instance(env: dict[str, str]) -> float:
    """Create the instance's storage once, in one process, before any other process opens it
    (docs/dagster-guide.md: two processes creating a fresh SQLite instance at once can race
    its first migration). Returns the seconds it took."""
    t0 = time.perf_counter()
    subprocess.run([str(BIN / "dagster"), "instance", "migrate"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def verify(data_root: Path, source: dict[str, str]) -> list[str]:
    """Columns whose checksum differs from the source (empty: equal)."""
    files = sorted(p for p in data_root.rglob("*.parquet") if "_quarantine" not in p.parts)
    return compare(source, file_checksums(files, TABLE))


def timed(argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> tuple[float, int]:
    with open(log, "wb") as out:
        t0 = time.perf_counter()
        rc = subprocess.run(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode
    return time.perf_counter() - t0, rc


def dg_project(folder: Path, config: Path) -> Path:
    """A `dg` project as examples/dg_project lays it out, its component reading `config`."""
    pkg = folder / "src" / "bench_dg"
    (pkg / "defs" / "orders").mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "bench_dg"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
        'dependencies = ["rivet-dagster[dg]"]\n\n[tool.dg]\ndirectory_type = "project"\n\n'
        '[tool.dg.project]\nroot_module = "bench_dg"\n')
    (pkg / "__init__.py").write_text("")
    (pkg / "defs" / "__init__.py").write_text("")
    # The example's own definitions.py (its executor choice included).
    shutil.copy(REPO / "examples" / "dg_project" / "src" / "shop_pipeline" / "definitions.py", pkg / "definitions.py")
    (pkg / "defs" / "orders" / "defs.yaml").write_text(
        f"type: rivet_dagster.RivetExportsComponent\nattributes:\n  config: {json.dumps(str(config))}\n")
    return folder


# --------------------------------------------------------------------------- dagster-full

#: `dagster asset materialize … (multiprocess)`: RIVET_DAGSTER_EXECUTOR=multiprocess, Dagster's
#: default mode before rivet_dagster/executors.py made `in_process` the default.
METHODS_FULL = ("rivet run", "dagster asset materialize", "dagster asset materialize (multiprocess)", "dg launch")

def run_full(args: argparse.Namespace, url: str, source: dict[str, str]) -> list[dict[str, Any]]:
    records = []
    for rep in range(args.repeat):
        for method in METHODS_FULL:
            work = args.work / f"full-{method.split()[0]}-r{rep}"
            shutil.rmtree(work, ignore_errors=True)
            out = work / "out"
            config = write_config(work / "cfg", "BENCH_SOURCE_URL", [full_export(out)])
            home = dagster_home(work / "dagster_home", args.dagster_yaml, None)
            env = {**os.environ, "BENCH_SOURCE_URL": url, "DAGSTER_HOME": str(home), "RIVET_CONFIG": str(config),
                   "PYTHONPATH": str(REPO), "DAGSTER_DISABLE_TELEMETRY": "1"}
            cwd = work
            if method == "rivet run":
                argv = [str(BIN / "rivet"), "run", "-c", str(config), "-e", "orders_full"]
            elif method.startswith("dagster asset materialize"):
                argv = [str(BIN / "dagster"), "asset", "materialize", "-m", "rivet_dagster.definitions",
                        "--select", "orders_full"]
                if "multiprocess" in method:
                    env["RIVET_DAGSTER_EXECUTOR"] = "multiprocess"
            else:
                cwd = dg_project(work / "dg", config)
                env["PYTHONPATH"] = f"{REPO}{os.pathsep}{cwd / 'src'}"
                argv = [str(BIN / "dg"), "launch", "--assets", "orders_full"]
            if method != "rivet run":
                migrate_instance(env)  # an existing instance, as users have: its creation is not timed
            load = _load()
            wall, rc = timed(argv, env, cwd, work / "run.log")
            mismatch = verify(out, source) if rc == 0 else ["(failed)"]
            rec = {"method": method, "rep": rep, "wall": round(wall, 2), "rc": rc, "load": load,
                   "check": "ok" if not mismatch else "✗ " + ", ".join(mismatch)}
            if rc != 0:
                rec["error"] = (work / "run.log").read_text(errors="replace")[-800:]
            print(f"[dagster-full] r{rep} {method:26s} wall {wall:6.2f} s rc={rc} check={rec['check']} "
                  f"(load {load})", flush=True)
            records.append(rec)
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
    return records


# --------------------------------------------------------------------------- dagster-chunked

@contextmanager
def started(argv: list[str], env: dict[str, str], cwd: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A long-running process of the benchmark (the daemon, a code server), its process group
    ended on exit."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # our own child's process group only
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def workspace(args: argparse.Namespace, env: dict[str, str], work: Path) -> Iterator[None]:
    """workspace.yaml for the daemon. `--code-server`: a `dagster code-server start` of its own
    (the deployment pattern: one long-lived code server the daemon connects to) — else the
    module entry of the project's workspace.yaml, whose code server the daemon spawns and
    replaces on its own."""
    entry = {"module_name": "rivet_dagster.definitions", "working_directory": str(REPO), "location_name": "rivet"}
    if not args.code_server:
        (work / "workspace.yaml").write_text(json.dumps({"load_from": [{"python_module": entry}]}))
        yield
        return
    port = _free_port()
    argv = [str(BIN / "dagster"), "code-server", "start", "-h", "127.0.0.1", "-p", str(port), "-m",
            "rivet_dagster.definitions", "-d", str(REPO), "--location-name", "rivet"]
    with started(argv, env, work, work / "code-server.log") as proc:
        deadline = time.monotonic() + args.timeout
        while subprocess.run([str(BIN / "dagster"), "api", "grpc-health-check", "-p", str(port)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the code server did not start; see {work / 'code-server.log'}")
            time.sleep(1)
        (work / "workspace.yaml").write_text(json.dumps({"load_from": [{"grpc_server": {
            "host": "127.0.0.1", "port": port, "location_name": "rivet"}}]}))
        yield


def _instance(home: Path) -> Any:
    os.environ["DAGSTER_HOME"] = str(home)
    import dagster as dg

    return dg.DagsterInstance.get()


#: The planner runs (tag `rivet/request`) that materialize `orders_chunked_manifest`: the
#: manifest on its own, or the last batch of windows with the manifest (the planner folds it
#: in when that batch holds every window still to export; rivet_dagster/chunked.py
#: `fold_manifest`). The runs are of Dagster's implicit asset job, told apart by this tag.
MANIFEST_REQUESTS = ("manifest", "publish")


def _manifest_runs(instance: Any, statuses: list[Any] | None = None) -> list[Any]:
    import dagster as dg

    return [r for kind in MANIFEST_REQUESTS for r in instance.get_runs(filters=dg.RunsFilter(
        tags={"rivet/export": "orders_chunked", "rivet/request": kind}, statuses=statuses or []))]


def _wait_for_manifest(instance: Any, proc: subprocess.Popen[bytes], timeout: float) -> Any:
    """The finished run that materialized the manifest (polls the instance every 2 s).

    The wall is measured from the instance's own event timestamps, not from when this loop
    notices the end, so the poll only decides when the scenario stops; at every 0.5 s its
    queries took ~0.1 of a core (2.35 CPU-s over 24 s, sampled from /proc) from the run it
    measures."""
    import dagster as dg

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"dagster-daemon exited ({proc.returncode}) before the manifest")
        runs = _manifest_runs(instance)
        done = [r for r in runs if r.is_finished]
        if done:
            return done[0]
        failed = [r for r in instance.get_runs(filters=dg.RunsFilter(tags={"rivet/export": "orders_chunked"}))
                  if r.status == dg.DagsterRunStatus.FAILURE]
        if failed:
            raise SystemExit(f"chunk run {failed[0].run_id} failed; see the daemon log")
        time.sleep(2)
    raise SystemExit(f"no manifest within {timeout:.0f} s")


def _first_tick(instance: Any) -> float | None:
    for state in instance.all_instigator_state():
        if state.name == "rivet_chunk_planner":
            ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=1000)
            return min(t.timestamp for t in ticks) if ticks else None
    return None


def _events(instance: Any, run_id: str) -> dict[str, float]:
    """First STEP_START, last STEP_SUCCESS, RUN_START and the manifest_verified evaluation."""
    import dagster as dg

    names = {dg.DagsterEventType.RUN_START: "RUN_START", dg.DagsterEventType.STEP_START: "STEP_START",
             dg.DagsterEventType.STEP_SUCCESS: "STEP_SUCCESS"}
    found: dict[str, float] = {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        kind = names.get(event.event_type)
        if kind in ("STEP_START", "RUN_START") and kind not in found:
            found[kind] = record.timestamp
        if kind == "STEP_SUCCESS":
            found["STEP_SUCCESS"] = record.timestamp
        if (event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION
                and event.event_specific_data.check_name == "manifest_verified"):
            found["manifest_verified"] = record.timestamp
            found["verified_passed"] = float(event.event_specific_data.passed)
    return found


def write_timeline(instance: Any, run_id: str, path: Path) -> None:
    """One line per event of the run: seconds since its first event, since the previous one,
    the event type (LOG for a plain log line) and the message's start."""
    records = list(instance.all_logs(run_id))
    if not records:
        return
    first = prev = records[0].timestamp
    lines = ["t\tdelta\tevent\tmessage"]
    for record in records:
        kind = record.dagster_event.event_type_value if record.dagster_event is not None else "LOG"
        message = (record.user_message or "").replace("\t", " ").replace("\n", " ")[:120]
        lines.append(f"{record.timestamp - first:.3f}\t{record.timestamp - prev:.3f}\t{kind}\t{message}")
        prev = record.timestamp
    path.write_text("\n".join(lines) + "\n")


def collect(instance: Any, manifest_run: Any) -> dict[str, Any]:
    import dagster as dg

    first_tick = _first_tick(instance)
    runs = []
    for record in instance.get_run_records(filters=dg.RunsFilter(tags={"rivet/export": "orders_chunked"})):
        run = record.dagster_run
        ev = _events(instance, run.run_id)
        created = record.create_timestamp.timestamp()
        end = record.end_time or created
        step = ev.get("STEP_SUCCESS", end) - ev.get("STEP_START", end)
        runs.append({"run_id": run.run_id, "job": run.tags.get("rivet/request", run.job_name), "windows": len((run.tags.get("rivet/windows") or "").split(",")),
                     "created": created, "run_start": ev.get("RUN_START"), "end": end,
                     "wall": end - created, "queue_launch": (ev.get("RUN_START") or end) - created,
                     "step": step, "overhead": end - created - step, "status": run.status.value,
                     "verified_at": ev.get("manifest_verified"), "verified_passed": ev.get("verified_passed")})
    runs.sort(key=lambda r: r["created"])
    # Runs that export windows (the last of them may publish too: `folded`), and the manifest's.
    chunk = [r for r in runs if r["job"] != "manifest"]
    manifest = next(r for r in runs if r["run_id"] == manifest_run.run_id)
    folded = manifest["job"] != "manifest"
    start = first_tick if first_tick is not None else runs[0]["created"]
    verified_at = manifest["verified_at"] or manifest["end"]
    return {
        "first_tick": start, "total": verified_at - start, "runs": runs,
        "chunk_runs": len(chunk), "windows": sum(r["windows"] for r in chunk), "dagster_runs": len(runs),
        "folded": folded, "overhead_all_runs": sum(r["overhead"] for r in runs),
        "first_run_after_tick": chunk[0]["created"] - start if chunk else None,
        "chunk_phase": (max(r["end"] for r in chunk) - start) if chunk else None,
        "manifest_wait": (None if folded else
                          manifest["created"] - max(r["end"] for r in chunk) if chunk else None),
        "manifest_run": None if folded else manifest["wall"], "manifest_overhead": manifest["overhead"],
        "verified_passed": bool(manifest["verified_passed"]),
        "overhead_per_run": statistics.mean(r["overhead"] for r in chunk) if chunk else None,
        "queue_launch_per_run": statistics.mean(r["queue_launch"] for r in chunk) if chunk else None,
        "step_per_run": statistics.mean(r["step"] for r in chunk) if chunk else None,
        "step_sum": sum(r["step"] for r in runs),
    }


def run_chunked_dagster(args: argparse.Namespace, url: str, admin_url: str, chunk_size: int, kind: str,
                        rep: int) -> dict[str, Any]:
    work = args.work / f"chunked-{kind}-r{rep}"
    shutil.rmtree(work, ignore_errors=True)
    out = work / "out"
    config = write_config(work / "cfg", "BENCH_SOURCE_URL", [chunked_export(out, chunk_size, args.per_run)])
    with contextlib.ExitStack() as stack:
        # Outside `work`: the round removes `work` (no --keep) while the server still runs.
        server = stack.enter_context(instance_server(args, args.work / f"instance-pg-r{rep}")) \
            if kind == "postgres" else None
        return _chunked_dagster_round(args, url, work, out, config, server, kind, rep)


def _chunked_dagster_round(args: argparse.Namespace, url: str, work: Path, out: Path, config: Path, server: str | None,
                           kind: str, rep: int) -> dict[str, Any]:
    pg_instance = fresh_database(server, INSTANCE_DB) if server is not None else None
    home = dagster_home(work / "dagster_home", args.dagster_yaml, pg_instance)
    env = {**os.environ, "BENCH_SOURCE_URL": url, "DAGSTER_HOME": str(home), "RIVET_CONFIG": str(config),
           "PYTHONPATH": str(REPO), "DAGSTER_DISABLE_TELEMETRY": "1",
           "DAGSTER_GRPC_TIMEOUT_SECONDS": str(args.grpc_timeout)}
    migrate_s = migrate_instance(env)
    load = _load()
    with workspace(args, env, work), started([str(BIN / "dagster-daemon"), "run", "-w", str(work / "workspace.yaml")],
                                             env, work, work / "daemon.log") as proc:
        t0 = time.time()
        instance = _instance(home)
        manifest_run = _wait_for_manifest(instance, proc, args.timeout)
        # The check's evaluation lands before the run ends; the run's end is what we waited for.
        facts = collect(instance, manifest_run)
        if args.keep:  # where a step's time goes, event by event (the instance is gone after the round)
            for run in facts["runs"]:
                write_timeline(instance, run["run_id"], work / f"events-{run['run_id']}.tsv")
    facts.update(instance=kind, rep=rep, load=load, migrate_s=round(migrate_s, 2),
                 daemon_to_first_tick=facts["first_tick"] - t0, status=manifest_run.status.value)
    mismatch = verify(out, args.source_sums)
    facts["check"] = "ok" if not mismatch else "✗ " + ", ".join(mismatch)
    wait = "folded into the last chunk run" if facts["folded"] else f"manifest wait {facts['manifest_wait']:.1f} s"
    print(f"[dagster-chunked] {kind} r{rep}: {facts['total']:.1f} s first tick → manifest_verified "
          f"({facts['chunk_runs']} chunk runs, {facts['windows']} windows, overhead/run "
          f"{facts['overhead_per_run']:.1f} s, {wait}, check {facts['check']}; load {load})", flush=True)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return facts


def run_chunked_rivet(args: argparse.Namespace, url: str, chunk_size: int, rep: int) -> dict[str, Any]:
    work = args.work / f"chunked-rivet-r{rep}"
    shutil.rmtree(work, ignore_errors=True)
    out = work / "out"
    config = write_config(work / "cfg", "BENCH_SOURCE_URL", [chunked_export(out, chunk_size, args.per_run)])
    env = {**os.environ, "BENCH_SOURCE_URL": url, "PYTHONPATH": str(REPO)}
    load = _load()
    wall, rc = timed([str(BIN / "rivet"), "run", "-c", str(config), "-e", "orders_chunked"], env, work,
                     work / "run.log")
    if rc != 0:
        raise SystemExit(f"rivet run failed ({rc}): {(work / 'run.log').read_text()[-800:]}")
    mismatch = verify(out, args.source_sums)
    print(f"[dagster-chunked] rivet run r{rep}: {wall:.1f} s (load {load})", flush=True)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return {"wall": wall, "load": load, "check": "ok" if not mismatch else "✗ " + ", ".join(mismatch)}


# --------------------------------------------------------------------------- report

def _fmt(values: list[float]) -> str:
    med = statistics.median(values)
    return f"{med:.2f}" + (f" [{', '.join(f'{v:.2f}' for v in values)}]" if len(values) > 1 else "")


def _replace_section(path: Path, begin: str, end: str, body: list[str]) -> None:
    text = path.read_text() if path.exists() else ""
    block = "\n".join([begin, *body, end])
    if begin in text and end in text:
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def report_full(args: argparse.Namespace, records: list[dict[str, Any]], command: str) -> None:
    by: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by.setdefault(r["method"], []).append(r)
    base = statistics.median(r["wall"] for r in by["rivet run"])
    body = [f"## Dagster path (a): a full export through Dagster vs `rivet run` (PostgreSQL `orders`, "
            f"{args.rows:,} rows)", "",
            f"Generated by `{command}` (benchmarks/dagster_path.py) on {dt.date.today().isoformat()}; "
            f"{args.repeat} round(s), median shown, all runs in brackets; each a fresh process, wall = the whole "
            f"command. Load average (1/5/15 min) at each start: {'; '.join(r['load'] for r in records)}.", "",
            "| command | wall s | × `rivet run` | check |", "|---|---|---|---|"]
    for method, rows in by.items():
        walls = [r["wall"] for r in rows]
        body.append(f"| `{method}` | {_fmt(walls)} | {statistics.median(walls) / base:.2f} | "
                    f"{', '.join(sorted({r['check'] for r in rows}))} |")
    body += ["", "`dagster asset materialize -m rivet_dagster.definitions --select orders_full` (RIVET_CONFIG, "
             "a DAGSTER_HOME with the project's dagster.yaml, created by `dagster instance migrate` before the "
             "clock starts) and `dg launch --assets orders_full` (a dg project as examples/dg_project lays it "
             "out, its definitions.py included) execute the run in the calling process; *(multiprocess)* = "
             "`RIVET_DAGSTER_EXECUTOR=multiprocess`, Dagster's default mode (a second process for the step); "
             "*check* = the published Parquet re-read and compared with the source (benchmarks/checksum.py).", ""]
    _replace_section(args.output, "<!-- dagster-full:begin -->", "<!-- dagster-full:end -->", body)


def report_chunked(args: argparse.Namespace, dag: list[dict[str, Any]], riv: list[dict[str, Any]],
                   command: str, windows: int) -> None:
    base = statistics.median(r["wall"] for r in riv)
    label = f" — {args.label}" if args.label else ""
    body = [f"## Dagster path (b): a chunked export of {windows} windows through `dagster-daemon` vs `rivet run` "
            f"(PostgreSQL `orders`, {args.rows:,} rows){label}", "",
            f"Generated by `{command}` (benchmarks/dagster_path.py) on {dt.date.today().isoformat()}; "
            f"{args.repeat} round(s), median shown, all runs in brackets. Dagster: a fresh DAGSTER_HOME with "
            f"`{args.dagster_yaml.relative_to(REPO) if args.dagster_yaml.is_relative_to(REPO) else args.dagster_yaml}`"
            f", migrated once, then `dagster-daemon run` (default run launcher, queued run coordinator; code "
            f"location {'served by one `dagster code-server start`' if args.code_server else 'a python_module workspace entry: the daemon spawns its code server'}"
            f", DAGSTER_GRPC_TIMEOUT_SECONDS={args.grpc_timeout}), the "
            f"planner sensor RUNNING; max_partitions_per_run "
            f"{args.per_run if args.per_run is not None else 'default'}"
            + (("; the postgres instance on its own PostgreSQL server" if args.instance_server == "own" else
                "; the postgres instance on the source's PostgreSQL server") if "postgres" in args.instances else "")
            + f". Clock: the planner's first tick → the "
            f"`manifest_verified` evaluation (both from the instance). Load average (1/5/15 min) at each start: "
            f"{'; '.join(r['load'] for r in [*dag, *riv])}.", "",
            "| | " + " | ".join(f"Dagster, {k} instance" for k in args.instances) + " |",
            "|---|" + "---|" * len(args.instances)]

    def row(label: str, key: str, fmt: str = "{:.2f}") -> str:
        cells = []
        for kind in args.instances:
            vals = [r[key] for r in dag if r["instance"] == kind and r.get(key) is not None]
            cells.append(_fmt(vals) if vals and fmt == "{:.2f}" else ", ".join(fmt.format(v) for v in vals) or "–")
        return f"| {label} | " + " | ".join(cells) + " |"

    body += [row("first tick → manifest_verified (s)", "total"),
             "| × `rivet run` of the same chunked export | " + " | ".join(
                 f"{statistics.median(r['total'] for r in dag if r['instance'] == k) / base:.2f}"
                 for k in args.instances) + " |",
             row("chunk runs (windows)", "chunk_runs", "{}"),
             row("Dagster runs in all", "dagster_runs", "{}"),
             "| manifest in the last chunk run (`publish_job`) | " + " | ".join(
                 ", ".join("yes" if r.get("folded") else "no" for r in dag if r["instance"] == k)
                 for k in args.instances) + " |",
             row("first tick → first run created (s)", "first_run_after_tick"),
             row("per chunk run: queue + launch, created → RUN_START (s)", "queue_launch_per_run"),
             row("per chunk run: step, STEP_START → STEP_SUCCESS (s)", "step_per_run"),
             row("per chunk run: overhead = run wall − step (s)", "overhead_per_run"),
             row("first tick → last chunk run ended (s)", "chunk_phase"),
             row("last chunk run ended → manifest run created (s)", "manifest_wait"),
             row("manifest run wall (s)", "manifest_run"),
             row("overhead of all runs: Σ (run wall − step) (s)", "overhead_all_runs"),
             row("daemon start → first tick (s, not in the total)", "daemon_to_first_tick"),
             row("`dagster instance migrate` of the fresh instance (s, not in the total)", "migrate_s"),
             "| check (published data vs source) | " + " | ".join(
                 ", ".join(sorted({r["check"] for r in dag if r["instance"] == k})) for k in args.instances) + " |",
             "",
             f"`rivet run` of the same chunked export (sequential, one process): {_fmt([r['wall'] for r in riv])} s, "
             f"check {', '.join(sorted({r['check'] for r in riv}))}.", ""]
    marker = "dagster-chunked" + (f"-{args.label.split()[0].strip(':,')}" if args.label else "")
    _replace_section(args.output, f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->", body)


# --------------------------------------------------------------------------- main

def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through `started`, which ends the daemon and code server


def parse(argv: list[str] | None, scenario: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=f"python -m benchmarks --scenario {scenario}", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pg-url", default=os.environ.get("TEST_PG_DSN", ""), help="admin URL (default TEST_PG_DSN)")
    ap.add_argument("--rows", type=int, default=500_000, help="orders rows (default 500 k; the issue's scale: 5 M)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--windows", type=int, default=32, help="chunk windows (dagster-chunked)")
    ap.add_argument("--per-run", type=int, default=None,
                    help="dagster.max_partitions_per_run (default: rivet's default)")
    ap.add_argument("--instance", default="sqlite,postgres", help="sqlite, postgres or both (dagster-chunked)")
    ap.add_argument("--instance-server", choices=("own", "shared"), default="own",
                    help="dagster-chunked, the postgres instance: on a PostgreSQL server of its own (default; "
                         "started and stopped by the benchmark) or on the source's server")
    ap.add_argument("--dagster-yaml", type=Path, default=REPO / "dagster_home" / "dagster.yaml",
                    help="the instance settings (default: the project's dagster_home/dagster.yaml)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds to wait for the manifest")
    ap.add_argument("--code-server", action="store_true",
                    help="serve the code location from one `dagster code-server start` (default: the daemon "
                         "spawns it from a python_module workspace entry, as the project's workspace.yaml does)")
    ap.add_argument("--grpc-timeout", type=int, default=300,
                    help="DAGSTER_GRPC_TIMEOUT_SECONDS (Dagster: 60): a run launch waits for the new run process to "
                         "load the code location, which takes longer than 60 s on a saturated machine")
    ap.add_argument("--output", type=Path, default=DOC)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work folders (logs, instances, outputs)")
    ap.add_argument("--label", default="",
                    help="dagster-chunked: a label for the heading and the section markers (e.g. 'before: …')")
    ap.add_argument("--from-work", action="store_true",
                    help="dagster-chunked: write the report again from the instances kept in --work (--keep)")
    args = ap.parse_args(argv)
    if not args.pg_url:
        raise SystemExit("needs TEST_PG_DSN or --pg-url (bash scripts/services.sh start DIR pg)")
    args.instances = [k.strip() for k in args.instance.split(",") if k.strip()]
    args.dagster_yaml = args.dagster_yaml.resolve()
    signal.signal(signal.SIGTERM, _terminate)
    return args


def _prepare(args: argparse.Namespace) -> str:
    args.work = args.work or Path(tempfile.mkdtemp(prefix="rivet-bench-dagster."))
    args.work.mkdir(parents=True, exist_ok=True)
    # mkdtemp makes it 0700: the dagster-postgres instance server, started as root, runs
    # initdb as `postgres` (scripts/services.sh), which must reach its data folder in here.
    args.work.chmod(0o755)
    url = ensure_fixture("pg", args.pg_url, args.rows, 1, DATABASE)
    with psycopg.connect(url, autocommit=True) as conn:
        args.source_sums = source_checksums("pg", conn, TABLE)
    return url


def _command(scenario: str, argv: list[str]) -> str:
    from rivet_core.redact import redact_secrets

    return redact_secrets(" ".join(["python -m benchmarks --scenario", scenario, *argv]))


def main_full(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[3:] if argv is None else argv)
    args = parse(argv, "dagster-full")
    url = _prepare(args)
    records = run_full(args, url, args.source_sums)
    report_full(args, records, _command("dagster-full", argv))
    print(f"[dagster-full] wrote {args.output}", flush=True)
    return 1 if any(r["rc"] != 0 or r["check"] != "ok" for r in records) else 0


def _recollect(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """The records of a kept run (`--keep`), its Dagster figures read again from its instances."""
    import dagster as dg

    raw = json.loads((args.work / "dagster-chunked.json").read_text())
    for rec in raw["dagster"]:
        instance = _instance(args.work / f"chunked-{rec['instance']}-r{rec['rep']}" / "dagster_home")
        [manifest_run] = _manifest_runs(instance, [dg.DagsterRunStatus.SUCCESS])[:1]
        rec.update(collect(instance, manifest_run))
    return raw["dagster"], raw["rivet"], raw["command"]


def main_chunked(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[3:] if argv is None else argv)
    # Dagster's CLI gives SIGTERM whatever handler SIGINT has, and a benchmark started as a
    # shell's background job inherits SIGINT ignored, down to the daemon and code server it
    # starts: they would ignore `started`'s SIGTERM. A handler is reset to the default at
    # exec, so with one installed here the children get SIGINT (and SIGTERM) back.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    args = parse(argv, "dagster-chunked")
    if args.from_work:
        dag, riv, command = _recollect(args)
    else:
        url = _prepare(args)
        _, hi = id_span(url)
        chunk_size = -(-(hi + 1) // args.windows)  # windows are cut from id 0 (keys id_<lo>-<hi>)
        dag, riv, command = [], [], _command("dagster-chunked", argv)
        for rep in range(args.repeat):
            riv.append(run_chunked_rivet(args, url, chunk_size, rep))
            for kind in args.instances:
                dag.append(run_chunked_dagster(args, url, args.pg_url, chunk_size, kind, rep))
        (args.work / "dagster-chunked.json").write_text(json.dumps(
            {"command": command, "dagster": dag, "rivet": riv}, indent=2))
    report_chunked(args, dag, riv, command, args.windows)
    print(f"[dagster-chunked] wrote {args.output} (raw: {args.work / 'dagster-chunked.json'})", flush=True)
    return 1 if any(r["check"] != "ok" or not r["verified_passed"] for r in dag) else 0
